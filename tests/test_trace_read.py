"""The trace reader (roofline/_traces/_read.py): a Kineto JSON trace, plain or gzip, as its header and a stream of
events, checked against the standard library's ``json.loads`` of the same text (an independent whole-document parser),
and on damaged or hostile files: a TraceError naming the file and the byte, or a result marked incomplete; never a
hang. Big files and the one huge event are in bench/hostile_traces.py."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline._traces import _read
from roofline._traces._read import DECODERS, RawTrace, TraceError, open_trace

# strings that stress the scanner: quotes, backslash runs, brackets and commas inside strings, non-ASCII
NASTY = ['a"b', "a\\", "\\\\", '\\"', "{[,]}", "é€😀", "", ",", '"', "]}", "\\\\\\\"x"]


def trace_doc(n=40, header_after=True) -> dict:
    """A small trace shaped like Kineto's: header members before the events, more after them (as torch writes
    deviceProperties and baseTimeNanoseconds), ops with shapes, kernels, flows, metadata events."""
    ev = []
    for i in range(n):
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"aten::mm {NASTY[i % len(NASTY)]}", "pid": 7, "tid": 7,
                   "ts": 1000.5 + i, "dur": 0.75, "args": {"External id": i, "Input Dims": [[4, 8], [8, 2]],
                                                          "Input type": ["float", "float"], "Concrete Inputs": ["", ""],
                                                          "Input Strides": [[8, 1], [2, 1]]}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1001.0 + i, "dur": 0.5,
                   "args": {"correlation": i, "grid": [1, 2, 3]}})
        ev.append({"ph": "s", "cat": "ac2g", "id": i, "pid": 7, "tid": 7, "ts": 1000.6 + i, "bp": "e"})
    ev.append({"name": "thread_name", "ph": "M", "pid": 7, "tid": 7, "args": {"name": "thread 7 (python)"}})
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
           "record_shapes": 1, "traceEvents": ev}
    if header_after:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]
        doc["baseTimeNanoseconds"] = 1751410836000000000
    return doc


def encode(doc, indent=None) -> bytes:
    return json.dumps(doc, indent=indent, ensure_ascii=False).encode()


def read_all(source, **kw):
    r = open_trace(source, **kw)
    return r, list(r.events())


@pytest.fixture(scope="module")
def doc():
    return trace_doc()


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_events_and_header_equal_a_whole_document_parse(tmp_path, doc, indent, chunk):
    if chunk < 64:  # a chunk of a byte or a few: every boundary falls everywhere once; a smaller document will do
        doc = trace_doc(len(NASTY))
    text = encode(doc, indent)
    p = tmp_path / "t.json"
    p.write_bytes(text)
    ref = json.loads(text)
    r, ev = read_all(p, chunk_bytes=chunk)
    assert ev == ref["traceEvents"]
    assert r.header == {k: v for k, v in ref.items() if k != "traceEvents"}
    assert r.complete and r.header_complete and not r.truncated and r.issues == []
    assert r.events_read == len(ref["traceEvents"]) and r.bytes_scanned == len(text)
    assert r.path == str(p) and r.nbytes == len(text) and not r.compressed


def test_gzip_is_recognised_by_content_and_reads_the_same(tmp_path, doc):
    text = encode(doc)
    p = tmp_path / "trace.pt.trace.json"  # no .gz in the name: the magic bytes decide
    p.write_bytes(gzip.compress(text))
    r, ev = read_all(p, chunk_bytes=100)
    assert r.compressed and r.nbytes == p.stat().st_size
    assert ev == doc["traceEvents"] and r.complete
    # two gzip members one after the other (`cat a.gz b.gz`) are one stream
    half = len(text) // 2
    p.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    _, ev2 = read_all(p, chunk_bytes=100)
    assert ev2 == doc["traceEvents"]


def test_the_header_before_the_events_is_there_on_open_the_rest_after_the_last_event(doc):
    r = open_trace(encode(doc), chunk_bytes=64)
    assert r.header == {"schemaVersion": 1, "distributedInfo": doc["distributedInfo"], "record_shapes": 1}
    assert not r.header_complete
    it = r.events()
    next(it)
    assert "deviceProperties" not in r.header
    for _ in it:
        pass
    assert r.header["deviceProperties"] == doc["deviceProperties"]
    assert r.header["baseTimeNanoseconds"] == 1751410836000000000  # 19 digits, exact
    assert r.header_complete and r.complete


def test_events_are_read_once_and_the_file_is_closed_after_the_last(tmp_path, doc):
    p = tmp_path / "t.json"
    p.write_bytes(encode(doc))
    r, _ = read_all(p)
    assert r._file is None
    with pytest.raises(RuntimeError, match="read once"):
        r.events()
    with open_trace(p) as r2:
        next(r2.events())
    assert r2._file is None


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_every_decoder_gives_the_same_events(doc, decoder):
    r, ev = read_all(encode(doc), decoder=decoder, chunk_bytes=333)
    assert r.decoder == decoder and ev == doc["traceEvents"]


def test_batches_are_the_events_in_lists(doc):
    r = open_trace(encode(doc), chunk_bytes=500)
    batches = list(r.event_batches())
    assert len(batches) > 1 and [e for b in batches for e in b] == doc["traceEvents"]


def test_the_array_form_and_a_byte_order_mark():
    ev = [{"ph": "X", "name": "a"}, {"ph": "i", "name": "b"}]
    r, got = read_all(b"\xef\xbb\xbf" + json.dumps(ev).encode())
    assert got == ev and r.header == {} and r.complete


# ---- a property: any document of this shape, cut into any chunk size ------------------------------------------------
_text = st.text(alphabet=st.sampled_from(list('ab"\\{}[],: é😀\n\t')), max_size=12)
_value = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False,
                      allow_infinity=False) | _text,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_value, max_size=6), before=st.dictionaries(_text, _value, max_size=2),
       after=st.dictionaries(_text, _value, max_size=2), chunk=st.integers(1, 40), indent=st.sampled_from([None, 1]))
def test_any_document_in_any_chunks_reads_as_a_whole_parse(events, before, after, chunk, indent):
    before.pop("traceEvents", None)
    after.pop("traceEvents", None)
    doc = dict(before)
    doc["traceEvents"] = events
    doc.update({k: v for k, v in after.items() if k not in before})
    text = json.dumps(doc, indent=indent, ensure_ascii=False).encode()
    ref = json.loads(text)
    r, got = read_all(text, chunk_bytes=chunk)
    assert got == ref["traceEvents"]
    assert r.header == {k: v for k, v in ref.items() if k != "traceEvents"}
    assert r.complete


# ---- damaged and hostile files ---------------------------------------------------------------------------------------
def test_a_file_cut_anywhere_gives_a_prefix_of_the_events_marked_truncated_or_a_trace_error(doc):
    doc = trace_doc(8)
    text = encode(doc)
    events = doc["traceEvents"]
    cuts = sorted(set(range(0, len(text), 41)) | {len(text) - 1, len(text) - 2, 1, 2})
    for cut in cuts:
        try:
            r, got = read_all(text[:cut], chunk_bytes=128)
        except TraceError as e:
            assert "<bytes>" in str(e) and "byte" in str(e), e
            continue
        assert got == events[:len(got)], cut
        assert r.truncated and not r.complete and "truncated" in r.issues[-1], (cut, r.issues)


def test_a_truncated_gzip_keeps_the_events_before_the_cut(tmp_path, doc):
    z = gzip.compress(encode(doc))
    p = tmp_path / "t.json.gz"
    p.write_bytes(z[: len(z) * 3 // 4])
    r, got = read_all(p, chunk_bytes=256)
    assert 0 < len(got) < len(doc["traceEvents"]) and got == doc["traceEvents"][:len(got)]
    assert r.truncated and not r.complete
    assert "gzip stream ends before its end marker" in r.issues[-1]


@pytest.mark.parametrize("data, message", [
    (b"", "empty: no JSON document"),
    (b"   \n", "empty: no JSON document"),
    (b"hello world", "not a JSON trace: it starts with b'hello world'"),
    (b"\x00\x01\x02binary", "not a JSON trace"),
    (b"\x1f\x8b" + b"not gzip at all" * 4, "not a valid gzip stream"),
    (b'{"schemaVersion": 1}', "no traceEvents member"),
    (b'{"schemaVersion": 1, "deviceProperties": []', "ends before any event"),
    (b'{"traceEvents": {"ph": "X"}}', "traceEvents is not an array"),
    (b'{"traceEvents": [], "traceEvents": []}', "a second traceEvents member"),
    (b'{"traceEvents": [{"a": 1},]}', "a comma before the end of traceEvents"),
    (b'{"traceEvents": [{"a": 1}, {"b": nope}]}', "invalid JSON in traceEvents"),
    (b'{"a": 1,, "traceEvents": []}', "an empty top-level member"),
    (b'{"a": tru, "traceEvents": []}', "a top-level member is not valid JSON"),
    (b'{"traceEvents": []}]', "a closing bracket with no opening one"),
    (b'{"traceEvents": [{"a": 1}]]', "the top-level object closes with ']'"),
    (b'{"traceEvents": [{"a": 1}}}', "traceEvents closes with '}'"),
    (b'[{"a": 1}}', "the top-level array closes with '}'"),
    (b'{"traceEvents": [' + b"[" * 65 + b"]" * 65 + b"]}", "nested deeper than 64 levels"),
    (b'{"x": ' + b'{"a": ' * 100_000, "nested deeper than 64 levels"),  # would overflow orjson's C stack
], ids=lambda v: repr(v)[:40] if isinstance(v, bytes) else None)
def test_what_is_not_a_readable_trace_raises_a_trace_error_naming_the_file(tmp_path, data, message):
    p = tmp_path / "bad.json"
    p.write_bytes(data)
    with pytest.raises(TraceError, match="bad.json") as e:
        read_all(p, chunk_bytes=64)
    assert message in str(e.value)
    assert isinstance(e.value, ValueError)


def test_invalid_json_names_the_byte_where_it_is():
    good = b'{"traceEvents": [{"a": 1}, {"b": 2}, '
    data = good + b'{"c": @}]}'
    with pytest.raises(TraceError, match="invalid JSON in traceEvents") as e:
        read_all(data, chunk_bytes=8)
    at = int(str(e.value).rsplit("at byte ", 1)[1].rstrip(")"))
    assert data[at:at + 1] == b"@", (at, data[at - 3:at + 3])


def test_elements_that_are_not_objects_are_yielded_as_they_are():
    r, got = read_all(b'{"traceEvents": [1, "two", [3], null, {"ph": "X"}]}')
    assert got == [1, "two", [3], None, {"ph": "X"}] and r.complete


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_numbers_beyond_64_bits_and_a_double_are_read_exactly_or_as_infinity(decoder):
    big = 123456789012345678901234567890  # beyond uint64: orjson alone would round it to a float
    neg = -9223372036854775809  # one below int64's minimum
    data = (b'{"traceEvents": [{"id": %d}, {"id": %d}, {"ts": 1e400}, {"ts": NaN}, {"id": 18446744073709551615}]}'
            % (big, neg))
    r, got = read_all(data, decoder=decoder)
    assert got[0]["id"] == big and type(got[0]["id"]) is int
    assert got[1]["id"] == neg and type(got[1]["id"]) is int
    assert got[2]["ts"] == float("inf")
    assert got[3]["ts"] != got[3]["ts"]  # NaN
    assert got[4]["id"] == 2**64 - 1
    assert r.complete


def test_an_oversized_event_is_skipped_and_said_the_rest_is_read():
    huge = {"ph": "X", "name": "x" * 5000}
    data = encode({"traceEvents": [{"a": 1}, huge, {"b": 2}, {"c": 3}]})
    r, got = read_all(data, chunk_bytes=100, max_event_bytes=1000)
    assert got == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert not r.complete and not r.truncated
    assert len(r.issues) == 1 and "larger than 1000 bytes: skipped" in r.issues[0]
    # the last event oversized, closed by the array's bracket rather than a comma
    r, got = read_all(encode({"traceEvents": [{"a": 1}, huge]}), chunk_bytes=100, max_event_bytes=1000)
    assert got == [{"a": 1}] and "skipped" in r.issues[0]


def test_an_oversized_header_member_is_skipped_and_said():
    data = encode({"metadata": {"pip": ["p" * 50] * 100}, "traceEvents": [{"a": 1}], "schemaVersion": 1})
    r, got = read_all(data, chunk_bytes=64, max_member_bytes=1000)
    assert got == [{"a": 1}] and r.header == {"schemaVersion": 1}
    assert "'metadata'" in r.issues[0] and "skipped" in r.issues[0] and not r.complete


def test_text_after_the_document_is_ignored_and_said():
    r, got = read_all(b'{"traceEvents": [{"a": 1}]}\n trailing garbage')
    assert got == [{"a": 1}] and not r.complete
    assert "after the end of the JSON document" in r.issues[0]


def test_invalid_utf8_is_replaced_and_said():
    r, got = read_all(b'{"traceEvents": [{"name": "a\xff\xfeb"}]}')
    assert got == [{"name": "a\ufffd\ufffdb"}]
    assert "invalid UTF-8" in r.issues[0] and r.complete  # nothing was skipped


def test_a_duplicate_header_member_keeps_the_last_and_says_so():
    r, _ = read_all(b'{"schemaVersion": 1, "traceEvents": [], "schemaVersion": 2}')
    assert r.header == {"schemaVersion": 2} and "appears twice" in r.issues[0]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="decoder must be one of"):
        open_trace(b"{}", decoder="simd")
    with pytest.raises(ValueError, match="chunk_bytes must be an int >= 1"):
        open_trace(b"{}", chunk_bytes=0)
    with pytest.raises(ValueError, match=r"max_depth must be an int in \[3, 512\], got 10000"):
        open_trace(b"{}", max_depth=10_000)
    with pytest.raises(TypeError, match="expected a path or bytes"):
        open_trace(3)
    with pytest.raises(FileNotFoundError):
        open_trace("/nonexistent/trace.json")
    assert isinstance(open_trace(b'{"traceEvents": []}'), RawTrace)


def test_the_backslash_run_across_a_chunk_boundary():
    """A quote escaped by a backslash that ends the previous chunk (and a run of two that does not escape it)."""
    for name in ['x\\"y', "x\\\\", 'x\\\\\\"', "\\" * 9 + '"']:
        data = encode({"traceEvents": [{"name": name}, {"name": "]},{"}]})
        for chunk in range(1, 30):
            _, got = read_all(data, chunk_bytes=chunk)
            assert got == [{"name": name}, {"name": "]},{"}], (name, chunk)


def test_the_reader_imports_no_torch():
    """Traces are analysed on machines without torch: the reader imports nothing of it, at the top or in a
    function (read from the source: importing torch here to check would prove nothing)."""
    import ast
    tree = ast.parse(open(_read.__file__, encoding="utf-8").read())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "torch" not in names and names <= {"__future__", "gc", "io", "json", "os", "re", "zlib", "numpy",
                                              "msgspec", "orjson", "roofline"}, names
    # of the package, the int rule only (roofline._util._ints imports nothing but the standard library)
    assert {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
        "roofline")} == {"roofline._util"}
