"""The hints' evidence, order and notebook view, and the phase a fusion opportunity names, pinned on hand-built
reports (no torch, no measurement): the score product's input shapes come from the score product, not the softmax;
the float32-product hint counts the compute-bound calls; hints whose times tie (unknown, or equal) come most bytes
first; the notebook advice lists three hints by default; a phase code past the known phases is named "?"."""

from __future__ import annotations

import html
import re

import pytest

from _graph import BH, L, QKV, SCORES, Graph, ceilings, chain, six_hints

from roofline._analysis import _hints
from roofline.render import _advice
from roofline._hardware._ceilings import Ceiling, Ceilings
from roofline.report import Report


def _with_signatures(r, sig_of_call, sigs):
    """``r`` again, with a signature index per call and the signature table (entry 0: a call without tensors)."""
    r.records["sig"] = sig_of_call
    return Report(r.records, r._ops, r.module_sets, meta=r.meta, ceilings=r.ceilings, accesses=r.accesses,
                  signatures=sigs)


# ---- SDPA: the evidence names the score product's inputs ----------------------------------------------------------
def _attention3():
    """score product -> softmax -> second product (calls 0, 1, 2)."""
    g = Graph()
    g.call("aten.bmm.default", "bmm", [(1, QKV), (2, QKV)], [(10, SCORES)], matrix=2 * BH * L * L * 32)
    g.call("aten._softmax.default", "ewise_in", [(10, SCORES)], [(11, SCORES)], vector=4 * BH * L * L)
    g.call("aten.bmm.default", "bmm", [(11, SCORES), (3, QKV)], [(12, QKV)], matrix=2 * BH * L * L * 32)
    return g


SCORE_INPUTS = "f32[8,128,32], f32[8,32,128]"
SOFTMAX_INPUT = "f32[8,128,128]"


def test_sdpa_evidence_reads_the_score_products_signature_only():
    """Whether the evidence lists input shapes depends on the score product's signature alone: listed when the
    product has one (the softmax has none here), left out when only the softmax has one."""
    sigs = ["", SCORE_INPUTS, SOFTMAX_INPUT]
    (h,) = [h for h in _with_signatures(_attention3().report(), [1, 0, 0], sigs).hints() if h.kind == "sdpa"]
    assert h.evidence["score_product_inputs"] == SCORE_INPUTS
    (h,) = [h for h in _with_signatures(_attention3().report(), [0, 2, 0], sigs).hints() if h.kind == "sdpa"]
    assert "score_product_inputs" not in h.evidence


# ---- float32 products: how many are compute-bound ------------------------------------------------------------------
def _mm(g, flops, nbytes, base):
    g.call("aten.mm.default", "mm", [(base + 1, nbytes // 3), (base + 2, nbytes // 3)], [(base + 3, nbytes // 3)],
           matrix=flops)


def test_matmul_precision_counts_the_compute_bound_products():
    """float32 peak 1e12 FLOP/s, DRAM 1e11 B/s (ridge 10 FLOP/B). Two products of 8e9 FLOPs over 3 MB (intensity
    ~2667: compute-bound, 8 ms each) and one of 2e6 FLOPs over 3 MB (intensity ~0.67: memory-bound, 30 us):
    three calls, two of them compute-bound."""
    c = ceilings(device="cuda", vector=2e13, matrix=1e12, dram=1e11, extra_peaks={("matrix", "bfloat16"): 4e12})
    g = Graph()
    _mm(g, 8 * 10 ** 9, 3 * 10 ** 6, base=0)
    _mm(g, 8 * 10 ** 9, 3 * 10 ** 6, base=10)
    _mm(g, 2 * 10 ** 6, 3 * 10 ** 6, base=20)
    (h,) = [h for h in g.report(ceil=c).hints(min_share=0) if h.kind == "matmul_precision"]
    assert (h.evidence["calls"], h.evidence["compute_bound_calls"]) == (3, 2)
    assert h.message.startswith("3 float32 matrix products (2 compute-bound) run at the float32 peak")
    # all memory-bound: none compute-bound (bfloat16 still halves their bytes)
    g = Graph()
    _mm(g, 2 * 10 ** 6, 3 * 10 ** 6, base=0)
    _mm(g, 2 * 10 ** 6, 3 * 10 ** 6, base=10)
    (h,) = [h for h in g.report(ceil=c).hints(min_share=0) if h.kind == "matmul_precision"]
    assert (h.evidence["calls"], h.evidence["compute_bound_calls"]) == (2, 0)


# ---- order: ties in time go most bytes first --------------------------------------------------------------------------
def _no_dram():
    """Ceilings without a DRAM bandwidth: a saving in bytes has no time (NaN)."""
    return Ceilings(device="cpu", name="t", fingerprint="t",
                    peaks={("vector", "float32"): Ceiling(1e12), ("matrix", "float32"): Ceiling(2e12)},
                    bandwidths={"L9": Ceiling(1e12)})


def _dropout_and_optimizer(mask):
    """A forward dropout writing a ``mask``-byte mask nothing reads back (saves ``mask`` bytes), and a two-call
    optimizer step: the first reads and writes S (1000 B), the second reads S and reads and writes T (600 B); 4200 B
    moved, 3200 B by a fused step: 1000 saved."""
    g = Graph()
    g.call("aten.native_dropout.default", "ewise", [(1, 4000)], [(2, 4000), (3, mask)], vector=1000)
    g.call("aten.mul_.Tensor", "ewise", [(5, 1000)], [(5, 1000)], vector=250, phase=2)
    g.call("aten.addcmul_.default", "ewise", [(5, 1000), (6, 600)], [(6, 600)], vector=150, phase=2)
    return g


@pytest.mark.parametrize("mask,order", [(1500, ["dropout_mask", "optimizer_fused"]),
                                        (500, ["optimizer_fused", "dropout_mask"])])
def test_hints_of_unknown_time_come_most_bytes_first(mask, order):
    hs = _dropout_and_optimizer(mask).report(ceil=_no_dram()).hints(min_share=0)
    assert [h.kind for h in hs] == order
    assert all(h.saved_s != h.saved_s for h in hs)  # both unknown
    assert [h.saved_bytes for h in hs] == sorted([mask, 1000], reverse=True)


def test_hints_of_calls_without_a_time_come_most_bytes_first():
    """Without a DRAM bandwidth every roofline time is unknown: the state fill (3000 B written) and the layout copy
    (1000 B read, 1000 B written: 2000 B) save an unknown time (NaN, not 0 s); the fill's hint, with more bytes,
    comes first, and with a fill of 1000 B the copy's does."""
    for fill, order in ((3000, ["optimizer_state_init", "layout_copies"]),
                        (1000, ["layout_copies", "optimizer_state_init"])):
        g = Graph()
        g.call("aten.clone.default", "copy", [(1, 1000)], [(2, 1000)])
        g.call("aten.zeros_like.default", "fill", [], [(3, fill)], phase=2)
        hs = g.report(ceil=_no_dram()).hints(min_share=0)
        assert [h.kind for h in hs] == order, fill
        assert all(h.saved_s != h.saved_s for h in hs)


# ---- the notebook advice: three hints by default ------------------------------------------------------------------
def _six_hints():
    return six_hints().report()


def test_notebook_advice_shows_three_hints_by_default():
    """Six hints at 1e11 B/s and 2e12 FLOP/s: small GEMM (20480 B: 204.8 ns, at the peak 65536 / 2e12 = 32.8 ns:
    172.0 ns saved), cast ping-pong (12000 B: 120 ns), unfused optimizer (12000 B saved: 120 ns), layout copy
    (8000 B: 80 ns), state fill and dropout mask (2000 B: 20 ns each). The view lists the three largest, after
    its two fusion opportunities (the forward copy chain, the optimizer's add_ calls)."""
    r = _six_hints()
    assert len(r.hints()) == 6
    items = re.findall(r"<li>(.*?)</li>", _advice.advice_html(r))
    fuse = [i for i in items if i.startswith("<b>fuse</b>")]
    hint_kinds = [re.match(r"\[(\w+)\]", i).group(1) for i in items if i.startswith("[")]
    assert len(items) == 5 and len(fuse) == 2
    assert hint_kinds[0] == "small_gemm" and sorted(hint_kinds[1:]) == ["cast_pingpong", "optimizer_fused"]
    assert items[2] == html.escape(str(r.hints()[0]))
    # the default is three, not all: an explicit top of 3 gives the same view
    assert _advice.advice_html(r) == _advice.advice_html(r, top=3)


# ---- fusion opportunities: the phase of a chain ------------------------------------------------------------------------
def test_opportunity_of_an_unknown_phase_code_is_named_by_a_question_mark():
    """Phase codes 0..3 are forward, backward, optimizer, recompute; a code past them (a newer recorder's) names
    its chains "?" instead of failing."""
    assert [f.phase for f in chain(phase=3).report().fusion_opportunities()] == ["recompute"]
    (f,) = chain(phase=4).report().fusion_opportunities()
    assert f.phase == "?"
    assert f.ops == ["aten.mm.default", "aten.add.Tensor", "aten.gelu.default", "aten.native_dropout.default",
                     "aten.add.Tensor", "aten.native_layer_norm.default"]


def test_hints_are_ordered_by_time_saved_then_unknown_ones_by_bytes(monkeypatch):
    """The order of hints() on its own: rules returning savings of 2 s, 0 s (twice), -1.5 s (a change that costs
    time: no hint, even with min_share=0), unknown with 10 B and unknown with 30 B. Most time first, equal times most
    bytes first, then the unknown ones most bytes first."""
    made = [("a", 2.0, 1), ("b", 0.0, 5), ("c", -1.5, 1), ("d", float("nan"), 10), ("e", float("nan"), 30),
            ("f", 0.0, 9)]
    monkeypatch.setattr(_hints, "RULES", (lambda x: [_hints.Hint(k, k, t, b, {}) for k, t, b in made],))
    g = Graph()
    g.call("aten.clone.default", "copy", [(1, 1000)], [(2, 1000)])
    hs = _hints.hints(g.report(ceil=ceilings()), min_share=0)
    assert [h.kind for h in hs] == ["a", "f", "b", "e", "d"]


def test_sdpa_saving_is_unknown_when_a_call_has_no_roofline_time():
    """A math-path attention judged against ceilings with no DRAM bandwidth: its calls' roofline times are unknown,
    so the hint's saving is unknown (NaN, kept by its bytes), not the FLOP time of the fused kernel subtracted from
    0 s (a negative saving)."""
    from _graph import attention

    (h,) = [h for h in attention().report(ceil=_no_dram()).hints(min_share=0) if h.kind == "sdpa"]
    assert h.saved_s != h.saved_s and h.saved_bytes > 0
    assert h.evidence["t_before_s"] != h.evidence["t_before_s"]


# ---- unknown times: what is named, what is kept ------------------------------------------------------------------
def test_faster_matrix_unit_of_unknown_saving_is_the_first_the_device_has():
    """float32 products on a device with TF32, bf16 and fp16 matrix units but no DRAM bandwidth: every candidate's
    saving is unknown, so the hint names the first candidate (TF32: the least intrusive change), not the last."""
    peaks = {("vector", "float32"): Ceiling(1e12), ("matrix", "float32"): Ceiling(1e12),
             ("matrix", "tfloat32"): Ceiling(8e12), ("matrix", "bfloat16"): Ceiling(16e12),
             ("matrix", "float16"): Ceiling(16e12)}
    ceil = Ceilings(device="cpu", name="t", fingerprint="t", peaks=peaks, bandwidths={"L9": Ceiling(1e12)})
    g = Graph()
    _mm(g, 8_000_000_000, 3_000_000, 0)
    (h,) = [h for h in g.report(ceil=ceil).hints(min_share=0) if h.kind == "matmul_precision"]
    assert h.saved_s != h.saved_s
    assert "tfloat32_matrix_peak" in h.evidence and "float16_matrix_peak" not in h.evidence


def test_layout_copy_saving_is_the_copies_roofline_time():
    """A clone reading and writing 1000 B against 1e11 B/s of DRAM (ceilings() of tests/_graph.py): the layout hint
    saves its roofline time, 2000 B / 1e11 B/s = 20 ns."""
    g = Graph()
    g.call("aten.clone.default", "copy", [(1, 1000)], [(2, 1000)])
    (h,) = [h for h in g.report(ceil=ceilings()).hints(min_share=0) if h.kind == "layout_copies"]
    assert h.saved_s == pytest.approx(2000 / 1e11)
    assert h.evidence["t_roof_s"] == pytest.approx(2000 / 1e11)


def test_a_timed_hint_in_a_run_without_roofline_time_is_kept_by_its_bytes():
    """Ceilings with a DRAM bandwidth but no peak: the dropout call's roofline time is unknown, so the run's total
    is 0 s, while the dropout hint's saving (its 1500-byte mask at 1e11 B/s) has a time. With no total time to
    compare with, the hint is judged by its bytes: 1500 of 9500 B moved (16%) is kept at min_share 0.1 and not at
    0.5."""
    ceil = Ceilings(device="cpu", name="t", fingerprint="t", peaks={}, bandwidths={"DRAM": Ceiling(1e11)})
    g = Graph()
    g.call("aten.native_dropout.default", "ewise", [(1, 4000)], [(2, 4000), (3, 1500)], vector=1000)
    r = g.report(ceil=ceil)
    kept = r.hints(min_share=0.1)
    assert [h.kind for h in kept] == ["dropout_mask"] and kept[0].saved_s == pytest.approx(1500 / 1e11)
    assert r.hints(min_share=0.5) == []
