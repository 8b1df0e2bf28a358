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


# ---- roofline/_analysis/_classification.py: which ceilings, which peak per record, the arrays --------------------------------

import sys  # noqa: E402
import types  # noqa: E402

from _ceilings_modules import ceilings_mod as ceil_mod  # noqa: E402  (the ceilings modules as one)
from roofline._analysis import _classification as cls  # noqa: E402
from roofline._hardware import _choose, _roofs  # noqa: E402
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE  # noqa: E402


def hand_ceilings(bandwidths=None):
    """fp32 matrix 100 (datasheet 200), fp32 vector 10 (datasheet 20), bf16 vector datasheet only (30); DRAM 5."""
    peaks = {("matrix", "float32"): ceil_mod.Ceiling(100.0, 200.0), ("vector", "float32"): ceil_mod.Ceiling(10.0, 20.0),
             ("vector", "bfloat16"): ceil_mod.Ceiling(None, 30.0)}
    bw = {"DRAM": ceil_mod.Ceiling(5.0)} if bandwidths is None else bandwidths
    return ceil_mod.Ceilings(device="test", name="hand", fingerprint="f", peaks=peaks, bandwidths=bw)


# matrix, vector, read, written, dtype, time
REC = [(40, 0, 3, 1, "float32", 2.0),      # matrix fp32: peak 100
       (0, 6, 2, 2, "float32", 4.0),       # vector fp32: 10
       (0, 8, 4, 0, "int64", 1.0),         # integer work: the fp32 vector rate, 10
       (0, 9, 1, 2, "complex64", 3.0),     # no complex64 peak: NaN
       (12, 3, 5, 5, "bfloat16", 0.5),     # matrix bf16 (it has matrix FLOPs): falls back to vector bf16 / fp32
       (0, 0, 8, 8, "float32", 2.0)]       # a copy: vector fp32 key, 10


def hand_records():
    rec = np.zeros(len(REC), dtype=RECORD_DTYPE)
    for i, (m, v, rd, wr, dt, t) in enumerate(REC):
        rec[i]["matrix_flops"], rec[i]["vector_flops"] = m, v
        rec[i]["bytes_read"], rec[i]["bytes_written"] = rd, wr
        rec[i]["dtype"] = DTYPE_CODES[dt]
        rec[i]["t_start"], rec[i]["t_end"] = 1.0, 1.0 + t
    return rec


def eq_nan(got, want):
    return len(got) == len(want) and all(same(float(g), w) for g, w in zip(got, want))


def test_peaks_per_record_and_source():
    rec = hand_records()
    peak, bw, notes = cls.peaks(rec, hand_ceilings(), "measured")
    # bf16 matrix: chain matrix/bf16, vector/bf16 (no measured value), vector/fp32 = 10
    assert eq_nan(peak, [100.0, 10.0, 10.0, NAN, 10.0, 10.0]) and eq_nan(bw, [5.0] * 6)
    assert len(notes) == 2 and notes == sorted(notes)
    assert notes[0].startswith("dtype must be one of") and notes[0].endswith("not 'complex64'")
    assert notes[1].startswith("matrix/bfloat16: ") and notes[1].endswith("using the vector/float32 peak")
    f64 = hand_records()[:2]
    f64["dtype"] = DTYPE_CODES["float64"]  # a dtype the ceilings have no entry for
    peak, _, notes = cls.peaks(f64, hand_ceilings(), "measured")
    assert eq_nan(peak, [NAN, NAN]) and len(notes) == 2
    assert notes[0].startswith("no measured peak for matrix/float64")
    assert notes[1].startswith("no measured peak for vector/float64")
    # datasheet figures: 200, 20; bf16 finds its vector/bf16 datasheet 30; the bandwidth has no datasheet figure,
    # so the measured one is used and the notes say so
    peak, bw, notes = cls.peaks(rec, hand_ceilings(), "datasheet")
    assert eq_nan(peak, [200.0, 20.0, 20.0, NAN, 30.0, 20.0]) and eq_nan(bw, [5.0] * 6)
    assert "no datasheet DRAM bandwidth: using the measured one" in notes and len(notes) == 3
    assert ("no matrix/bfloat16 peak: using vector/bfloat16 (a matrix product can run on the vector units at their "
            "rate)") in notes
    # no bandwidth at all: NaN, and the lookup's message
    peak, bw, notes = cls.peaks(rec, hand_ceilings(bandwidths={}), "datasheet")
    assert eq_nan(bw, [NAN] * 6) and eq_nan(peak, [200.0, 20.0, 20.0, NAN, 30.0, 20.0])
    assert any(n.startswith("no datasheet bandwidth for level 'DRAM'") for n in notes)
    assert "no datasheet DRAM bandwidth: using the measured one" not in notes
    # the same note from several records is given once
    peak, bw, notes = cls.peaks(np.concatenate([rec, rec]), hand_ceilings(), "measured")
    assert len(peak) == 12 and len(notes) == 2
    # without ceilings: NaN everywhere, no notes
    peak, bw, notes = cls.peaks(rec, None, "measured")
    assert eq_nan(peak, [NAN] * 6) and eq_nan(bw, [NAN] * 6) and notes == []
    assert len(cls.peaks(rec[:0], hand_ceilings(), "measured")[0]) == 0


def test_integer_matrix_products_use_the_int8_peak_where_there_is_one():
    rec = hand_records()[:2]
    rec[0]["dtype"] = DTYPE_CODES["int8"]   # matrix work in int8 (_int_mm)
    rec[1]["dtype"] = DTYPE_CODES["int8"]   # element-wise int8 work: still the fp32 vector rate
    # no int8 matrix peak: the fp32 matrix rate (100), and a note saying so
    peak, _, notes = cls.peaks(rec, hand_ceilings(), "measured")
    assert eq_nan(peak, [100.0, 10.0])
    assert notes == ["no measured int8 matrix peak: int8 matrix products judged against the float32 rate"]
    # with a measured matrix/int8 peak (VNNI, AMX, tensor cores): that one, no note
    c = hand_ceilings()
    c.peaks[("matrix", "int8")] = ceil_mod.Ceiling(400.0, None)
    peak, _, notes = cls.peaks(rec, c, "measured")
    assert eq_nan(peak, [400.0, 10.0]) and notes == []
    # uint8 matrix work is judged against the same int8 peak
    rec[0]["dtype"] = DTYPE_CODES["uint8"]
    assert eq_nan(cls.peaks(rec, c, "measured")[0], [400.0, 10.0])


def test_classify_arrays_of_the_records():
    res, notes = cls.classify(hand_records(), hand_ceilings(), "measured")
    assert res["flops"].tolist() == [40.0, 6.0, 8.0, 9.0, 12.0 + 3.0, 0.0]  # matrix + vector
    assert res["bytes"].tolist() == [4.0, 4.0, 4.0, 3.0, 10.0, 16.0]       # read + written
    assert eq_nan(res["peak"], [100.0, 10.0, 10.0, NAN, 10.0, 10.0]) and eq_nan(res["bw"], [5.0] * 6)
    # t_min = max(FLOPs / peak, bytes / bw); the measured time is t_end - t_start
    assert eq_nan(res["t_min"], [max(40 / 100, 4 / 5), max(6 / 10, 4 / 5), max(8 / 10, 4 / 5), NAN,
                                 max(15 / 10, 10 / 5), 16 / 5])
    assert eq_nan(res["mfu"], [40 / (2.0 * 100), 6 / (4.0 * 10), 8 / (1.0 * 10), NAN, 15 / (0.5 * 10), 0.0])
    # intensities 10, 1, 2 (on the ridge: compute), -, 1.5 against ridges 20, 2, 2, -, 2
    assert res["bound"].tolist() == [M, M, C, N, M, B]
    assert len(notes) == 2


def test_resolve_ceilings(monkeypatch):
    given = hand_ceilings()
    assert _choose.choose(given, {}) == (given, "best", "")
    assert _choose.choose(given, {"ceilings_source": "datasheet"}) == (given, "datasheet", "")
    for devs, where in ((["meta"], "meta"), (["cpu", "fake"], "cpu, fake"), ([], "no device")):
        got = _choose.choose("measured", {"devices": devs})
        assert got == (None, "measured", f"ops ran on {where}: no ceilings to judge them against; "
                                         "use r.project('<device>')")
    assert _choose.choose("datasheet", {})[0] is None
    asked = []

    def fake_ceilings(device):
        asked.append(device)
        if device == "cuda:3":
            raise RuntimeError("no NVRTC")
        return given

    monkeypatch.setattr(ceil_mod, "ceilings", fake_ceilings)
    assert _choose.choose("measured", {"devices": ["cpu"]}) == (given, "measured", "")
    assert _choose.choose("datasheet", {"devices": ["cpu"]}) == (given, "datasheet", "")
    assert _choose.choose("measured", {"devices": ["cpu", "cuda:1"]}) == (given, "measured", "")
    assert asked == ["cpu", "cpu", "cuda:1"]  # a GPU among the devices is the one judged
    assert _choose.choose("measured", {"devices": ["cuda:3"]}) == (None, "measured",
                                                                        "ceilings of cuda:3 unavailable: no NVRTC")
    ds = _choose.choose("H100 SXM", {"devices": ["cpu"]})
    assert ds[1:] == ("datasheet", "") and ds[0].peaks[("matrix", "bfloat16")].datasheet == 989e12
    assert asked == ["cpu", "cpu", "cuda:1", "cuda:3"]  # a device name never measures
    with pytest.raises(TypeError, match="ceilings must be"):
        _choose.choose(3, {"devices": ["cpu"]})


def test_resolve_ceilings_datasheet_of_a_gpu(monkeypatch):
    # the GPU's name is all resolve_ceilings asks torch for: a stand-in answers it, with or without torch installed
    name = {"value": "NVIDIA H100 80GB HBM3"}
    asked = []
    fake_torch = types.SimpleNamespace(device=lambda d: ("device", d),
                                       cuda=types.SimpleNamespace(get_device_name=lambda dev: asked.append(dev)
                                                                  or name["value"]))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(ceil_mod, "ceilings", lambda device: hand_ceilings())
    got, source, note = _choose.choose("datasheet", {"devices": ["cpu", "cuda:0"]})
    assert (source, note) == ("datasheet", "") and got.device == "cuda:0"
    assert got.peaks[("matrix", "bfloat16")].datasheet == 989e12 and asked == [("device", "cuda:0")]
    name["value"] = "an unknown GPU"
    with pytest.warns(UserWarning, match="no datasheet entry for 'an unknown GPU'; using measured ceilings"):
        got, source, note = _choose.choose("datasheet", {"devices": ["cuda:0"]})
    assert (got.name, source, note) == ("hand", "datasheet", "")


def test_roofs_are_chosen_once_and_classified_once(monkeypatch):
    from roofline.report import Report

    calls = []
    real = _choose.choose

    def counting(spec, meta):
        calls.append(spec)
        return real(spec, meta)

    monkeypatch.setattr(_choose, "choose", counting)
    r = Report(hand_records(), [], [("Global",)], meta={"devices": ["meta"]}, ceilings="measured")
    assert r.roofs.ceilings is None and r.roofs.note.startswith("ops ran on meta")
    assert r.ceilings is None and r.ceilings_source == "measured" and r.classification() is r.classification()
    assert calls == ["measured"]  # chosen once, failure or not
    given = hand_ceilings()
    r2 = Report(hand_records(), [], [("Global",)], ceilings=given)
    assert r2.roofs is r2.roofs and r2.ceilings is given and r2.ceilings_source == "best"
    assert calls == ["measured", given]
    first = r2.classification()
    assert first is r2.classification()  # computed once
    # source "best": the bf16 record finds the datasheet figure of vector/bf16 (30)
    assert eq_nan(first["peak"], [100.0, 10.0, 10.0, NAN, 30.0, 10.0]) and len(r2._classifier.peak_notes) == 2
    none = _choose.roofs(None, {"devices": ["cpu"]})
    assert none.ceilings is None and none.note == ""
    k = cls.Classifier()
    assert eq_nan(k.classification(hand_records(), none, {})["peak"], [NAN] * 6) and k.peak_notes == []


def test_roofs_value_figures():
    """The roofs of hand-made ceilings: each figure with its source and fallback note, read once."""
    roofs = _roofs.of(hand_ceilings(), "measured")
    assert roofs.peak("matrix", "float32") == _roofs.Figure(100.0, "measured", "", ("matrix", "float32"))
    # a bfloat16 product on this CPU falls back to the fp32 vector peak (10): the figure says whose peak it is
    fallback = roofs.peak("matrix", "bfloat16")
    assert fallback.value == 10.0 and fallback.peak_of == ("vector", "float32") and "float32" in fallback.note
    assert roofs.peak("matrix", "float64").peak_of == ()  # no peak, no fallback: NaN, whose peak is no one's
    assert roofs.bandwidth("DRAM").value == 5.0 and roofs.levels()[-1][0] == "DRAM"
    assert math.isnan(roofs.peak("matrix", "no such dtype").value)
    # integer element-wise work is judged against the float32 vector rate (10)
    assert roofs.judged_peak("vector", "int64").value == 10.0
    with pytest.raises(TypeError):
        roofs.peaks[("matrix", "float32")] = None  # frozen: a mapping nobody can change


def test_unknown_gpu_warning_blames_the_caller(monkeypatch):
    """The warning for a GPU without a datasheet entry points at the code that asked for the ceilings, through
    each entry point (resolve_ceilings itself, Report.ceilings, Report.classification)."""
    from roofline.report import Report

    fake_torch = types.SimpleNamespace(device=lambda d: d,
                                       cuda=types.SimpleNamespace(get_device_name=lambda dev: "an unknown GPU"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(ceil_mod, "ceilings", lambda device: hand_ceilings())
    meta = {"devices": ["cuda:0"]}
    with pytest.warns(UserWarning, match="no datasheet entry") as w:
        _choose.choose("datasheet", meta)
    assert w[0].filename == __file__
    with pytest.warns(UserWarning, match="no datasheet entry") as w:
        Report(hand_records(), [], [("Global",)], meta=meta, ceilings="datasheet").ceilings
    assert w[0].filename == __file__
    with pytest.warns(UserWarning, match="no datasheet entry") as w:
        Report(hand_records(), [], [("Global",)], meta=meta, ceilings="datasheet").classification()
    assert w[0].filename == __file__


def test_one_matrix_flop_is_matrix_work():
    rec = hand_records()[:1]
    rec["matrix_flops"] = 1  # the smallest matrix count still uses the matrix peak
    assert eq_nan(cls.peaks(rec, hand_ceilings(), "measured")[0], [100.0])
    rec["dtype"] = 0  # an unknown dtype (code 0) is judged as float32, matrix work on the matrix peak
    assert eq_nan(cls.peaks(rec, hand_ceilings(), "measured")[0], [100.0])
