"""The trace reader: a PyTorch profiler (Kineto) JSON trace, plain or gzip-compressed, as its header and a single-pass
stream of events, in bounded memory.

A job's trace is 0.1-2 GB of JSON. Parsing it whole builds several times its size in Python objects before the first
event can be looked at, so the reader streams it instead:

1. the file is read (and gunzipped) in chunks of ``chunk_bytes``;
2. each chunk is scanned with NumPy for the JSON structure only: quotes (escapes resolved), brackets and commas outside
   strings, the nesting depth of each. That finds the top-level members of the document and, inside ``traceEvents``,
   the commas between events, without building anything;
3. the complete events of a chunk are decoded together by one call of the fastest decoder available (orjson when
   installed, else the standard library's ``json``), and yielded one by one.

Memory is a few chunks, the events of one chunk and the largest event, whatever the size of the file. The decoders
are only ever handed text whose nesting depth the scanner has checked (orjson overflows the C stack on some 10^5
nested brackets; the standard library raises RecursionError).

What a hostile or damaged file gets:

- not JSON, not an object or array at the top, no ``traceEvents``, brackets that do not balance, nesting deeper than
  ``max_depth``, invalid JSON inside an event, gzip garbage: :class:`TraceError` naming the file, the byte offset (in
  the uncompressed text) and the problem;
- a file that ends early (a job killed while writing; a truncated download, compressed or not): the events before the
  cut are yielded, then :attr:`RawTrace.complete` is False and :attr:`RawTrace.issues` says where it ended;
- an event larger than ``max_event_bytes``, a top-level member larger than ``max_member_bytes``, text after the end
  of the document: skipped, and said in ``issues``;
- elements of ``traceEvents`` that are not objects: yielded as they are (the event model skips what is not a dict);
- integers beyond 64 bits, numbers beyond a double (``1e400``), ``NaN``, unpaired surrogates: orjson refuses or
  rounds them, so the chunks holding them are decoded by the standard library instead, which keeps integers exact
  (Python ints), reads ``1e400`` as ``inf`` and ``NaN`` as ``nan``; ``issues`` says so. The event model must check
  that the numbers it uses are finite and in range.
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import zlib

import numpy as np

from roofline._util import _ints

try:  # the fast decoders, optional (`pip install roofline[traces]` installs msgspec)
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

__all__ = ["TraceError", "RawTrace", "open_trace", "DECODERS", "CHUNK_BYTES", "MAX_EVENT_BYTES", "MAX_MEMBER_BYTES",
           "MAX_DEPTH"]

# uncompressed bytes scanned at a time (1 MB: as fast as 4 MB in bench/trace_load.py, half the peak memory)
CHUNK_BYTES = 1 << 20
MAX_EVENT_BYTES = 16 << 20     # one event (a Kineto event is well under 100 kB, a huge `args` included)
MAX_MEMBER_BYTES = 64 << 20    # one top-level member other than traceEvents (deviceProperties, distributedInfo...)
MAX_DEPTH = 64                 # nesting depth anywhere in the document (a Kineto trace reaches about 6)
MAX_MEMBERS = 100_000          # top-level members (a Kineto trace has about 20)

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"

# byte classes of the scanner: 1 open bracket, 2 close bracket, 3 comma, 4 quote, 5 backslash
_OPEN, _CLOSE, _COMMA, _QUOTE, _BACKSLASH = 1, 2, 3, 4, 5
_CLASS = np.zeros(256, np.uint8)
_CLASS[[ord("{"), ord("[")]] = _OPEN
_CLASS[[ord("}"), ord("]")]] = _CLOSE
_CLASS[ord(",")] = _COMMA
_CLASS[ord('"')] = _QUOTE
_CLASS[ord("\\")] = _BACKSLASH
_SPECIAL = bytes((_CLASS > 0).astype(np.uint8))  # bytes.translate table: 1 for a special byte, else 0

# orjson reads an integer beyond 64 bits as a float: text that may hold one (20 digits in a row, or a minus and 19) is
# decoded by the standard library. The test maps digits to "0" and "-" to "m" (bytes.translate, C speed) and looks for
# the two patterns; a long fraction or a long digit string matches too (harmless: the same values, decoded slower).
_DIGITS = bytes(48 if 48 <= i <= 57 else (109 if i == 45 else 32) for i in range(256))
_RUN20, _NEG19 = b"0" * 20, b"m" + b"0" * 19


def _may_hold_big_int(text: bytes) -> bool:
    t = text.translate(_DIGITS)
    return _RUN20 in t or _NEG19 in t


_KEY_EVENTS = re.compile(rb'\s*"traceEvents"\s*:\s*$')
_WS = b" \t\r\n"


class TraceError(ValueError):
    """A trace that cannot be read: the message names the file (or ``<bytes>``), the byte offset in the uncompressed
    JSON where it applies, and what is wrong."""


# ---- decoders ---------------------------------------------------------------------------------------------------
# Each takes the bytes of one JSON document. msgspec keeps integers of any size exact; orjson reads an integer beyond
# 64 bits as a float, so text that may hold one goes to the standard library instead (_may_hold_big_int). Both refuse
# NaN, 1e400 and unpaired surrogates, which the standard library then reads. bench/trace_load.py measures them.
DECODERS = {"json": json.loads}
if _orjson is not None:
    DECODERS["orjson"] = _orjson.loads
if _msgspec is not None:
    DECODERS["msgspec"] = _msgspec.json.Decoder().decode
_EXACT = {"msgspec", "json"}  # decoders that never round an integer


def _default_decoder() -> str:
    return next(d for d in ("msgspec", "orjson", "json") if d in DECODERS)


# ---- sources of uncompressed chunks ---------------------------------------------------------------------------------
class _Truncated(Exception):
    """The compressed stream ended before its end marker."""


def _chunks_of_file(f, compressed: bool, size: int, name: str):
    """Yield the uncompressed bytes of the open binary file ``f`` in pieces of about ``size``. A compressed stream that
    ends early raises _Truncated after its last complete piece; gzip garbage raises TraceError."""
    if not compressed:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # the gzip container, one member at a time
    fed = False  # the current member has been given bytes
    at = 0       # compressed bytes read, for messages
    while True:
        raw = f.read(max(size // 4, 1 << 16))
        if not raw:
            if fed and not d.eof:
                raise _Truncated(f"the gzip stream ends before its end marker (compressed size {at})")
            return
        at += len(raw)
        while raw:
            fed = True
            try:
                out = d.decompress(raw, size)
            except zlib.error as e:
                raise TraceError(f"{name}: not a valid gzip stream (within its first {at} compressed bytes): "
                                 f"{e}") from None
            if out:
                yield out
            if d.eof:  # one gzip member ended: another may follow (concatenated gzip files)
                # (what follows the member is in unused_data; zlib leaves a copy in unconsumed_tail too)
                raw = d.unused_data.lstrip(b"\0")  # zero padding after a member is allowed
                d, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
                if raw and not _GZIP_MAGIC.startswith(raw[:2]):
                    raise TraceError(f"{name}: bytes after the gzip stream (within its first {at} compressed "
                                     f"bytes) are not gzip")
            elif d.unconsumed_tail:
                raw = d.unconsumed_tail
            else:
                raw = b""


def _chunks_of_bytes(data, size: int):
    mv = memoryview(data)
    for i in range(0, len(mv), size):
        yield bytes(mv[i:i + size])


# ---- the reader -------------------------------------------------------------------------------------------------
class RawTrace:
    """One trace file, read as a stream (made by :func:`open_trace`).

    - ``path``: the file (None for bytes); ``nbytes``: its size as stored (the compressed size for gzip);
    - ``compressed``: gzip or not; ``decoder``: what decodes the events ("msgspec", "orjson" or "json");
    - ``header``: every top-level member of the document but ``traceEvents`` (``schemaVersion``, ``deviceProperties``,
      ``distributedInfo``, ``record_shapes``, ``with_modules``, ``baseTimeNanoseconds``, ...). The members written
      before ``traceEvents`` are there when :func:`open_trace` returns, the ones after it once :meth:`events` is
      exhausted (``header_complete``). Empty for a document that is a bare array of events (the Trace Event
      Format's array form);
    - :meth:`events`: the events, each a dict as decoded, in file order, once;
    - ``issues``: what was skipped or could not be read, one sentence each (filled while reading);
    - ``complete``: once :meth:`events` is exhausted, True when every byte of the file went into the header or the
      events; False after a truncation or a skipped event or member (``issues`` says which);
    - ``truncated``: the file ended inside the document (the events before the cut were yielded);
    - ``events_read``: elements of ``traceEvents`` yielded so far; ``bytes_scanned``: uncompressed bytes scanned;
      ``slow_batches``: chunks of events decoded by the standard library because orjson could not hold a number
      exactly (or refused the text).

    Exhausting :meth:`events`, :meth:`close` or a ``with`` block closes the file."""

    def __init__(self, name, path, nbytes, compressed, chunks, fileobj, decoder, max_event_bytes, max_member_bytes,
                 max_depth):
        self.path, self.nbytes, self.compressed, self.decoder = path, nbytes, compressed, decoder
        self.header: dict = {}
        self.issues: list[str] = []
        self.events_read = self.bytes_scanned = self.slow_batches = 0
        self.header_complete = self.truncated = False
        self._skipped = False
        self._name = name
        self._decode = DECODERS[decoder]
        self._file = fileobj
        self._limits = (max_event_bytes, max_member_bytes, max_depth)
        self._started = False
        self._in_events = False
        self._gzip_cut = None
        self._batches = self._scan(self._guard(chunks))
        self._ready: list = []
        self._prime()

    # -- public --------------------------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.header_complete and not self.truncated and not self._skipped

    def events(self):
        """The events of the trace, one dict at a time (an element that is not an object as it is), in file order.
        Single pass: a second call raises RuntimeError. TraceError where the document cannot be read further (the
        events before that point have been yielded)."""
        self._start()
        return self._events()

    def event_batches(self):
        """The events as lists (one chunk's events each): the same single pass as :meth:`events`, for a consumer
        that handles many events at a time."""
        self._start()
        return self._all_batches()

    def close(self):
        """Close the file (the rest of the events and of the header is then not read)."""
        self._batches.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def position(self) -> int:
        """Bytes of the source consumed so far, as stored (compressed bytes for gzip), out of ``nbytes``: what a
        progress bar shows."""
        f = self._file
        if f is not None:
            try:
                return min(f.tell(), self.nbytes)
            except (OSError, ValueError):
                pass
        return self.nbytes if self.header_complete else min(self.bytes_scanned, self.nbytes)

    def __repr__(self):
        state = "complete" if self.complete else ("incomplete" if self.header_complete else "being read")
        return (f"<RawTrace {self._name}: {self.nbytes} bytes{' gzip' if self.compressed else ''}, "
                f"{self.events_read} events read, {state}>")

    # -- reading ---------------------------------------------------------------------------------------------------
    def _start(self):
        if self._started:
            raise RuntimeError(f"{self._name}: the events of a RawTrace are read once; call open_trace again")
        self._started = True

    def _events(self):
        for batch in self._all_batches():
            yield from batch

    def _all_batches(self):
        try:
            while self._ready:
                b = self._ready.pop(0)
                self.events_read += len(b)
                yield b
            for b in self._batches:
                if b:
                    self.events_read += len(b)
                    yield b
        finally:
            if self.header_complete and self._file is not None:
                self._file.close()
                self._file = None

    def _prime(self):
        """Read up to the first events (or to the end): the members before traceEvents land in the header, and a file
        that is no trace fails here, in open_trace."""
        for b in self._batches:
            if b:
                self._ready.append(b)
                return
            if self._in_events:
                return

    def _guard(self, chunks):
        try:
            yield from chunks
        except _Truncated as e:
            self._gzip_cut = str(e)
        except OSError as e:
            raise TraceError(f"{self._name}: cannot read the file: {e}") from None

    def _fail(self, at, what):
        raise TraceError(f"{self._name}: {what} (at byte {at})")

    def _issue(self, text, skipped=True):
        self.issues.append(text)
        self._skipped = self._skipped or skipped

    def _scan(self, chunks):
        """The scanner: a generator of lists of events; it yields an empty list where the events array opens (so that
        _prime stops there). Fills header and issues."""
        max_event, max_member, max_depth = self._limits
        pos = 0              # global offset of the current chunk
        in_str = 0           # inside a string at the chunk start
        bs_run = 0           # length of the backslash run that ends the previous chunk
        depth = 0            # nesting depth at the chunk start
        root = None          # "object" | "array", from the first non-blank byte
        ev_depth = 2         # the depth of the elements of the events array
        done = False         # the root closed
        trailing = None      # offset of non-blank bytes after the root
        member: list = []    # pieces of the current top-level member (object root), outside the events
        member_len = member_at = 0
        member_skip = False  # the member is not kept (oversized, or the closed events array)
        members = 0
        seen_events = in_events = False
        pend: list = []      # pieces of the incomplete event after the last cut
        pend_len = pend_at = 0
        ev_skip = False      # the pending event outgrew max_event_bytes: drop it up to the next cut
        ev_skip_at = 0
        for buf in chunks:
            n = len(buf)
            self.bytes_scanned += n
            if root is None:
                if pos == 0 and buf.startswith(_BOM):
                    buf = b"   " + buf[3:]
                s = buf.lstrip(_WS)
                if not s:
                    pos += n
                    continue
                if s[:1] == b"{":
                    root, ev_depth = "object", 2
                elif s[:1] == b"[":
                    root, ev_depth = "array", 1
                else:
                    self._fail(pos + n - len(s), f"not a JSON trace: it starts with {s[:16]!r} where a JSON object "
                                                 f"('{{') is expected")
            if done:
                if buf.strip(_WS) and trailing is None:
                    trailing = pos + n - len(buf.lstrip(_WS))
                pos += n
                continue
            # -- the structure of the chunk: specials, quotes (escapes resolved), what lies outside strings
            a = np.frombuffer(buf, np.uint8)
            sp = np.flatnonzero(np.frombuffer(buf.translate(_SPECIAL), np.bool_))  # translate: C speed
            c = _CLASS[a[sp]]
            isq = c == _QUOTE
            isb = c == _BACKSLASH
            if bs_run or isb.any():
                real_q, bs_run = _unescaped(a, sp, isq, isb, bs_run)
            else:
                real_q = isq
            qcount = np.cumsum(real_q, dtype=np.int32)  # a chunk is far below 2**31 bytes
            outside = ((qcount + in_str) & 1) == 0
            if qcount.size:
                in_str = (int(qcount[-1]) + in_str) & 1
            keep = outside & ((c == _OPEN) | (c == _CLOSE) | (c == _COMMA))
            spos, sc = sp[keep], c[keep]
            step = (sc == _OPEN).astype(np.int32)
            step -= sc == _CLOSE
            d = np.cumsum(step, dtype=np.int32)
            d += depth  # depth <= max_depth here
            if d.size:
                if int(d.max()) > max_depth:
                    self._fail(pos + int(spos[np.argmax(d > max_depth)]),
                               f"nested deeper than {max_depth} levels (no profiler trace is)")
                if int(d.min()) < 0:
                    self._fail(pos + int(spos[np.argmax(d < 0)]), "a closing bracket with no opening one")
                depth = int(d[-1])
            # the top level, in file order: opens to depth <= ev_depth, closes and commas below it
            top = np.where(sc == _OPEN, d <= ev_depth, d < ev_depth)
            cuts = spos[(sc == _COMMA) & (d == ev_depth)]  # commas between events (used inside the events array)
            cur = 0  # this chunk is consumed up to here
            for p, k, dd in zip(spos[top].tolist(), sc[top].tolist(), d[top].tolist()):
                if done:
                    break
                if root == "array":
                    if k == _OPEN:  # the root array opens: the events begin
                        seen_events = in_events = self._in_events = True
                        pend, pend_len, pend_at, cur = [], 0, pos + p + 1, p + 1
                        yield []
                    else:  # the root array closes
                        if buf[p:p + 1] != b"]":
                            self._fail(pos + p, "the top-level array closes with '}'")
                        yield from self._batch(buf, pos, cur, p, cuts, pend, pend_at, ev_skip, ev_skip_at, True)
                        pend, pend_len, ev_skip = [], 0, False
                        in_events = self._in_events = False
                        done, cur = True, p + 1
                    continue
                if dd == 1 and k == _OPEN:  # the root object opens
                    member, member_len, member_at, member_skip, members, cur = [], 0, pos + p + 1, False, 1, p + 1
                elif dd == 0:  # the root closes: its last member ends
                    if buf[p:p + 1] != b"}":
                        self._fail(pos + p, "the top-level object closes with ']'")
                    self._end_member(member, buf[cur:p], member_at, member_skip, pos + p, members == 1)
                    member, member_len = [], 0
                    done, cur = True, p + 1
                elif k == _COMMA:  # a member ends, the next begins
                    self._end_member(member, buf[cur:p], member_at, member_skip, pos + p, False)
                    members += 1
                    if members > MAX_MEMBERS:
                        self._fail(pos + p, f"more than {MAX_MEMBERS} top-level members (no profiler trace has)")
                    member, member_len, member_at, member_skip, cur = [], 0, pos + p + 1, False, p + 1
                elif k == _OPEN:  # a member's value opens: is it traceEvents?
                    if member_skip or not _KEY_EVENTS.match(b"".join(member) + buf[cur:p]):
                        continue
                    if buf[p:p + 1] != b"[":
                        self._fail(pos + p, "traceEvents is not an array")
                    if seen_events:
                        self._fail(pos + p, "a second traceEvents member")
                    seen_events = in_events = self._in_events = True
                    member, member_len = [], 0
                    pend, pend_len, pend_at, ev_skip, cur = [], 0, pos + p + 1, False, p + 1
                    yield []
                elif in_events:  # the events array closes
                    if buf[p:p + 1] != b"]":
                        self._fail(pos + p, "traceEvents closes with '}'")
                    yield from self._batch(buf, pos, cur, p, cuts, pend, pend_at, ev_skip, ev_skip_at, True)
                    pend, pend_len, ev_skip = [], 0, False
                    in_events = self._in_events = False
                    member, member_len, member_skip, cur = [], 0, True, p + 1  # not a header entry
            if done:
                rest = buf[cur:]
                if rest.strip(_WS):
                    trailing = pos + cur + len(rest) - len(rest.lstrip(_WS))
            elif in_events:
                here = cuts[cuts >= cur]
                if here.size:  # the complete events of this chunk, up to its last cut
                    last = int(here[-1])
                    yield from self._batch(buf, pos, cur, last, here, pend, pend_at, ev_skip, ev_skip_at, False)
                    pend, pend_len, pend_at, ev_skip, cur = [], 0, pos + last + 1, False, last + 1
                if not ev_skip:
                    pend.append(buf[cur:])
                    pend_len += n - cur
                    if pend_len > max_event:
                        pend, pend_len, ev_skip, ev_skip_at = [], 0, True, pend_at
            elif members and not member_skip:
                member.append(buf[cur:])
                member_len += n - cur
                if member_len > max_member:
                    self._issue(f"the top-level member {_member_key(b''.join(member)[:256])} at byte {member_at} is "
                                f"larger than {max_member} bytes: skipped")
                    member, member_len, member_skip = [], 0, True
            pos += n
        # -- the end of the data
        cut = f" ({self._gzip_cut})" if self._gzip_cut else ""
        if root is None:
            self._fail(pos, f"empty: no JSON document{cut}")
        if not seen_events:
            if done:
                self._fail(pos, "no traceEvents member: not a profiler trace")
            self._fail(pos, f"the file ends before any event: truncated, or not a profiler trace{cut}")
        if not done:
            if in_events and not ev_skip:  # the last event may be complete, with no comma after it
                text = b"".join(pend).strip(_WS)
                if text:
                    try:
                        got = self._decode_batch(text, pend_at)
                    except TraceError:
                        got = None
                    if got:
                        yield got
            where = "inside traceEvents" if in_events else "after traceEvents, before the end of the document"
            self.truncated = True
            self._issue(f"the file ends {where} at byte {pos}: truncated{cut}")
        elif self._gzip_cut:
            self._issue(f"the document is complete but {self._gzip_cut}", skipped=False)
        if trailing is not None:
            self._issue(f"bytes after the end of the JSON document (from byte {trailing}) were ignored")
        self.header_complete = True

    def _batch(self, buf, pos, cur, end, cuts, pend, pend_at, ev_skip, ev_skip_at, final):
        """Yield the events of the pending pieces and buf[cur:end] as one list (end: a cut, or the closing bracket of
        the events when final)."""
        if ev_skip:  # the oversized event ends at the first cut from cur (or at end)
            after = cuts[(cuts >= cur) & (cuts < end)]
            first = int(after[0]) if after.size else end
            self._issue(f"an event of {pos + first - ev_skip_at} bytes at byte {ev_skip_at} is larger than "
                        f"{self._limits[0]} bytes: skipped")
            if first >= end:
                return
            pend, cur = [], first + 1
        at = pend_at if pend else pos + cur
        text = b"".join(pend) + buf[cur:end] if pend else buf[cur:end]
        if final:
            text = text.rstrip(_WS)
            if not text.strip(_WS):
                return
            if text.endswith(b","):
                self._fail(pos + end, "a comma before the end of traceEvents")
        batch = self._decode_batch(text, at)
        if batch:
            yield batch

    def _decode_batch(self, text: bytes, at: int) -> list:
        """The events of ``text`` (events separated by commas, without the brackets of the array)."""
        try:
            return self._decode_exact(b"[" + text + b"]")
        except RecursionError:
            self._fail(at, "nested too deeply to decode")
        except ValueError as e:
            off = getattr(e, "pos", None)
            where = at + max(off - 1, 0) if isinstance(off, int) else at
            self._fail(where, f"invalid JSON in traceEvents after event {self.events_read}: {getattr(e, 'msg', e)}")

    def _decode_exact(self, doc: bytes):
        """The fast decoder where it reads every number exactly, else the standard library (exact integers, 1e400 as
        inf, NaN, unpaired surrogates); invalid UTF-8 is replaced (and said). The cyclic garbage collector is paused
        while a chunk's events are built: they hold no cycles, and its passes over them would cost as much as the
        decoding."""
        was = gc.isenabled()
        gc.disable()
        try:
            if self.decoder != "json" and (self.decoder in _EXACT or not _may_hold_big_int(doc)):
                try:
                    return self._decode(doc)
                except ValueError:  # msgspec.DecodeError and orjson.JSONDecodeError are ValueErrors
                    pass
            if self.decoder != "json":
                self.slow_batches += 1
            try:
                return json.loads(doc)
            except UnicodeDecodeError:
                out = json.loads(doc.decode("utf-8", "replace"))
                self._issue("invalid UTF-8 in the trace: replaced by U+FFFD", skipped=False)
                return out
        finally:
            if was:
                gc.enable()

    def _end_member(self, pieces, last, at, skip, end_at, may_be_empty):
        """A top-level member ended at ``end_at``: decode it into the header."""
        if skip:
            return
        text = b"".join(pieces) + last if pieces else last
        if not text.strip(_WS):
            if not may_be_empty:
                self._fail(end_at, "an empty top-level member (a stray comma)")
            return
        try:
            d = self._decode_exact(b"{" + text + b"}")
        except (ValueError, RecursionError) as e:
            self._fail(at, f"a top-level member is not valid JSON: {getattr(e, 'msg', e)}")
        for k, v in d.items():
            if k in self.header:
                self._issue(f"the top-level member {k!r} appears twice: the last one is kept", skipped=False)
            self.header[k] = v


def _unescaped(a, sp, isq, isb, bs_run):
    """The quotes among the specials ``sp`` of chunk ``a`` that are not escaped (a quote after an odd run of
    backslashes is), and the length of the backslash run that ends the chunk. ``bs_run``: the run that ended the
    previous chunk (it continues into this one). Linear: each run's parity marks the byte after it."""
    n = a.size
    bpos = sp[isb]
    real = isq.copy()
    tail = 0
    if bpos.size:
        brk = np.flatnonzero(np.diff(bpos) != 1)
        starts = np.concatenate((bpos[:1], bpos[brk + 1]))
        ends = np.concatenate((bpos[brk], bpos[-1:]))
        lens = ends - starts + 1
        if starts[0] == 0:
            lens[0] += bs_run
        escaped = np.zeros(n + 1, bool)
        escaped[ends[(lens & 1) == 1] + 1] = True
        qi = np.flatnonzero(isq)
        real[qi[escaped[sp[qi]]]] = False
        if ends[-1] == n - 1:
            tail = int(lens[-1])
    if bs_run & 1 and a.size and a[0] == 34 and (bpos.size == 0 or bpos[0] != 0):
        real[0] = False  # the previous chunk's odd run escapes this chunk's first byte, a quote
    return real, tail


def _member_key(text: bytes) -> str:
    m = re.match(rb'\s*("(?:[^"\\]|\\.)*")', text)
    try:
        return repr(json.loads(m.group(1))) if m else "?"
    except ValueError:
        return "?"


def open_trace(source, *, decoder: str | None = None, chunk_bytes: int = CHUNK_BYTES,
               max_event_bytes: int = MAX_EVENT_BYTES, max_member_bytes: int = MAX_MEMBER_BYTES,
               max_depth: int = MAX_DEPTH) -> RawTrace:
    """Open a Kineto JSON trace for reading: ``source`` is a path (``.json`` or gzip-compressed, recognised by its
    content, not its name) or the bytes of one. Reads up to the first event: the top-level members written before
    ``traceEvents`` are in ``header`` on return, and a file that is no trace raises :class:`TraceError` here.

    ``decoder``: "msgspec", "orjson" (the first of them installed is the default) or "json" (the standard
    library). The limits bound memory: ``chunk_bytes`` scanned at a time, an event larger than ``max_event_bytes`` or
    a top-level member larger than ``max_member_bytes`` is skipped (and said in ``issues``), nesting deeper than
    ``max_depth`` is a TraceError.
    OSError (FileNotFoundError, ...) as from ``open``."""
    decoder = _default_decoder() if decoder is None else decoder
    if decoder not in DECODERS:
        raise ValueError(f"open_trace: decoder must be one of {sorted(DECODERS)}, got {decoder!r}")
    chunk_bytes = _ints.count(chunk_bytes, "chunk_bytes", "open_trace", 1)
    max_event_bytes = _ints.count(max_event_bytes, "max_event_bytes", "open_trace", 1)
    max_member_bytes = _ints.count(max_member_bytes, "max_member_bytes", "open_trace", 1)
    max_depth = _ints.count(max_depth, "max_depth", "open_trace", 3, 512)  # the decoders recurse
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        compressed = data[:2] == _GZIP_MAGIC
        name = "<bytes>"
        if compressed:
            f = io.BytesIO(data)
            chunks = _chunks_of_file(f, True, chunk_bytes, name)
        else:
            f = None
            chunks = _chunks_of_bytes(data, chunk_bytes)
        return RawTrace(name, None, len(data), compressed, chunks, f, decoder, max_event_bytes, max_member_bytes,
                        max_depth)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"open_trace: expected a path or bytes, got {type(source).__name__}")
    path = os.fspath(source)
    f = open(path, "rb")
    try:
        nbytes = os.fstat(f.fileno()).st_size
        compressed = f.read(2) == _GZIP_MAGIC
        f.seek(0)
        chunks = _chunks_of_file(f, compressed, chunk_bytes, path)
        return RawTrace(path, path, nbytes, compressed, chunks, f, decoder, max_event_bytes, max_member_bytes,
                        max_depth)
    except BaseException:
        f.close()
        raise
