"""The public methods of Report and Comparison, exactly: argument checks (the method, the argument and what it
accepts named in the message, the boundary value accepted), default arguments that show in the output, the
attribution and completeness properties, the ceilings notes in ``meta``, projections laid end to end, the paths
``roofline.load`` takes for a file and for text, and the before/after arithmetic of a comparison.

Reports are built by hand (no torch): every expected figure is worked out in the comments from the records given."""

import math
import os
import pickle
import warnings

import numpy as np
import pytest

import roofline
from roofline._hardware import _contention
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import Comparison, OpInfo, Report

F32 = DTYPE_CODES["float32"]
PHASES_TEXT = "one of 'forward', 'backward', 'optimizer', 'recompute' or None"


def _ceil(**info):
    # matrix 100 FLOP/s, vector 10 FLOP/s, DRAM 5 B/s
    return roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                             peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                    ("vector", "float32"): roofline.Ceiling(10.0)},
                             bandwidths={"DRAM": roofline.Ceiling(5.0)}, info=dict(info))


def _many(n, ceilings=True, **kw):
    """n vector ops named aten.opNN.default, op i with 10 * (i + 1) FLOPs and 4 bytes read: op i's roofline time
    is max(10 (i + 1) / 10, 4 / 5) = i + 1 seconds, so the larger i, the earlier in every ranking."""
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(n)
    rec["vector_flops"] = 10 * np.arange(1, n + 1)
    rec["bytes_read"] = 4
    rec["dtype"] = F32
    ops = [OpInfo(f"aten.op{i:02d}.default", f"aten.op{i:02d}", "ewise") for i in range(n)]
    return Report(rec, ops, [("Global",)], wall_time=99.0, ceilings=_ceil() if ceilings else None, **kw)


def _names_in(text, n):
    return [i for i in range(n) if f"aten.op{i:02d}" in text]


def _two(ceilings=True, meta=None):
    """An mm of 400 FLOPs reading 30 bytes and an add of 20 FLOPs reading 20 bytes (both float32)."""
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1]
    rec["matrix_flops"], rec["vector_flops"] = [400, 0], [0, 20]
    rec["bytes_read"], rec["dtype"] = [30, 20], F32
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    return Report(rec, ops, [("Global",), ("Global", "Net")], wall_time=9.0, meta=meta,
                  ceilings=_ceil() if ceilings else None)


# ---- argument checks -----------------------------------------------------------------------------------------------
def test_an_int_argument_takes_its_lower_bound_and_refuses_one_below_it():
    r = _many(3)
    r.table(top=1)                      # top >= 1: 1 itself is accepted
    r.summary(top=1)
    r.to_html(top=1)
    r.roofline_chart(top=0)             # top >= 0 here
    _chain().fusion_opportunities(min_ops=2)
    r.to_json(indent=0)
    r.project(_ceil(), gpus=1)
    r.by_module(depth=0)
    r.compare(r, by="module", depth=0)
    for call, msg in [(lambda: r.table(top=0), r"table: top must be an int >= 1 or None, got 0$"),
                      (lambda: r.summary(top=0), r"summary: top must be an int >= 1 or None, got 0$"),
                      (lambda: r.to_html(top=0), r"Report.to_html: top must be an int >= 1, got 0$"),
                      (lambda: r.roofline_chart(top=-1), r"roofline_chart: top must be an int >= 0, got -1$"),
                      (lambda: _chain().fusion_opportunities(min_ops=1),
                       r"fusion_opportunities: min_ops must be an int >= 2, got 1$"),
                      (lambda: r.to_json(indent=-1), r"Report.to_json: indent must be an int >= 0 or None, got -1$"),
                      (lambda: r.project(_ceil(), gpus=0), r"project: gpus must be an int >= 1 or None, got 0$"),
                      (lambda: r.by_module(depth=-1), r"by_module: depth must be an int >= 0 or None, got -1$"),
                      (lambda: r.table(by="module", depth=0), r"table: depth must be an int >= 1 or None, got 0$"),
                      (lambda: r.compare(r, by="module", depth=-1),
                       r"compare: depth must be an int >= 0 or None, got -1$"),
                      (lambda: r.plot(top=-1), r"plot: top must be an int >= 0, got -1$")]:
        with pytest.raises(ValueError, match=msg):
            call()


def test_an_int_argument_refuses_a_bool_a_float_and_none_where_none_is_not_allowed():
    r = _many(2)
    with pytest.raises(TypeError, match=r"table: top must be an int >= 1 or None, got True \(bool\)$"):
        r.table(top=True)
    with pytest.raises(TypeError, match=r"summary: top must be an int >= 1 or None, got 2\.0 \(float\)$"):
        r.summary(top=2.0)
    with pytest.raises(TypeError, match=r"Report.to_html: top must be an int >= 1, got None \(NoneType\)$"):
        r.to_html(top=None)
    with pytest.raises(TypeError, match=r"roofline_chart: top must be an int >= 0, got None \(NoneType\)$"):
        r.roofline_chart(top=None)
    with pytest.raises(TypeError, match=r"fusion_opportunities: min_ops must be an int >= 2, got None"):
        _chain().fusion_opportunities(min_ops=None)
    # None where it is allowed: every row
    assert _names_in(r.table(top=None), 2) == [0, 1]


def test_a_choice_names_what_it_accepts():
    r = _many(2)
    with pytest.raises(ValueError, match=f"by_op: phase must be {PHASES_TEXT}, got 'fwd'$"):
        r.by_op(phase="fwd")
    with pytest.raises(ValueError, match=r"to_dataframe: by must be 'op' or 'kernel', got 'module'$"):
        r.to_dataframe(by="module")
    with pytest.raises(ValueError, match=r"cache_analysis: source must be one of 'measured', 'datasheet', 'best' "
                                         r"or None, got 'x'$"):
        r.cache_analysis(source="x")
    with pytest.raises(ValueError, match=r"roofline_chart: backend must be 'svg' or 'plotly', got 'png'$"):
        r.roofline_chart(backend="png")
    with pytest.raises(ValueError, match=r"analysis: by must be one of 'op', 'op_shape' or 'module', got 'kernel'$"):
        r.analysis(by="kernel")
    with pytest.raises(ValueError, match=r"compare: by must be 'op' or 'module', got 'x'$"):
        r.compare(r, by="x")
    # a str is required, not something equal to one of the names, and None only where allowed
    with pytest.raises(ValueError, match=r"to_dataframe: by must be 'op' or 'kernel', got None$"):
        r.to_dataframe(by=None)
    assert r.by_op(phase=None) == r.by_op()


def test_one_alternative_is_named_alone():
    from roofline.report import _alternatives

    assert _alternatives(("op",)) == "'op'"
    assert _alternatives(("op", "kernel")) == "'op' or 'kernel'"
    assert _alternatives(("a", "b", "c")) == "one of 'a', 'b' or 'c'"


def test_depth_only_with_by_module():
    r = _many(2)
    with pytest.raises(ValueError, match=r"analysis: depth applies to by='module' only, not by='op'$"):
        r.analysis(by="op", depth=1)
    with pytest.raises(ValueError, match=r"table: depth applies to by='module' only, not by='op_shape'$"):
        r.table(by="op_shape", depth=2)
    assert isinstance(r.table(by="module", depth=1), str)


def test_other_type_checks_name_the_argument():
    r = _two()
    with pytest.raises(TypeError, match=r"project: name must be a str or None, got int$"):
        r.project(_ceil(), name=3)
    with pytest.raises(TypeError, match=r"project: target must be a device name or a Ceilings, got int$"):
        r.project(5)
    with pytest.raises(TypeError, match=r"Report.to_html: title must be a str or None, got int$"):
        r.to_html(title=4)
    assert "<title>my page</title>" in r.to_html(title="my page")
    assert "<title>roofline report</title>" in r.to_html()
    with pytest.raises(TypeError, match=r"fusion_opportunities: compiled must be a roofline Report or None, got "
                                        r"dict$"):
        r.fusion_opportunities(compiled={"meta": 1})
    with pytest.raises(TypeError, match=r"useful_work: causal must be a bool, got int$"):
        r.useful_work(tokens={"lengths": [2], "seq_len": 2}, causal=1)
    with pytest.raises(ValueError, match=r"useful_work: which tokens are real is unknown"):
        r.useful_work()
    with pytest.raises(ValueError, match=r"table: phase does not apply to by='kernel'"):
        r.table(by="kernel", phase="forward")
    with pytest.raises(TypeError, match=r"compare: the before report must be a roofline Report, got dict$"):
        Comparison({}, r)
    with pytest.raises(TypeError, match=r"compare: the after report must be a roofline Report, got int$"):
        r.compare(1)


def test_useful_work_takes_the_blocks_layout_and_a_bool_causal():
    r = _two()
    # both calls take a [2, 2, 4] tensor: per-token work over batch 2 x sequence 2
    r = Report(r.records, r._ops, r.module_sets, ceilings=_ceil(), signatures=["", "f32[2,2,4]"],
               meta={"tokens": {"batch": 2, "seq_len": 2, "lengths": [1, 2], "packed": False}})
    r.records["sig"] = [1, 1]
    for causal in (False, True):
        w = r.useful_work(causal=causal)
        # 1 of the 4 positions is padding: a quarter of 420 FLOPs
        assert (w["real_tokens"], w["padding_flops"], w["causal"]) == (3, 105.0, causal)
    assert r.useful_work(tokens={"lengths": [2, 2], "seq_len": 2})["padding_flops"] == 0.0


# ---- defaults that show ----------------------------------------------------------------------------------------------
def test_default_row_counts_of_the_views():
    r = _many(16)
    # op 15 takes 16 s, op 0 1 s: the table's default 15 rows leave out op 0 only
    assert _names_in(r.table(), 16) == list(range(1, 16))
    # the summary's 10 ops: 6..15
    head = r.summary().split("% roof =")[0]
    assert _names_in(head, 16) == list(range(6, 16))
    # the HTML page's op table: 15 ops as rows (each op name appears once in its row's first cell)
    page = r.to_html()
    assert "<b>top 15 ops by " in page
    assert _names_in(page.split("<b>top 15 ops by ")[1], 16) == list(range(1, 16))


def test_the_chart_labels_ten_points_by_default():
    r = _many(12)
    # intensities 10 * 3**i / 4 FLOP/byte: points far apart, no label hides another
    r.records["vector_flops"] = 10 * 3 ** np.arange(12)

    def labelled(svg):
        return [i for i in range(12) if f'class="rl-label">op{i:02d}<' in svg]

    assert labelled(r.roofline_chart().svg) == list(range(2, 12))
    assert labelled(r.roofline_chart(top=12).svg) == list(range(12))
    assert labelled(r.roofline_chart(top=0).svg) == []


def test_the_plot_labels_eight_points_by_default(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    r = _many(10)
    fig = r.plot()
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    # ops 2..9 take the most time
    assert {i for i in range(10) if any(f"op{i:02d}" in t for t in texts)} == set(range(2, 10))
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---- attribution, completeness ---------------------------------------------------------------------------------------
def _attributed():
    # records: mm (400 matrix), add (20 vector), mm (20 vector + 400 matrix: 420), mm (0)
    rec = np.zeros(4, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1, 0, 0]
    rec["matrix_flops"] = [400, 0, 400, 0]
    rec["vector_flops"] = [0, 20, 20, 0]
    rec["module"] = [1, 1, 1, 0]
    rec["flop_counter_flops"] = [400, 0, 400, 0]
    rec["dtype"] = F32
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    meta = {"attribution": {"method": "autograd", "flop_counter_rows": [1, 2], "flop_counter_modules": [0, 0],
                            "unlinked_rows": [2, 1, 3, 0, 2], "note": "why"}}
    return Report(rec, ops, [("Global",), ("Global", "Net")], meta=meta)


def test_attribution_sums_the_moved_and_unlinked_rows():
    a = _attributed().attribution
    # moved rows 1, 2: 20 + 420 FLOPs; unlinked rows 2, 1, 3, 0, 2: 420 + 20 + 0 + 400 + 420
    # unlinked by op: mm rows 2, 3, 0, 2 (4 calls), add row 1 (1 call): most calls first
    assert a == {"method": "autograd", "moved_calls": 2, "moved_flops": 440, "unlinked_calls": 5,
                 "unlinked_flops": 1260, "unlinked_by_op": {"aten.mm.default": 4, "aten.add.Tensor": 1},
                 "note": "why"}
    assert list(a["unlinked_by_op"]) == ["aten.mm.default", "aten.add.Tensor"]


def test_attribution_ties_are_ordered_by_name_and_a_missing_method_is_autograd():
    r = _attributed()
    r.meta["attribution"] = {"unlinked_rows": [3, 1]}
    a = r.attribution
    assert list(a["unlinked_by_op"].items()) == [("aten.add.Tensor", 1), ("aten.mm.default", 1)]
    assert a == {"method": "autograd", "moved_calls": 0, "moved_flops": 0, "unlinked_calls": 2,
                 "unlinked_flops": 20, "unlinked_by_op": {"aten.add.Tensor": 1, "aten.mm.default": 1}}


def test_attribution_without_a_link_table_is_module_trackers():
    r = _two()
    assert r.attribution == {"method": "module_tracker", "moved_calls": 0, "moved_flops": 0, "unlinked_calls": 0,
                             "unlinked_flops": 0, "unlinked_by_op": {}}


def test_flop_counter_view_puts_moved_rows_back_in_module_trackers_sets():
    r = _attributed()
    # FlopCounterMode's counts: 400 for the mm rows 0 and 2. The moved rows 1 and 2 go back to module set 0
    # ("Global" only): Net keeps row 0's 400
    fc = r.flop_counter_compatible()
    assert sum(fc.get("Net", {}).values()) == 400
    assert sum(fc["Global"].values()) == 800
    r.meta["attribution"] = {"flop_counter_rows": []}
    assert sum(r.flop_counter_compatible()["Net"].values()) == 800
    del r.meta["attribution"]
    assert sum(r.flop_counter_compatible()["Net"].values()) == 800
    # the report's own records are not changed by the view
    assert r.records["module"].tolist() == [1, 1, 1, 0]


def test_complete_and_incomplete():
    r = _two()
    assert r.complete is True and r.incomplete == []
    r.meta["compiled"] = {"uncounted_graph_calls": 3}
    assert r.incomplete == ["3 call(s) of torch.compile graphs not counted"]
    assert r.complete is False
    r.meta["incomplete"] = ["a reason"]
    assert r.incomplete == ["a reason"]


# ---- the block's report: pending, then completed once -------------------------------------------------------------------
def test_a_pending_report_is_completed_once(monkeypatch):
    seen = []
    real = _contention.snapshot
    monkeypatch.setattr(_contention, "snapshot", lambda *a: seen.append(a) or real(*a))
    r = Report._pending_block()
    assert seen == [(False,)]  # the cheap reading inside the timed window
    r._complete([], [], [], wall_time=None, meta=None, ceilings=None, overhead=None)
    assert len(r.records) == 0 and "load" in r.meta
    with pytest.raises(RuntimeError, match="not waiting"):
        r._complete([], [], [], wall_time=None, meta=None, ceilings=None, overhead=None)
    with pytest.raises(RuntimeError, match="not waiting"):
        _two()._complete([], [], [], wall_time=None, meta=None, ceilings=None, overhead=None)


@pytest.mark.parametrize("timing, devices, flagged", [
    ("op", ["cpu"], True), ("model", [], True), (None, ["cpu"], False), ("op", ["meta"], False),
    ("op", ["meta", "fake"], False), ("op", ["fake"], False), ("op", ["meta", "cpu"], True)])
def test_only_a_timed_block_on_a_real_device_is_judged_for_contention(monkeypatch, timing, devices, flagged):
    monkeypatch.setattr(_contention, "judge", lambda load: ["busy machine"])
    r = Report._pending_block()
    r._complete([], [], [], wall_time=1.0, meta={"timing": timing, "devices": devices}, ceilings=None,
                overhead=None)
    assert r.meta["contention"] == (["busy machine"] if flagged else [])


def test_signatures_given_as_a_callable_are_read_once_and_pickled_as_a_list():
    calls = []

    def sigs():
        calls.append(1)
        return ["", "f32[2]"]

    r = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)], signatures=sigs)
    assert r.signatures == ["", "f32[2]"] and r.signatures == ["", "f32[2]"] and calls == [1]
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.signatures == ["", "f32[2]"]


def test_op_shape_rows_need_signatures():
    r = _two()
    with pytest.raises(ValueError, match="needs shape signatures"):
        r.analysis(by="op_shape")
    r = Report(r.records, r._ops, r.module_sets, ceilings=_ceil(), signatures=["", "f32[2,3]"])
    r.records["sig"] = [1, 0]
    keys = set(r.analysis(by="op_shape"))
    assert "aten.mm.default [f32[2,3]]" in keys and len(keys) == 2
    assert set(r.analysis(by="op")) == {"aten.mm.default", "aten.add.Tensor"}


# ---- ceilings notes ------------------------------------------------------------------------------------------------
def test_first_use_of_the_ceilings_notes_what_they_are():
    r = _two()
    assert "ceilings_yardstick" not in r.meta
    assert r.ceilings is not None
    assert r.meta["ceilings_yardstick"] == {"kind": "given"}
    r = _two()
    r.classification()
    assert r.meta["ceilings_yardstick"] == {"kind": "given"}
    # no ceilings: nothing to note
    r = _two(ceilings=False)
    assert r.ceilings is None and r.classification() is not None
    assert "ceilings_yardstick" not in r.meta


def test_busy_ceilings_are_flagged_with_their_reasons():
    r = _two()
    r._roofs_spec, r._roofs = _ceil(busy=True), None
    r.summary()
    assert r.meta["ceilings_contention"] == ["flagged busy"]
    r = _two()
    r._roofs_spec, r._roofs = _ceil(contention=["steal 30%", 7]), None
    r.to_html()
    assert r.meta["ceilings_contention"] == ["steal 30%", "7"]
    r = _two()
    r.meta["ceilings_contention"] = ["stale"]
    r._repr_html_()
    assert "ceilings_contention" not in r.meta


def test_a_yardstick_is_kept_as_strings_and_lists_of_strings():
    yard = {"kind": "idle", "measured_at": "2026-01-01", "path": "/x", "by_version": 3, "dram": "stream",
            "contention": ["a", 2], "formula": "not a list", "other": "dropped"}
    r = _two()
    r._roofs_spec, r._roofs = _ceil(yardstick=yard), None
    r.to_dict()
    assert r.meta["ceilings_yardstick"] == {"kind": "idle", "measured_at": "2026-01-01", "path": "/x",
                                            "dram": "stream", "contention": ["a", "2"]}
    # a yardstick without a kind is not one: the ceilings are the given ones
    r = _two()
    r._roofs_spec, r._roofs = _ceil(yardstick={"kind": ""}), None
    r.summary()
    assert r.meta["ceilings_yardstick"] == {"kind": "given"}


def test_a_projection_notes_no_yardstick():
    p = _two().project(_ceil(), name="X")
    p.summary()
    p.to_dict()
    assert "ceilings_yardstick" not in p.meta
    p._roofs_spec, p._roofs = _ceil(yardstick={"kind": "idle"}), None
    p.summary()
    assert "ceilings_yardstick" not in p.meta


# ---- summary with advice --------------------------------------------------------------------------------------------
def _chain():
    """add -> mul through a storage nothing else reads: one elementwise fusion opportunity."""
    from roofline.report import ACCESS_DTYPE

    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1]
    rec["vector_flops"] = [8, 8]
    rec["bytes_read"], rec["bytes_written"] = [64, 32], [32, 32]
    rec["dtype"] = F32
    acc = np.zeros(4, dtype=ACCESS_DTYPE)
    acc["record"] = [0, 0, 1, 1]
    acc["storage"] = [1, 2, 2, 3]
    acc["nbytes"] = [64, 32, 32, 32]
    acc["write"] = [0, 1, 0, 1]
    ops = [OpInfo("aten.add.Tensor", "aten.add", "ewise"), OpInfo("aten.mul.Tensor", "aten.mul", "ewise")]
    return Report(rec, ops, [("Global",)], wall_time=1.0, ceilings=_ceil(), accesses=acc)


def test_the_summary_ends_with_the_advice_after_a_blank_line():
    text = str(_chain())
    head, _, advice = text.rpartition("\n\n")
    assert advice.startswith("fusion opportunities: 1 chain could each run as one kernel")
    assert "1 x add -> mul (elementwise, forward)" in advice
    assert head.startswith("roofline report: 2 op calls")
    # without advice, no trailing blank line
    assert not _many(2).summary().endswith("\n")


def test_hints_default_share_is_one_percent(monkeypatch):
    from roofline._analysis import _hints

    seen = []
    real = _hints.hints
    monkeypatch.setattr(_hints, "hints", lambda rep, acc, share: seen.append(share) or real(rep, acc, share))
    _two().hints()
    assert seen == [0.01]


# ---- to_dict / from_dict: the class is kept ----------------------------------------------------------------------------
def test_a_subclass_saves_its_name_and_loads_back_as_itself():
    class MyReport(Report):
        pass

    try:
        d = MyReport(_two().records, _two()._ops, [("Global",), ("Global", "Net")], ceilings=_ceil()).to_dict()
        assert d["meta"]["report_class"] == "MyReport"
        assert type(Report.from_dict(d)) is MyReport
        d = _two().to_dict()
        assert "report_class" not in d["meta"]
        assert type(Report.from_dict(d)) is Report
    finally:
        Report._CLASSES.pop("MyReport", None)


def test_to_dataframe_by_op_has_one_row_per_call():
    pytest.importorskip("pandas")
    df = _two().to_dataframe()
    assert list(df["op"]) == ["aten.mm.default", "aten.add.Tensor"]


# ---- projection -------------------------------------------------------------------------------------------------------
def test_a_projection_lays_the_roofline_times_end_to_end():
    r = _two(meta={"contention": ["busy"], "ceilings_contention": ["x"]})
    p = r.project(_ceil(), name="X")
    # mm: max(400 / 100, 30 / 5) = 6 s; add: max(20 / 10, 20 / 5) = 4 s
    assert p.records["t_start"].tolist() == [0.0, 6.0]
    assert p.records["t_end"].tolist() == [6.0, 10.0]
    assert p.wall_time == 10.0
    assert p.meta["projected_to"] == "X" and p.meta["ceilings_source"] == "best"
    assert p.meta["contention"] == [] and "ceilings_contention" not in p.meta
    # the label defaults to the Ceilings' name
    assert r.project(_ceil()).meta["projected_to"] == "test"
    # no contention entry in, none out
    assert "contention" not in _two().project(_ceil()).meta
    # a device name is projected against its datasheet
    q = r.project("H100 SXM")
    assert q.meta["ceilings_source"] == "datasheet" and q.meta["projected_to"] == roofline.devices.get("H100 SXM").name


def test_a_projection_of_nothing_has_zero_wall_time():
    r = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)], ceilings=_ceil())
    p = r.project(_ceil())
    assert p.wall_time == 0.0 and len(p.records) == 0


def test_a_projected_op_without_a_roof_takes_no_time():
    # an op of dtype float64: no float64 peak, no DRAM bytes: t_min NaN -> 0 s
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"] = [0, 0]
    rec["vector_flops"] = [100, 10]
    rec["bytes_read"] = [0, 5]
    rec["dtype"] = [DTYPE_CODES["float64"], F32]
    ops = [OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    r = Report(rec, ops, [("Global",)], ceilings=_ceil())
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("vector", "float32"): roofline.Ceiling(10.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        p = r.project(c)
    # record 1: max(10 FLOPs / 10 FLOP/s, 5 B / 5 B/s) = 1 s; record 0: no peak (NaN roofline time): 0 s
    assert p.records["t_end"].tolist() == [0.0, 1.0]
    assert p.wall_time == 1.0
    # 100 of 110 FLOPs have no peak: warned
    assert any("has no peak for the dtype" in str(x.message) for x in w)


def test_no_peak_share_below_a_thousandth_is_not_warned():
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"] = [0, 0]
    # 1 of 1000 FLOPs (exactly 1e-3) without a peak: warned; 1 of 1001: not
    for total, warned in ((1000, True), (1001, False)):
        rec["vector_flops"] = [1, total - 1]
        rec["dtype"] = [DTYPE_CODES["float64"], F32]
        r = Report(rec, [OpInfo("aten.add.Tensor", "aten.add", "ewise")], [("Global",)], ceilings=_ceil())
        c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                              peaks={("vector", "float32"): roofline.Ceiling(10.0)},
                              bandwidths={"DRAM": roofline.Ceiling(5.0)})
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r.project(c)
        assert any("has no peak" in str(x.message) for x in w) is warned, total


def test_a_projection_keeps_each_duration_at_least_its_roofline_time():
    # a 1 s op, then a 1e-17 s op: 1.0 + 1e-17 rounds to 1.0, so the second end is moved up by one ulp
    rec = np.zeros(3, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1, 1]
    rec["matrix_flops"] = [100, 0, 0]
    rec["vector_flops"] = [0, 1, 1]
    rec["dtype"] = F32
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    c = roofline.Ceilings(device="cpu", name="t", fingerprint="t",
                          peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                 ("vector", "float32"): roofline.Ceiling(1e17)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    p = Report(rec, ops, [("Global",)], ceilings=c).project(c)
    one_up = math.nextafter(1.0, 2.0)
    two_up = math.nextafter(one_up, 2.0)
    assert p.records["t_start"].tolist() == [0.0, 1.0, one_up]
    assert p.records["t_end"].tolist() == [1.0, one_up, two_up]
    assert p.wall_time == two_up
    d = p.records["t_end"] - p.records["t_start"]
    assert (d >= np.array([1.0, 1e-17, 1e-17])).all()


def test_a_projection_with_gpus_rescales_the_collectives():
    r = _two()
    p = r.project(_ceil(), gpus=4)
    q = r.project(_ceil())
    # no collective in these records: the same times; but the rescaling is recorded only with gpus
    assert p.records["t_end"].tolist() == q.records["t_end"].tolist() == [6.0, 10.0]
    assert p.meta != q.meta or "network" not in p.meta


# ---- load: a path or the text -----------------------------------------------------------------------------------------
def test_load_tells_a_path_from_the_text(tmp_path):
    r = _two()
    text = r.to_json()
    f = tmp_path / "r.json"
    f.write_text(text)
    assert roofline.load(f).total_flops == 420           # os.PathLike
    assert roofline.load(str(f)).total_flops == 420      # a str naming a file
    assert roofline.load(os.fsencode(str(f))).total_flops == 420  # bytes naming a file
    assert roofline.load(text).total_flops == 420        # JSON text
    assert roofline.load("  \n" + text).total_flops == 420
    assert roofline.load(text.encode()).total_flops == 420
    assert roofline.load(bytearray(text.encode())).total_flops == 420
    # a name that starts like JSON but is a file: the file
    g = tmp_path / "{r}.json"
    g.write_text(text)
    assert roofline.load(str(g)).total_flops == 420
    # a missing path: FileNotFoundError, not a JSON error
    with pytest.raises(FileNotFoundError):
        roofline.load(str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError):
        roofline.load(tmp_path / "missing.json")
    # text that is neither a path nor JSON text (a NUL, or over 4096 characters, without the brackets): said so
    with pytest.raises(ValueError, match="expected a path or a report's JSON text .* that is neither"):
        roofline.load("x\0y")
    with pytest.raises(ValueError, match="expected a path or a report's JSON text .* that is neither"):
        roofline.load("x" * 4097)
    with pytest.raises(OSError):  # a path (too long for this system, or missing), not JSON text
        roofline.load("d/" * 2048)
    with pytest.raises(ValueError, match="not a roofline report"):
        roofline.load(bytearray(b"nope"))
    with pytest.raises(TypeError, match=r"load: expected a path or the JSON text of a report, got int$"):
        roofline.load(3)


# ---- comparison --------------------------------------------------------------------------------------------------------
def _rep(ops_flops, ceilings=True):
    """One vector op per (name, FLOPs), 4 bytes read each."""
    n = len(ops_flops)
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    rec["op"] = np.arange(n)
    rec["vector_flops"] = [f for _, f in ops_flops]
    rec["bytes_read"] = 4
    rec["dtype"] = F32
    ops = [OpInfo(name, name.rsplit(".", 1)[0], "ewise") for name, _ in ops_flops]
    return Report(rec, ops, [("Global",)], ceilings=_ceil() if ceilings else None)


def test_comparison_rows_deltas_and_changes():
    a = _rep([("aten.a.x", 10), ("aten.b.x", 20)])
    b = _rep([("aten.b.x", 50), ("aten.c.x", 30)])
    c = a.compare(b)
    # names of before first, then the new ones
    assert list(c.rows) == list(a.analysis()) + ["aten.c.x"]
    assert c.rows["aten.c.x"][0] is None and c.rows["aten.a.x"][1] is None
    assert c.delta("aten.b.x") == 50 - 20
    assert c.delta("aten.a.x") == 0 - 10
    assert c.delta("aten.c.x") == 30 - 0
    # time: max(f / 10, 4 / 5) s at the roof
    assert c.delta("aten.c.x", "t_min") == 3.0 - 0.0
    assert c.delta("aten.a.x", "t_min") == 0.0 - 1.0
    assert c.changed() == {"aten.a.x": (10, 0.0), "aten.b.x": (20, 50), "aten.c.x": (0.0, 30)}
    assert c.changed("calls") == {"aten.a.x": (1, 0.0), "aten.c.x": (0.0, 1)}
    with pytest.raises(KeyError):
        c.delta("aten.z.x")
    with pytest.raises(ValueError, match=r"Comparison.delta: field must be one of the rows' fields \(.*flops.*\), "
                                         r"got 'nope'$"):
        c.delta("aten.a.x", "nope")
    with pytest.raises(ValueError, match=r"Comparison.changed: field must be one of"):
        c.changed(3)


def test_comparison_without_ceilings_has_nan_times_that_do_not_count_as_changed():
    a = _rep([("aten.a.x", 10)], ceilings=False)
    b = _rep([("aten.a.x", 10)], ceilings=False)
    c = a.compare(b)
    x, y = c.rows["aten.a.x"]
    assert math.isnan(x["time"]) and math.isnan(y["t_min"]) and x["flops"] == 10
    assert c.changed("time") == {}
    assert c.changed("t_min") == {}
    assert c.changed() == {}
    m = a.compare(b, by="module")
    assert list(m.rows) == ["Global"] and math.isnan(m.rows["Global"][0]["time"])
    # with ceilings on one side only, a NaN against a number is a change
    d = _rep([("aten.a.x", 10)]).compare(b)
    assert list(d.changed("t_min")) == ["aten.a.x"]
    assert d.changed("t_min")["aten.a.x"][0] == 1.0


def test_comparison_of_empty_reports_takes_any_field_name():
    e = Report(np.zeros(0, dtype=RECORD_DTYPE), [], [("Global",)])
    c = e.compare(e)
    assert c.rows == {} and c.changed("anything") == {}
    with pytest.raises(ValueError, match="field must be one of the rows' fields"):
        c.changed(None)


# ---- survivors of the first run: defaults and guards each shown by one call -------------------------------------------
def test_useful_work_is_not_causal_by_default():
    r = _two()
    r = Report(r.records, r._ops, r.module_sets, ceilings=_ceil(), signatures=["", "f32[2,2,4]"],
               meta={"tokens": {"batch": 2, "seq_len": 2, "lengths": [1, 2], "packed": False}})
    r.records["sig"] = [1, 1]
    assert r.useful_work()["causal"] is False


def test_a_report_without_ceilings_keeps_its_saved_ceilings_notes():
    # read back from a document: the note of the ceilings it was judged against when saved stays
    for use in (lambda r: r.ceilings, lambda r: r.classification()):
        r = _two(ceilings=False, meta={"ceilings_contention": ["saved"]})
        use(r)
        assert r.meta["ceilings_contention"] == ["saved"]


def test_cache_analysis_defaults_to_the_reports_source():
    r = _chain()
    c = r.cache_analysis()
    # DRAM only: add max(8 / 10, 96 / 5) = 19.2 s, mul max(0.8, 64 / 5) = 12.8 s
    assert c["levels"][-1] == "DRAM"
    assert c["t_min_dram"].tolist() == pytest.approx([19.2, 12.8])
    assert c["t_min"].tolist() == pytest.approx([19.2, 12.8])


def test_fusion_opportunities_are_timed_against_the_ceilings():
    (o,) = _chain().fusion_opportunities()
    # the 32-byte intermediate is written once and read once: 64 bytes at 5 B/s = 12.8 s saved
    assert o.saved_bytes == 64
    assert o.saved_s == pytest.approx(12.8)
    r = _chain()
    r._roofs_spec, r._roofs = None, None
    (o,) = r.fusion_opportunities()
    assert o.saved_bytes == 64 and math.isnan(o.saved_s)


def test_fusion_opportunities_refuse_a_compiled_without_records():
    import types

    with pytest.raises(TypeError, match=r"compiled must be a roofline Report or None, got SimpleNamespace$"):
        _chain().fusion_opportunities(compiled=types.SimpleNamespace(meta={}))
    with pytest.raises(TypeError, match=r"compiled must be a roofline Report or None, got SimpleNamespace$"):
        _chain().fusion_opportunities(compiled=types.SimpleNamespace(records=[]))


def test_a_phase_applies_to_the_op_table():
    r = _two()
    r.records["phase"] = [0, 1]
    assert [ln.split()[0] for ln in r.table(phase="backward").splitlines()[1:-1]] == ["aten.add.Tensor"]
