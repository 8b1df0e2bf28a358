"""Tests that pin the report roll-ups of roofline/_analysis/_rollup.py where mutation testing found them unpinned:
the module tree's implied containers, the op-and-shape groups (their packed op/signature key, their names, their
phase restriction, the refusal without signatures), the interconnect share of a group's bound, the bandwidth a
group's MBU is taken against, and the whole-run model FLOPs and network-aware intensity.

Everything is built by hand (record arrays and classification dicts written out below, no torch); the expected
values are worked out in the comments.
"""

import math

import numpy as np
import pytest

from roofline import _core
from roofline._analysis._rollup import group_bound, group_masks, module_members, roofline_row, roofline_totals
from roofline._datamodel._records import RECORD_DTYPE, RECORD_DTYPE_V1, RECOMPUTE

NAN = float("nan")
C, M, BW, I = _core.BOUND_COMPUTE, _core.BOUND_MEMORY, _core.BOUND_BANDWIDTH, _core.BOUND_INTERCONNECT


# ---- module_members: a dotted name implies every prefix above it --------------------------------------------------

def test_module_members_adds_every_dotted_prefix_even_when_never_called():
    # a ModuleList ("Net.blocks") is never called, and here not even the root "Net" is in any set: each must still be
    # a group holding everything below it
    sets = [("Global",), ("Global", "Net.blocks.0"), ("Global", "Net.blocks.1.fc")]
    assert module_members(sets) == {
        "Global": [0, 1, 2],
        "Net": [1, 2],
        "Net.blocks": [1, 2],
        "Net.blocks.0": [1],
        "Net.blocks.1": [2],
        "Net.blocks.1.fc": [2],
    }


def test_module_members_keeps_global_whole():
    assert module_members([("Global",), ("Global", "A")]) == {"Global": [0, 1], "A": [1]}


# ---- group_masks by op and input-shape signature ----------------------------------------------------------------

NAMES = ["aten.mm.default", "aten.add.Tensor"]
SIGS = ["", "f32[2]", "f32[4]", "f32[8]"]


def shape_records(op, sig, phase=None, dtype=RECORD_DTYPE):
    rec = np.zeros(len(op), dtype=dtype)
    rec["op"] = op
    if "sig" in dtype.names:
        rec["sig"] = sig
    if phase is not None:
        rec["phase"] = phase
    return rec


def as_lists(groups):
    return {k: m.tolist() for k, m in groups.items()}


def test_op_shape_groups_unpack_op_and_signature():
    # op 1 and odd signatures: a key packed or unpacked with the wrong shift or mask names the wrong op or shape.
    # Groups come in (op, signature) order; signature 0 (no tensor arguments) is named by the op alone.
    rec = shape_records(op=[0, 1, 0, 1, 1, 0], sig=[1, 1, 2, 3, 1, 0])
    got = group_masks(rec, NAMES, [("Global",)], "op_shape", signatures=SIGS)
    assert list(got) == ["aten.mm.default", "aten.mm.default [f32[2]]", "aten.mm.default [f32[4]]",
                         "aten.add.Tensor [f32[2]]", "aten.add.Tensor [f32[8]]"]
    assert as_lists(got) == {
        "aten.mm.default": [False, False, False, False, False, True],
        "aten.mm.default [f32[2]]": [True, False, False, False, False, False],
        "aten.mm.default [f32[4]]": [False, False, True, False, False, False],
        "aten.add.Tensor [f32[2]]": [False, True, False, False, True, False],
        "aten.add.Tensor [f32[8]]": [False, False, False, True, False, False],
    }


def test_op_shape_groups_keep_to_the_phase():
    # phases: forward 0, backward 1. The backward add [f32[2]] (record 4) stays out of the forward group of the same
    # op and shape, and the backward-only mm [f32[4]] is no forward group at all
    rec = shape_records(op=[0, 1, 0, 1, 1], sig=[1, 1, 2, 3, 1], phase=[0, 0, 1, 0, 1])
    got = group_masks(rec, NAMES, [("Global",)], "op_shape", phase="forward", signatures=SIGS)
    assert as_lists(got) == {
        "aten.mm.default [f32[2]]": [True, False, False, False, False],
        "aten.add.Tensor [f32[2]]": [False, True, False, False, False],
        "aten.add.Tensor [f32[8]]": [False, False, False, True, False],
    }


def test_op_shape_signature_past_the_table_is_named_question_mark():
    # signatures has entries 0 and 1: signature 1 is known, signature 2 (just past the end) is not
    rec = shape_records(op=[0, 0], sig=[1, 2])
    got = group_masks(rec, NAMES, [("Global",)], "op_shape", signatures=["", "f32[2]"])
    assert as_lists(got) == {"aten.mm.default [f32[2]]": [True, False], "aten.mm.default [?]": [False, True]}


def test_op_shape_needs_signatures_and_a_sig_column():
    rec = shape_records(op=[0], sig=[1])
    for sigs in (None, []):
        with pytest.raises(ValueError, match="needs shape signatures"):
            group_masks(rec, NAMES, [("Global",)], "op_shape", signatures=sigs)
    old = shape_records(op=[0], sig=None, dtype=RECORD_DTYPE_V1)  # records saved before the sig column existed
    with pytest.raises(ValueError, match="needs shape signatures"):
        group_masks(old, NAMES, [("Global",)], "op_shape", signatures=SIGS)


# ---- group_bound: the interconnect share -------------------------------------------------------------------------

def test_group_bound_interconnect_at_exactly_eighty_percent():
    # 4 of 5 seconds on collectives: 4 / 5 = 0.8, the threshold itself, counts
    assert group_bound(np.array([I, C]), np.array([4.0, 1.0])) == "interconnect"


def test_group_bound_interconnect_share_between_seventy_and_eighty_percent_is_mixed():
    # 3 of 4 seconds: 0.75 < 0.8 (and compute 0.25, memory 0)
    assert group_bound(np.array([I, C]), np.array([3.0, 1.0])) == "mixed"


def test_group_bound_interconnect_share_is_a_fraction_of_the_total():
    # 5 of 10 seconds on collectives (compute 3, memory 2): half, not enough for any bound
    assert group_bound(np.array([I, C, M]), np.array([5.0, 3.0, 2.0])) == "mixed"
    # and 17 of 20 (0.85): interconnect
    assert group_bound(np.array([I, C]), np.array([17.0, 3.0])) == "interconnect"


# ---- roofline_row: which bandwidth a group's MBU uses ------------------------------------------------------------

def classification(flops, nbytes, t_min, bound, peak, bw, link_bw):
    f = lambda x: np.array(x, dtype=np.float64)  # noqa: E731
    return {"flops": f(flops), "bytes": f(nbytes), "t_min": f(t_min), "bound": np.array(bound, dtype=np.uint8),
            "peak": f(peak), "bw": f(bw), "link_bw": f(link_bw), "flags": np.zeros(len(flops), dtype=np.uint8)}


def timed_records(seconds, phase=None):
    rec = np.zeros(len(seconds), dtype=RECORD_DTYPE)
    rec["t_start"] = 1.0
    rec["t_end"] = 1.0 + np.array(seconds, dtype=np.float64)
    if phase is not None:
        rec["phase"] = phase
    return rec


# record 0: an all-reduce of 400 bus bytes over a 100 B/s link, 8 s; record 1: an add of 100 FLOPs and 100 bytes
# against a 10 B/s DRAM (and a 1000 FLOP/s peak), 12 s
NET_C = classification(flops=[0, 100], nbytes=[400, 100], t_min=[4.0, 10.0], bound=[I, M], peak=[NAN, 1000.0],
                       bw=[10.0, 10.0], link_bw=[100.0, NAN])
NET_REC = timed_records([8.0, 12.0])


def test_mbu_of_a_single_collective_is_against_the_link():
    row = roofline_row(NET_REC, np.array([True, False]), NET_C)
    assert row["mbu"] == pytest.approx(400 / (8 * 100))
    assert row["bound"] == "interconnect"


def test_mbu_of_a_group_mixing_collectives_and_compute_is_dram_bytes_against_dram():
    # the collective's 400 bytes went over the network: the MBU is the add's 100 DRAM bytes over 20 s at 10 B/s
    row = roofline_row(NET_REC, np.array([True, True]), NET_C)
    assert row["mbu"] == pytest.approx(100 / (20 * 10))
    assert row["bytes"] == 500.0


# ---- roofline_totals: model FLOPs and the intensity without network bytes ----------------------------------------

def test_totals_model_flops_leave_out_recompute_and_intensity_leaves_out_bus_bytes():
    # record 0: forward matmul, 400 FLOPs, 40 bytes; record 1: the same recomputed in the backward, 100 FLOPs,
    # 10 bytes; record 2: an all-reduce of 400 bus bytes
    c = classification(flops=[400, 100, 0], nbytes=[40, 10, 400], t_min=[4.0, 1.0, 4.0], bound=[C, C, I],
                       peak=[100.0, 100.0, NAN], bw=[10.0, 10.0, 10.0], link_bw=[NAN, NAN, 100.0])
    rec = timed_records([4.0, 1.0, 4.0], phase=[0, RECOMPUTE, 0])
    g = roofline_totals(rec, c, 10.0)
    assert g["flops"] == 500.0
    assert g["recompute_flops"] == 100.0
    assert g["model_flops"] == 400.0
    assert g["network_bytes"] == 400.0 and g["bytes"] == 50.0
    assert g["intensity"] == pytest.approx(500 / 50)
    assert g["hfu"] == pytest.approx((400 / 100 + 100 / 100) / 10)
    assert g["mfu"] == pytest.approx((400 / 100) / 10)


def test_totals_intensity_of_collectives_only_is_zero():
    # every byte is on the network and there are no FLOPs: no memory traffic, no work, intensity 0
    c = classification(flops=[0], nbytes=[400], t_min=[4.0], bound=[I], peak=[NAN], bw=[10.0], link_bw=[100.0])
    g = roofline_totals(timed_records([8.0]), c, None)
    assert g["bytes"] == 0.0 and g["network_bytes"] == 400.0
    assert g["intensity"] == 0.0
    assert not math.isinf(g["intensity"])
