"""The roofline report: classification arithmetic, timing, tables, plot, export, comparison, projection."""

import math

import numpy as np
import pytest

import roofline
from roofline import _core
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report

NAN = float("nan")


def _ceil(peaks, dram):
    """Hand-made ceilings: {(unit, dtype): FLOP/s}, DRAM bytes/s (as measured values)."""
    return roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                             peaks={k: roofline.Ceiling(v) for k, v in peaks.items()},
                             bandwidths={"DRAM": roofline.Ceiling(dram)})


# ---- classification arithmetic (C), hand-made inputs ------------------------------------------------------------

def test_bound_flips_exactly_at_the_ridge():
    peak, bw = 100.0, 10.0  # ridge = 100 / 10 = 10 FLOP/byte
    res = _core.classify([100.0, 99.99, 1000.0], [10.0, 10.0, 10.0], [1.0, 1.0, 1.0], [peak] * 3, [bw] * 3)
    assert res["ridge"].tolist() == [10.0, 10.0, 10.0]
    assert res["intensity"].tolist() == pytest.approx([10.0, 9.999, 100.0])
    assert res["bound"].tolist() == [_core.BOUND_COMPUTE, _core.BOUND_MEMORY, _core.BOUND_COMPUTE]
    # attainable = min(peak, I * bw): 100, 99.99, 100
    assert res["attainable"].tolist() == pytest.approx([100.0, 99.99, 100.0])
    # t_min = max(flops / peak, bytes / bw) = max(1, 1), max(0.9999, 1), max(10, 1)
    assert res["t_min"].tolist() == pytest.approx([1.0, 1.0, 10.0])


def test_zero_flop_ops_are_judged_against_bandwidth_only():
    res = _core.classify([0.0, 0.0], [1000.0, 0.0], [2.0, 1.0], [100.0, 100.0], [1000.0, 1000.0])
    assert res["bound"].tolist() == [_core.BOUND_BANDWIDTH, _core.BOUND_NONE]
    assert res["attainable"][0] == 1000.0  # bytes/s
    assert res["t_min"][0] == 1.0  # 1000 bytes at 1000 B/s
    assert res["efficiency"][0] == 0.5  # 1 s on the roof, 2 s measured
    assert res["mbu"][0] == 0.5  # 1000 / (2 * 1000)
    assert math.isnan(res["mfu"][0]) is False and res["mfu"][0] == 0.0


def test_zero_time_and_untimed_are_flagged_not_divided():
    res = _core.classify([10.0, 10.0], [10.0, 10.0], [0.0, NAN], [100.0, 100.0], [10.0, 10.0])
    assert res["flags"][0] & _core.FLAG_ZERO_TIME and res["flags"][1] & _core.FLAG_UNTIMED
    assert np.isnan(res["achieved_flops"]).all() and np.isnan(res["mfu"]).all()


def test_rate_above_the_ceiling_is_flagged_not_clipped():
    res = _core.classify([300.0], [1.0], [1.0], [100.0], [10.0])  # 300 FLOP/s achieved vs 100 peak
    assert res["achieved_flops"][0] == 300.0 and res["mfu"][0] == 3.0
    assert res["flags"][0] & _core.FLAG_ABOVE_PEAK
    with pytest.raises(ValueError, match="bytes has 2 elements"):
        _core.classify([1.0], [1.0, 2.0], [1.0], [1.0], [1.0])


def _hand_report(rows, ceilings, wall=None, ops=None):
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (op, mat, vec, nbytes, dtype, t) in enumerate(rows):
        rec[i]["op"], rec[i]["matrix_flops"], rec[i]["vector_flops"] = op, mat, vec
        rec[i]["bytes_read"], rec[i]["dtype"] = nbytes, DTYPE_CODES[dtype]
        rec[i]["t_start"], rec[i]["t_end"] = (0.0, t) if t is not None else (NAN, NAN)
    ops = ops or [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    return Report(rec, ops, [("Global",)], wall_time=wall, ceilings=ceilings)


def test_mixed_dtypes_use_their_own_roofs():
    c = _ceil({("matrix", "bfloat16"): 1000.0, ("vector", "float32"): 10.0}, dram=1.0)
    r = _hand_report([(0, 2000, 0, 1, "bfloat16", 4.0), (1, 0, 20, 10, "float32", 20.0)], c, wall=30.0)
    cls = r.classification()
    assert cls["peak"].tolist() == [1000.0, 10.0]
    # bf16 mm: I = 2000, ridge 1000 -> compute; t_min = 2000 / 1000 = 2 s; efficiency 2 / 4
    # fp32 add: I = 2, ridge 10 -> memory; t_min = max(20 / 10, 10 / 1) = 10 s; efficiency 10 / 20
    assert cls["bound"].tolist() == [_core.BOUND_COMPUTE, _core.BOUND_MEMORY]
    assert cls["t_min"].tolist() == [2.0, 10.0]
    assert cls["efficiency"].tolist() == [0.5, 0.5]
    t = r.totals()
    assert t["mfu"] == pytest.approx((2000 / 1000 + 20 / 10) / 30.0)  # time at each op's own peak / wall
    assert t["mbu"] == pytest.approx(11 / (30.0 * 1.0))
    assert t["compute_share"] == pytest.approx(2 / 12)


# ---- end to end on the CPU -----------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cpu_ceilings():
    return roofline.ceilings("cpu")


def _check_invariants(r):
    cls = r.classification()
    times = r.records["t_end"] - r.records["t_start"]
    assert np.isfinite(times).all() and (times >= 0).all()
    assert times.sum() <= r.wall_time  # ops are timed inside the block
    costly = (cls["flops"] > 0) | (cls["bytes"] > 0)
    assert (cls["bound"][costly] != _core.BOUND_NONE).all()  # every op that costs something has a bound
    assert (cls["bound"][~costly] == _core.BOUND_NONE).all()
    ok = costly & (times > 0)
    assert np.allclose(cls["efficiency"][ok], cls["t_min"][ok] / times[ok])
    assert (cls["attainable"][cls["flops"] > 0] <= cls["peak"][cls["flops"] > 0] * (1 + 1e-12)).all()


def test_resnet50_inference_timed_per_op(cpu_ceilings):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    x = torch.randn(8, 3, 224, 224)
    with torch.no_grad(), roofline.measure(model, timing="op", ceilings=cpu_ceilings) as r:
        model(x)
    _check_invariants(r)
    ops = r.analysis("op")
    conv = ops["aten.convolution.default"]
    assert conv["intensity"] > 20 and conv["bound"] == "compute"
    assert ops["aten.relu_.default"]["intensity"] < 1 and ops["aten.relu_.default"]["bound"] == "memory"
    assert ops["aten.add_.Tensor"]["intensity"] < 1
    assert r.overhead["counting_per_op_s"] >= 0 and "timing_per_op_s" in r.overhead
    s = str(r)
    assert "MFU" in s and "compute-bound share" in s and "aten.convolution.default" in s


def test_gpt2_training_step_timed_per_op(cpu_ceilings):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    # GPT-2 small (768 wide, its 50,257-token vocabulary) with 2 of its 12 identical layers, random weights
    model = GPT2LMHeadModel(GPT2Config(n_layer=2))
    ids = torch.randint(0, 50257, (1, 128))
    opt = torch.optim.AdamW(model.parameters())
    with roofline.measure(model, timing="op", ceilings=cpu_ceilings) as r:
        model(ids, labels=ids).loss.backward()
        opt.step()
    _check_invariants(r)
    ops = r.analysis("op")
    assert ops["aten.mm.default"]["intensity"] > 10  # the LM head and MLP products
    assert ops["aten.addcmul_.default"]["bound"] == "memory"  # AdamW updates stream the parameters
    mods = r.analysis("module", depth=4)  # the ModuleList `h` is never called: its blocks are h.0, h.1, ...
    assert "GPT2LMHeadModel.transformer.h.0" in mods and "GPT2LMHeadModel.transformer.h.0.mlp" not in mods
    assert set(r.by_phase()) == {"forward", "backward", "optimizer"}


# ---- plot ------------------------------------------------------------------------------------------------------------

def test_plot_writes_a_png_with_the_expected_content(tmp_path, cpu_ceilings):
    pytest.importorskip("matplotlib")
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    with roofline.measure(m, timing="op", ceilings=cpu_ceilings) as r:
        m(torch.randn(64, 256)).softmax(-1)
    path = tmp_path / "roof.png"
    fig = r.plot(path)
    assert path.stat().st_size > 10_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    groups = [n for n, row in r.analysis("op").items() if row["flops"] > 0 and row["bytes"] > 0]
    pts = [c for c in ax.collections if c.get_gid() == "ops"]
    assert len(pts) == 1 and len(pts[0].get_offsets()) == len(groups)
    gids = {line.get_gid() for line in ax.get_lines()}
    assert {"roof:matrix/float32", "roof:vector/float32", "bandwidth:DRAM"} <= gids
    svg = tmp_path / "roof.svg"
    r.plot(svg)
    assert svg.read_text().lstrip().startswith("<?xml")


# ---- export, comparison -------------------------------------------------------------------------------------------

def _resnet18_run(batch, ceilings):
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet18()
    with roofline.measure(m, timing="op", ceilings=ceilings) as r:
        m(torch.randn(batch, 3, 64, 64)).sum().backward()
    return r


def test_json_round_trip_is_exact(tmp_path, cpu_ceilings):
    r = _resnet18_run(2, cpu_ceilings)
    path = tmp_path / "r.json"
    r.to_json(path)
    back = roofline.load(path)
    assert back.records.tobytes() == r.records.tobytes()
    assert back.op_names == r.op_names and back.module_sets == r.module_sets
    assert back.wall_time == r.wall_time and back.overhead == r.overhead
    assert back.ceilings == r.ceilings and back.ceilings_source == r.ceilings_source
    assert back.meta["devices"] == r.meta["devices"]
    assert back.flop_counter_compatible() == r.flop_counter_compatible()
    assert back.analysis("module", depth=2) == r.analysis("module", depth=2)
    assert roofline.load(r.to_json()).records.tobytes() == r.records.tobytes()
    csv = r.to_csv()
    assert csv.splitlines()[0].startswith("op,module,phase,dtype,matrix_flops")
    assert len(csv.splitlines()) == len(r.records) + 1
    df = r.to_dataframe()
    assert int(df["matrix_flops"].sum()) == r.matrix_flops
    assert "<table>" in r._repr_html_()
    with pytest.raises(ValueError, match="not a roofline report"):
        Report.from_dict({"schema": 99})


def test_compare_two_batch_sizes(cpu_ceilings):
    a, b = _resnet18_run(1, cpu_ceilings), _resnet18_run(2, cpu_ceilings)
    cmp = a.compare(b)
    conv = cmp.rows["aten.convolution.default"]
    assert conv[1]["flops"] == 2 * conv[0]["flops"]  # twice the images, twice the convolution work
    assert "aten.convolution.default" in cmp.changed("flops")
    assert "aten.convolution.default" in str(cmp)
    mods = a.compare(b, by="module", depth=2)
    # per-channel work (batch-norm weight gradients) does not scale with the batch: about, not exactly, twice
    assert mods.rows["ResNet.layer1"][1]["flops"] == pytest.approx(2 * mods.rows["ResNet.layer1"][0]["flops"], rel=1e-3)


# ---- projection ----------------------------------------------------------------------------------------------------

def test_project_llama3_8b_training_step_onto_h100():
    """Count a Llama-3-8B-shaped bf16 training step on meta, project it onto the H100 SXM datasheet, and recompute
    the predicted step time independently from the records and the datasheet table."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, max_position_embeddings=2048)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
        ids = torch.zeros(1, 2048, dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    with roofline.measure(model) as r:
        model(ids, labels=ids).loss.backward()
        opt.step()
    assert r.ceilings is None  # nothing ran on a real device
    p = r.project("H100 SXM")

    spec = roofline.devices.get("H100 SXM")
    names = {v: k for k, v in DTYPE_CODES.items()}
    total = 0.0
    for rec in r.records:
        unit = "matrix" if rec["matrix_flops"] > 0 else "vector"
        dt = names.get(int(rec["dtype"]), "unknown")
        dt = dt if dt in ("bfloat16", "float32", "float16", "float64") else "float32"
        # the datasheet has no fp32 matrix peak (fp32 products run on the vector units) and no non-tensor bf16
        # rate (element-wise bf16 is judged against the fp32 vector peak)
        peak = spec.peaks.get((unit, dt)) or spec.peaks.get(("vector", dt)) or spec.peaks[("vector", "float32")]
        flops = int(rec["matrix_flops"]) + int(rec["vector_flops"])
        nbytes = int(rec["bytes_read"]) + int(rec["bytes_written"])
        total += max(flops / peak, nbytes / spec.memory_bandwidth)
    assert p.wall_time == pytest.approx(total, rel=1e-9)
    t = p.totals()
    assert 0 < t["mfu"] <= 1 and 0 < t["compute_share"] < 1
    assert p.meta["projected_to"] == "H100 SXM"
    assert p.records.tobytes() != r.records.tobytes() and (p.records["matrix_flops"] == r.records["matrix_flops"]).all()


def test_unusual_dtypes_and_datasheet_on_cpu_still_classify(cpu_ceilings):
    x = torch.randn(64, dtype=torch.complex64)
    with roofline.measure(timing="op", ceilings=cpu_ceilings) as r:
        (x * 2).abs()
        torch.randn(64).to(torch.float8_e5m2)
    assert "roofline report" in str(r)  # no peak for complex64: NaN for those ops, not an exception
    t = r.totals()
    assert math.isfinite(t["mfu"])
    with roofline.measure(timing="op", ceilings="datasheet") as r2:
        torch.randn(256, 256) @ torch.randn(256, 256)
    mm = r2.analysis("op")["aten.mm.default"]
    assert mm["bound"] in ("compute", "memory")  # datasheet peak (theoretical) + measured DRAM bandwidth


def test_ops_with_a_python_formula_are_timed():
    @torch.library.custom_op("rltest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    roofline.register(torch.ops.rltest.twice, lambda x, out=None: {"vector_flops": x.numel()})
    try:
        with roofline.measure(timing="op") as r:
            torch.ops.rltest.twice(torch.randn(10))
        row = r.records[r.records["vector_flops"] == 10]
        assert len(row) == 1 and np.isfinite(row["t_end"] - row["t_start"]).all()
    finally:
        roofline.unregister(torch.ops.rltest.twice)


def test_memory_and_bandwidth_bound_ops_roll_up_as_memory():
    c = _ceil({("vector", "float32"): 100.0}, dram=10.0)
    # an add (1 FLOP per 12 bytes: memory-bound) and a copy (no FLOPs: bandwidth-only), half the roofline time each
    ops = [OpInfo("aten.clone.default", "aten.clone", "copy"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    r = _hand_report([(1, 0, 10, 100, "float32", 20.0), (0, 0, 0, 100, "float32", 20.0)], c, ops=ops)
    g = r.totals()
    assert g["compute_share"] == 0.0 and g["bound"] == "memory"


# ---- documents written by earlier versions -------------------------------------------------------------------------

DATA = __import__("pathlib").Path(__file__).resolve().parent / "data"


def _fixture_model():
    """The model and input tests/data/report_schema1.json was measured on (forward, backward, SGD step)."""
    return (torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(32, 4)),
            torch.randn(1, 1, 6, 6))


def test_a_document_written_before_the_flop_counter_rename_loads():
    """report_schema1.json was written when the record field was named compat_flops; the document stores records by
    position, so it loads unchanged and the column reads as flop_counter_flops."""
    from torch.utils.flop_counter import FlopCounterMode

    r = roofline.load(DATA / "report_schema1.json")
    assert len(r.records) == 27 and set(r.by_phase()) == {"forward", "backward", "optimizer"}
    # FlopCounterMode's formulas, by hand: conv 2 x (2 x 4 x 4 outputs) x (1 x 3 x 3 taps); the Linear 2 x 1 x 32 x 4
    # forward, and two such products backward (input and weight gradients); the conv's weight gradient only (its
    # input needs no gradient)
    conv, linear = 2 * 32 * 9, 2 * 1 * 32 * 4
    aten = torch.ops.aten
    counts = r.flop_counter_compatible()
    assert counts["Sequential.0"] == {aten.convolution: conv, aten.convolution_backward: conv}
    assert counts["Sequential.2"] == {aten.addmm: linear, aten.mm: 2 * linear}
    assert counts["Global"] == counts["Sequential"] == {**counts["Sequential.0"], **counts["Sequential.2"]}
    assert int(r.records["flop_counter_flops"].sum()) == 2 * conv + 3 * linear
    assert (r.records["compat_flops"] == r.records["flop_counter_flops"]).all()  # the earlier name still reads it
    # the same structure from FlopCounterMode itself, on the same shapes
    m, x = _fixture_model()
    with FlopCounterMode(display=False) as fcm:
        m(x).sum().backward()
    assert counts == fcm.get_flop_counts()
    # a fresh measurement of the same model writes a document with the same record block layout and counts
    m, x = _fixture_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with roofline.measure(m, timing=None, ceilings=r.ceilings) as fresh:
        m(x).sum().backward()
        opt.step()
    # the document was written under torch 2.14; other releases emit a different op stream for the same step (e.g.
    # 2.9 adds detach calls and no profiler ops around the optimizer), so record by record only on 2.14
    if torch.__version__.split("+")[0].split(".")[:2] == ["2", "14"]:
        for field in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written",
                      "flop_counter_flops", "op", "phase", "dtype", "status"):
            assert fresh.records[field].tolist() == r.records[field].tolist(), field
        assert fresh.op_names == r.op_names
        # the document predates backward attribution by autograd node: its modules are ModuleTracker's, which the
        # fresh report keeps for FlopCounterMode's structure
        assert ([fresh.module_sets[i] for i in fresh._flop_counter_records()["module"].tolist()]
                == [r.module_sets[i] for i in r.records["module"].tolist()])
        assert fresh.flop_counter_compatible() == counts
    for phase in (0, 1, 2):  # on every release: the same products per phase
        for field in ("matrix_flops", "flop_counter_flops"):
            assert (int(fresh.records[field][fresh.records["phase"] == phase].sum())
                    == int(r.records[field][r.records["phase"] == phase].sum())), (phase, field)
    header = r.to_csv().splitlines()[0].split(",")
    assert header[4:11] == ["matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written",
                            "flop_counter_flops", "time"]
    assert r.to_dataframe()["flop_counter_flops"].sum() == 2 * conv + 3 * linear


def test_count_and_roofline_roll_ups_group_alike():
    """by_op / by_module (exact counts) and analysis (roofline rows) are two views of the same groups."""
    r = roofline.load(DATA / "report_schema1.json")
    for phase in (None, "forward", "backward", "optimizer"):
        ops, roof = r.by_op(phase), r.analysis("op", phase=phase)
        assert set(ops) == set(roof)
        for name, row in ops.items():
            assert (row["calls"], float(row["flops"]), float(row["bytes"])) == \
                (roof[name]["calls"], roof[name]["flops"], roof[name]["bytes"])
        for depth in (None, 1, 2):
            mods, roof = r.by_module(depth, phase), r.analysis("module", depth, phase)
            assert list(mods) == sorted(roof)
            assert all(mods[k]["calls"] == roof[k]["calls"] for k in mods)
    assert r.by_module()["Global"]["calls"] == len(r.records) == 27  # "Global" is the whole run
    assert r.by_op("forward")["aten.convolution.default"]["calls"] == 1
    with pytest.raises(ValueError, match="phase must be one of"):
        r.by_module(phase="sideways")
    with pytest.raises(ValueError, match="analysis: by must be one of 'op', 'op_shape' or 'module'"):
        r.analysis("kernel")


def test_a_projection_is_a_report_of_its_own():
    """project builds its report through the constructor: its ceilings and times are the projection's, the source
    report is untouched."""
    c = _ceil({("matrix", "float32"): 100.0, ("vector", "float32"): 10.0}, dram=5.0)
    r = _hand_report([(0, 400, 0, 30, "float32", 7.0), (1, 0, 20, 20, "float32", 3.0)], None, wall=10.0)
    before = r.records.tobytes()
    p = r.project(c, name="hand")
    # t_min by hand: mm max(400 / 100, 30 / 5) = 6 s; add max(20 / 10, 20 / 5) = 4 s; back to back
    assert p.records["t_start"].tolist() == [0.0, 6.0] and p.records["t_end"].tolist() == [6.0, 10.0]
    assert p.wall_time == 10.0 and p.ceilings is c and p.ceilings_source == "best"
    assert p.meta["projected_to"] == "hand" and p.overhead == {}
    assert p.classification()["efficiency"].tolist() == [1.0, 1.0]  # projected times are the roofline times
    assert r.records.tobytes() == before and r.ceilings is None
