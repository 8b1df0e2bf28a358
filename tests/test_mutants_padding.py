"""The padding analysis (roofline/_analysis/_padding.py) on hand-built shapes and records: which calls count as per
token, attention or other, and the useful_work figures, each expected value written out as arithmetic. No model
runs here: every record is made by hand, so each case isolates one rule of the classification."""

import math

import numpy as np
import pytest

from roofline._analysis import _padding
from roofline._datamodel._records import BACKWARD, FORWARD, OPTIMIZER, RECORD_DTYPE
from roofline._datamodel._tokens import token_layout

SDPA = "aten._scaled_dot_product_flash_attention_for_cpu.default"


def _report(rows):
    """records, op_names, signatures from rows of (op name, signature, phase, matrix flops, vector flops);
    signature index 0 is the empty signature, as in a captured report."""
    op_names, signatures = [], [""]
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (op, sig, phase, mf, vf) in enumerate(rows):
        if op not in op_names:
            op_names.append(op)
        if sig not in signatures:
            signatures.append(sig)
        rec["op"][i], rec["sig"][i], rec["phase"][i] = op_names.index(op), signatures.index(sig), phase
        rec["matrix_flops"][i], rec["vector_flops"][i] = mf, vf
    return rec, op_names, signatures


# --- shapes ------------------------------------------------------------------------------------------------------

def test_shapes_keep_every_dtype_unless_asked_for_floating_only():
    sig = "i64[56], f32[3,4], b8[2,5]"
    assert _padding.shapes(sig) == [(56,), (3, 4), (2, 5)]
    assert _padding.shapes(sig, floating=True) == [(3, 4)]


# --- classify: attention kernels over this batch's sequences ----------------------------------------------------

def test_attention_kernel_in_batch_seq_heads_layout():
    # (B, S, heads, d): S right after B is still this batch's sequence
    assert _padding.classify(SDPA, [(2, 8, 4, 16)] * 3, 2, 8) == "attention"


def test_attention_kernel_with_batch_equal_to_seq_needs_seq_after_batch():
    # B = S = 4 over a tower of 3 patches: the batch dim alone is not a sequence of this batch
    assert _padding.classify(SDPA, [(4, 2, 3, 16)] * 3, 4, 4) == "other"
    assert _padding.classify(SDPA, [(4, 2, 4, 16)] * 3, 4, 4) == "attention"


# --- classify: per-token calls ------------------------------------------------------------------------------------

def test_batch_dim_without_seq_after_it_is_not_per_token():
    b, s = 2, 8
    # B present, S absent / B then another dim / S then B: no (B, S) pair, no B x S dim
    assert _padding.classify("aten.add.Tensor", [(2, 5)], b, s) == "other"
    assert _padding.classify("aten.add.Tensor", [(3, 8)], b, s) == "other"
    assert _padding.classify("aten.add.Tensor", [(8, 2, 5)], b, s) == "other"


def test_batch_equal_to_seq_needs_both_dims():
    # B = S = 4: a single dim of 4 is neither (B, S) nor B x S = 16
    assert _padding.classify("aten.add.Tensor", [(4, 3)], 4, 4) == "other"
    assert _padding.classify("aten.add.Tensor", [(4, 4, 3)], 4, 4) == "token"


def test_batch_of_one_takes_seq_dim_only():
    # B = 1: a dim of S is a token dim; without it, nothing is
    assert _padding.classify("aten.add.Tensor", [(3, 5)], 1, 8) == "other"
    assert _padding.classify("aten.add.Tensor", [(3, 8)], 1, 8) == "token"


def test_batch_heads_seq_layout_is_per_token():
    # (B, heads, S, d) with d != B x S: only B followed (not immediately) by S marks it, for B = 2 as for B = 3
    assert _padding.classify("aten.mul.Tensor", [(2, 4, 8, 32)], 2, 8) == "token"
    assert _padding.classify("aten.mul.Tensor", [(3, 4, 8, 32)], 3, 8) == "token"


# --- classify: the (.., S, S) scores and the Q K^T product -------------------------------------------------------

def test_square_scores_over_seq_are_attention():
    b, s = 3, 8
    assert _padding.classify("aten._softmax.default", [(8, 8)], b, s) == "attention"  # 2-D scores, one head
    # one trailing S is not a score matrix, in either position
    assert _padding.classify("aten.add.Tensor", [(8, 5)], b, s) == "other"
    assert _padding.classify("aten.add.Tensor", [(5, 8)], b, s) == "other"


def test_seq_of_two_scores_are_attention():
    assert _padding.classify("aten._softmax.default", [(3, 2, 2)], 5, 2) == "attention"


def test_seq_of_one_has_no_scores_to_find():
    # one position per sequence: a (.., 1, 1) tensor is no score matrix
    assert _padding.classify("aten.add.Tensor", [(3, 1, 1)], 2, 1) == "other"


def test_qk_product_of_two_matrices():
    b, s = 3, 8
    assert _padding.classify("aten.matmul.default", [(8, 16), (16, 8)], b, s) == "attention"
    # B x heads = 4 (not the batch), d = 32: only (.., S, d) @ (.., d, S) marks it
    assert _padding.classify("aten.bmm.default", [(4, 8, 32), (4, 32, 8)], 2, 8) == "attention"


def test_qk_product_with_a_leading_addend():
    # baddbmm(alibi (B*heads, 1, S), Q (B*heads, S, d), K^T (B*heads, d, S)): the last two arguments are the
    # product's operands
    assert _padding.classify("aten.baddbmm.default", [(4, 1, 8), (4, 8, 32), (4, 32, 8)], 2, 8) == "attention"


def test_a_product_with_a_vector_operand_is_not_the_scores_product():
    b, s = 3, 8
    assert _padding.classify("aten.matmul.default", [(16,), (16, 8)], b, s) == "other"
    assert _padding.classify("aten.matmul.default", [(8, 16), (8,)], b, s) == "other"
    assert _padding.classify("aten.matmul.default", [(4, 4), (8, 16), (8,)], b, s) == "other"


def test_outer_comparison_building_a_mask_is_not_a_product():
    # arange(S)[:, None] >= arange(S)[None, :]: (S, 1) against (1, S), no product of Q and K
    assert _padding.classify("aten.ge.Tensor", [(8, 1), (1, 8)], 3, 8) == "other"


# --- useful_work -------------------------------------------------------------------------------------------------

# lengths 8 and 4 padded to 8: 16 positions, 12 real
LAYOUT = {"lengths": [8, 4], "seq_len": 8}
TOKEN_SHARE = (16 - 12) / 16  # 0.25
ATTN_SHARE = 1 - (8 * 8 + 4 * 4) / (2 * 8 * 8)  # 0.375
CAUSAL_SHARE = 1 - (8 * 9 + 4 * 5) / (2 * 8 * 9)

ROWS = [
    ("aten.addmm.default", "f32[32], f32[16,64], f32[64,32]", FORWARD, 1000, 0),  # rows B x S = 16: per token
    ("aten.bmm.default", "f32[8,8,16], f32[8,16,8]", FORWARD, 2048, 0),  # Q K^T: attention
    ("aten.add_.Tensor", "f32[16,64], f32[16,64]", OPTIMIZER, 0, 100),  # the optimizer step: other
    ("aten.add_.Tensor", "f32[16,64], f32[16,64]", BACKWARD, 0, 50),  # the same call outside it: per token
    ("aten.addmm.default", "f32[32], f32[16,64], f32[64,32]", BACKWARD, 1000, 0),
]


@pytest.fixture(scope="module")
def work():
    rec, ops, sigs = _report(ROWS)
    return rec, ops, sigs, _padding.useful_work(rec, ops, sigs, token_layout(LAYOUT))


def test_useful_work_counts_and_flops_per_kind(work):
    u = work[3]
    token_flops, attn_flops, other_flops = 1000 + 50 + 1000, 2048, 100
    assert u["by_kind"]["token"] == {"calls": 3, "flops": token_flops, "padding_flops": TOKEN_SHARE * token_flops}
    assert u["by_kind"]["attention"] == {"calls": 1, "flops": attn_flops, "padding_flops": ATTN_SHARE * attn_flops}
    assert u["by_kind"]["other"] == {"calls": 1, "flops": other_flops, "padding_flops": 0.0}
    padding = 0.25 * 2050 + 0.375 * 2048
    assert u["executed_flops"] == 4198 and u["padding_flops"] == pytest.approx(padding, rel=1e-12)
    assert u["useful_flops"] == pytest.approx(4198 - padding, rel=1e-12)
    assert u["padding_share"] == pytest.approx(padding / 4198, rel=1e-12)
    assert u["by_op"]["aten.add_.Tensor"] == {"flops": 150, "padding_flops": 0.25 * 50}


def test_useful_work_is_not_causal_unless_asked(work):
    rec, ops, sigs, u = work
    assert u["causal"] is False and u["by_kind"]["attention"]["padding_flops"] == pytest.approx(0.375 * 2048)
    causal = _padding.useful_work(rec, ops, sigs, token_layout(LAYOUT), causal=True)
    assert causal["by_kind"]["attention"]["padding_flops"] == pytest.approx(CAUSAL_SHARE * 2048)


def test_real_tokens_per_second(work):
    rec, ops, sigs, u = work
    assert math.isnan(u["real_tokens_per_s"])
    assert _padding.useful_work(rec, ops, sigs, token_layout(LAYOUT), wall_time=2.0)["real_tokens_per_s"] == 6.0


def test_useful_work_refuses_a_report_without_signatures():
    rec, ops, _ = _report([("aten.add.Tensor", "f32[16,64]", FORWARD, 0, 10)])
    rec["sig"] = 0  # every call without a signature: captured with signatures off
    with pytest.raises(ValueError, match="no call signatures"):
        _padding.useful_work(rec, ops, [""], token_layout(LAYOUT))
    with pytest.raises(ValueError, match="no call signatures"):
        _padding.useful_work(np.zeros(0, dtype=RECORD_DTYPE), [], [], token_layout(LAYOUT))


def test_no_work_has_no_padding_share():
    u = _padding.useful_work(np.zeros(0, dtype=RECORD_DTYPE), [], [""], token_layout(LAYOUT))
    assert u["executed_flops"] == 0 and u["padding_flops"] == 0 and u["padding_share"] == 0.0
    assert u["by_kind"]["token"] == {"calls": 0, "flops": 0.0, "padding_flops": 0.0}


def test_an_empty_packed_batch_has_no_padding():
    # a packed batch of no token (measure refuses cu_seqlens [0, 0]; the analysis still copes): no positions at
    # all; the call over the empty token dim is not charged as padding
    rec, ops, sigs = _report([("aten.addmm.default", "f32[4], f32[0,3], f32[3,4]", FORWARD, 0, 12)])
    u = _padding.useful_work(rec, ops, sigs, {"batch": 1, "seq_len": 0, "lengths": [0], "packed": True})
    assert u["positions"] == 0 and u["by_kind"]["token"]["calls"] == 1
    assert u["padding_flops"] == 0 and u["useful_flops"] == 12


@pytest.mark.parametrize("causal", [False, True])
def test_a_layout_without_positions_has_no_attention_padding(causal):
    # seq_len 0 (a degenerate layout): no score to pad, rather than a division by zero
    layout = {"batch": 1, "seq_len": 0, "lengths": [0], "packed": False}
    rec, ops, sigs = _report([(SDPA, "f32[1,2,0,16], f32[1,2,0,16], f32[1,2,0,16]", FORWARD, 0, 100)])
    u = _padding.useful_work(rec, ops, sigs, layout, causal=causal)
    assert u["by_kind"]["attention"]["calls"] == 1 and u["padding_flops"] == 0


# --- useful_work: ambiguous token dims ------------------------------------------------------------------------

def _ambiguous(rows, tokens):
    rec, ops, sigs = _report(rows)
    return _padding.useful_work(rec, ops, sigs, token_layout(tokens))["ambiguous"]


def test_a_2d_weight_with_the_token_count_is_ambiguous():
    # the optimizer updates a (16, 32) weight: B x S = 16 is one of its dims
    assert _ambiguous([("aten.add_.Tensor", "f32[16,32], f32[16,32]", OPTIMIZER, 0, 512)], LAYOUT) == [16]


def test_a_3d_tensor_is_no_weight():
    assert _ambiguous([("aten.add_.Tensor", "f32[16,4,4], f32[16,4,4]", OPTIMIZER, 0, 256)], LAYOUT) == []


def test_an_integer_index_of_length_seq_is_no_weight():
    # (B = 2, S = 8): an i64[8] index is no weight, so S is not ambiguous; the f32[5, 3] table has no token dim
    assert _ambiguous([("aten.index_select.default", "f32[5,3], i64[8]", FORWARD, 0, 15)], LAYOUT) == []


def test_seq_of_two_is_ambiguous_but_one_is_not():
    # S = 2 is a dim of a (3, 2) weight: ambiguous; S = 1 in a (64, 1) weight: every tensor has such dims, not said
    assert _ambiguous([("aten.add_.Tensor", "f32[3,2], f32[3,2]", FORWARD, 0, 6)],
                      {"lengths": [2, 1], "seq_len": 2}) == [2]
    assert _ambiguous([("aten.add_.Tensor", "f32[64,1], f32[64,1]", FORWARD, 0, 64)],
                      {"lengths": [1, 0, 1], "seq_len": 1}) == []


def test_a_signature_past_the_table_counts_as_other():
    """A record whose signature index lies past the table (no loaded or measured report has one: load refuses it)
    is a call of unknown shapes: counted as "other", without padding, not an IndexError."""
    rec, ops, sigs = _report([("aten.add.Tensor", "f32[2,8,64]", FORWARD, 0, 10),
                              ("aten.mul.Tensor", "f32[2,8,64]", FORWARD, 0, 7)])
    rec["sig"][1] = len(sigs)
    u = _padding.useful_work(rec, ops, sigs, token_layout(LAYOUT))
    assert u["by_kind"]["other"] == {"calls": 1, "flops": 7, "padding_flops": 0.0}
    assert u["by_kind"]["token"]["calls"] == 1
