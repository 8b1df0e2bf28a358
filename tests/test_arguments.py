"""Every public method of a report checks its arguments before doing anything: a count that is negative, zero
where nothing would be shown, a bool or a float; a name that is not one of the allowed ones; an object of the wrong
type. The error names the method, the argument and what it accepts; nothing is silently dropped or ignored. The
report is built by hand (records, ops, module sets, accesses, ceilings), so the row counts the valid calls are
checked against are written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline
from roofline._datamodel._records import ACCESS_DTYPE, DTYPE_CODES, RECORD_DTYPE
from roofline.report import Comparison, OpInfo, Report

F32 = DTYPE_CODES["float32"]
OPS = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise"),
       OpInfo("aten.relu.default", "aten.relu", "ewise")]
SETS = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.a"), ("Global", "Net", "Net.b")]
# (op, module set, phase, matrix FLOPs, vector FLOPs, bytes read, bytes written): three distinct ops, so a table
# by op has three rows
ROWS = [(0, 2, 0, 4096, 0, 768, 256), (1, 2, 0, 0, 64, 512, 256), (2, 3, 0, 0, 64, 256, 256),
        (0, 3, 1, 8192, 0, 1024, 512)]


def _report(timed=True):
    rec = np.zeros(len(ROWS), dtype=RECORD_DTYPE)
    for i, (op, mod, ph, mf, vf, br, bw) in enumerate(ROWS):
        rec[i]["op"], rec[i]["module"], rec[i]["phase"], rec[i]["dtype"] = op, mod, ph, F32
        rec[i]["matrix_flops"], rec[i]["vector_flops"], rec[i]["bytes_read"], rec[i]["bytes_written"] = mf, vf, br, bw
        rec[i]["seq"] = i
        rec[i]["t_start"], rec[i]["t_end"] = (i * 1e-6, (i + 1) * 1e-6) if timed else (math.nan, math.nan)
    # mm (record 0) writes storage 1, add (1) reads it and writes 2, relu (2) reads 2 and writes 3: a chain
    acc = np.array([(0, 10, 768, 0), (0, 1, 256, 1), (1, 1, 256, 0), (1, 11, 256, 0), (1, 2, 256, 1),
                    (2, 2, 256, 0), (2, 3, 256, 1), (3, 12, 1024, 0), (3, 13, 512, 1)], dtype=ACCESS_DTYPE)
    ceil = roofline.Ceilings(device="cpu", name="handmade", fingerprint="handmade",
                             peaks={("matrix", "float32"): roofline.Ceiling(1e11),
                                    ("vector", "float32"): roofline.Ceiling(2e10)},
                             bandwidths={"DRAM": roofline.Ceiling(2e10)})
    return Report(rec, OPS, SETS, wall_time=len(ROWS) * 1e-6 if timed else None,
                  meta={"timing": "op" if timed else None, "devices": ["cpu"]}, ceilings=ceil, accesses=acc)


@pytest.fixture(scope="module")
def r():
    return _report()


# (method, args, kwargs, exception, words the message must hold)
BAD = [
    # counts: negative, zero where nothing would be shown, bools, floats, strings
    ("table", (), {"top": -1}, ValueError, ["table", "top", "int >= 1 or None", "-1"]),
    ("table", (), {"top": 0}, ValueError, ["table", "top", ">= 1"]),
    ("table", (), {"top": True}, TypeError, ["table", "top", "bool"]),
    ("table", (), {"top": 2.0}, TypeError, ["table", "top", "float"]),
    ("table", (), {"top": "5"}, TypeError, ["table", "top", "str"]),
    ("summary", (), {"top": -1}, ValueError, ["summary", "top", ">= 1"]),
    ("summary", (), {"top": 0}, ValueError, ["summary", "top"]),
    ("summary", (), {"top": False}, TypeError, ["summary", "top", "bool"]),
    ("fusion_opportunities", (), {"min_ops": -5}, ValueError, ["fusion_opportunities", "min_ops", ">= 2"]),
    ("fusion_opportunities", (), {"min_ops": 1}, ValueError, ["min_ops", ">= 2"]),
    ("fusion_opportunities", (), {"min_ops": True}, TypeError, ["min_ops", "bool"]),
    ("fusion_opportunities", (), {"compiled": "r.json"}, TypeError, ["compiled", "Report", "str"]),
    ("hints", (), {"min_share": True}, TypeError, ["hints", "min_share", "[0, 1]", "bool"]),
    ("hints", (), {"min_share": "1%"}, TypeError, ["min_share", "str"]),
    ("hints", (), {"min_share": -0.1}, ValueError, ["min_share", "[0, 1]"]),
    ("hints", (), {"min_share": math.nan}, ValueError, ["min_share", "[0, 1]"]),
    ("by_module", (), {"depth": -1}, ValueError, ["by_module", "depth", "int >= 0 or None"]),
    ("by_module", (), {"depth": True}, TypeError, ["by_module", "depth", "bool"]),
    ("by_module", (), {"depth": 1.5}, TypeError, ["depth", "float"]),
    ("analysis", ("module",), {"depth": -1}, ValueError, ["analysis", "depth", ">= 0"]),
    ("table", ("module",), {"depth": 0}, ValueError, ["table", "depth", ">= 1"]),
    ("plot", (), {"by": "module", "depth": 0}, ValueError, ["plot", "depth", ">= 1"]),
    ("roofline_chart", ("module",), {"depth": 0}, ValueError, ["roofline_chart", "depth", ">= 1"]),
    ("plot", (), {"top": -1}, ValueError, ["plot", "top", ">= 0"]),
    ("plot", (), {"top": True}, TypeError, ["plot", "top", "bool"]),
    ("roofline_chart", (), {"top": -1}, ValueError, ["roofline_chart", "top", ">= 0"]),
    ("roofline_chart", (), {"top": 1.0}, TypeError, ["roofline_chart", "top", "float"]),
    ("project", ("H100 SXM",), {"gpus": 0}, ValueError, ["project", "gpus", ">= 1"]),
    ("project", ("H100 SXM",), {"gpus": True}, TypeError, ["project", "gpus", "bool"]),
    ("project", ("H100 SXM",), {"name": 3}, TypeError, ["project", "name", "str", "int"]),
    ("module_path", (-1,), {}, ValueError, ["module_path", "module_id", ">= 0"]),
    ("module_path", (len(SETS),), {}, ValueError, ["module_path", "module_id", f"below {len(SETS)}"]),
    ("module_path", (True,), {}, TypeError, ["module_path", "module_id", "bool"]),
    ("to_json", (), {"indent": -2}, ValueError, ["to_json", "indent", ">= 0"]),
    ("to_json", (), {"indent": True}, TypeError, ["to_json", "indent", "bool"]),
    # names: unknown strings and non-strings, with the allowed values in the message
    ("cache_analysis", ("bogus",), {}, ValueError, ["cache_analysis", "source", "'measured'", "'datasheet'",
                                                    "'best'", "None", "'bogus'"]),
    ("cache_analysis", (1,), {}, ValueError, ["cache_analysis", "source", "'best'"]),
    ("to_dataframe", (), {"by": "x"}, ValueError, ["to_dataframe", "by", "'op' or 'kernel'", "'x'"]),
    ("to_dataframe", (), {"by": None}, ValueError, ["to_dataframe", "by", "'op' or 'kernel'"]),
    ("table", ("bogus",), {}, ValueError, ["table", "by", "'op'", "'op_shape'", "'module'", "'kernel'"]),
    ("table", (), {"phase": "sideways"}, ValueError, ["table", "phase", "'forward'", "'backward'", "'optimizer'"]),
    ("table", ("kernel",), {"phase": "forward"}, ValueError, ["table", "phase", "kernel"]),
    ("analysis", ("layer",), {}, ValueError, ["analysis", "by", "one of 'op', 'op_shape' or 'module'"]),
    ("analysis", (0,), {}, ValueError, ["analysis", "by"]),
    ("by_op", (), {"phase": 1}, ValueError, ["by_op", "phase", "'forward'"]),
    ("by_module", (), {"phase": "fwd"}, ValueError, ["by_module", "phase"]),
    ("plot", (), {"by": "layer"}, ValueError, ["plot", "by", "'op'"]),
    ("roofline_chart", (), {"backend": "png"}, ValueError, ["roofline_chart", "backend", "'svg' or 'plotly'"]),
    ("roofline_chart", (), {"by": "layer"}, ValueError, ["roofline_chart", "by", "'module'"]),
    # depth with a grouping it does not apply to: refused, not ignored
    ("table", ("op",), {"depth": 2}, ValueError, ["table", "depth applies to by='module' only"]),
    ("analysis", ("op",), {"depth": 2}, ValueError, ["analysis", "depth applies to by='module' only"]),
    ("analysis", ("op_shape",), {"depth": 2}, ValueError, ["depth applies to by='module' only"]),
    # compare: the other report and the grouping
    ("compare", (3,), {}, TypeError, ["compare", "after", "Report", "int"]),
    ("compare", (None,), {}, TypeError, ["compare", "Report", "NoneType"]),
    ("compare", ("SELF",), {"by": "kernel"}, ValueError, ["compare", "by", "'op' or 'module'"]),
    ("compare", ("SELF",), {"depth": -2}, ValueError, ["compare", "depth", ">= 0"]),
    ("compare", ("SELF",), {"by": "module", "depth": 1.0}, TypeError, ["compare", "depth", "float"]),
    ("compare", ("SELF",), {"depth": 2}, ValueError, ["compare", "depth applies to by='module' only"]),
]


@pytest.mark.parametrize("method,args,kwargs,exc,words", BAD,
                         ids=[f"{m}-{a}-{k}" for m, a, k, _, _ in BAD])
def test_bad_argument_is_refused_with_a_message_naming_it(r, method, args, kwargs, exc, words, tmp_path):
    args = tuple(r if a == "SELF" else a for a in args)
    if method == "plot":
        pytest.importorskip("matplotlib")
        kwargs = dict(kwargs, path=tmp_path / "chart.png")
    with pytest.raises(exc) as e:
        getattr(r, method)(*args, **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    if method == "plot":
        assert not (tmp_path / "chart.png").exists()  # refused before anything is drawn or written


def _table_rows(text):
    """The data rows of a text table: the lines after the header that name an op (the legend is left out)."""
    return [ln for ln in text.splitlines()[1:] if ln.startswith("aten.")]


def test_top_keeps_exactly_that_many_rows(r):
    # three ops ran (mm, add, relu): top=None and any top >= 3 show all three, top=k < 3 shows k
    assert len(_table_rows(r.table(top=None))) == 3
    assert len(_table_rows(r.table(top=3))) == 3
    assert len(_table_rows(r.table(top=100))) == 3
    assert len(_table_rows(r.table(top=2))) == 2
    assert len(_table_rows(r.table(top=1))) == 1
    assert len(_table_rows(r.table(top=np.int64(2)))) == 2  # an integer of another library is an int
    summary_rows = [ln for ln in r.summary(top=2).splitlines() if ln.startswith("aten.")]
    assert len(summary_rows) == 2
    assert len([ln for ln in r.summary(top=None).splitlines() if ln.startswith("aten.")]) == 3


def test_valid_arguments_still_work(r):
    # the chain mm -> add -> relu through storages 1 and 2: one opportunity of three calls
    opps = r.fusion_opportunities(min_ops=2)
    assert [o.records for o in opps] == [[0, 1, 2]]
    assert r.fusion_opportunities(min_ops=3) == opps
    assert r.fusion_opportunities(min_ops=4) == []
    for source in (None, "best", "measured", "datasheet"):
        ca = r.cache_analysis(source)
        assert ca["levels"][-1] == "DRAM"
    assert set(r.by_module(depth=2)) == {"Global", "Net", "Net.a", "Net.b"}
    assert set(r.by_module(depth=1)) == {"Global", "Net"}
    assert set(r.by_module(depth=0)) == {"Global"}
    assert set(r.analysis("module", depth=1)) == {"Global", "Net"}
    assert set(r.by_op(phase="backward")) == {"aten.mm.default"}
    assert r.module_path(3) == "Net.b" and r.module_path(0) == "Global"
    assert r.to_json(indent=0).startswith("{\n")
    assert r.hints(min_share=0) == r.hints(min_share=0.0)
    cmp = r.compare(r, by="module", depth=1)
    assert set(cmp.rows) == {"Global", "Net"}
    assert cmp.delta("Net", "flops") == 0 and cmp.changed("calls") == {}
    svg = r.roofline_chart(top=0).svg
    assert svg.startswith("<svg")


def test_comparison_refuses_a_field_no_row_has(r):
    cmp = r.compare(r)
    with pytest.raises(ValueError, match=r"Comparison.delta: field must be one of the rows' fields \(.*flops"):
        cmp.delta("aten.mm.default", "flop")
    with pytest.raises(ValueError, match="Comparison.changed: field must be one of"):
        cmp.changed("tim")
    with pytest.raises(ValueError, match="Comparison.changed: field"):
        cmp.changed(None)
    assert isinstance(cmp, Comparison)


def test_a_steady_report_summary_checks_top_too():
    """SteadyReport.summary prints its line and then Report.summary's text: the same check applies."""
    from roofline._loops._steady import SteadyReport

    r = _report()
    s = SteadyReport(r.records, r._ops, r.module_sets, r.wall_time, dict(r.meta, steady={"repeat": 1}),
                     ceilings=r.ceilings, accesses=r.accesses)
    with pytest.raises(ValueError, match="summary: top must be an int >= 1 or None, got -1"):
        s.summary(top=-1)
    assert len([ln for ln in s.summary(top=1).splitlines() if ln.startswith("aten.")]) == 1
