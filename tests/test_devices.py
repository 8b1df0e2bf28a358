"""Tests for the datasheet table ``roofline.devices``.

Expected values come from the vendor figures; where a figure can be derived from the chip's structure the
arithmetic is written out in the test, so a wrong table entry shows up as a failed derivation.
"""

import dataclasses
import math
import pathlib

import pytest

from roofline import devices
from roofline.render import _devices_table
from roofline.devices import DEVICES, DTYPES, UNITS, DeviceSpec

T = 1e12
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "devices.md"

# What torch.cuda.get_device_name() returns on each device -> the canonical entry it must resolve to.
TORCH_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB",
    "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",
    "Tesla T4": "T4",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell",
    "AMD Instinct MI300X": "MI300X",
}

REQUIRED = [
    "A100 SXM 80GB",
    "A100 PCIe 80GB",
    "H100 SXM",
    "H100 PCIe",
    "H200 SXM",
    "B200",
    "GB200",
    "L4",
    "L40S",
    "RTX 4090",
    "RTX PRO 6000 Blackwell",
    "V100 SXM2 16GB",
    "T4",
    "MI300X",
]


def _fp8(spec):
    """The FP8 matrix peak, whichever FP8 encoding the device runs (OCP or FNUZ), or None."""
    for dtype in ("float8_e4m3fn", "float8_e4m3fnuz"):
        if ("matrix", dtype) in spec.peaks:
            return spec.peaks[("matrix", dtype)]
    return None


# ---------------------------------------------------------------------------------------------------------------
# Table shape and sources


def test_at_least_the_required_devices():
    assert len(DEVICES) >= 14
    for name in REQUIRED:
        assert name in DEVICES, name
    assert devices.names() == list(DEVICES)


def test_canonical_names_and_types():
    for name, spec in DEVICES.items():
        assert isinstance(spec, DeviceSpec)
        assert spec.name == name
        assert spec.vendor in ("NVIDIA", "AMD")
        assert isinstance(spec.aliases, tuple)
        assert spec.sm_count is None or (isinstance(spec.sm_count, int) and spec.sm_count > 0)
        for field in ("boost_clock_hz", "memory_bandwidth"):
            value = getattr(spec, field)
            assert value is None or value > 0, (name, field)
        for field in ("l2_bytes", "memory_bytes"):
            value = getattr(spec, field)
            assert value is None or (isinstance(value, int) and value > 0), (name, field)
        # Every device in the table can be placed on a roofline.
        assert spec.memory_bandwidth is not None, name
        assert spec.peaks, name


def test_every_figure_has_a_source():
    for name, spec in DEVICES.items():
        for field in ("sm_count", "boost_clock_hz", "l2_bytes", "memory_bandwidth", "memory_bytes"):
            if getattr(spec, field) is not None:
                assert spec.sources.get(field, "").strip(), (name, field)
                assert spec.source(field) == spec.sources[field]
        for unit, dtype in spec.peaks:
            assert unit in UNITS and dtype in DTYPES, (name, unit, dtype)
            assert spec.source((unit, dtype)).strip(), (name, unit, dtype)


def test_a_figure_without_a_source_is_rejected():
    with pytest.raises(ValueError, match="without a source"):
        DeviceSpec(name="X", vendor="NVIDIA", memory_bandwidth=1e12)
    with pytest.raises(ValueError, match="without a source"):
        DeviceSpec(name="X", vendor="NVIDIA", peaks={("matrix", "bfloat16"): 1e15})
    with pytest.raises(ValueError, match="unknown dtype"):
        DeviceSpec(name="X", vendor="NVIDIA", peaks={("matrix", "bf16"): 1e15}, sources={"peaks.matrix.bf16": "s"})
    with pytest.raises(ValueError, match="unknown unit"):
        DeviceSpec(name="X", vendor="NVIDIA", peaks={("tensor", "int8"): 1e15}, sources={"peaks.tensor.int8": "s"})


def test_specs_are_immutable():
    spec = DEVICES["H100 SXM"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.memory_bandwidth = 1.0
    with pytest.raises(TypeError):
        spec.peaks[("matrix", "bfloat16")] = 1.0
    with pytest.raises(TypeError):
        DEVICES["X"] = spec
    assert hash(spec) == hash(DEVICES["H100 SXM"])


# ---------------------------------------------------------------------------------------------------------------
# Lookups


@pytest.mark.parametrize("torch_name,canonical", sorted(TORCH_NAMES.items()))
def test_lookup_by_torch_device_name(torch_name, canonical):
    assert devices.lookup(torch_name) is DEVICES[canonical]
    assert devices.get(torch_name) is DEVICES[canonical]


def test_lookup_is_case_and_whitespace_insensitive():
    assert devices.lookup("  nvidia   h100 80gb hbm3 ") is DEVICES["H100 SXM"]
    assert devices.lookup("NVIDIA L40S".upper()) is DEVICES["L40S"]
    for name in DEVICES:
        assert devices.lookup(name) is DEVICES[name]
        assert devices.lookup(name.lower()) is DEVICES[name]


def test_lookup_of_unseen_spellings():
    # Same product, other separators, no vendor word, capacity and memory type spelled out.
    assert devices.lookup("nvidia h100-80gb-hbm3") is DEVICES["H100 SXM"]
    assert devices.lookup("H100 80GB HBM3") is DEVICES["H100 SXM"]
    assert devices.lookup("NVIDIA H100 SXM5 80GB") is DEVICES["H100 SXM"]
    assert devices.lookup("NVIDIA H100 PCIe 80GB HBM2e") is DEVICES["H100 PCIe"]
    assert devices.lookup("NVIDIA A100-PCIE-80GB") is DEVICES["A100 PCIe 80GB"]
    assert devices.lookup("A100 SXM4 40GB") is DEVICES["A100 SXM 40GB"]
    assert devices.lookup("NVIDIA RTX 4090") is DEVICES["RTX 4090"]
    assert devices.lookup("MI300X") is DEVICES["MI300X"]
    assert devices.lookup("NVIDIA T4") is DEVICES["T4"]


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA H100 NVL",  # a different product (PCIe card, 94 GB, NVLink bridge), not the SXM part
        "H100 NVL",
        "NVIDIA H200 NVL",
        "NVIDIA GH200 480GB",
        "H100",  # ambiguous between SXM and PCIe
        "A100 SXM4",  # ambiguous between 40 GB and 80 GB (different bandwidth)
        "V100 SXM2",  # ambiguous between 16 GB and 32 GB
        "NVIDIA A100-SXM4-64GB",  # no such memory size in the table
        "NVIDIA GeForce RTX 4090 D",  # fewer SMs than the RTX 4090
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "NVIDIA H100 80GB HBM2e",  # memory type contradicts the alias
        "AMD Instinct MI300A",
        "AMD Instinct MI325X",
        "NVIDIA GeForce RTX 3090",
        "Quadro RTX 8000",
        "cpu",
        "NVIDIA",
        "",
        "   ",
    ],
)
def test_unknown_or_ambiguous_names_are_none(name):
    assert devices.lookup(name) is None


def test_h100_nvl_is_not_the_sxm_part():
    assert devices.lookup("NVIDIA H100 NVL") is not DEVICES["H100 SXM"]
    with pytest.raises(KeyError):
        devices.get("NVIDIA H100 NVL")


def test_get_lists_close_matches():
    with pytest.raises(KeyError) as info:
        devices.get("H100 SXN")
    message = str(info.value)
    assert "H100 SXN" in message
    assert "close matches" in message
    assert "'H100 SXM'" in message


def test_aliases_are_unique_across_devices():
    seen = {}
    for spec in DEVICES.values():
        for alias in (spec.name, *spec.aliases):
            key = " ".join(alias.casefold().split())
            assert seen.setdefault(key, spec.name) == spec.name, alias


# ---------------------------------------------------------------------------------------------------------------
# peak() and ridge_point()


def test_peak_and_ridge_point():
    h100 = DEVICES["H100 SXM"]
    assert h100.peak("matrix", "bfloat16") == 989e12
    # Ridge point: 989e12 FLOP/s / 3.35e12 B/s = 295.2 FLOP/byte.
    assert h100.ridge_point("matrix", "bfloat16") == pytest.approx(295.2, abs=0.05)
    # FP32 vector: 67e12 / 3.35e12 = 20 FLOP/byte.
    assert h100.ridge_point("vector", "float32") == pytest.approx(20.0)
    # The H200 has the same compute and more bandwidth: 989e12 / 4.8e12 = 206.0 FLOP/byte.
    assert DEVICES["H200 SXM"].ridge_point("matrix", "bfloat16") == pytest.approx(206.04, abs=0.01)
    # A100 SXM 80GB: 312e12 / 2.039e12 = 153.0 FLOP/byte.
    assert DEVICES["A100 SXM 80GB"].ridge_point("matrix", "bfloat16") == pytest.approx(153.0, abs=0.05)


def test_peak_accepts_torch_dtype_spelling():
    class FakeTorchDtype:  # str(torch.bfloat16) == "torch.bfloat16"
        def __str__(self):
            return "torch.bfloat16"

    assert DEVICES["H100 SXM"].peak("matrix", FakeTorchDtype()) == 989e12


def test_missing_peak_names_what_exists():
    v100 = DEVICES["V100 SXM2 16GB"]
    with pytest.raises(KeyError) as info:
        v100.peak("matrix", "bfloat16")
    message = str(info.value)
    assert "V100 SXM2 16GB" in message and "matrix/bfloat16" in message
    assert "matrix/float16" in message and "vector/float32" in message
    with pytest.raises(KeyError):
        v100.ridge_point("matrix", "float8_e4m3fn")


# ---------------------------------------------------------------------------------------------------------------
# Derivations: the published peaks against the chip's structure


# Dense datasheet figures, written out from shared/reference/gpu-datasheet.md (TFLOP/s, TOPS for int8, TB/s): every
# figure the table has must be exactly the published one.
DATASHEET = {
    "H100 SXM": {"vector/float64": 33.5, "vector/float32": 67, "matrix/tfloat32": 494.5, "matrix/bfloat16": 989,
                 "matrix/float16": 989, "matrix/float8_e4m3fn": 1979, "matrix/int8": 1979, "DRAM": 3.35},
    "H100 PCIe": {"vector/float32": 51, "matrix/tfloat32": 378, "matrix/bfloat16": 756, "matrix/float16": 756,
                  "matrix/float8_e4m3fn": 1513, "matrix/int8": 1513, "DRAM": 2.0},
    "H200 SXM": {"vector/float32": 67, "matrix/tfloat32": 494.5, "matrix/bfloat16": 989, "matrix/float16": 989,
                 "matrix/float8_e4m3fn": 1979, "matrix/int8": 1979, "DRAM": 4.8},
    "A100 SXM 80GB": {"vector/float64": 9.7, "matrix/float64": 19.5, "vector/float32": 19.5, "matrix/tfloat32": 156,
                      "matrix/bfloat16": 312, "matrix/int8": 624, "DRAM": 2.039},
    "A100 PCIe 80GB": {"vector/float64": 9.7, "matrix/float64": 19.5, "vector/float32": 19.5,
                       "matrix/tfloat32": 156, "matrix/bfloat16": 312, "matrix/int8": 624, "DRAM": 1.935},
    "L4": {"matrix/tfloat32": 60, "matrix/bfloat16": 121, "matrix/float8_e4m3fn": 242.5, "matrix/int8": 242.5,
           "DRAM": 0.300},
    "L40S": {"vector/float32": 91.6, "matrix/tfloat32": 183, "matrix/bfloat16": 362, "matrix/float8_e4m3fn": 733,
             "matrix/int8": 733, "DRAM": 0.864},
    "RTX 4090": {"vector/float32": 82.6, "matrix/bfloat16": 165, "DRAM": 1.008},
    "B200": {"vector/float32": 80, "matrix/tfloat32": 1125, "matrix/bfloat16": 2250, "matrix/float8_e4m3fn": 4500,
             "matrix/int8": 4500, "DRAM": 8.0},
    "GB200": {"vector/float32": 80, "matrix/tfloat32": 1250, "matrix/bfloat16": 2500, "matrix/float8_e4m3fn": 5000,
              "matrix/int8": 5000, "DRAM": 8.0},
    "V100 SXM2 16GB": {"vector/float64": 7.8, "vector/float32": 15.7, "matrix/float16": 125, "DRAM": 0.900},
    "T4": {"vector/float32": 8.1, "matrix/float16": 65, "matrix/int8": 130, "DRAM": 0.320},
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_table_holds_the_datasheet_figures_exactly(name):
    spec = DEVICES[name]
    for key, value in DATASHEET[name].items():
        exact = float(f"{value}e12")  # the decimal figure itself, not value * 1e12 with its rounding error
        if key == "DRAM":
            assert spec.memory_bandwidth == exact, name
        else:
            unit, dtype = key.split("/")
            assert spec.peak(unit, dtype) == exact, (name, key)


def test_hopper_fp32_vector_derivation():
    # 132 SMs x 128 FP32 lanes x 2 FLOP/FMA x 1.98 GHz (max boost) = 66.91 TFLOP/s; the datasheet rounds to 67.
    derived = 132 * 128 * 2 * 1.98e9
    assert derived == pytest.approx(66.90816e12, rel=1e-12)
    for name in ("H100 SXM", "H200 SXM"):
        spec = DEVICES[name]
        assert spec.sm_count == 132
        assert spec.peak("vector", "float32") == 67e12
        assert round(derived / 1e12) == spec.peak("vector", "float32") / 1e12


def test_hopper_bf16_tensor_derivation():
    # 132 SMs x 2048 dense FP16 FMA/clk/SM (4 tensor cores x 512) x 2 x 1.83 GHz = 989.43 TFLOP/s, published as 989;
    # TF32 is half of that (494.71, published 494.5), FP8 and INT8 twice (1978.86, published 1979).
    for name in ("H100 SXM", "H200 SXM"):
        spec = DEVICES[name]
        assert spec.sm_count == 132 and spec.boost_clock_hz == 1.83e9
        derived = spec.sm_count * 2048 * 2 * spec.boost_clock_hz
        assert derived == pytest.approx(989.42976e12, rel=1e-12)
        assert spec.peak("matrix", "bfloat16") == 989e12 == round(derived / 1e12) * 1e12
        assert abs(spec.peak("matrix", "tfloat32") - derived / 2) <= 0.5e12
        assert spec.peak("matrix", "float8_e4m3fn") == 1979e12 == round(2 * derived / 1e12) * 1e12


def test_a100_tensor_and_vector_derivation():
    spec = DEVICES["A100 SXM 80GB"]
    # 108 SMs x 1024 dense FP16 FMA/clk/SM (4 tensor cores x 256) x 2 x 1.41 GHz = 311.87 TFLOP/s, published 312.
    derived = 108 * 1024 * 2 * 1.41e9
    assert derived == pytest.approx(311.86944e12, rel=1e-12)
    assert spec.sm_count == 108 and spec.boost_clock_hz == 1.41e9
    assert spec.peak("matrix", "bfloat16") == 312e12 == round(derived / 1e12) * 1e12
    # 108 SMs x 64 FP32 lanes x 2 x 1.41 GHz = 19.49 TFLOP/s, published 19.5.
    assert 108 * 64 * 2 * 1.41e9 == pytest.approx(19.49184e12, rel=1e-12)
    assert spec.peak("vector", "float32") == 19.5e12 == round(108 * 64 * 2 * 1.41e9 / 1e11) * 1e11


def test_v100_and_t4_derivations():
    v100 = DEVICES["V100 SXM2 16GB"]
    # 80 SMs x 64 FP32 lanes x 2 x 1.53 GHz = 15.7 TFLOP/s.
    assert v100.peak("vector", "float32") == pytest.approx(80 * 64 * 2 * 1.53e9, rel=0.01)
    # 80 SMs x 8 tensor cores x 64 FMA/clk x 2 x 1.53 GHz = 125.3 TFLOP/s.
    assert v100.peak("matrix", "float16") == pytest.approx(80 * 8 * 64 * 2 * 1.53e9, rel=0.01)
    t4 = DEVICES["T4"]
    # 40 SMs x 64 FP32 lanes x 2 x 1.59 GHz = 8.1 TFLOP/s.
    assert t4.peak("vector", "float32") == pytest.approx(40 * 64 * 2 * 1.59e9, rel=0.01)
    # 40 SMs x 8 tensor cores x 64 FMA/clk x 2 x 1.59 GHz = 65.1 TFLOP/s.
    assert t4.peak("matrix", "float16") == pytest.approx(40 * 8 * 64 * 2 * 1.59e9, rel=0.01)


def test_rtx_4090_uses_fp32_accumulate_rate():
    spec = DEVICES["RTX 4090"]
    # 128 SMs x 128 FP32 lanes x 2 x 2.52 GHz = 82.6 TFLOP/s.
    assert spec.peak("vector", "float32") == pytest.approx(128 * 128 * 2 * 2.52e9, rel=0.01)
    # FP32-accumulate tensor rate: 128 SMs x 256 FMA/clk x 2 x 2.52 GHz = 165.2 TFLOP/s (FP16 accumulate: 330).
    assert spec.peak("matrix", "bfloat16") == pytest.approx(128 * 256 * 2 * 2.52e9, rel=0.01)
    assert spec.peak("matrix", "float16") < 200e12
    assert "FP32 accumulate" in spec.source(("matrix", "float16"))


def test_mi300x_derivations():
    spec = DEVICES["MI300X"]
    # 304 CUs x FLOP/clk/CU x 2.1 GHz (AMD's per-CU rates): FP64 vector 128, FP32 vector 256, BF16 matrix 2048.
    assert spec.peak("vector", "float64") == pytest.approx(304 * 128 * 2.1e9, rel=1e-3)
    assert spec.peak("vector", "float32") == pytest.approx(304 * 256 * 2.1e9, rel=1e-3)
    assert spec.peak("matrix", "bfloat16") == pytest.approx(304 * 2048 * 2.1e9, rel=1e-3)
    assert spec.peak("matrix", "float8_e4m3fnuz") == pytest.approx(304 * 4096 * 2.1e9, rel=1e-3)
    assert ("matrix", "float8_e4m3fn") not in spec.peaks  # CDNA3 runs the FNUZ FP8 variants


def test_h100_sxm_and_pcie_clocks_differ():
    sxm, pcie = DEVICES["H100 SXM"], DEVICES["H100 PCIe"]
    assert pcie.peak("matrix", "bfloat16") < sxm.peak("matrix", "bfloat16")
    assert pcie.sm_count == 114 and sxm.sm_count == 132
    assert pcie.boost_clock_hz != sxm.boost_clock_hz  # None: not confirmed, and never copied from the SXM part


def test_memory_variants_share_compute():
    assert DEVICES["A100 SXM 40GB"].peaks == DEVICES["A100 SXM 80GB"].peaks
    assert DEVICES["A100 SXM 40GB"].memory_bandwidth < DEVICES["A100 SXM 80GB"].memory_bandwidth
    assert DEVICES["A100 PCIe 40GB"].peaks == DEVICES["A100 PCIe 80GB"].peaks
    assert DEVICES["V100 SXM2 32GB"].peaks == DEVICES["V100 SXM2 16GB"].peaks
    assert DEVICES["V100 SXM2 32GB"].memory_bytes == 2 * DEVICES["V100 SXM2 16GB"].memory_bytes


# ---------------------------------------------------------------------------------------------------------------
# Consistency invariants across the table


def test_matrix_bf16_at_least_vector_fp32():
    for name, spec in DEVICES.items():
        for dtype in ("bfloat16", "float16"):
            if ("matrix", dtype) in spec.peaks and ("vector", "float32") in spec.peaks:
                assert spec.peaks[("matrix", dtype)] >= spec.peaks[("vector", "float32")], (name, dtype)


def test_bf16_equals_fp16_where_both_listed():
    for name, spec in DEVICES.items():
        if ("matrix", "bfloat16") in spec.peaks and ("matrix", "float16") in spec.peaks:
            assert spec.peaks[("matrix", "bfloat16")] == spec.peaks[("matrix", "float16")], name


def test_tf32_is_half_of_bf16_on_nvidia_tensor_cores():
    for name, spec in DEVICES.items():
        if spec.vendor == "NVIDIA" and ("matrix", "tfloat32") in spec.peaks:
            ratio = spec.peaks[("matrix", "bfloat16")] / spec.peaks[("matrix", "tfloat32")]
            assert ratio == pytest.approx(2.0, rel=0.02), name


def test_fp8_is_twice_bf16_on_hopper_and_blackwell():
    for name in ("H100 SXM", "H100 PCIe", "H200 SXM", "B200", "GB200"):
        spec = DEVICES[name]
        assert spec.peak("matrix", "float8_e4m3fn") == pytest.approx(2 * spec.peak("matrix", "bfloat16"), rel=1e-3)
        assert spec.peak("matrix", "float8_e5m2") == spec.peak("matrix", "float8_e4m3fn")


def test_int8_equals_fp8_where_both_listed():
    for name, spec in DEVICES.items():
        fp8 = _fp8(spec)
        if fp8 is not None and ("matrix", "int8") in spec.peaks:
            assert spec.peaks[("matrix", "int8")] == fp8, name


def test_matrix_fp64_at_least_vector_fp64():
    for name, spec in DEVICES.items():
        if ("matrix", "float64") in spec.peaks:
            assert spec.peaks[("matrix", "float64")] >= spec.peaks[("vector", "float64")], name


def test_no_fp8_before_hopper_and_ada():
    for name in ("A100 SXM 80GB", "A100 PCIe 80GB", "V100 SXM2 16GB", "T4"):
        assert _fp8(DEVICES[name]) is None, name


def test_peaks_are_dense_not_sparse():
    # Sparse figures are twice the dense ones; a dense H100 SXM bf16 peak above 1000 TFLOP/s would be a sparse one.
    assert DEVICES["H100 SXM"].peak("matrix", "bfloat16") < 1000 * T
    assert DEVICES["A100 SXM 80GB"].peak("matrix", "bfloat16") < 400 * T
    assert DEVICES["L40S"].peak("matrix", "float8_e4m3fn") < 1000 * T
    assert DEVICES["B200"].peak("matrix", "bfloat16") < 3000 * T


def test_ridge_points_are_sane():
    for name, spec in DEVICES.items():
        for unit, dtype in spec.peaks:
            ridge = spec.ridge_point(unit, dtype)
            assert math.isfinite(ridge) and 1 < ridge < 2000, (name, unit, dtype, ridge)


# ---------------------------------------------------------------------------------------------------------------
# The documentation table


def _between(text, marker):
    begin, end = f"<!-- {marker}:begin -->\n", f"<!-- {marker}:end -->"
    assert begin in text and end in text, marker
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_doc_lists_every_device():
    text = DOC.read_text(encoding="utf-8")
    for name in DEVICES:
        assert f"| {name} |" in text, name


def test_doc_table_and_sources_match_the_data():
    # Regenerate with: python -m roofline.render._devices_table
    text = DOC.read_text(encoding="utf-8")
    assert _between(text, "devices-table") == _devices_table.table()
    assert _between(text, "devices-sources") == _devices_table.sources()
