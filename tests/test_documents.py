"""The document schema (roofline/_datamodel/_document.py) every loader uses: reports (``roofline.load``,
``Report.from_dict``), merged reports (``roofline.distributed.merge``, ``gather``), ceilings documents
(``Ceilings.from_json``) and the ceilings cache.

* one test per defect the schema fixes: a field that loaded and broke later, or raised the wrong exception;
* a property (Hypothesis): a mutation of a real document either raises ValueError naming a field, or loads into a
  report on which every public method runs (printed, rendered, projected, merged, exported, analysed);
* a corpus of hostile documents of about 1 MB, each loading or failing with ValueError in well under a second.

Examples of the property: ``ROOFLINE_FUZZ_EXAMPLES`` (default 150, a few seconds; bench/fuzz.sh runs 10,000).
Unset, the examples are derandomized (the same on every run); set, they are random.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import roofline  # noqa: E402
import roofline.distributed as rd  # noqa: E402
from roofline._util import _safejson  # noqa: E402
from roofline._hardware._ceilings import Ceiling, Ceilings, _load_cache  # noqa: E402
from roofline._datamodel._records import RECORD_DTYPE  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
_N = os.environ.get("ROOFLINE_FUZZ_EXAMPLES")
EXAMPLES = int(_N) if _N else 150
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=_N is None,
                suppress_health_check=list(HealthCheck))
# what a refusal looks like: the loader's prefix, then the path of the field and what is wrong with it
NAMED = re.compile(r"(corrupt roofline report: [^\s]+ |not a roofline report)")
FP = "test-fingerprint"


# ---- real documents ------------------------------------------------------------------------------------------------
def _cpu_ceilings() -> Ceilings:
    """Ceilings of a CPU shaped as a measurement writes them (caches, a sweep, the cache reader's keys), made
    here so that nothing is measured."""
    peaks = {("vector", "float64"): Ceiling(5e10, 8e10, "fma"), ("vector", "float32"): Ceiling(1e11, 1.6e11, "fma"),
             ("matrix", "bfloat16"): Ceiling(4e11, 1e12, "amx")}
    bws = {"L1": Ceiling(5e11, None, "triad"), "L2": Ceiling(2e11, None, "triad"),
           "L3": Ceiling(8e10, None, "triad"), "DRAM": Ceiling(2e10, None, "triad"),
           "DRAM_read": Ceiling(2.5e10, None, "read")}
    info = {"model": "test CPU", "threads": 2, "clock_hz": 2.6e9,
            "caches": {"L1": {"bytes": 49152, "instances": 2}, "L2": {"bytes": 2 << 20, "instances": 2},
                       "L3": {"bytes": 64 << 20, "instances": 1}},
            "cache_capacity_bytes": {"L1": 98304, "L2": 4 << 20, "L3": 64 << 20},
            "native_lowp": {"bfloat16": ["amx_bf16"]}, "lowp_kernels": {}, "busy": False, "contention": []}
    return Ceilings(device="cpu", name="test CPU", fingerprint=FP, peaks=peaks, bandwidths=bws, duration_s=2.5,
                    version=roofline.__version__, timestamp="2026-12-03T00:00:00+00:00", quick=True, info=info,
                    sweep={"sizes": np.array([4096, 1 << 20, 1 << 28]), "read": np.array([6e11, 2e11, 2.5e10])},
                    notes=["made by the test"])


_COMPILED = {  # the compiled section of a report, one kernel, as roofline._compiled._collector writes it
    "graphs": 1, "graph_calls": 1, "uncounted_graph_calls": 0, "graph_breaks": 0, "aten_bytes": 1024,
    "eager_fallback": None, "problems": [], "recovered_graphs": 1, "recovery_time": 0.5,
    "graph_list": [{"graph": 0, "phase": "forward", "calls": 1, "ops": 2, "kernels": 1}],
    "kernels": [{"name": "cpp_fused_relu_0", "phase": "forward", "calls": 1, "graph": 0, "index": 0,
                 "module": "Sequential.1", "ops": ["aten.relu.default"], "origins": ["relu"], "matrix_flops": 0,
                 "vector_flops": 32, "special_ops": 0, "bytes_read": 128, "bytes_written": 128,
                 "bytes_read_total": 128, "bytes_written_total": 128, "unfused_bytes": 256, "inductor_flops": 0,
                 "time": 1e-5, "dtype": "float32", "extern": False, "symbolic": False, "bytes_known": True,
                 "inputs": {"buf0": 128}, "outputs": {"buf1": 128}, "input_buffers": {"buf0": 128}}]}


@functools.lru_cache(maxsize=None)
def _docs():
    """Documents of a small model measured on CPU: timed per op against CPU-shaped ceilings, timed as a whole
    against a datasheet, a projection, and a rank of a distributed run (its process group, collectives side table,
    attention choice and compiled section set as the package writes them)."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with roofline.measure(model, timing="op", ceilings=_cpu_ceilings()) as op:
            model(x).sum().backward()
        with roofline.measure(model, ceilings="H100 SXM") as whole:
            model(x).sum().backward()
        projected = op.project("A100 SXM 80GB")
        out = {"op": op.to_dict(), "model": whole.to_dict(), "projected": projected.to_dict()}
    rank = copy.deepcopy(out["op"])
    rank["meta"]["distributed"] = {"rank": 1, "world_size": 2, "backend": "gloo",
                                   "interconnect": {"busbw": 1e10, "backend": "gloo", "world_size": 2,
                                                    "device": "cpu", "method": "all-reduce sweep",
                                                    "sweep": [{"bytes": 4096, "time": 1e-5, "algbw": 4.1e8,
                                                               "busbw": 4.1e8}]}}
    rank["meta"]["collectives"] = {"record": [0, 1], "collective": ["all_reduce", "wait"], "group_size": [2, 2],
                                   "message_bytes": [64, 0], "bus_bytes": [64, 0], "async_op": [True, False],
                                   "uncertain": [False, False]}
    rank["meta"]["attention"] = {"backend": "flash", "calls": {"flash": 1}}
    rank["meta"]["compiled"] = copy.deepcopy(_COMPILED)
    rank["meta"]["incomplete"] = ["1 call of a torch.compile graph compiled before the block not counted: why"]
    out["rank"] = rank
    # a report read from a profiler trace (its meta["trace"] section: docs/traces.md)
    out["trace"] = roofline.load_trace(pathlib.Path(__file__).resolve().parent / "data" / "traces" / "tracelens_h100" /
                                       "gaunernst_bert-small-uncased__1016001.json.gz").to_dict()
    for name, d in out.items():  # every one loads
        roofline.load(json.dumps(d))
    return out


@pytest.fixture(scope="module")
def docs():
    return copy.deepcopy(_docs())


def _text(d) -> str:
    return json.dumps(d)


def _with(d, path, value):
    """A copy of document ``d`` with the value at ``path`` (keys and indexes) replaced."""
    d = copy.deepcopy(d)
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return d


def _records(d):
    return np.frombuffer(base64.b64decode(d["records"]), dtype=RECORD_DTYPE).copy()


def _with_records(d, rec):
    return {**d, "records": base64.b64encode(rec.tobytes()).decode("ascii")}


def _refused(text, field):
    with pytest.raises(ValueError, match=r"corrupt roofline report: " + re.escape(field) + " "):
        roofline.load(text)


# ---- the nesting check -----------------------------------------------------------------------------------------------
_LINEAR_CHECK = r"""
import json, os, sys, time, warnings
import roofline, roofline.distributed as rd
from roofline._hardware._ceilings import Ceilings, _load_cache
text = '{"meta": "' + '\\"' * 150_000        # 300 KB: one string of escaped quotes, never closed
path = os.path.join(sys.argv[1], "bad.json")
open(path, "w").write(text)
def timed(fn, *args):
    t = time.perf_counter()
    try:
        fn(*args)
        out = "returned"
    except ValueError:
        out = "ValueError"
    return out, time.perf_counter() - t
warnings.simplefilter("ignore")
print(json.dumps({"load": timed(roofline.load, text), "load_bytes": timed(roofline.load, text.encode()),
                  "merge": timed(rd.merge, [path]), "ceilings": timed(Ceilings.from_json, text),
                  "cache": timed(_load_cache, path, "fp", False)}))
"""


def test_unterminated_string_of_escaped_quotes_is_refused_in_linear_time(tmp_path):
    """A 300 KB unterminated string of escaped quotes hung load, merge and the cache reader (quadratic pre-check)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        p = subprocess.run([sys.executable, "-c", _LINEAR_CHECK, str(tmp_path)], capture_output=True, text=True,
                           env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a 300 KB unterminated string took more than 60 s")
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["cache"][0] == "returned"  # the cache reader never raises: None, with a warning
    for reader, (outcome, seconds) in got.items():
        if reader != "cache":
            assert outcome == "ValueError", reader
        assert seconds < 2.0, f"{reader} took {seconds:.2f} s"


@pytest.mark.parametrize("text, depth", [
    ('{"a": ["[", "\\"{"], "b": [[[]]]}', 4),   # brackets and escaped quotes inside strings do not count
    ('"[[[[', 0),                               # an unterminated string: nothing after its quote counts
    ('[["\\\\"], "\\\\\\"]"]', 2),                # escaped backslashes before a closing quote
    ("]]][[", 0),
    ("[" * 64 + "]" * 64, 64),
    ("3", 0),
])
def test_nesting_depth_skips_strings(text, depth):
    """The linear count agrees with the nesting of the text (brackets inside strings are text)."""
    assert _safejson.nesting_depth(text) == depth


def test_parsing_leaves_the_garbage_collector_as_it_was():
    """The collector, paused while JSON is parsed, is on again afterwards (failed parses too), off if it was off."""
    import gc

    assert gc.isenabled()
    try:
        for text in ("[[1], [2]]", "[[1], [2]", '"\\x"'):
            try:
                _safejson.loads(text, "test")
            except ValueError:
                pass
            assert gc.isenabled(), text
        gc.disable()
        _safejson.loads("[[1]]", "test")
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---- meta.distributed --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dist, field", [
    ({"rank": 5, "world_size": 2, "backend": "gloo"}, "meta.distributed.rank"),
    ({"rank": -1, "world_size": 2, "backend": "gloo"}, "meta.distributed.rank"),
    ({"rank": 1.0, "world_size": 2, "backend": "gloo"}, "meta.distributed.rank"),
    ({"rank": True, "world_size": 2, "backend": "gloo"}, "meta.distributed.rank"),
    ({"rank": [1], "world_size": 2, "backend": "gloo"}, "meta.distributed.rank"),
    ({"rank": 0, "world_size": 0, "backend": "gloo"}, "meta.distributed.world_size"),
    ({"rank": 0, "world_size": "2", "backend": "gloo"}, "meta.distributed.world_size"),
    ({"rank": 0, "world_size": 2}, "meta.distributed.backend"),
    ({"rank": 0, "world_size": 2, "backend": "gloo", "interconnect": {"busbw": 1e-300}},
     "meta.distributed.interconnect.busbw"),
    ("rank 0", "meta.distributed"),
])
def test_malformed_meta_distributed_is_refused_on_load_and_by_merge(docs, dist, field):
    """Unchecked meta.distributed: merge died (AttributeError, unhashable) or merged ranks 5 of 2, -1, 1.0, True."""
    _refused(_text(_with(docs["rank"], ("meta", "distributed"), dist)), field)
    r = roofline.load(_text(docs["rank"]))  # a report changed after loading is checked where it is merged
    r.meta["distributed"] = dist
    with pytest.raises(ValueError, match=r"merge: report 0 of 1: " + re.escape(field) + " "):
        rd.merge([r])


def test_ranks_of_one_world_merge(docs):
    """The check does not refuse what a distributed run writes: ranks 0 and 1 of a world of 2 merge in order."""
    r1 = roofline.load(_text(docs["rank"]))
    r0 = roofline.load(_text(_with(docs["rank"], ("meta", "distributed", "rank"), 0)))
    m = rd.merge([r1, r0])
    assert m.rank_ids == [0, 1] and m.world_size == 2 and m.backend == "gloo"
    assert m.totals()["collectives"] == 4 and m.totals()["bus_bytes"] == 2 * 64


# ---- meta.assumed, meta.attention, meta.collectives -----------------------------------------------------------------
@pytest.mark.parametrize("section, value, field", [
    ("assumed", {"matrix_dtypes": {"float32": "all"}}, "meta.assumed.matrix_dtypes.float32"),
    ("assumed", {"matrix_dtypes": [1.0]}, "meta.assumed.matrix_dtypes"),
    ("assumed", {"no_peak": ["aten.mm"]}, "meta.assumed.no_peak"),
    ("assumed", {"no_peak_flop_share": 7}, "meta.assumed.no_peak_flop_share"),
    ("assumed", {"vector_fallback": {"bfloat16": 1}}, "meta.assumed.vector_fallback.bfloat16"),
    ("attention", {"calls": {}}, "meta.attention.backend"),
    ("attention", {"backend": "flash", "calls": {"flash": "one"}}, "meta.attention.calls.flash"),
    ("attention", {"backend": "flash", "calls": [1]}, "meta.attention.calls"),
    ("attention", {"backend": "sdpa"}, "meta.attention.backend"),
])
def test_malformed_assumed_and_attention_are_refused_on_load(docs, section, value, field):
    """A malformed meta.assumed or meta.attention loaded, then print(r), the HTML view or project() raised."""
    doc = docs["projected"] if section == "assumed" else docs["rank"]
    _refused(_text(_with(doc, ("meta", section), value)), field)


def test_assumed_and_attention_as_written_load_and_print(docs):
    """What project() and measure(attention=...) write loads, prints and projects."""
    p = roofline.load(_text(docs["projected"]))
    assert "assumed: attention" in str(p) and p.meta["assumed"] == docs["projected"]["meta"]["assumed"]
    r = roofline.load(_text(docs["rank"]))
    assert r.meta["attention"] == {"backend": "flash", "calls": {"flash": 1}}
    assert "flash" in r.project("H100 SXM").meta["assumed"]["attention"]


@pytest.mark.parametrize("column, value, field", [
    ("collective", [[1], "wait"], "meta.collectives.collective[0]"),
    ("collective", [{"all_reduce": 1}, "wait"], "meta.collectives.collective[0]"),
    ("record", [0, [1]], "meta.collectives.record[1]"),
    ("message_bytes", [64, 2**64], "meta.collectives.message_bytes[1]"),
    ("group_size", [0, 2], "meta.collectives.group_size[0]"),
    ("async_op", [True, 1], "meta.collectives.async_op[1]"),
])
def test_bad_collectives_entry_is_a_value_error_naming_it(docs, column, value, field):
    """A bad meta.collectives entry (an unhashable name) raised TypeError from load, not the documented ValueError."""
    _refused(_text(_with(docs["rank"], ("meta", "collectives", column), value)), field)


# ---- ceilings ----------------------------------------------------------------------------------------------------
_BAD_CEILINGS = [
    (("bandwidth", "DRAM", "measured"), 0, "bandwidth.DRAM.measured"),
    (("bandwidth", "DRAM", "measured"), 1e-300, "bandwidth.DRAM.measured"),
    (("peaks", "vector/float32", "measured"), 1e308, "peaks['vector/float32'].measured"),
    (("peaks", "vector/float32", "datasheet"), -1.0, "peaks['vector/float32'].datasheet"),
    (("info", "l2_bytes"), "50 MB", "info.l2_bytes"),
    (("info", "cache_capacity_bytes", "L2"), "4 MiB", "info.cache_capacity_bytes.L2"),
    (("info", "caches", "L1", "instances"), 0, "info.caches.L1.instances"),
    (("info", "threads"), 2.5, "info.threads"),
    (("duration_s", ), 1e300, "duration_s"),
]


@pytest.mark.parametrize("path, value, field", _BAD_CEILINGS)
def test_ceilings_with_unusable_rates_or_sizes_are_refused(docs, tmp_path, path, value, field):
    """Ceilings with DRAM bandwidth 0 or 1e-300, a 1e308 peak or a text l2_bytes loaded; HTML, chart etc. raised."""
    good = _cpu_ceilings().to_dict()
    bad = _with(good, path, value)
    with pytest.raises(ValueError, match=re.escape(field) + " "):
        Ceilings.from_json(json.dumps(bad))
    _refused(_text({**docs["op"], "ceilings": bad}), "ceilings")  # "ceilings are malformed: <field> ..."
    with pytest.raises(ValueError, match=re.escape(field)):
        roofline.load(_text({**docs["op"], "ceilings": bad}))
    cache = tmp_path / "ceilings-cpu.json"
    cache.write_text(json.dumps(good))
    assert _load_cache(str(cache), FP, need_thorough=False) == _cpu_ceilings()  # the good one is used
    cache.write_text(json.dumps(bad))
    with pytest.warns(RuntimeWarning, match="ignoring the ceilings cache .*" + re.escape(field)):
        assert _load_cache(str(cache), FP, need_thorough=False) is None


def test_cpu_ceilings_whose_l2s_outgrow_the_l3_load_and_analyse(docs):
    """Private L2s that hold more than the shared L3 (many cores) load; the cache model leaves the L3 out."""
    c = _cpu_ceilings().to_dict()
    c["info"]["cache_capacity_bytes"]["L2"] = 128 << 20  # larger than the 64 MiB L3
    r = roofline.load(_text({**docs["op"], "ceilings": c}))
    a = r.cache_analysis()
    assert a["levels"] == ["L1", "L2", "DRAM"] and a["capacities"][:2] == [98304.0, float(128 << 20)]


# ---- record times ------------------------------------------------------------------------------------------------
def test_record_times_beyond_any_clock_are_refused(docs):
    """Record times of 1e300 loaded; to_chrome_trace then raised OverflowError."""
    rec = _records(docs["op"])
    rec["t_start"][1], rec["t_end"][1] = 1e300, 1e300
    _refused(_text(_with_records(docs["op"], rec)), "records[1].t_start")
    rec = _records(docs["op"])
    rec["t_end"][2] = 2e9
    _refused(_text(_with_records(docs["op"], rec)), "records[2].t_end")
    _refused(_text({**docs["op"], "wall_time": 1e300}), "wall_time")


def test_record_times_at_the_bound_export_a_trace(docs):
    """Times within the bound (1e9 s) export: the last op, 1e9 s after the first, ends 1e15 us into the trace."""
    rec = _records(docs["op"])
    n = len(rec)
    rec["t_start"] = np.arange(n, dtype=np.float64)
    rec["t_end"] = rec["t_start"] + 0.5
    rec["t_start"][-1], rec["t_end"][-1] = 1e9 - 1.0, 1e9
    r = roofline.load(_text(_with_records(docs["op"], rec)))
    events = json.loads(r.to_chrome_trace())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "op"]
    assert len(ops) == n
    last = max(ops, key=lambda e: e["ts"])
    assert last["ts"] == (1e9 - 1.0) * 1e6 and last["dur"] == 1e6


# ---- gather's timeout ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available")
def test_gather_refuses_a_timeout_it_cannot_wait_for():
    """gather(r, timeout=float('inf')) passed the check, then raised OverflowError (a timedelta of infinity)."""
    import torch.distributed as dist

    with roofline.measure(ceilings="H100 SXM") as r:
        torch.ones(3) * 2
    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # one rank, in this process
    try:
        with pytest.raises(ValueError, match="gather: timeout must be a finite number of seconds"):
            roofline.gather(r, timeout=float("inf"))
        merged = roofline.gather(r, timeout=30)  # and a finite one gathers
        assert merged.rank_ids == [0] and merged.totals()["flops"] == r.total_flops
    finally:
        dist.destroy_process_group()
    for bad in (float("inf"), float("nan"), 1e300, 10**400, 0, -1.0):
        with pytest.raises(ValueError, match="gather: timeout must be a finite number of seconds"):
            roofline.gather(r, timeout=bad)  # checked before the process group is looked for
    with pytest.raises(TypeError, match="gather: timeout must be a number"):
        roofline.gather(r, timeout="60")


# ---- load: a path or the text ------------------------------------------------------------------------------------
def test_load_reads_an_existing_file_whose_name_looks_like_json(docs, tmp_path, monkeypatch):
    """load('[rank0].json'), load('{x}.json') and load(b'r.json') read the file: only the text of a JSON object
    ({ to }) is read as the document."""
    text = _text(docs["model"])
    flops = roofline.load(text).total_flops
    monkeypatch.chdir(tmp_path)
    (tmp_path / "[rank0].json").write_text(text)
    (tmp_path / "r.json").write_text(text)
    (tmp_path / "{x}.json").write_text(text)
    for name in ("[rank0].json", b"[rank0].json", b"r.json", "{x}.json", pathlib.Path("{x}.json"),
                 str(tmp_path / "[rank0].json"), os.fsencode(tmp_path / "r.json")):
        assert roofline.load(name).total_flops == flops, name
    # the text itself, as str, bytes or bytearray, is still the document
    for t in (text, text.encode(), bytearray(text.encode()), "\n  " + text):
        assert roofline.load(t).total_flops == flops
    with pytest.raises(FileNotFoundError):
        roofline.load("missing.json")
    with pytest.raises(FileNotFoundError):
        roofline.load(pathlib.Path("[missing].json"))  # a PathLike is always a path
    with pytest.raises(FileNotFoundError):
        roofline.load("[missing].json")  # not a JSON object's text, so a file name
    with pytest.raises(TypeError, match="load: expected a path or the JSON text"):
        roofline.load(3)


# ---- the property --------------------------------------------------------------------------------------------------
JUNK = [0, -1, 1, 0.5, 1e-300, 5e-324, 1e9, 1e30, 1e308, -1e308, math.nan, math.inf, -math.inf, 2**63, 2**64 - 1,
        2**64, 10**30, -(10**30), 10**400, True, False, None, "", "x", "cpu", "flash", "L2", [], {}, [[[]]], [1, "a"],
        {"a": {"b": [1.5]}}, {"rank": 0}]
# record fields, and values that are in or just beyond each one's range
RECORD_VALUES = {"f": [0.0, -1.0, 1.0, 1e9, -1e9, 1e10, 1e300, math.nan, math.inf, 1e-300, 5e-324],
                 "u": [0, 1, 2, 3, 7, 255, 2**16, 2**32 - 1, 2**64 - 1]}


_SIMILAR = [(bool, [True, False]), (int, [0, 1, 2, 3, -1, 2**31, 2**32, 2**53, 2**62, 2**63, 2**64 - 1, 2**64]),
            (float, [0.0, 1.0, 0.5, 1e-9, 1e9, 1e30, 1e31, 1e-300, -1.0, math.nan, math.inf]),
            (str, ["", "x", "cpu", "cuda:0", "forward", "flash", "math", "all_reduce", "gloo", "L2", "float32"])]
_KEYS = ["a", "rank", "backend", "calls", "measured", "L2", "bytes", "kernels", "record"]
_JSON = st.one_of(st.sampled_from(JUNK), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=4),
                  st.lists(st.sampled_from(JUNK), max_size=3),
                  st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(JUNK), max_size=3))


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, data):
    """One edit of a report document: a record field set (times in pairs too), or a value somewhere deleted or
    replaced by junk (type changes, 0, -1, huge and tiny numbers, NaN, infinities, huge ints, strings, nesting)."""
    top = data.draw(st.sampled_from(sorted(doc) + ["records:field", "records:times"]))
    if top.startswith("records:"):
        try:
            rec = _records(doc)
        except (TypeError, ValueError, KeyError):  # the block itself was replaced by an earlier edit
            return doc
        if not len(rec):
            return doc
        i = data.draw(st.integers(0, len(rec) - 1))
        if top == "records:times":
            a = data.draw(st.sampled_from([0.0, 1.0, 1e9 - 1, 1e9, -1e9, 5e-324, 123.456]))
            b = data.draw(st.sampled_from([0.0, 5e-324, 1e-12, 1.0, 1e9, 2e9]))
            rec["t_start"][i], rec["t_end"][i] = a, a + b
        else:
            f = data.draw(st.sampled_from(RECORD_DTYPE.names))
            t = rec.dtype[f]
            values = RECORD_VALUES[t.kind]
            rec[f][i] = data.draw(st.sampled_from(values if t.kind == "f" else
                                                  [v for v in values if v <= np.iinfo(t).max] + [np.iinfo(t).max]))
        return _with_records(doc, rec)
    paths = list(_paths(doc[top], (top,)))
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    action = data.draw(st.sampled_from(["replace", "delete", "add", "similar"]))
    node = parent[path[-1]]
    similar = next((v for t, v in _SIMILAR if isinstance(node, t)), None)
    if action == "similar" and similar is not None:  # the same type, at and beyond the ends of the ranges
        parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(similar)))
    elif action == "similar" and isinstance(node, list) and node:
        parent[path[-1]] = node[:-1] if data.draw(st.booleans()) else node + node[:1]
    elif action == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "add" and isinstance(node, dict):  # a key the schema does not know
        node[data.draw(st.sampled_from(_KEYS + ["extra"]))] = copy.deepcopy(data.draw(_JSON))
    else:
        parent[path[-1]] = copy.deepcopy(data.draw(_JSON))  # JUNK's lists and objects stay as they are
    return doc


# ValueErrors that public methods document for reports that lack something (not for damaged ones)
DOCUMENTED = ("needs per-op times", "the cache model needs ceilings", "no dataflow (no access table",
              "no ceilings to draw")  # to_chrome_trace, cache_analysis, fusion_opportunities, roofline_chart


def _documented(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ValueError as e:
        assert any(d in str(e) for d in DOCUMENTED), f"{fn.__name__}: {e}"


def exercise(r):
    """Every public view of a report: printed, rendered, projected, merged, exported, analysed."""
    str(r), repr(r), r.summary(), r._repr_html_()
    for by in ("op", "module", "kernel"):
        r.table(by=by)
    r.by_op(), r.by_module(), r.by_phase(), r.totals(), r.analysis(), r.analysis("module")
    r.hints(), r.kernels, r.fusion, r.compare(r)
    _documented(r.fusion_opportunities)
    _documented(r.cache_analysis)
    _documented(r.roofline_chart)
    _documented(r.to_chrome_trace)
    r.to_csv()
    back = roofline.load(r.to_json())
    assert back.records.tobytes() == r.records.tobytes()
    p = r.project("H100 SXM")
    str(p), p._repr_html_(), p.to_chrome_trace(), p.roofline_chart(), p.to_json()
    m = rd.merge([r])
    str(m), m.per_rank(), m.totals(), m.slowest_rank(), m.to_dict()


@FUZZ
@given(data=st.data())
def test_fuzzed_documents_load_and_work_or_are_refused_naming_the_field(data):
    """For a mutation of a real document, load either raises ValueError naming the field that is wrong, or
    returns a report on which every public method runs."""
    docs = _docs()
    doc = copy.deepcopy(docs[data.draw(st.sampled_from(sorted(docs)))])
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    try:
        r = roofline.load(json.dumps(doc))
    except ValueError as e:
        msg = str(e)
        assert NAMED.match(msg), msg[:500]
        assert len(msg) < 2000, f"a message of {len(msg)} characters"
        event("refused")
        return
    event("loaded")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exercise(r)


# ---- hostile documents -------------------------------------------------------------------------------------------
MB = 1 << 20


def _hostile(docs) -> dict:
    """About 1 MB each: documents that are slow to parse, deep, huge in number, or not text at all."""
    report = _text(docs["op"])
    pad = MB - len(report)
    deep = "[" * 60 + "0" + "]" * 60
    return {
        "unterminated escaped quotes": '{"meta": "' + '\\"' * (MB // 2),
        "escaped quotes in a report": report[:-1] + ', "note": "' + '\\"' * (pad // 2 - 20) + '"}',
        "open brackets": "[" * MB,
        "open objects": '{"a":' * (MB // 5),
        "brackets and strings": '["[", ' * (MB // 6),
        "backslashes, odd": '{"a": "' + "\\" * (MB - 1) + '"}',
        "backslashes, even": '{"a": "' + "\\" * MB + '"}',
        "backslashes in a report": report[:-1] + ', "note": "' + "\\" * (2 * (pad // 2 - 20)) + '"}',
        "quotes": '"' * MB,
        "huge numbers": "[" + ",".join(["1e999999"] * (MB // 9)) + "]",
        "huge numbers in a report": report.replace('"wall_time": ', '"wall_time": 1e999999, "x": ', 1)[:-1]
        + ', "pad": [' + ",".join(["1e999999"] * (pad // 9)) + "]}",
        "ints of 100,000 digits": '{"schema": 1, "n_records": [' + ",".join(["9" * 100_000] * 10) + "]}",
        "ints of 4,000 digits": "[" + ",".join(["7" * 4000] * (MB // 4001)) + "]",
        "deep within the limit": report[:-1] + ', "deep": [' + ",".join([deep] * (pad // 122)) + "]}",
        "NUL bytes": '{"a": "' + "\x00" * MB + '"}',
        "NUL bytes, raw": b"\x00" * MB,
        "invalid UTF-8": b'{"a": "' + b"\xff\xfe" * (MB // 2) + b'"}',
        "lone surrogates": '{"a": "' + "\\ud800" * (MB // 6) + '"}',
        "many keys": "{" + ",".join(f'"k{i}": {i}' for i in range(MB // 12)) + "}",
    }


def _readers(tmp_path):
    """Each reader of documents, as (name, function of the text)."""

    def merge(text):
        p = tmp_path / "rank.json"
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        return rd.merge([p])

    def cache(text):
        p = tmp_path / "ceilings-cpu.json"
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _load_cache(str(p), FP, need_thorough=False)

    return [("load", roofline.load), ("merge", merge), ("Ceilings.from_json", Ceilings.from_json),
            ("ceilings cache", cache)]


def test_hostile_documents_load_or_fail_fast(docs, tmp_path):
    """Each document of the corpus, through each reader, loads or fails with ValueError (the cache reader: returns
    None). Its time is measured by bench/hostile_docs.py (under 1 s each; worst about 0.4 s on two cores); here a
    bound of 30 s only catches a hang or a quadratic reader, which a loaded CI runner cannot make look slow."""
    times = []
    for name, text in _hostile(docs).items():
        assert 0.3 * MB < len(text) < 2.2 * MB, (name, len(text))
        for reader, fn in _readers(tmp_path):
            t0 = time.perf_counter()
            try:
                fn(text)
            except ValueError:
                pass
            dt = time.perf_counter() - t0
            times.append((dt, name, reader))
            assert dt < 30.0, f"{name} through {reader}: {dt:.2f} s"
    worst = max(times)
    print(f"\nhostile documents: {len(times)} reads of {len(times) // 4} documents of ~1 MB, worst "
          f"{worst[0]:.3f} s ({worst[1]}, {worst[2]})")
