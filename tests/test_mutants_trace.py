"""The Chrome / Perfetto trace of a report, event by event, for the hand-worked timed report of
tests/test_mutants_render.py (mm in Net.fc 0 .. 8 s, add in Net 8 .. 10 s, both forward; copy outside every module
10 .. 14 s, backward): every slice's nesting, times and arguments, and the counter tracks, written out here."""

import json
import math

import numpy as np
import pytest

from roofline.report import OpInfo, Report
from test_mutants_render import _ceil, timed, untimed


def _x(name, cat, ts_us, dur_us, args):
    return {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": 1, "ts": ts_us, "dur": dur_us, "args": args}


def _c(ts_us, flops, nbytes):
    return [{"ph": "C", "name": "achieved FLOP/s", "pid": 1, "ts": ts_us, "args": {"FLOP/s": flops}},
            {"ph": "C", "name": "achieved bandwidth", "pid": 1, "ts": ts_us, "args": {"B/s": nbytes}}]


MM = {"op": "aten.mm.default", "module": "Net.fc", "phase": "forward", "dtype": "float32", "flops": 400.0,
      "bytes": 30.0, "intensity": 400 / 30, "bound": "memory", "roofline_time_us": 6e6, "time_us": 8e6,
      "pct_of_roof": 75.0}
ADD = {"op": "aten.add.Tensor", "module": "Net", "phase": "forward", "dtype": "float32", "flops": 20.0,
       "bytes": 20.0, "intensity": 1.0, "bound": "memory", "roofline_time_us": 4e6, "time_us": 2e6,
       "pct_of_roof": 200.0, "above_ceiling": True}
COPY = {"op": "aten.copy_.default", "module": "Global", "phase": "backward", "dtype": "float32", "flops": 0.0,
        "bytes": 20.0, "intensity": 0.0, "bound": "bandwidth", "roofline_time_us": 4e6, "time_us": 4e6,
        "pct_of_roof": 100.0}


def test_the_trace_of_a_timed_report():
    t = json.loads(timed().to_chrome_trace())
    assert t["displayTimeUnit"] == "ns"
    assert t["otherData"] == {"roofline_version": None, "wall_time_s": 20.0, "timing": None, "projected_to": None,
                              "ceilings": "test (best)"}
    ev = t["traceEvents"]
    assert ev[:2] == [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "roofline: run"}},
                      {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "ops"}}]
    # microseconds: 8 s = 8e6 us. In start order; at one start the longer first, at equal length the outer first
    assert ev[2:9] == [
        _x("forward", "phase", 0.0, 10e6, {"phase": "forward"}),
        _x("Net", "module", 0.0, 10e6, {"module": "Net"}),
        _x("fc", "module", 0.0, 8e6, {"module": "Net.fc"}),
        _x("mm", "op", 0.0, 8e6, MM),
        _x("add.Tensor", "op", 8e6, 2e6, ADD),
        _x("backward", "phase", 10e6, 4e6, {"phase": "backward"}),
        _x("copy_", "op", 10e6, 4e6, COPY)]
    # the rate of the op running: 400 FLOP / 8 s, 30 B / 8 s; 20 / 2, 20 / 2; 0 / 4, 20 / 4; 0 between ops
    assert ev[9:] == (_c(0.0, 50.0, 3.75) + _c(8e6, 0.0, 0.0) + _c(8e6, 10.0, 10.0) + _c(10e6, 0.0, 0.0)
                      + _c(10e6, 0.0, 5.0) + _c(14e6, 0.0, 0.0))


def test_times_are_from_the_first_op_and_modules_run_twice_are_two_slices():
    r = timed()
    # the mm in Net.fc at 100 .. 101 s, the add in Net at 101 .. 102 s, the copy back in Net.fc at 102 .. 102.000001
    r.records["t_start"] = [100.0, 101.0, 102.0]
    r.records["t_end"] = [101.0, 102.0, 102.000001]
    r.records["phase"] = [0, 0, 0]
    r.records["module"] = [2, 1, 2]
    ev = [e for e in json.loads(r.to_chrome_trace())["traceEvents"] if e["ph"] == "X"]
    got = [(e["name"], e["ts"], e["dur"]) for e in ev]
    # in microseconds: 1 s = 1e6, 2.000001 s = 2e6 + 1; Net.fc runs twice, around the add: two slices
    assert got == [("forward", 0.0, 2e6 + 1), ("Net", 0.0, 2e6 + 1), ("fc", 0.0, 1e6), ("mm", 0.0, 1e6),
                   ("add.Tensor", 1e6, 1e6), ("fc", 2e6, 1.0), ("copy_", 2e6, 1.0)]


def test_a_zero_length_op_has_no_counter_and_an_end_before_its_start_is_clipped():
    r = timed()
    r.records["t_start"] = [0.0, 1.0, 2.0]
    r.records["t_end"] = [1.0, 1.0, 1.5]  # the add takes no time; the copy ends before it starts
    t = json.loads(r.to_chrome_trace())
    ops = [e for e in t["traceEvents"] if e.get("cat") == "op"]
    assert [(e["name"], e["ts"], e["dur"]) for e in ops] == [("mm", 0.0, 1e6), ("add.Tensor", 1e6, 0.0),
                                                             ("copy_", 2e6, 0.0)]
    counters = [(e["ts"], e["args"]["FLOP/s"]) for e in t["traceEvents"] if e["name"] == "achieved FLOP/s"]
    assert counters == [(0.0, 400.0), (1e6, 0.0)]


def test_untimed_records_are_left_out_and_a_report_without_times_is_refused():
    r = timed()
    r.records["t_start"][1] = np.nan
    r.records["t_end"][1] = np.nan
    ops = [e["name"] for e in json.loads(r.to_chrome_trace())["traceEvents"] if e.get("cat") == "op"]
    assert ops == ["mm", "copy_"]
    r.records["t_end"][0] = np.nan  # a start without an end is not a time
    ops = [e["name"] for e in json.loads(r.to_chrome_trace())["traceEvents"] if e.get("cat") == "op"]
    assert ops == ["copy_"]
    with pytest.raises(ValueError, match="to_chrome_trace needs per-op times"):
        untimed().to_chrome_trace()


def test_a_projected_trace_names_its_target_and_flags_nothing():
    p = timed().project(_ceil(), name="X")
    t = json.loads(p.to_chrome_trace())
    assert t["traceEvents"][0]["args"] == {"name": "roofline: projected onto X"}
    assert t["otherData"]["projected_to"] == "X"
    assert not any(e["args"].get("above_ceiling") for e in t["traceEvents"] if e.get("cat") == "op")


def test_devices_shapes_and_index_module_names():
    r = timed(meta={"devices": ["cpu", "cuda:0"], "version": "1.2", "timing": "op"})
    r = Report(r.records, r._ops, [("Global",), ("Global", "Net"), ("Global", "Net", "Net.blocks.0")],
               wall_time=20.0, meta=r.meta, ceilings=_ceil(), signatures=["", "f32[2,3]"])
    r.records["sig"] = [1, 0, 0]
    t = json.loads(r.to_chrome_trace())
    assert t["traceEvents"][0]["args"] == {"name": "roofline: cpu, cuda:0"}
    assert t["otherData"]["roofline_version"] == "1.2" and t["otherData"]["timing"] == "op"
    x = [e for e in t["traceEvents"] if e["ph"] == "X"]
    # the container Net.blocks is a slice of its own, named "blocks"; an index keeps its parent's name
    assert [e["name"] for e in x][:5] == ["forward", "Net", "blocks", "blocks.0", "mm"]
    assert x[4]["args"]["shapes"] == "f32[2,3]" and x[5]["args"]["shapes"] == ""
    r._signatures = ["", "f32[2,3]"]
    r.records["sig"] = [2, 0, 0]  # one past the table of 2
    x = [e for e in json.loads(r.to_chrome_trace())["traceEvents"] if e.get("cat") == "op"]
    assert x[0]["args"]["shapes"] == "?"


def test_no_ceilings_no_ceilings_entry_and_nan_figures_are_null():
    r = timed(ceilings=False)
    t = json.loads(r.to_chrome_trace())
    assert "ceilings" not in t["otherData"]
    mm = [e for e in t["traceEvents"] if e.get("cat") == "op"][0]["args"]
    assert mm["roofline_time_us"] is None and mm["pct_of_roof"] is None and mm["intensity"] == 400 / 30


def test_the_trace_is_written_to_a_file(tmp_path):
    r = timed()
    text = r.to_chrome_trace(tmp_path / "t.json")
    assert (tmp_path / "t.json").read_text() == text
    with pytest.raises(TypeError, match="Report.to_chrome_trace"):
        r.to_chrome_trace(3)


def test_ops_are_laid_out_in_time_order_and_an_index_module_keeps_its_parents_name():
    r = timed()
    r.module_sets = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.0")]
    # the add (record 1) ran first, at 100 s; the mm (record 0) from 105 s; the copy from 110 s
    r.records["t_start"] = [105.0, 100.0, 110.0]
    r.records["t_end"] = [106.0, 101.0, 111.0]
    r.records["phase"] = 0
    x = [(e["name"], e["ts"], e["dur"]) for e in json.loads(r.to_chrome_trace())["traceEvents"] if e["ph"] == "X"]
    # Net runs around the add, then around the mm (in Net.0, named "Net.0": an index keeps its parent's name)
    assert x == [("forward", 0.0, 11e6), ("Net", 0.0, 6e6), ("add.Tensor", 0.0, 1e6), ("Net.0", 5e6, 1e6),
                 ("mm", 5e6, 1e6), ("copy_", 10e6, 1e6)]


def test_a_module_slice_covers_its_longest_op_and_a_longer_op_comes_first():
    r = timed()
    r.records["module"] = [2, 2, 2]
    r.records["phase"] = 0
    # the mm 0 .. 10 s; the add inside its time, 2 .. 3 s; the copy starting with the add, taking no time
    r.records["t_start"] = [0.0, 2.0, 2.0]
    r.records["t_end"] = [10.0, 3.0, 2.0]
    x = [(e["name"], e["ts"], e["dur"]) for e in json.loads(r.to_chrome_trace())["traceEvents"] if e["ph"] == "X"]
    # at 2 s the longer add first, then the copy
    assert x == [("forward", 0.0, 10e6), ("Net", 0.0, 10e6), ("fc", 0.0, 10e6), ("mm", 0.0, 10e6),
                 ("add.Tensor", 2e6, 1e6), ("copy_", 2e6, 0.0)]


def test_nanosecond_durations_and_strict_json():
    r = timed()
    r.records["t_start"] = [0.0, 1.0, 2.0]
    r.records["t_end"] = [1e-9, 1.0 + 2e-9, 2.0]  # 1 ns and 2 ns: 0.001 and 0.002 us
    ops = [e for e in json.loads(r.to_chrome_trace())["traceEvents"] if e.get("cat") == "op"]
    assert [(e["ts"], e["dur"]) for e in ops] == [(0.0, 0.001), (1e6, 0.002), (2e6, 0.0)]
    # the format is strict JSON: a figure that is not a number is refused, never written as NaN
    bad = timed(wall=math.nan)
    with pytest.raises(ValueError):
        bad.to_chrome_trace()
