"""Report.to_chrome_trace: a Trace Event Format document (what Perfetto and chrome://tracing open), checked here
against the format itself, since Perfetto's trace processor is a separate binary the ``perfetto`` package downloads
on first use: strict JSON, each event's fields and types, slices that nest (never overlap partially) on their
track, every op under its module and phase, and the counters' rates from the hand-written figures below."""

import json
import math

import numpy as np
import pytest

import roofline
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report

F32 = DTYPE_CODES["float32"]
OPS = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
SETS = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.blocks.0"), ("Global", "Net", "Net.blocks.1"),
        ("Global", "Net", "Net.head")]
# (op, module set, phase, matrix FLOPs, vector FLOPs, bytes read, bytes written, seconds, signature)
ROWS = [
    (1, 0, 0, 0, 16, 64, 64, 1e-6, 2),            # outside every module
    (0, 2, 0, 512, 0, 1000, 200, 2e-6, 1),        # Net.blocks.0
    (1, 3, 0, 0, 32, 256, 128, 1e-6, 2),          # Net.blocks.1
    (0, 4, 0, 4096, 0, 2048, 1024, 4e-6, 1),      # Net.head
    (0, 4, 1, 8192, 0, 4096, 2048, 8e-6, 1),      # Net.head, backward
    (0, 2, 1, 1024, 0, 2000, 400, 3e-6, 1),       # Net.blocks.0, backward
    (0, 2, 1, 1024, 0, 2000, 400, 0.0, 1),        # a call too short for the clock
]
SIGS = ["", "f32[8,8], f32[8,8]", "f32[16]"]


def _report(timed=True):
    rec = np.zeros(len(ROWS), dtype=RECORD_DTYPE)
    t = 10.0  # the clock does not start at 0
    for i, (op, mod, ph, mf, vf, br, bw, sec, sig) in enumerate(ROWS):
        rec[i]["op"], rec[i]["module"], rec[i]["phase"], rec[i]["dtype"] = op, mod, ph, F32
        rec[i]["matrix_flops"], rec[i]["vector_flops"], rec[i]["bytes_read"], rec[i]["bytes_written"] = mf, vf, br, bw
        rec[i]["seq"], rec[i]["sig"] = i, sig
        if timed:
            rec[i]["t_start"], rec[i]["t_end"] = t, t + sec
            t += sec + 5e-7  # a gap between ops
        else:
            rec[i]["t_start"] = rec[i]["t_end"] = math.nan
    ceil = roofline.Ceilings(device="cpu", name="handmade", fingerprint="handmade",
                             peaks={("matrix", "float32"): roofline.Ceiling(1e11),
                                    ("vector", "float32"): roofline.Ceiling(2e10)},
                             bandwidths={"DRAM": roofline.Ceiling(2e10)})
    return Report(rec, OPS, SETS, wall_time=1e-4, meta={"timing": "op" if timed else "model", "devices": ["cpu"]},
                  ceilings=ceil, signatures=SIGS)


def _strict(text):
    def bad(c):
        raise ValueError(f"not strict JSON: {c}")

    return json.loads(text, parse_constant=bad)


def validate(doc):
    """The Trace Event Format's JSON object form, for the event types a roofline trace uses; returns the X events
    per (pid, tid) in file order."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit") in (None, "ms", "ns")
    tracks = {}
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert isinstance(ev["name"], str) and ev["name"]
        assert isinstance(ev["pid"], int)
        if ph == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            assert isinstance(ev["args"]["name"], str)
        elif ph == "X":
            assert isinstance(ev["tid"], int) and isinstance(ev["cat"], str)
            for k in ("ts", "dur"):
                assert isinstance(ev[k], (int, float)) and not isinstance(ev[k], bool) and ev[k] >= 0
            assert isinstance(ev.get("args", {}), dict)
            tracks.setdefault((ev["pid"], ev["tid"]), []).append(ev)
        elif ph == "C":
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
            assert ev["args"] and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ev["args"].values())
        else:
            raise AssertionError(f"unexpected event type {ph!r}")
    return tracks


def nest(events):
    """Each slice's parent (index into events, or None), checking that slices nest: a slice starts inside the
    innermost open slice and ends within it, or after it has closed. Times in integer nanoseconds."""
    parents, stack = [], []
    last = -1
    for i, ev in enumerate(events):
        s, e = round(ev["ts"] * 1000), round((ev["ts"] + ev["dur"]) * 1000)
        assert s >= last, "slices are not in start order"
        last = s
        # the innermost open slice ends before this one starts (a zero-length slice at its very end is inside it)
        while stack and (s > stack[-1][1] or (s == stack[-1][1] and e > s)):
            stack.pop()
        if stack:
            assert e <= stack[-1][1], f"{ev['name']} overlaps its parent {events[stack[-1][0]]['name']}"
        parents.append(stack[-1][0] if stack else None)
        stack.append((i, e))
    return parents


def test_trace_is_valid_nested_and_carries_the_figures(tmp_path):
    r = _report()
    path = tmp_path / "trace.json"
    text = r.to_chrome_trace(path)
    assert path.read_text() == text
    doc = _strict(text)
    tracks = validate(doc)
    assert list(tracks) == [(1, 1)]
    events = tracks[(1, 1)]
    parents = nest(events)
    ops = [(i, ev) for i, ev in enumerate(events) if ev["cat"] == "op"]
    assert len(ops) == len(ROWS)  # one slice per timed call, the zero-length one included
    for (i, ev), row in zip(ops, ROWS):
        op, mod, ph, mf, vf, br, bw, sec, sig = row
        a = ev["args"]
        assert a["flops"] == mf + vf and a["bytes"] == br + bw and a["shapes"] == SIGS[sig]
        assert a["intensity"] == pytest.approx((mf + vf) / (br + bw))
        assert a["phase"] == ("forward", "backward")[ph] and a["dtype"] == "float32"
        assert ev["dur"] == pytest.approx(sec * 1e6, abs=1e-3)
        # its enclosing slices: the innermost module (if any), ..., the phase
        chain, p = [], parents[i]
        while p is not None:
            chain.append(events[p])
            p = parents[p]
        assert chain[-1]["cat"] == "phase" and chain[-1]["name"] == a["phase"]
        mods = [c["args"]["module"] for c in chain if c["cat"] == "module"]
        inner = SETS[mod][-1]
        assert mods == ([] if inner == "Global" else
                        [".".join(inner.split(".")[:k]) for k in range(inner.count(".") + 1, 0, -1)])
        assert a["module"] == inner
    # the head's forward mm: 4096 FLOP at 100 GFLOP/s = 40.96 ns vs 3072 B at 20 GB/s = 153.6 ns: memory-bound,
    # 153.6 ns of 4 us on the roof
    head = ops[3][1]["args"]
    assert head["bound"] == "memory" and head["roofline_time_us"] == pytest.approx(0.1536)
    assert head["pct_of_roof"] == pytest.approx(100 * 0.1536 / 4)
    # module runs: blocks (a container) appears once in forward (blocks.0 then blocks.1) and once in backward
    blocks = [ev for ev in events if ev["cat"] == "module" and ev["args"]["module"] == "Net.blocks"]
    assert len(blocks) == 2 and {ev["name"] for ev in events if ev["cat"] == "module"} >= {"blocks.0", "head"}
    # counters: the rate of the op running, 0 between ops
    flops = [ev for ev in doc["traceEvents"] if ev["ph"] == "C" and ev["name"] == "achieved FLOP/s"]
    bw = [ev for ev in doc["traceEvents"] if ev["ph"] == "C" and ev["name"] == "achieved bandwidth"]
    assert len(flops) == len(bw) == 2 * (len(ROWS) - 1)  # the zero-length call has no rate
    assert flops[2]["args"]["FLOP/s"] == pytest.approx(512 / 2e-6) and flops[3]["args"]["FLOP/s"] == 0
    assert bw[2]["args"]["B/s"] == pytest.approx(1200 / 2e-6)
    assert [ev["ts"] for ev in flops] == sorted(ev["ts"] for ev in flops)


def test_trace_of_a_projection_and_of_an_untimed_report():
    p = _report(timed=False).project("H100 SXM")
    doc = _strict(p.to_chrome_trace())
    events = validate(doc)[(1, 1)]
    nest(events)
    assert doc["otherData"]["projected_to"] == "H100 SXM"
    assert sum(ev["cat"] == "op" for ev in events) == len(ROWS)
    assert not any(ev["args"].get("above_ceiling") for ev in events if ev["cat"] == "op")
    with pytest.raises(ValueError, match="needs per-op times"):
        _report(timed=False).to_chrome_trace()


def test_trace_of_a_measured_model():
    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with roofline.measure(m, timing="op", ceilings=_report().ceilings) as r:
        m(torch.randn(8, 16)).sum().backward()
    doc = _strict(r.to_chrome_trace())
    events = validate(doc)[(1, 1)]
    parents = nest(events)
    ops = [i for i, ev in enumerate(events) if ev["cat"] == "op"]
    assert len(ops) == len(r.records)
    addmm = [i for i in ops if events[i]["args"]["op"] == "aten.addmm.default"]
    assert [events[parents[i]]["args"]["module"] for i in addmm] == ["Sequential.0", "Sequential.2"]
    assert events[addmm[0]]["args"]["shapes"] == "f32[16], f32[8,16], f32[16,16]"
    assert events[addmm[0]]["args"]["flops"] == 2 * 8 * 16 * 16 + 8 * 16  # the product and the bias add


def test_the_nesting_check_rejects_a_partial_overlap():
    ev = [{"name": "a", "ts": 0.0, "dur": 2.0}, {"name": "b", "ts": 1.0, "dur": 2.0}]
    with pytest.raises(AssertionError, match="b overlaps its parent a"):
        nest(ev)
    assert nest([{"name": "a", "ts": 0.0, "dur": 2.0}, {"name": "b", "ts": 2.0, "dur": 0.0},
                 {"name": "c", "ts": 2.0, "dur": 1.0}]) == [None, 0, None]
