"""Exact values of the roofline classification (csrc/classify.c through roofline._core.classify): every branch of
the definitions in csrc/classify.h, one op per row, with the expected figures written as arithmetic."""

import math

import numpy as np
import pytest

from roofline import _core

NAN, INF = float("nan"), float("inf")
FIELDS = ("intensity", "ridge", "attainable", "t_min", "achieved_flops", "achieved_bytes", "efficiency", "mfu", "mbu")
C, M, B, N = _core.BOUND_COMPUTE, _core.BOUND_MEMORY, _core.BOUND_BANDWIDTH, _core.BOUND_NONE
ABOVE_PEAK, ABOVE_BW = _core.FLAG_ABOVE_PEAK, _core.FLAG_ABOVE_BW
UNTIMED, ZERO_TIME, NO_CEILING = _core.FLAG_UNTIMED, _core.FLAG_ZERO_TIME, _core.FLAG_NO_CEILING
TOL = 1e-9  # csrc/classify.c: relative slack before a rate counts as above its ceiling


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def classify_one(flops, nbytes, time, peak, bw):
    """Classify one op, but inside a batch of three (a neighbour on each side with other values) so that the loop
    over ops is exercised too; returns the middle row."""
    res = _core.classify([1.0, flops, 7.0], [2.0, nbytes, 0.0], [3.0, time, NAN], [5.0, peak, 1.0], [11.0, bw, 0.0])
    row = {k: float(res[k][1]) for k in FIELDS}
    row["bound"], row["flags"] = int(res["bound"][1]), int(res["flags"][1])
    # the neighbours keep their own figures: 1 FLOP, 2 bytes, 3 s on (5 FLOP/s, 11 B/s); 7 FLOPs, untimed, no bw
    assert res["intensity"][0] == 1 / 2 and res["t_min"][0] == max(1 / 5, 2 / 11) and res["mfu"][0] == 1 / (3 * 5)
    assert res["bound"][0] == C and res["flags"][0] == 0  # intensity 1/2 >= ridge 5/11
    assert res["intensity"][2] == INF and res["bound"][2] == N and res["flags"][2] == UNTIMED | NO_CEILING
    return row


def check(row, want):
    for k, w in want.items():
        assert same(row[k], w), f"{k}: got {row[k]!r}, want {w!r}"


# (id, flops, bytes, time, peak, bw, expected)
CASES = [
    ("compute-bound", 1000.0, 10.0, 20.0, 100.0, 5.0,
     dict(intensity=1000 / 10, ridge=100 / 5, attainable=100.0, t_min=max(1000 / 100, 10 / 5), achieved_flops=1000 / 20,
          achieved_bytes=10 / 20, efficiency=10 / 20, mfu=1000 / (20 * 100), mbu=10 / (20 * 5), bound=C, flags=0)),
    ("memory-bound", 30.0, 60.0, 40.0, 100.0, 5.0,
     dict(intensity=30 / 60, ridge=20.0, attainable=(30 / 60) * 5, t_min=max(30 / 100, 60 / 5), achieved_flops=30 / 40,
          achieved_bytes=60 / 40, efficiency=12 / 40, mfu=30 / (40 * 100), mbu=60 / (40 * 5), bound=M, flags=0)),
    ("on the ridge is compute-bound", 200.0, 10.0, 4.0, 100.0, 5.0,
     dict(intensity=20.0, ridge=20.0, attainable=100.0, t_min=2.0, efficiency=2 / 4, bound=C, flags=0)),
    ("flops without bytes: infinite intensity", 500.0, 0.0, 10.0, 100.0, 5.0,
     dict(intensity=INF, attainable=100.0, t_min=500 / 100, mbu=0.0, achieved_bytes=0.0, efficiency=5 / 10, bound=C,
          flags=0)),
    ("bandwidth only (a copy)", 0.0, 50.0, 20.0, 100.0, 5.0,
     dict(intensity=0.0, ridge=20.0, attainable=5.0, t_min=50 / 5, achieved_flops=0.0, achieved_bytes=50 / 20,
          efficiency=10 / 20, mfu=0.0, mbu=50 / (20 * 5), bound=B, flags=0)),
    ("bandwidth only without a bandwidth", 0.0, 50.0, 20.0, 100.0, 0.0,
     dict(ridge=NAN, attainable=NAN, t_min=NAN, efficiency=NAN, mbu=NAN, mfu=0.0, bound=B, flags=NO_CEILING)),
    ("nothing counted", 0.0, 0.0, 2.0, 100.0, 5.0,
     dict(intensity=0.0, ridge=20.0, attainable=NAN, t_min=0.0, achieved_flops=0.0, achieved_bytes=0.0,
          efficiency=NAN, mfu=0.0, mbu=0.0, bound=N, flags=0)),
    ("no peak (0)", 100.0, 10.0, 2.0, 0.0, 5.0,
     dict(ridge=NAN, attainable=NAN, t_min=NAN, efficiency=NAN, mfu=NAN, mbu=10 / (2 * 5), achieved_flops=50.0,
          bound=N, flags=NO_CEILING)),
    ("negative peak", 100.0, 10.0, 2.0, -100.0, 5.0,
     dict(ridge=NAN, attainable=NAN, t_min=NAN, mfu=NAN, bound=N, flags=NO_CEILING)),
    ("NaN peak", 100.0, 10.0, 2.0, NAN, 5.0,
     dict(ridge=NAN, attainable=NAN, t_min=NAN, mfu=NAN, mbu=1.0, bound=N, flags=NO_CEILING)),
    ("no bandwidth (NaN)", 100.0, 10.0, 2.0, 100.0, NAN,
     dict(ridge=NAN, attainable=NAN, t_min=NAN, mfu=100 / (2 * 100), mbu=NAN, efficiency=NAN, bound=N,
          flags=NO_CEILING)),
    ("negative bandwidth", 100.0, 10.0, 2.0, 100.0, -5.0,
     dict(ridge=NAN, mbu=NAN, mfu=0.5, bound=N, flags=NO_CEILING)),
    ("untimed", 1000.0, 10.0, NAN, 100.0, 5.0,
     dict(t_min=10.0, attainable=100.0, achieved_flops=NAN, achieved_bytes=NAN, efficiency=NAN, mfu=NAN, mbu=NAN,
          bound=C, flags=UNTIMED)),
    ("zero time", 1000.0, 10.0, 0.0, 100.0, 5.0,
     dict(t_min=10.0, achieved_flops=NAN, achieved_bytes=NAN, efficiency=NAN, mfu=NAN, mbu=NAN, bound=C,
          flags=ZERO_TIME)),
    ("negative time", 1000.0, 10.0, -1.0, 100.0, 5.0,
     dict(achieved_flops=NAN, efficiency=NAN, mfu=NAN, bound=C, flags=ZERO_TIME)),
    ("above the peak", 300.0, 1.0, 1.0, 100.0, 10.0,
     dict(intensity=300.0, achieved_flops=300.0, mfu=3.0, mbu=0.1, efficiency=3.0, bound=C, flags=ABOVE_PEAK)),
    ("one FLOP, no bytes", 1.0, 0.0, 1.0, 100.0, 10.0, dict(intensity=INF, bound=C, t_min=1 / 100, efficiency=0.01)),
    ("one byte, no FLOPs", 0.0, 1.0, 2.0, 100.0, 10.0, dict(intensity=0.0, bound=B, t_min=1 / 10, efficiency=0.05)),
    ("one byte", 3.0, 1.0, 1.0, 100.0, 10.0, dict(intensity=3.0, ridge=10.0, bound=M, t_min=max(3 / 100, 1 / 10))),
    ("above the bandwidth", 1.0, 300.0, 1.0, 100.0, 10.0,
     dict(achieved_bytes=300.0, mbu=30.0, efficiency=30.0, bound=M, flags=ABOVE_BW)),
    ("above both, untimed flag clear", 300.0, 300.0, 1.0, 100.0, 10.0,
     dict(bound=M, flags=ABOVE_PEAK | ABOVE_BW)),
    # exactly on the peak (a projection's time): not above it
    ("exactly at the peak", 1e9, 1.0, 1.0, 1e9, 1e9,
     dict(achieved_flops=1e9, mfu=1.0, bound=C, flags=0)),
    ("exactly at the bandwidth", 1.0, 1e9, 1.0, 1e9, 1e9,
     dict(achieved_bytes=1e9, mbu=1.0, bound=M, flags=0)),
    # within the tolerance: a rounding error of a rate computed on the roof
    ("within the tolerance of the peak", 1e9 * (1 + TOL / 2), 1.0, 1.0, 1e9, 1e9, dict(flags=0)),
    ("within the tolerance of the bandwidth", 1.0, 1e9 * (1 + TOL / 2), 1.0, 1e9, 1e9, dict(flags=0)),
    ("within the tolerance of a large peak", 1e12 * (1 + TOL / 2), 1.0, 1.0, 1e12, 1e12, dict(flags=0)),
    ("within the tolerance of a large bandwidth", 1.0, 1e12 * (1 + TOL / 2), 1.0, 1e12, 1e12, dict(flags=0)),
    ("at the tolerance of the peak", 1.0 * (1.0 + TOL), 1.0, 1.0, 1.0, 1e9, dict(flags=0)),
    ("at the tolerance of the bandwidth", 1.0, 1.0 * (1.0 + TOL), 1.0, 1e9, 1.0, dict(flags=0)),
    ("beyond the tolerance of the peak", 1e9 * (1 + 10 * TOL), 1.0, 1.0, 1e9, 1e9, dict(flags=ABOVE_PEAK)),
    ("just beyond the tolerance of the peak", 1e9 * (1 + 1.5 * TOL), 1.0, 1.0, 1e9, 1e9, dict(flags=ABOVE_PEAK)),
    ("just beyond the tolerance of the bandwidth", 1.0, 1e9 * (1 + 1.5 * TOL), 1.0, 1e9, 1e9, dict(flags=ABOVE_BW)),
    ("beyond the tolerance of the bandwidth", 1.0, 1e9 * (1 + 10 * TOL), 1.0, 1e9, 1e9, dict(flags=ABOVE_BW)),
    ("nothing counted, no ceilings", 0.0, 0.0, 1.0, NAN, NAN,
     dict(t_min=0.0, efficiency=NAN, mfu=NAN, mbu=NAN, bound=N, flags=0)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_classification_case(case):
    _, f, b, t, p, w, want = case
    check(classify_one(f, b, t, p, w), want)


def test_every_output_of_a_full_row():
    row = classify_one(1000.0, 10.0, 20.0, 100.0, 5.0)
    assert row == {"intensity": 100.0, "ridge": 20.0, "attainable": 100.0, "t_min": 10.0, "achieved_flops": 50.0,
                   "achieved_bytes": 0.5, "efficiency": 0.5, "mfu": 0.5, "mbu": 0.1, "bound": C, "flags": 0}


def test_outputs_have_the_length_and_types_of_the_input():
    res = _core.classify(np.arange(5.0), np.ones(5), np.ones(5), np.full(5, 2.0), np.full(5, 4.0))
    assert all(len(res[k]) == 5 for k in (*FIELDS, "bound", "flags"))
    assert res["bound"].dtype == np.int8 and res["flags"].dtype == np.uint8
    # ridge 2 / 4 = 0.5; intensities 0 (no FLOPs: bandwidth-only), 1, 2, 3, 4
    assert res["bound"].tolist() == [B, C, C, C, C]
    assert res["t_min"].tolist() == [max(0 / 2, 1 / 4), max(1 / 2, 1 / 4), max(2 / 2, 1 / 4), 3 / 2, 4 / 2]
