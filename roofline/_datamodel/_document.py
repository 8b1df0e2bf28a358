"""The schema of the documents this package reads back: what every field of a report's ``meta``, of a ceilings
document (in a report, in the ceilings cache, from ``Ceilings.from_json``) and of a merged report may hold.

Every loader checks a document against these before anything is built from it (:func:`roofline.load` and
``Report.from_dict`` through :func:`roofline._io._export.read_document`, :func:`roofline.distributed.merge`,
``Ceilings.from_dict`` and the ceilings cache), so that whatever loads can be printed, rendered, projected, merged
and exported: every field is typed, and every number is finite and in a range that keeps the arithmetic done on
it later finite (a time of 1e300 s overflows the nanoseconds of a trace; a bandwidth of 1e-300 B/s makes every
roofline time infinite). A field that is wrong raises :class:`Invalid`, a ValueError whose message starts with the
field's path (``meta.distributed.rank is 5, not a rank of a world of 2 (0 to 1)``), which the loaders prefix with
what they were reading.

A schema is built from small checkers, each a callable ``check(value, field)`` that returns the value (ints stay
ints, numbers become floats) or raises :class:`Invalid`: :func:`Int`, :func:`Num`, :func:`Str`, :func:`Bool`,
:func:`Opt`, :func:`List`, :func:`Map` and :func:`Obj` (an object: a checker per known key; unknown keys are kept
as they are, checked by ``rest`` when given). Ranges:

* times and durations: seconds in ``[0, MAX_SECONDS]`` (record times, which are clock readings, in
  ``[-MAX_SECONDS, MAX_SECONDS]``);
* counts (FLOPs, bytes moved, calls): ints in ``[0, MAX_COUNT]``, the range of a record's counters;
* capacities and working sets: ints in ``[0, MAX_SIZE]``;
* rates (a peak in FLOP/s, a bandwidth in bytes/s): ``[MIN_RATE, MAX_RATE]``, far outside any device on either side;
* ranks: ints in ``[0, world_size)``, world sizes in ``[1, MAX_RANKS]``.
"""

from __future__ import annotations

import math
import re

from roofline._datamodel import _collectives

MAX_SECONDS = 1e9  # about 32 years: any time or duration a run can hold, and its nanoseconds fit in 63 bits
MAX_COUNT = 2**64 - 1  # a record's counters are unsigned 64-bit
MAX_SIZE = 2**62  # bytes of a cache, a working set or a message
MIN_RATE = 1.0  # FLOP/s or bytes/s: no device is slower; a smaller rate only makes roofline times overflow
MAX_RATE = 1e30  # far above any device (an accelerator peaks near 1e16), and far from overflowing
MAX_RANKS = 2**24
_BIG = 2**53  # calls, steps, graph counts: any exact number
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LEVEL = re.compile(r"L[1-9][0-9]?\Z")  # a cache level name: "L1", "L2", "L3"


class Invalid(ValueError):
    """A field of a document that is missing, of the wrong type or out of range. ``field`` is its path
    (``meta.distributed.rank``, ``peaks['vector/float32'].measured``), ``problem`` what is wrong with it; the
    message is both."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def fail(field: str, problem: str):
    raise Invalid(field, problem)


def key(field: str, k) -> str:
    """The path of key ``k`` inside ``field``: ``a.b`` for a name, ``a['x/y']`` otherwise."""
    k = str(k)
    inner = k if _IDENT.match(k) else repr(k if len(k) <= 60 else k[:57] + "...")
    if not field:
        return inner
    return f"{field}.{inner}" if _IDENT.match(k) else f"{field}[{inner}]"


def kind(v) -> str:
    """The JSON name of a value's type, for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    return {dict: "object", list: "list", str: "str", int: "int", float: "float"}.get(type(v), type(v).__name__)


def show(v) -> str:
    """A short repr of ``v`` for a message (long strings, huge ints and containers cut)."""
    if isinstance(v, (dict, list)):
        return f"a{'n' if isinstance(v, dict) else ''} {kind(v)} of {len(v)}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30:
        return f"{'a negative' if v < 0 else 'an'} int of about {int(abs(v).bit_length() * 0.30103) + 1} digits"
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


# ---- checkers ----------------------------------------------------------------------------------------------------
def Int(lo: int, hi: int):
    """An int (not a bool) in ``[lo, hi]``."""

    def check(v, field):
        if not isinstance(v, int) or isinstance(v, bool):
            fail(field, f"must be an int, not {kind(v)}")
        if not lo <= v <= hi:
            fail(field, f"is {show(v)}, not in [{lo}, {hi}]")
        return v

    return check


def Num(lo: float, hi: float, nan: bool = False):
    """A finite number (int or float, not a bool) in ``[lo, hi]``, as a float; NaN too when ``nan``."""

    def check(v, field):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            fail(field, f"must be a number, not {kind(v)}")
        try:
            f = float(v)
        except OverflowError:
            fail(field, f"is {show(v)}, beyond the float range")
        if math.isnan(f) and nan:
            return f
        if not (math.isfinite(f) and lo <= f <= hi):
            fail(field, f"is {show(v)}, not a finite number in [{lo:g}, {hi:g}]")
        return f

    return check


def Str(choices=None):
    """A str; one of ``choices`` when given."""

    def check(v, field):
        if not isinstance(v, str):
            fail(field, f"must be a str, not {kind(v)}")
        if choices is not None and v not in choices:
            fail(field, f"is {show(v)}, not one of {', '.join(map(repr, choices))}")
        return v

    return check


def Bool():
    def check(v, field):
        if not isinstance(v, bool):
            fail(field, f"must be true or false, not {show(v)}")
        return v

    return check


def Opt(inner):
    """null, or what ``inner`` accepts."""

    def check(v, field):
        return None if v is None else inner(v, field)

    return check


def List(item, max_len: int | None = None):
    """A list whose every item ``item`` accepts."""

    def check(v, field):
        if not isinstance(v, list):
            fail(field, f"must be a list, not {kind(v)}")
        if max_len is not None and len(v) > max_len:
            fail(field, f"holds {len(v)} items, more than {max_len}")
        return [item(x, f"{field}[{i}]") for i, x in enumerate(v)]

    return check


def Map(value, keys: re.Pattern | None = None, keys_are: str = ""):
    """An object whose every value ``value`` accepts (keys matching ``keys`` when given: ``keys_are`` says
    what they must be)."""

    def check(v, field):
        if not isinstance(v, dict):
            fail(field, f"must be an object, not {kind(v)}")
        if keys is not None:
            for k in v:
                if not keys.match(k):
                    fail(key(field, k), f"is not {keys_are}")
        return {k: value(x, key(field, k)) for k, x in v.items()}

    return check


def Obj(fields: dict, required=(), rest=None, then=None):
    """An object: ``fields`` maps a key to the checker of its value, ``required`` lists the keys that must be
    there; other keys are kept, checked by ``rest`` when given; ``then(obj, field)`` checks the object as a whole
    (fields that depend on each other)."""

    def check(v, field):
        if not isinstance(v, dict):
            fail(field, f"must be an object, not {kind(v)}")
        out = dict(v)
        for k in required:
            if k not in v:
                fail(key(field, k), "is missing")
        for k, x in v.items():
            c = fields.get(k, rest)
            if c is not None:
                out[k] = c(x, key(field, k))
        if then is not None:
            then(out, field)
        return out

    return check


def Finite():
    """Any JSON value without a NaN or infinite number anywhere in it (free-form fields that are written back as
    strict JSON)."""

    def check(v, field):
        if isinstance(v, float) and not math.isfinite(v):
            fail(field, f"is {v!r}, not a finite number")
        if isinstance(v, dict):
            for k, x in v.items():
                check(x, key(field, k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                check(x, f"{field}[{i}]")
        return v

    return check


def Anything():
    """Any value: a key whose value is checked by the caller."""

    def check(v, field):
        return v

    return check


Seconds = Num(0.0, MAX_SECONDS)
Count = Int(0, MAX_COUNT)
Size = Int(0, MAX_SIZE)
Rate = Num(MIN_RATE, MAX_RATE)
Calls = Int(0, _BIG)


# ---- a report's meta ---------------------------------------------------------------------------------------------
def _rank_in_world(d, field):
    if not d["rank"] < d["world_size"]:
        fail(key(field, "rank"), f"is {d['rank']}, not a rank of a world of {d['world_size']} (0 to "
                                 f"{d['world_size'] - 1})")


# what roofline.distributed.measure_interconnect measured (NaN: no size could be timed)
INTERCONNECT = Obj({
    "busbw": Opt(Num(MIN_RATE, MAX_RATE, nan=True)),
    "sweep": List(Obj({"bytes": Int(1, MAX_SIZE), "time": Num(0.0, MAX_SECONDS, nan=True),
                       "algbw": Num(0.0, MAX_RATE, nan=True), "busbw": Num(0.0, MAX_RATE, nan=True)},
                      required=("bytes",), rest=Finite())),
    "backend": Str(), "world_size": Int(1, MAX_RANKS), "device": Str(), "method": Str(),
}, rest=Finite())

# rank, world size and backend of the process group the block ran in (roofline._capture._collectives.process_group_meta)
DISTRIBUTED = Obj({"rank": Int(0, MAX_RANKS - 1), "world_size": Int(1, MAX_RANKS), "backend": Str(),
                   "interconnect": Opt(INTERCONNECT)},
                  required=("rank", "world_size", "backend"), rest=Finite(), then=_rank_in_world)

# measure(..., attention=...): the backend chosen and the calls counted per kernel (roofline._capture._sdpa)
ATTENTION = Obj({"backend": Str(("flash", "efficient", "math")), "calls": Opt(Map(Calls))},
                required=("backend",), rest=Finite())

# what a projection assumes (roofline._analysis._assumptions.describe)
ASSUMED = Obj({"attention": Str(), "matrix_dtypes": Map(Num(0.0, 1.0)), "no_peak": Map(Str()),
               "no_peak_flop_share": Num(0.0, 1.0), "vector_fallback": Map(Str())}, rest=Finite())

# the machine's load while the block ran (roofline._hardware._contention.readings)
LOAD = Obj({"wall_s": Opt(Seconds), "process_cpu_s": Opt(Seconds), "cpu_per_wall": Opt(Num(0.0, 1e9)),
            "others_share": Opt(Num(0.0, 1.0)), "steal_share": Opt(Num(0.0, 1.0)),
            "runnable_others": List(Opt(Calls)), "loadavg": List(Opt(List(Num(0.0, 1e9)))),
            "cpus": Opt(Int(1, MAX_RANKS)), "machine_cpus": Opt(Int(1, MAX_RANKS))}, rest=Finite())

# profile(): the steady-state runs (roofline._loops._steady)
STEADY = Obj({"warmup": Calls, "repeat": Int(1, _BIG), "wall_times": List(Opt(Seconds)), "counts_agree": Bool(),
              "first_step": Bool(), "steps": List(Int(1, _BIG)), "other_steps": List(Int(1, _BIG)),
              "first_step_ops": Map(Calls), "no_warmup": Str(), "step_numbers": List(Int(0, _BIG)),
              "cycle": Int(0, _BIG), "partial": Bool(), "active": Int(1, _BIG),
              "op_spread": Map(Obj({"min": Seconds, "median": Seconds, "max": Seconds},
                                   required=("min", "median", "max")))}, rest=Finite())

_BUFFERS = Map(Opt(Count))


def _totals_together(k, field):
    if ("bytes_read_total" in k) != ("bytes_written_total" in k):
        there, missing = ("bytes_read_total", "bytes_written_total")[::1 if "bytes_read_total" in k else -1]
        fail(key(field, missing), f"is missing (a kernel with {there} has both totals)")


# one kernel torch.compile generated (roofline._compiled._collector: Collector.summary)
KERNEL = Obj({
    "name": Str(), "phase": Str(("forward", "backward", "optimizer")), "calls": Calls, "graph": Calls,
    "index": Calls, "module": Str(), "ops": List(Str()), "origins": List(Str()),
    "matrix_flops": Count, "vector_flops": Count, "special_ops": Count, "bytes_read": Count, "bytes_written": Count,
    "bytes_read_total": Count, "bytes_written_total": Count, "unfused_bytes": Count, "inductor_flops": Opt(Count),
    "time": Opt(Seconds), "dtype": Opt(Str()), "extern": Bool(), "symbolic": Bool(), "bytes_known": Bool(),
    "inputs": _BUFFERS, "outputs": _BUFFERS, "input_buffers": _BUFFERS, "error": Str(), "instance": Calls,
}, required=("name", "phase", "calls"), rest=Finite(), then=_totals_together)

COMPILED = Obj({
    "graphs": Calls, "graph_calls": Calls, "uncounted_graph_calls": Calls, "graph_breaks": Calls,
    "aten_bytes": Count, "eager_fallback": Opt(Str()), "problems": List(Str()),
    "recovered_graphs": Calls, "recovery_time": Seconds,
    "graph_list": List(Obj({"graph": Calls, "phase": Str(), "calls": Calls, "ops": Calls, "kernels": Calls},
                           rest=Finite())),
    "kernels": List(KERNEL),
}, rest=Finite())

# how backward ops were credited to modules (roofline._capture._session.attribution_meta); rows are checked against the
# records by attribution()
_ROWS = List(Int(0, MAX_COUNT))
ATTRIBUTION = Obj({"method": Str(("autograd", "module_tracker")), "flop_counter_rows": _ROWS,
                   "flop_counter_modules": List(Int(0, MAX_COUNT)), "unlinked_rows": _ROWS, "note": Str(),
                   "flop_counter_names": Map(Str()), "names_note": Str()},
                  required=("method",), rest=Finite())

# which token positions were real (roofline._datamodel._tokens.token_layout)
# (``matched``: false where no call of the block had the layout's token dims, roofline._analysis._padding)
TOKENS = Obj({"batch": Int(1, _BIG), "seq_len": Int(1, _BIG), "lengths": List(Int(0, _BIG)), "packed": Bool(),
              "matched": Bool()},
             required=("batch", "seq_len", "lengths", "packed"), then=lambda t, f: _lengths_fit(t, f))


def _lengths_fit(t, field):
    if t["packed"] and t["batch"] != 1:
        fail(key(field, "batch"), f"is {t['batch']}: a packed batch is one row")
    if not t["packed"] and len(t["lengths"]) != t["batch"]:
        fail(key(field, "lengths"), f"holds {len(t['lengths'])} lengths for a batch of {t['batch']}")
    limit = t["seq_len"]
    if (sum(t["lengths"]) if t["packed"] else max(t["lengths"], default=0)) > limit:
        fail(key(field, "lengths"), f"exceed the sequence length {limit}")


# a report read from a profiler trace: where its GPU time went (roofline._traces._build.build_report)
_KERNEL_TIME = Obj({"calls": Calls, "time": Seconds, "cat": Str()}, required=("calls", "time"), rest=Finite())
TRACE = Obj({
    "source": Str(), "step": Opt(Int(0, _BIG)), "steps": List(Int(0, _BIG)), "step_choice": Str(),
    "step_times": List(Obj({"step": Int(0, _BIG), "time": Seconds}, required=("step", "time"))),
    "device": Opt(Str()), "device_note": Str(), "devices": List(Obj({"name": Opt(Str())}, rest=Finite())),
    "shapes": Bool(), "modules": Bool(), "kernels": Calls, "kernel_time": Seconds, "attributed_time": Seconds,
    "attributed_share": Num(0.0, 1.0), "op_time": Seconds, "collective_time": Seconds, "unknown_op_time": Seconds,
    "uncounted_op_time": Seconds, "zero_cost_op_time": Seconds, "unattributed_time": Seconds,
    "unattributed": Map(_KERNEL_TIME), "outside_step_time": Seconds, "before_trace": _KERNEL_TIME,
    "problems": List(Str()),
}, required=("kernel_time",), rest=Finite())

META = Obj({
    "timing": Opt(Str(("model", "op"))), "devices": List(Str()), "version": Opt(Str()),
    "projected_to": Opt(Str()), "ceilings_source": Opt(Str()), "projected_gpus": Int(1, MAX_RANKS),
    "dtype": Opt(Str()), "contention": Opt(List(Str())), "ceilings_contention": Opt(List(Str())),
    "load": Opt(LOAD), "assumed": Opt(ASSUMED), "steady": Opt(STEADY), "compiled": Opt(COMPILED),
    "attention": Opt(ATTENTION), "distributed": Opt(DISTRIBUTED), "attribution": Opt(ATTRIBUTION),
    "tokens": Opt(TOKENS), "tokens_unknown": Opt(Str()),  # why the model's mask gave no layout (a fake one)
    "trace": Opt(TRACE),
    "incomplete": Opt(List(Str())),  # why the counts miss work that ran (Report.incomplete)
    # "collectives" refers to records: checked by collectives() with the record count
})

COLLECTIVE_KINDS = _collectives.KINDS
COLLECTIVE_COLUMNS = _collectives.COLUMNS
_COLLECTIVE_CELLS = {"record": Int(0, MAX_COUNT), "collective": Str(COLLECTIVE_KINDS), "group_size": Int(1, MAX_RANKS),
                     "message_bytes": Count, "bus_bytes": Count, "async_op": Bool(), "uncertain": Bool()}


def collectives(t, n_records: int, field: str = "meta.collectives") -> dict:
    """The collectives side table of a report's meta (one list per column of ``COLLECTIVE_COLUMNS``, a row per
    collective call), checked: every cell typed and ranged, the lists of one length, each row's record one of
    the ``n_records`` records and listed once."""
    if not isinstance(t, dict):
        fail(field, f"must be an object holding the lists {', '.join(COLLECTIVE_COLUMNS)}, not {kind(t)}")
    for k in COLLECTIVE_COLUMNS:
        if not isinstance(t.get(k), list):
            fail(key(field, k), f"must be a list, not {kind(t.get(k))} (the table holds the lists "
                                f"{', '.join(COLLECTIVE_COLUMNS)})")
    n = len(t["record"])
    for k in COLLECTIVE_COLUMNS:
        if len(t[k]) != n:
            fail(key(field, k), f"holds {len(t[k])} items, but record holds {n}: its lists differ in length")
        cell = _COLLECTIVE_CELLS[k]
        for i, v in enumerate(t[k]):
            cell(v, f"{key(field, k)}[{i}]")
    for i, r in enumerate(t["record"]):
        if r >= n_records:
            fail(f"{key(field, 'record')}[{i}]", f"is {r}: {field}.record refers to a record beyond the "
                                                 f"{n_records} records")
    if len(set(t["record"])) != n:
        fail(key(field, "record"), "lists a record twice")
    return t


def meta(m, n_records: int, field: str = "meta") -> dict:
    """A report's ``meta`` checked (:data:`META`, and the collectives table against the ``n_records`` records);
    returns a copy."""
    m = META(m, field)
    if m.get("collectives") is not None and m["collectives"] != {}:  # {}: none, as an empty table
        collectives(m["collectives"], n_records, key(field, "collectives"))
    if m.get("attribution") is not None:
        attribution(m["attribution"], n_records, key(field, "attribution"))
    return m


def attribution(a: dict, n_records: int, field: str = "meta.attribution") -> dict:
    """The attribution section's rows checked against the ``n_records`` records: each row a record, listed once;
    one ModuleTracker module id per moved row (the ids are checked against the module table by the reader)."""
    rows, mods = a.get("flop_counter_rows") or [], a.get("flop_counter_modules") or []
    if len(rows) != len(mods):
        fail(key(field, "flop_counter_modules"), f"holds {len(mods)} items, but flop_counter_rows holds {len(rows)}")
    for name in ("flop_counter_rows", "unlinked_rows"):
        v = a.get(name) or []
        for i, r in enumerate(v):
            if r >= n_records:
                fail(f"{key(field, name)}[{i}]", f"is {r}: a record beyond the {n_records} records")
        if len(set(v)) != len(v):
            fail(key(field, name), "lists a record twice")
    return a


# ---- a ceilings document -----------------------------------------------------------------------------------------
_LEVEL_NAME = "a cache level (L1, L2, ...)"
# the free-form machine details of a Ceilings; the entries read back are typed
INFO = Obj({
    "l2_bytes": Opt(Size), "l2_cache_bytes": Opt(Size), "sm_count": Opt(Int(0, _BIG)),
    "boost_clock_hz": Opt(Num(0.0, 1e13)), "clock_hz": Opt(Num(0.0, 1e13)),
    "threads": Opt(Int(1, MAX_RANKS)), "busy": Opt(Bool()), "contention": Opt(List(Str())),
    "native_lowp": Opt(Map(List(Str()))),
    # aggregate capacities need not grow outwards: 56 cores' private L2s can hold more than their shared L3
    "cache_capacity_bytes": Opt(Map(Opt(Size), keys=_LEVEL, keys_are=_LEVEL_NAME)),
    "caches": Opt(Map(Opt(Obj({"bytes": Opt(Size), "instances": Opt(Int(1, MAX_RANKS))}, rest=Finite())),
                      keys=_LEVEL, keys_are=_LEVEL_NAME)),
}, rest=Finite())

# one ceiling: measured and datasheet figures of a peak (FLOP/s) or a bandwidth (bytes/s)
CEILING = Obj({"measured": Opt(Rate), "datasheet": Opt(Rate), "method": Str(), "datasheet_source": Str()})

_SWEEP_RATE = Num(0.0, MAX_RATE)


def sweep(d, field: str = "sweep") -> dict:
    """The CPU bandwidth sweep of a ceilings document: ``sizes`` (bytes, ints in [1, MAX_SIZE]) and bytes/s per
    kernel (finite, in [0, MAX_RATE]), lists of one length."""
    if not isinstance(d, dict):
        fail(field, f"must be an object, not {kind(d)}")
    out = {}
    for k, v in d.items():
        f = key(field, k)
        out[k] = List(Int(1, MAX_SIZE) if k == "sizes" else _SWEEP_RATE)(v, f)
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1:
        fail(field, f"has lists of different lengths ({', '.join(f'{k}: {len(v)}' for k, v in out.items())})")
    return out


def collectives_table(meta: dict, n_records: int) -> dict:
    """The collectives table of a report's meta, checked (empty lists when there is none)."""
    t = meta.get("collectives")
    if not t:
        return {k: [] for k in COLLECTIVE_COLUMNS}
    return collectives(t, n_records)
