"""The int rule: every public argument that is a count accepts an int or any object with ``__index__``, refuses a
bool, a str and a float with one TypeError shape, and an out-of-range value with one ValueError shape, both naming
the function and the argument (roofline._util._ints.count)."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
import roofline.distributed as rd  # noqa: E402
from roofline import llm  # noqa: E402
from roofline._traces import _read  # noqa: E402
from roofline._util import _ints  # noqa: E402


class Idx:
    """Not an int, but an integer by ``__index__`` (as a NumPy integer or a 0-d integer tensor is)."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


@pytest.fixture(scope="module")
def report():
    with roofline.measure(ceilings="H100 SXM") as r:
        torch.nn.Linear(4, 3)(torch.ones(2, 4))
    return r


@pytest.fixture(scope="module")
def merged(report):
    return rd.MergedReport([report])


@pytest.fixture(scope="module")
def mon():
    m = roofline.monitor(ceilings="H100 SXM")
    m.start()
    yield m
    m.stop()


def _hf(v):
    pytest.importorskip("transformers")
    from roofline.integrations.huggingface import RooflineCallback

    return RooflineCallback(steps=v)


# (label, call(value), where, name, the smallest value accepted, the largest or None)
ENTRY_POINTS = [
    ("schedule active", lambda v: roofline.schedule(active=v), "schedule", "active", 1, None),
    ("schedule wait", lambda v: roofline.schedule(wait=v, active=1), "schedule", "wait", 0, None),
    ("steady warmup", lambda v: roofline.steady(lambda: None, warmup=v, repeat=1, ceilings="H100 SXM"), "steady",
     "warmup", 0, None),
    ("steady repeat", lambda v: roofline.steady(lambda: None, warmup=0, repeat=v, ceilings="H100 SXM"), "steady",
     "repeat", 1, None),
    ("monitor history_size", lambda v: roofline.monitor(history_size=v), "monitor", "history_size", 1,
     2**63 - 1),
    ("monitor warmup", lambda v: roofline.monitor(warmup=v), "monitor", "warmup", 0, None),
    ("trainer callback steps", _hf, "RooflineCallback", "steps", 1, None),
    ("register flops", lambda v: roofline.register("rltest_int::op", kind="ewise", flops=v), r"register\(rltest_int::op\)",
     "flops", 0, 2**63 - 1),
    ("bus_factor", lambda v: rd.bus_factor("all_reduce", v), "bus_factor", "n", 1, None),
    ("DecoderConfig", lambda v: llm.DecoderConfig(hidden=8, intermediate=16, layers=v, heads=2, vocab=32),
     "DecoderConfig", "layers", 1, None),
    ("open_trace", lambda v: _read.open_trace(b"{\"traceEvents\": []}", max_depth=v), "open_trace", "max_depth", 3, 512),
]
REPORT_METHODS = [
    ("Report.table top", lambda r, v: r.table(top=v), "table", "top", 1),
    ("Report.summary top", lambda r, v: r.summary(top=v), "summary", "top", 1),
    ("Report.to_html top", lambda r, v: r.to_html(top=v), "Report.to_html", "top", 1),
    ("Report.to_json indent", lambda r, v: r.to_json(indent=v), "Report.to_json", "indent", 0),
    ("Report.by_module depth", lambda r, v: r.by_module(depth=v), "by_module", "depth", 0),
    ("Report.table depth", lambda r, v: r.table(by="module", depth=v), "table", "depth", 1),
    ("Report.project gpus", lambda r, v: r.project("H100 SXM", gpus=v), "project", "gpus", 1),
    ("Report.fusion_opportunities", lambda r, v: r.fusion_opportunities(min_ops=v), "fusion_opportunities",
     "min_ops", 2),
    ("Report.roofline_chart top", lambda r, v: r.roofline_chart(top=v), "roofline_chart", "top", 0),
    ("Report.module_path", lambda r, v: r.module_path(v), "module_path", "module_id", 0),
]


def _check(call, where, name, lo, hi, cleanup=None):
    """The three refused types, the value below the range, and an __index__ object inside it."""
    for bad in (True, "3", 3.0):
        with pytest.raises(TypeError) as e:
            call(bad)
        assert re.fullmatch(rf"{where}: {name} must be an int.*?, got {re.escape(repr(bad))} "
                            rf"\({type(bad).__name__}\)", str(e.value)), str(e.value)
    with pytest.raises(ValueError) as e:
        call(lo - 1)
    assert re.fullmatch(rf"{where}: {name} must be an int (>= {lo}|in \[{lo}, {hi}\])( or None)?, got {lo - 1}",
                        str(e.value)), str(e.value)
    if hi is not None:
        with pytest.raises(ValueError, match=rf"^{where}: {name} must be an int in \[{lo}, {hi}\], got {hi + 1}$"):
            call(hi + 1)
    call(Idx(lo))  # accepted, as the int it stands for
    if cleanup:
        cleanup()


@pytest.mark.parametrize("label,call,where,name,lo,hi", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_functions_take_counts_by_one_rule(label, call, where, name, lo, hi):
    cleanup = (lambda: roofline.unregister("rltest_int::op")) if label == "register flops" else None
    _check(call, where, name, lo, hi, cleanup)


@pytest.mark.parametrize("label,call,where,name,lo", REPORT_METHODS, ids=[e[0] for e in REPORT_METHODS])
def test_report_methods_take_counts_by_one_rule(report, label, call, where, name, lo):
    _check(lambda v: call(report, v), where, name, lo, None)


def test_the_merged_report_and_the_monitor_step_take_counts_by_one_rule(merged, mon):
    _check(lambda v: merged.summary(top=v), "MergedReport.summary", "top", 1, None)
    _check(lambda v: merged.to_json(indent=v), "MergedReport.to_json", "indent", 0, None)
    _check(lambda v: mon.step(tokens=v), r"monitor\.step", "tokens", 0, 2**63 - 1)


def test_an_index_object_counts_as_its_int(report):
    assert roofline.schedule(wait=Idx(2), active=Idx(3)).as_dict()["active"] == 3
    assert report.table(top=Idx(1)) == report.table(top=1)
    assert report.to_json(indent=Idx(2)) == report.to_json(indent=2)
    assert _ints.count(np.int64(5), "n", "f") == 5 and type(_ints.count(np.int64(5), "n", "f")) is int
    with pytest.raises(TypeError, match=r"^f: n must be an int >= 0, got (np\.)?True_? \(bool_?\)$"):
        _ints.count(np.bool_(True), "n", "f")
