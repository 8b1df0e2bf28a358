"""Dataflow edges, fusion opportunities and the cache model, on hand-built op streams (no torch needed), and on
measured runs when the recorder captures accesses."""

import math
import os

import numpy as np
import pytest

from roofline._analysis import _cache_model, _dataflow
from roofline._hardware import _roofs
from roofline._analysis._dataflow import ACCESS_DTYPE

from _graph import ACT, MASK, SCORES, VEC, W, T, D, attention, ceilings, chain


def acc(rows):
    return np.array(rows, dtype=ACCESS_DTYPE)


# ---- edges ------------------------------------------------------------------------------------------------------
def test_edges_last_writer_in_place_and_reuse():
    a = acc([(0, 1, 100, 1),                   # 0 writes s1
             (1, 1, 100, 0), (1, 1, 100, 1),   # 1 updates s1 in place
             (2, 1, 100, 0), (2, 2, 40, 1),    # 2 reads s1
             (3, 1, 60, 1),                    # s1 reused for a new tensor
             (4, 1, 60, 0), (4, 2, 40, 0), (4, 9, 8, 0)])  # s9: an input, no producer
    e = _dataflow.edges(a, 5)
    got = [(int(r["producer"]), int(r["consumer"]), int(r["storage"]), int(r["nbytes"]), int(r["written"]))
           for r in e]
    assert got == [(0, 1, 1, 100, 100), (1, 2, 1, 100, 100), (2, 4, 2, 40, 40), (3, 4, 1, 60, 60)]


def brute_edges(a):
    out = []
    for i in range(len(a)):
        if a["write"][i]:
            continue
        best = None
        for j in range(len(a)):
            if (a["write"][j] and a["storage"][j] == a["storage"][i] and a["record"][j] < a["record"][i]
                    and (best is None or a["record"][j] > a["record"][best])):
                best = j
        if best is not None:
            out.append((int(a["record"][best]), int(a["record"][i]), int(a["storage"][i])))
    return sorted(out, key=lambda t: (t[1], t[0], t[2]))


def test_edges_match_a_brute_force_reference():
    rng = np.random.default_rng(0)
    for _ in range(20):
        rows = set()
        for r in range(30):
            for s in rng.choice(6, size=rng.integers(1, 4), replace=False):
                rows.add((r, int(s), int(rng.integers(1, 100)), int(rng.integers(0, 2))))
        a = acc(sorted(rows))
        e = _dataflow.edges(a, 30)
        got = sorted(((int(r["producer"]), int(r["consumer"]), int(r["storage"])) for r in e),
                     key=lambda t: (t[1], t[0], t[2]))
        assert got == brute_edges(a)


def test_edges_bad_input():
    with pytest.raises(ValueError, match="no dataflow"):
        _dataflow.edges(None)
    with pytest.raises(TypeError, match="structured array"):
        _dataflow.edges(np.zeros(3))
    with pytest.raises(ValueError, match="record 5"):
        _dataflow.edges(acc([(5, 1, 1, 1)]), 3)
    assert len(_dataflow.edges(acc([]), 0)) == 0


def test_report_edges_and_without_accesses():
    r = chain().report()
    e = r.edges()
    assert [(int(p), int(q)) for p, q in zip(e["producer"], e["consumer"])] == [(0, 1), (1, 2), (2, 3), (3, 4),
                                                                                 (4, 5)]
    bare = chain().report(with_accesses=False)
    with pytest.raises(ValueError, match="no dataflow"):
        bare.edges()
    with pytest.raises(ValueError, match="no dataflow"):
        bare.fusion_opportunities()


# ---- fusion opportunities ---------------------------------------------------------------------------------------
def test_chain_linear_bias_gelu_dropout_residual_layernorm_is_one_epilogue():
    r = chain().report()
    opps = r.fusion_opportunities()
    assert len(opps) == 1
    f = opps[0]
    assert f.records == [0, 1, 2, 3, 4, 5]
    assert f.kind == "epilogue"
    assert f.intermediates == 5
    # five intermediates (mm out, bias out, GELU out, dropout out, residual sum), each written once and read once
    assert f.saved_bytes == 5 * 2 * T * D * 4
    total = (ACT + W + ACT) + (ACT + VEC + ACT) + 2 * ACT + (ACT + ACT + MASK) + 3 * ACT + \
        (ACT + 2 * VEC + ACT + 2 * T * 4)
    assert f.bytes == total
    # roofline times with the test ceilings: fp32 matrix 2e12 (the mm), vector 1e12, DRAM 1e11 B/s
    flops_v = (1 + 4 + 2 + 1 + 8) * T * D
    t_mm = max(2 * T * D * D / 2e12, (2 * ACT + W) / 1e11)
    t_ew = [(2 * ACT + VEC) / 1e11, 2 * ACT / 1e11, (2 * ACT + MASK) / 1e11, 3 * ACT / 1e11,
            (2 * ACT + 2 * VEC + 2 * T * 4) / 1e11]
    assert f.t_before == pytest.approx(t_mm + sum(t_ew), rel=1e-12)
    after = max(2 * T * D * D / 2e12 + flops_v / 1e12, (total - 10 * ACT) / 1e11)
    assert f.t_after == pytest.approx(after, rel=1e-12)
    assert f.saved_s == pytest.approx(t_mm + sum(t_ew) - after, rel=1e-12)
    assert f.modules == ["mlp.fc", "mlp", "mlp.act", "mlp.drop", "block", "block.ln"]
    assert "mm -> add -> gelu -> native_dropout -> add -> native_layer_norm" in f.describe()


def test_chain_breaks_where_an_intermediate_has_another_reader():
    # the GELU input (bias output, storage 11) is read again by the backward: it must be written, so the chain splits
    r = chain(extra_reader_of=11).report()
    opps = sorted(r.fusion_opportunities(), key=lambda f: f.records[0])
    assert [f.records for f in opps] == [[0, 1], [2, 3, 4, 5]]
    assert [f.saved_bytes for f in opps] == [2 * ACT, 3 * 2 * ACT]
    assert opps[0].kind == "epilogue" and opps[1].kind == "elementwise"


def test_compute_bound_member_is_not_fused():
    g = chain()
    g.rows[2]["vector_flops"] = 10 ** 9  # a GELU that computes far past the ridge is no memory-bound op
    opps = sorted(g.report().fusion_opportunities(), key=lambda f: f.records[0])
    assert [f.records for f in opps] == [[0, 1], [3, 4, 5]]


def test_attention_scores_fuse_as_an_epilogue_of_the_first_product():
    r = attention().report()
    opps = r.fusion_opportunities()
    assert [f.records for f in opps] == [[0, 1, 2]]  # the second product is no epilogue member
    assert opps[0].saved_bytes == 4 * SCORES


def test_no_opportunity_without_a_chain():
    g = chain()
    g.rows = g.rows[:1]
    g.acc = [a for a in g.acc if a[0] == 0]
    assert g.report().fusion_opportunities() == []


def test_print_shows_opportunities_and_hints():
    text = str(chain().report())
    assert "fusion opportunities" in text
    assert "mm -> add -> gelu -> native_dropout -> add -> native_layer_norm" in text
    assert "hints" in text


# ---- cache model ------------------------------------------------------------------------------------------------
def test_replay_by_hand():
    caps = [1000, 10000]
    a = acc([(0, 1, 800, 1),                      # footprint 800: written into level 0
             (1, 1, 800, 0), (1, 2, 800, 1),      # s1 at distance 800 -> level 0; footprint 1600 -> level 1
             (2, 3, 5000, 0),                     # never seen -> DRAM
             (3, 1, 800, 0),                      # since s1: s2 800 + s3 5000 + itself 800 = 6600 -> level 1
             (4, 4, 20000, 0), (4, 4, 20000, 1),  # cold read -> DRAM; footprint 20000 -> DRAM
             (5, 1, 800, 0)])                     # s4 (20000) pushed everything out -> DRAM
    got = _cache_model.replay(a, 6, caps)
    want = np.array([[800, 0, 0], [800, 800, 0], [0, 0, 5000], [0, 800, 0], [0, 0, 40000], [0, 0, 800]], float)
    np.testing.assert_array_equal(got, want)


def brute_replay(a, n, caps):
    """A second implementation: the stack distance from the whole history, no eviction bookkeeping."""
    out = np.zeros((n, len(caps) + 1))
    order = np.lexsort((a["write"], a["record"]))
    hist = []  # (storage, bytes) in access order
    for k in order:
        r, s, nb, w = int(a["record"][k]), int(a["storage"][k]), float(a["nbytes"][k]), int(a["write"][k])
        if w:
            foot = {}
            for j in np.nonzero(a["record"] == r)[0]:
                foot[int(a["storage"][j])] = max(foot.get(int(a["storage"][j]), 0), float(a["nbytes"][j]))
            d = sum(foot.values())
        else:
            prev = [i for i, (t, _) in enumerate(hist) if t == s]
            if not prev:
                d = math.inf
            else:
                seen, d = set(), nb
                for t, size in reversed(hist[prev[-1] + 1:]):
                    if t not in seen and t != s:
                        seen.add(t)
                        d += size_last(hist, t)
        lvl = next((i for i, c in enumerate(caps) if d <= c), len(caps))
        out[r, lvl] += nb
        hist.append((s, nb))
    return out


def size_last(hist, t):
    return next(size for s, size in reversed(hist) if s == t)


def test_replay_matches_a_brute_force_reference():
    rng = np.random.default_rng(1)
    for _ in range(15):
        rows = set()
        for r in range(25):
            for s in rng.choice(8, size=rng.integers(1, 4), replace=False):
                rows.add((r, int(s), int(rng.integers(1, 400)), int(rng.integers(0, 2))))
        a = acc(sorted(rows))
        np.testing.assert_allclose(_cache_model.replay(a, 25, [300, 1200]), brute_replay(a, 25, [300, 1200]))


def test_replay_bad_capacities():
    with pytest.raises(ValueError, match="increasing"):
        _cache_model.replay(acc([]), 0, [100, 10])


def test_cache_analysis_splits_bytes_and_times_them_per_level():
    c = ceilings(bandwidths={"L2": 1e12, "L3": 4e11},
                 info={"cache_capacity_bytes": {"L2": 2 * ACT + 1, "L3": 10 * ACT}})
    r = chain().report(ceil=c)
    ca = r.cache_analysis()
    assert ca["levels"] == ["L2", "L3", "DRAM"]
    # every call's bytes are split, and nothing is lost
    comp = r.records["bytes_read"] + r.records["bytes_written"]
    np.testing.assert_allclose(ca["bytes_by_level"].sum(axis=1), comp)
    # the GELU (call 2) reads the bias output just written (distance ACT) and writes ACT: footprint 2 ACT -> L2
    assert ca["l2_bytes"][2] == 2 * ACT and ca["dram_bytes"][2] == 0
    assert ca["t_min"][2] == pytest.approx(2 * ACT / 1e12)
    assert ca["level"][2] == "L2"
    # the mm reads x and W for the first time: from DRAM; its output (footprint 2 ACT + W) lands in L3
    assert ca["dram_bytes"][0] == ACT + W and ca["l3_bytes"][0] == ACT
    assert ca["t_min_dram"][2] == pytest.approx(2 * ACT / 1e11)
    # the DRAM-only classification is unchanged
    assert r.classification()["t_min"][2] == pytest.approx(2 * ACT / 1e11)


def test_hierarchy_from_ceilings_and_sysfs(tmp_path):
    c = ceilings(device="cuda", bandwidths={}, info={"l2_bytes": 50 << 20})
    h = _cache_model.hierarchy(_roofs.of(c))
    assert h[0][:2] == ("L2", float(50 << 20)) and h[0][2] == 1e11  # no L2 bandwidth: timed at DRAM's
    assert h[-1][0] == "DRAM"
    base = tmp_path / "cpu0" / "cache"
    for i, (lvl, typ, size, shared) in enumerate([(1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"),
                                                  (2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-7")]):
        d = base / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{lvl}\n")
        (d / "type").write_text(typ + "\n")
        (d / "size").write_text(size + "\n")
        (d / "shared_cpu_list").write_text(shared + "\n")
    c2 = ceilings(info={"caches": {"L1": {"bytes": 32768, "instances": 2}, "L2": {"bytes": 1 << 20, "instances": 2}}})
    assert [(lv, cap) for lv, cap, _ in _cache_model.hierarchy(_roofs.of(c2))] == [("L1", 65536.0), ("L2", float(2 << 20)),
                                                                        ("DRAM", math.inf)]
    got = _cache_model.sysfs_caches(0, str(tmp_path))
    assert got == {"L1": {"bytes": 32768, "shared_cpus": 1}, "L2": {"bytes": 1 << 20, "shared_cpus": 1},
                   "L3": {"bytes": 32 << 20, "shared_cpus": 8}}
    assert _cache_model.sysfs_caches(0, str(tmp_path / "missing")) == {}


@pytest.mark.skipif(not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"), reason="no sysfs cache information")
def test_sysfs_caches_on_this_machine():
    got = _cache_model.sysfs_caches()
    assert got and all(v["bytes"] > 0 for v in got.values())


# ---- measured runs: the recorder's access table ------------------------------------------------------------------
def test_measured_chain_gives_the_fusion_opportunity_and_dropout_hint():
    torch = pytest.importorskip("torch")
    import roofline

    torch.manual_seed(0)
    x, w, b = torch.randn(T, D), torch.randn(D, D), torch.randn(D)
    ln = torch.nn.LayerNorm(D)
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r:
        h = torch.nn.functional.gelu(x @ w + b)
        h = torch.nn.functional.dropout(h, 0.1, training=True)
        ln(h + x)
    opps = r.fusion_opportunities()
    assert len(opps) == 1
    # without autograd, dropout runs as empty_like, bernoulli_ (a float mask), div_ (scaled in place), mul
    assert [o.split(".")[1] for o in opps[0].ops] == ["mm", "add", "gelu", "bernoulli_", "div_", "mul", "add",
                                                     "native_layer_norm"]
    # seven fp32 [T, D] intermediates (mm out, bias out, GELU out, mask, scaled mask, dropout out, residual sum),
    # each written once and read once
    assert opps[0].saved_bytes == 7 * 2 * T * D * 4
    assert opps[0].kind == "epilogue"
    h = [h for h in r.hints() if h.kind == "dropout_mask"]
    assert len(h) == 1 and h[0].evidence["mask_bytes"] == T * D * 4
    text = str(r)
    assert "fusion opportunities" in text and "mm -> add -> gelu -> bernoulli_ -> div_ -> mul -> add" in text


def test_measured_math_attention_gives_the_sdpa_hint():
    torch = pytest.importorskip("torch")
    import roofline

    B, H, Lq, Dh = 2, 4, 64, 16
    q, k, v = (torch.randn(B, H, Lq, Dh) for _ in range(3))
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r:
        s = (q @ k.transpose(-2, -1)) / math.sqrt(Dh)
        torch.softmax(s, dim=-1) @ v
    scores = B * H * Lq * Lq * 4
    (h,) = [h for h in r.hints() if h.kind == "sdpa"]
    # the scores: written by bmm, read and written by div and by softmax, read by the second bmm
    assert h.saved_bytes == 6 * scores
    assert [n.split(".")[1] for n in h.ops] == ["bmm", "div", "_softmax"]
    opps = r.fusion_opportunities()
    assert [o.split(".")[1] for o in opps[0].ops] == ["bmm", "div", "_softmax"] and opps[0].saved_bytes == 4 * scores
    with torch.no_grad(), roofline.measure(ceilings=ceilings()) as r2:
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert "sdpa" not in [h.kind for h in r2.hints()]


def test_saved_and_loaded_report_keeps_its_opportunities():
    from roofline.report import Report

    r = chain().report()
    back = Report.from_dict(r.to_dict())
    assert [(f.records, f.saved_bytes) for f in back.fusion_opportunities()] == [([0, 1, 2, 3, 4, 5], 10 * ACT)]


def test_summary_says_when_an_analysis_fails(monkeypatch):
    from roofline._analysis import _hints

    def broken(x):
        raise RuntimeError("rule failed")

    monkeypatch.setattr(_hints, "RULES", _hints.RULES + (broken,))
    text = str(chain().report())
    assert "hints unavailable: RuntimeError: rule failed" in text
    assert "fusion opportunities: 1 chain could" in text


def test_projection_onto_a_gpu_models_its_l2():
    r = chain().report()
    p = r.project("H100 SXM")
    ca = p.cache_analysis()
    assert ca["levels"] == ["L2", "DRAM"] and ca["capacities"][0] == 50 * 2 ** 20
    # everything after the first touch of x and W stays in a 50 MiB L2; the datasheet lists no L2 bandwidth, so
    # those bytes are timed at DRAM's and the cache-aware time equals the DRAM-only one
    comp = (r.records["bytes_read"] + r.records["bytes_written"]).astype(float)
    # first touches come from DRAM: x and W (the mm), the bias, the LayerNorm weight and bias
    assert ca["dram_bytes"].sum() == ACT + W + VEC + 2 * VEC
    np.testing.assert_allclose(ca["l2_bytes"] + ca["dram_bytes"], comp)
    np.testing.assert_allclose(ca["t_min"], p.classification()["t_min"])
    assert [f.records for f in p.fusion_opportunities()] == [[0, 1, 2, 3, 4, 5]]


def test_in_place_update_of_a_storage_from_before_the_block_is_still_written():
    """SGD with momentum on one parameter of N fp32 values, per-parameter ops: buf.mul_(m); buf.add_(grad);
    param.add_(buf, alpha=-lr). The momentum buffer existed before the step and outlives it: fusing the three
    saves buf's first value (written by mul_, read by add_: 2N) and the read of its second value by the last add_
    (N), not the write of that second value."""
    from _graph import Graph

    n = 1000 * 4
    buf, grad, param = 1, 2, 3
    g = Graph()
    g.call("aten.mul_.Tensor", "ewise", [(buf, n)], [(buf, n)], vector=1000, phase=2)
    g.call("aten.add_.Tensor", "ewise", [(buf, n), (grad, n)], [(buf, n)], vector=1000, phase=2)
    g.call("aten.add_.Tensor", "ewise", [(param, n), (buf, n)], [(param, n)], vector=2000, phase=2)
    (f,) = g.report().fusion_opportunities()
    assert f.records == [0, 1, 2] and f.phase == "optimizer"
    assert f.saved_bytes == 3 * n
    # the same chain on a buffer created in the block (its first access a write): every intermediate is avoided
    g2 = Graph()
    g2.call("aten.zeros_like.default", "fill", [], [(buf, n)], phase=2)
    g2.call("aten.mul_.Tensor", "ewise", [(buf, n)], [(buf, n)], vector=1000, phase=2)
    g2.call("aten.add_.Tensor", "ewise", [(buf, n), (grad, n)], [(buf, n)], vector=1000, phase=2)
    g2.call("aten.add_.Tensor", "ewise", [(param, n), (buf, n)], [(param, n)], vector=2000, phase=2)
    (f2,) = g2.report().fusion_opportunities()
    assert f2.records == [0, 1, 2, 3] and f2.saved_bytes == 2 * n * 3
