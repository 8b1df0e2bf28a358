"""Datasheet specifications of known GPUs: the fallback ceilings of the roofline.

Each :class:`DeviceSpec` holds the vendor's published peak throughput per (unit, dtype), the DRAM bandwidth, and a
few structural figures (SM count, boost clock, L2 size, memory size). Every figure carries the document it was
taken from in ``sources``. A figure that could not be traced to a vendor document is absent (``None`` or a missing
``peaks`` key), never estimated.

Conventions (see also docs/devices.md):

- ``peaks`` maps ``(unit, dtype)`` to FLOP/s (OP/s for ``int8``). ``unit`` is ``"vector"`` (CUDA cores / SIMD
  lanes) or ``"matrix"`` (tensor / matrix cores). ``dtype`` uses torch's names: ``"float64"``, ``"float32"``,
  ``"tfloat32"`` (a float32 matmul run on tensor cores), ``"bfloat16"``, ``"float16"``, ``"float8_e4m3fn"``,
  ``"float8_e5m2"``, ``"int8"``, plus ``"float8_e4m3fnuz"`` / ``"float8_e5m2fnuz"`` for the FP8 variants of
  AMD CDNA3, which has no OCP FP8.
- Peaks are **dense**. Where a vendor quotes "with sparsity" (2:4 structured) figures, the table holds half.
- 16-bit and 8-bit matrix peaks are the **FP32-accumulate** rate. On most data-centre parts FP16 and FP32
  accumulation run at the same rate; on GeForce parts (RTX 4090) FP32 accumulation runs at half the FP16-accumulate
  rate, and the table holds the FP32-accumulate figure because that is what PyTorch matmuls use.
- ``boost_clock_hz`` is the clock the tensor figures assume, which can be lower than the maximum boost clock
  (H100 SXM: tensor figures at 1830 MHz, vector figures at the 1980 MHz maximum); ``notes`` says where.
- ``memory_bandwidth`` is the vendor's peak DRAM bandwidth in bytes/s (decimal: 3.35 TB/s = 3.35e12).
- ``l2_bytes`` and ``memory_bytes``: vendor "MB"/"GB" capacities are binary in hardware and in what the CUDA driver
  reports (H100 L2 = 50 MiB), so the table stores them as MiB/GiB multiples. The usable memory the driver reports is
  a little lower than the nominal capacity.

This module imports only the standard library; it does not need ``roofline._core``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any

from roofline._datamodel._units import PEAK_DTYPES as DTYPES, UNITS

__all__ = [
    "DTYPES",
    "DEVICES",
    "UNITS",
    "DeviceSpec",
    "get",
    "lookup",
    "names",
]


# Scalar fields that hold a figure and therefore need a source when present.
_FIGURE_FIELDS = ("sm_count", "boost_clock_hz", "l2_bytes", "memory_bandwidth", "memory_bytes",
                  "interconnect_bandwidth")

_MiB = 1 << 20
_GiB = 1 << 30
_T = 1e12


def _peak_key(unit: str, dtype: str) -> str:
    return f"peaks.{unit}.{dtype}"


def _dtype_name(dtype: Any) -> str:
    """Accept ``"bfloat16"`` or ``torch.bfloat16`` (whose str is ``"torch.bfloat16"``) without importing torch."""
    name = str(dtype)
    return name[len("torch.") :] if name.startswith("torch.") else name


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Datasheet figures of one device. Immutable; ``peaks`` and ``sources`` are read-only mappings.

    ``sources`` maps a field name (``"sm_count"``, ``"memory_bandwidth"``, ...) or a peak key
    (``"peaks.matrix.bfloat16"``) to the document the figure comes from. Construction fails if any figure lacks one.
    """

    name: str
    vendor: str
    aliases: tuple[str, ...] = ()
    sm_count: int | None = None
    boost_clock_hz: float | None = None
    l2_bytes: int | None = None
    memory_bandwidth: float | None = None
    memory_bytes: int | None = None
    peaks: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    notes: str = ""
    # GPU-to-GPU link: its name and the vendor's per-GPU bandwidth in bytes/s, per direction (half the
    # bidirectional figure vendors quote), the figure nccl-tests' bus bandwidth is compared with
    interconnect: str | None = None
    interconnect_bandwidth: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "aliases", tuple(self.aliases))
        peaks = dict(self.peaks)
        for key, value in peaks.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"{self.name}: peak key {key!r} is not a (unit, dtype) pair")
            unit, dtype = key
            if unit not in UNITS:
                raise ValueError(f"{self.name}: unknown unit {unit!r} (expected one of {UNITS})")
            if dtype not in DTYPES:
                raise ValueError(f"{self.name}: unknown dtype {dtype!r} (expected one of {DTYPES})")
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{self.name}: peak {unit}/{dtype} must be a positive number, got {value!r}")
            peaks[key] = float(value)
        sources = dict(self.sources)
        missing = [f for f in _FIGURE_FIELDS if getattr(self, f) is not None and not sources.get(f)]
        missing += [_peak_key(u, d) for (u, d) in peaks if not sources.get(_peak_key(u, d))]
        if missing:
            raise ValueError(f"{self.name}: figures without a source: {', '.join(missing)}")
        object.__setattr__(self, "peaks", types.MappingProxyType(peaks))
        object.__setattr__(self, "sources", types.MappingProxyType(sources))

    def __hash__(self) -> int:
        return hash(self.name)

    def peak(self, unit: str, dtype: Any) -> float:
        """Dense peak of ``unit`` ("vector" or "matrix") for ``dtype``, in FLOP/s (OP/s for int8).

        Raises KeyError naming the (unit, dtype) pairs this device does have when the pair is not in the table.
        """
        dtype = _dtype_name(dtype)
        try:
            return self.peaks[(unit, dtype)]
        except KeyError:
            have = ", ".join(f"{u}/{d}" for (u, d) in self.peaks) or "none"
            raise KeyError(f"{self.name} has no datasheet peak for {unit}/{dtype}; it has: {have}") from None

    def ridge_point(self, unit: str, dtype: Any) -> float:
        """Arithmetic intensity (FLOP per byte of DRAM traffic) where the roofline turns: peak / memory_bandwidth."""
        peak = self.peak(unit, dtype)
        if not self.memory_bandwidth:
            raise KeyError(f"{self.name} has no datasheet memory bandwidth")
        return peak / self.memory_bandwidth

    def source(self, what: str | tuple[str, str]) -> str:
        """The source of a figure: a field name, or a ``(unit, dtype)`` peak key."""
        key = _peak_key(*what) if isinstance(what, tuple) else what
        return self.sources[key]


# ---------------------------------------------------------------------------------------------------------------
# Sources. Each string names the vendor document (and its address) a figure is published in.

_SPARSE_HALVED = "; dense = half the 'with sparsity' figure"

_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/"
_HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper, https://resources.nvidia.com/en-us-tensor-core"
_HOPPER_CLOCK = (
    _HOPPER_WP + "; 1830 MHz is the clock at which 132 SMs x 2048 dense FP16 FMA/clk/SM x 2 give the published "
    "989.4 TFLOP/s (the vector figures use the 1980 MHz maximum boost)"
)
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/"
_H200_CONFIG = _HOPPER_WP + " (H100 SXM5 configuration, which the H200 shares)"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/a100/"
_AMPERE_WP = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper, "
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf"
)
_L4_DS = "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/"
_L4_PB = "NVIDIA L4 Tensor Core GPU product brief"
_L40S_DS = "NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/"
_ADA_WP = (
    "NVIDIA Ada GPU Architecture whitepaper (GeForce RTX 4090 column), "
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
)
_RTXPRO_DS = (
    "NVIDIA RTX PRO 6000 Blackwell datasheet, "
    "https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/"
)
_RTX_BLACKWELL_WP = "NVIDIA RTX Blackwell GPU Architecture whitepaper"
_HGX_B200 = "NVIDIA HGX B200 specifications (8-GPU figures / 8), https://www.nvidia.com/en-us/data-center/hgx/"
_DGX_B200 = "NVIDIA DGX B200 datasheet (8-GPU figures / 8), https://www.nvidia.com/en-us/data-center/dgx-b200/"
_GB200_DS = "NVIDIA GB200 NVL72 specifications (per GPU), https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_BLACKWELL_BRIEF = (
    "NVIDIA Blackwell Architecture Technical Brief, https://resources.nvidia.com/en-us-blackwell-architecture"
)
_SECONDARY = (
    "GPU reference sheet compiled for this project from public NVIDIA material (secondary: the vendor document "
    "publishing this figure was not identified)"
)
_V100_DS = (
    "NVIDIA Tesla V100 GPU datasheet, "
    "https://images.nvidia.com/content/technologies/volta/pdf/tesla-volta-v100-datasheet-letter-fnl-web.pdf"
)
_VOLTA_WP = (
    "NVIDIA Tesla V100 GPU Architecture whitepaper, "
    "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf"
)
_T4_DS = "NVIDIA T4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/tesla-t4/"
_TURING_WP = (
    "NVIDIA Turing GPU Architecture whitepaper (Tesla T4 column), "
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/turing-architecture/"
    "NVIDIA-Turing-Architecture-Whitepaper.pdf"
)
_MI300X_DS = (
    "AMD Instinct MI300X data sheet, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
    "data-sheets/amd-instinct-mi300x-data-sheet.pdf"
)
_MI300_ARCH = (
    "AMD ROCm documentation, AMD Instinct MI300 series microarchitecture (peak-performance table), "
    "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html"
)
_ROCM_SPECS = (
    "AMD ROCm documentation, GPU hardware specifications, "
    "https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html"
)

_MI250X_DS = (
    "AMD Instinct MI250X data sheet, https://www.amd.com/content/dam/amd/en/documents/instinct-business-docs/"
    "product-briefs/instinct-mi250x-datasheet.pdf"
)
_MI250_ARCH = (
    "AMD ROCm documentation, AMD Instinct MI250 microarchitecture, "
    "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html"
)
_PER_GCD = " (package figure / 2: one of the two GCDs, which the driver lists as one device)"
_MI355X_DS = (
    "AMD Instinct MI355X data sheet, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
    "product-briefs/amd-instinct-mi355x-gpu-brochure.pdf"
)
_CDNA4_WP = (
    "AMD CDNA 4 architecture white paper, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
    "white-papers/amd-cdna-4-architecture-whitepaper.pdf"
)

_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _spec(
    name: str,
    vendor: str,
    aliases: Iterable[str],
    figures: Mapping[str, tuple[Any, str]],
    peaks: Mapping[tuple[str, str | tuple[str, ...]], tuple[float, str]],
    notes: str = "",
) -> DeviceSpec:
    """Build a spec from ``{field: (value, source)}`` and ``{(unit, dtype or dtypes): (flops, source)}``."""
    kwargs: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field_name, (value, source) in figures.items():
        kwargs[field_name] = value
        sources[field_name] = source
    flat: dict[tuple[str, str], float] = {}
    for (unit, dtypes), (value, source) in peaks.items():
        for dtype in (dtypes,) if isinstance(dtypes, str) else dtypes:
            flat[(unit, dtype)] = value
            sources[_peak_key(unit, dtype)] = source
    return DeviceSpec(
        name=name, vendor=vendor, aliases=tuple(aliases), peaks=flat, sources=sources, notes=notes, **kwargs
    )


def _variant(base: DeviceSpec, name: str, aliases: Iterable[str], notes: str, **changes: tuple[Any, str]) -> DeviceSpec:
    """A memory variant of ``base``: same compute, some fields replaced as ``field=(value, source)``."""
    sources = dict(base.sources)
    values: dict[str, Any] = {}
    for field_name, (value, source) in changes.items():
        values[field_name] = value
        sources[field_name] = source
    return dataclasses.replace(base, name=name, aliases=tuple(aliases), sources=sources, notes=notes, **values)


# ---------------------------------------------------------------------------------------------------------------
# The table.

_HOPPER_TENSOR = {
    ("matrix", "float64"): (67 * _T, _H100_DS),
    ("matrix", "tfloat32"): (494.5 * _T, _H100_DS + _SPARSE_HALVED),
    ("matrix", ("bfloat16", "float16")): (989 * _T, _H100_DS + _SPARSE_HALVED),
    ("matrix", _FP8): (1979 * _T, _H100_DS + _SPARSE_HALVED),
    ("matrix", "int8"): (1979 * _T, _H100_DS + _SPARSE_HALVED),
}

H100_SXM = _spec(
    "H100 SXM",
    "NVIDIA",
    ["NVIDIA H100 80GB HBM3", "H100 SXM5", "H100 SXM5 80GB", "NVIDIA H100 SXM5 80GB"],
    {
        "sm_count": (132, _HOPPER_WP),
        "boost_clock_hz": (1.83e9, _HOPPER_CLOCK),
        "l2_bytes": (50 * _MiB, _HOPPER_WP),
        "memory_bandwidth": (3.35e12, _H100_DS),
        "memory_bytes": (80 * _GiB, _H100_DS),
    },
    {
        ("vector", "float64"): (33.5 * _T, _H100_DS + " (34 TFLOP/s rounded; 132 SMs x 64 FP64 lanes x 2 x 1.98 GHz)"),
        ("vector", "float32"): (67 * _T, _H100_DS),
        **_HOPPER_TENSOR,
    },
    notes="Tensor figures assume 1830 MHz; FP32/FP64 vector figures assume the 1980 MHz maximum boost "
    "(132 SMs x 128 FP32 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s).",
)

H100_PCIE = _spec(
    "H100 PCIe",
    "NVIDIA",
    ["NVIDIA H100 PCIe", "H100 PCIe 80GB", "NVIDIA H100 PCIe 80GB"],
    {
        "sm_count": (114, _HOPPER_WP),
        "l2_bytes": (50 * _MiB, _HOPPER_WP),
        "memory_bandwidth": (2.0e12, _H100_DS),
        "memory_bytes": (80 * _GiB, _H100_DS),
    },
    {
        ("vector", "float32"): (51 * _T, _H100_DS),
        ("matrix", "tfloat32"): (378 * _T, _H100_DS + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (756 * _T, _H100_DS + _SPARSE_HALVED),
        ("matrix", _FP8): (1513 * _T, _H100_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (1513 * _T, _H100_DS + _SPARSE_HALVED),
    },
    notes="Lower clocks than the SXM part (350 W). Boost clock and FP64 figures are left out: they were not "
    "confirmed against a vendor document for this table. Not the same device as the H100 NVL, which this table "
    "does not list.",
)

H200 = _spec(
    "H200 SXM",
    "NVIDIA",
    ["NVIDIA H200", "H200", "NVIDIA H200 141GB HBM3e", "H200 SXM 141GB"],
    {
        "sm_count": (132, _H200_CONFIG),
        "boost_clock_hz": (1.83e9, _HOPPER_CLOCK),
        "l2_bytes": (50 * _MiB, _H200_CONFIG),
        "memory_bandwidth": (4.8e12, _H200_DS),
        "memory_bytes": (141 * _GiB, _H200_DS),
    },
    {
        ("vector", "float32"): (67 * _T, _H200_DS),
        ("matrix", "tfloat32"): (494.5 * _T, _H200_DS + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (989 * _T, _H200_DS + _SPARSE_HALVED),
        ("matrix", _FP8): (1979 * _T, _H200_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (1979 * _T, _H200_DS + _SPARSE_HALVED),
    },
    notes="Same GH100 compute configuration as the H100 SXM with 141 GB of HBM3e at 4.8 TB/s. FP64 figures are "
    "left out: they were not confirmed against a vendor document for this table.",
)

_AMPERE_PEAKS = {
    ("vector", "float64"): (9.7 * _T, _A100_DS),
    ("matrix", "float64"): (19.5 * _T, _A100_DS),
    ("vector", "float32"): (19.5 * _T, _A100_DS),
    ("matrix", "tfloat32"): (156 * _T, _A100_DS + _SPARSE_HALVED),
    ("matrix", ("bfloat16", "float16")): (312 * _T, _A100_DS + _SPARSE_HALVED),
    ("matrix", "int8"): (624 * _T, _A100_DS + _SPARSE_HALVED),
}
_AMPERE_FIGURES = {
    "sm_count": (108, _AMPERE_WP),
    "boost_clock_hz": (1.41e9, _AMPERE_WP),
    "l2_bytes": (40 * _MiB, _AMPERE_WP),
}

A100_SXM = _spec(
    "A100 SXM 80GB",
    "NVIDIA",
    ["NVIDIA A100-SXM4-80GB", "A100 SXM", "A100 SXM4 80GB", "A100-SXM4-80GB"],
    {**_AMPERE_FIGURES, "memory_bandwidth": (2.039e12, _A100_DS), "memory_bytes": (80 * _GiB, _A100_DS)},
    _AMPERE_PEAKS,
    notes="No FP8 support (Ampere).",
)

A100_SXM_40GB = _variant(
    A100_SXM,
    "A100 SXM 40GB",
    ["NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB", "A100-SXM4-40GB"],
    "Same compute as the 80 GB part; 40 GB of HBM2 at 1555 GB/s. No FP8 support (Ampere).",
    memory_bandwidth=(1.555e12, _A100_DS + " (A100 40GB SXM column)"),
    memory_bytes=(40 * _GiB, _A100_DS + " (A100 40GB SXM column)"),
)

A100_PCIE = _spec(
    "A100 PCIe 80GB",
    "NVIDIA",
    ["NVIDIA A100 80GB PCIe", "A100 PCIe", "A100 PCIe 80GB", "NVIDIA A100-PCIE-80GB"],
    {**_AMPERE_FIGURES, "memory_bandwidth": (1.935e12, _A100_DS), "memory_bytes": (80 * _GiB, _A100_DS)},
    _AMPERE_PEAKS,
    notes="The datasheet gives the PCIe part the same peak compute as the SXM part, at a lower power limit, so "
    "sustained clocks are lower in practice. No FP8 support (Ampere).",
)

A100_PCIE_40GB = _variant(
    A100_PCIE,
    "A100 PCIe 40GB",
    ["NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"],
    "Same compute as the 80 GB part; 40 GB of HBM2 at 1555 GB/s. No FP8 support (Ampere).",
    memory_bandwidth=(1.555e12, _A100_DS + " (A100 40GB PCIe column)"),
    memory_bytes=(40 * _GiB, _A100_DS + " (A100 40GB PCIe column)"),
)

B200 = _spec(
    "B200",
    "NVIDIA",
    ["NVIDIA B200", "B200 SXM", "NVIDIA B200 SXM"],
    {
        "memory_bandwidth": (8.0e12, _DGX_B200),
        "memory_bytes": (180 * _GiB, _DGX_B200),
    },
    {
        ("vector", "float32"): (80 * _T, _BLACKWELL_BRIEF + " (HGX B200)"),
        ("matrix", "tfloat32"): (1125 * _T, _HGX_B200 + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (2250 * _T, _HGX_B200 + _SPARSE_HALVED),
        ("matrix", _FP8): (4500 * _T, _DGX_B200 + _SPARSE_HALVED),
        ("matrix", "int8"): (4500 * _T, _HGX_B200 + _SPARSE_HALVED),
    },
    notes="NVIDIA publishes B200 figures per 8-GPU HGX/DGX system; per-GPU values are those divided by 8. "
    "SM count, L2 size and FP64 figures are left out (not confirmed against a vendor document for this table), and "
    "so is the boost clock: without a published SM count the clock the tensor figures assume cannot be derived, and "
    "the 1965 MHz sometimes quoted is not it. 8 TB/s is the datasheet bandwidth; users have reported a narrower "
    "driver-reported memory bus (about 7.7 TB/s), so measure before relying on it.",
)

GB200 = _spec(
    "GB200",
    "NVIDIA",
    ["NVIDIA GB200", "GB200 (per GPU)"],
    {
        "boost_clock_hz": (2.062e9, _SECONDARY),
        "l2_bytes": (126 * _MiB, _SECONDARY),
        "memory_bandwidth": (8.0e12, _GB200_DS),
    },
    {
        ("vector", "float32"): (80 * _T, _GB200_DS),
        ("matrix", "tfloat32"): (1250 * _T, _GB200_DS + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (2500 * _T, _GB200_DS + _SPARSE_HALVED),
        ("matrix", _FP8): (5000 * _T, _GB200_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (5000 * _T, _GB200_DS + _SPARSE_HALVED),
    },
    notes="Per Blackwell GPU of a GB200 superchip (one Grace CPU, two GPUs); it runs at higher clocks and power "
    "than a standalone B200. FP32 is the NVL72 rack figure per GPU (80 TFLOP/s); the Blackwell technical brief "
    "quotes a higher FP32 rate for the GB200 configuration. SM count, memory size and FP64 figures are left out "
    "(not confirmed against a vendor document for this table).",
)

L4 = _spec(
    "L4",
    "NVIDIA",
    ["NVIDIA L4"],
    {
        "boost_clock_hz": (2.04e9, _L4_PB),
        "l2_bytes": (48 * _MiB, _L4_PB),
        "memory_bandwidth": (0.300e12, _L4_DS),
        "memory_bytes": (24 * _GiB, _L4_DS),
    },
    {
        ("matrix", "tfloat32"): (60 * _T, _L4_DS + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (121 * _T, _L4_DS + _SPARSE_HALVED),
        ("matrix", _FP8): (242.5 * _T, _L4_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (242.5 * _T, _L4_DS + _SPARSE_HALVED),
    },
    notes="Ada Lovelace (AD104), 72 W. The FP32 vector peak, FP64 peak and SM count are left out: they were not "
    "confirmed against a vendor document for this table (third-party listings disagree on the SM count).",
)

L40S = _spec(
    "L40S",
    "NVIDIA",
    ["NVIDIA L40S"],
    {
        "sm_count": (142, _L40S_DS + " (18,176 CUDA cores = 142 SMs x 128)"),
        "memory_bandwidth": (0.864e12, _L40S_DS),
        "memory_bytes": (48 * _GiB, _L40S_DS),
    },
    {
        ("vector", "float32"): (91.6 * _T, _L40S_DS),
        ("matrix", "tfloat32"): (183 * _T, _L40S_DS + _SPARSE_HALVED),
        ("matrix", ("bfloat16", "float16")): (362 * _T, _L40S_DS + " (dense figure as published)"),
        ("matrix", _FP8): (733 * _T, _L40S_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (733 * _T, _L40S_DS + _SPARSE_HALVED),
    },
    notes="Ada Lovelace (AD102). Boost clock, L2 size and FP64 figures are left out: they were not confirmed "
    "against a vendor document for this table.",
)

RTX_4090 = _spec(
    "RTX 4090",
    "NVIDIA",
    ["NVIDIA GeForce RTX 4090", "GeForce RTX 4090"],
    {
        "sm_count": (128, _ADA_WP),
        "boost_clock_hz": (2.52e9, _ADA_WP),
        "l2_bytes": (72 * _MiB, _ADA_WP),
        "memory_bandwidth": (1.008e12, _ADA_WP),
        "memory_bytes": (24 * _GiB, _ADA_WP),
    },
    {
        ("vector", "float32"): (82.6 * _T, _ADA_WP),
        ("matrix", ("bfloat16", "float16")): (165 * _T, _ADA_WP + " (FP32 accumulate; 330 with FP16 accumulate)"),
    },
    notes="GeForce part: FP16/BF16 tensor throughput with FP32 accumulation (what PyTorch matmuls use) is half "
    "the FP16-accumulate rate; the table holds the FP32-accumulate 165 TFLOP/s, not 330. TF32, FP8, INT8 and FP64 "
    "figures are left out: they were not confirmed against a vendor document for this table. The RTX 4090 D "
    "(fewer SMs) is a different device.",
)

RTX_PRO_6000 = _spec(
    "RTX PRO 6000 Blackwell",
    "NVIDIA",
    [
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "RTX PRO 6000 Blackwell",
    ],
    {
        "sm_count": (188, _RTX_BLACKWELL_WP),
        "boost_clock_hz": (2.6e9, _RTX_BLACKWELL_WP + " (about 2.6 GHz)"),
        "l2_bytes": (128 * _MiB, _RTX_BLACKWELL_WP),
        "memory_bandwidth": (1.792e12, _RTXPRO_DS),
        "memory_bytes": (96 * _GiB, _RTXPRO_DS),
    },
    {("vector", "float32"): (125 * _T, _RTXPRO_DS + " (about 125 TFLOP/s)")},
    notes="Blackwell (GB202), 96 GB GDDR7. The Server and Workstation editions share these figures; the Max-Q "
    "Workstation Edition (lower power) is not listed. Clock and FP32 peak are approximate (published as ~2.6 GHz, "
    "~125 TFLOP/s). Tensor and FP64 peaks are left out: they were not confirmed against a vendor document for "
    "this table.",
)

V100_SXM2_16GB = _spec(
    "V100 SXM2 16GB",
    "NVIDIA",
    ["Tesla V100-SXM2-16GB", "V100-SXM2-16GB"],
    {
        "sm_count": (80, _VOLTA_WP),
        "boost_clock_hz": (1.53e9, _VOLTA_WP),
        "l2_bytes": (6 * _MiB, _VOLTA_WP),
        "memory_bandwidth": (0.900e12, _V100_DS),
        "memory_bytes": (16 * _GiB, _V100_DS),
    },
    {
        ("vector", "float64"): (7.8 * _T, _V100_DS),
        ("vector", "float32"): (15.7 * _T, _V100_DS),
        ("matrix", "float16"): (125 * _T, _V100_DS),
    },
    notes="Volta tensor cores run FP16 only: no BF16, TF32, FP8 or INT8 tensor path.",
)

V100_SXM2_32GB = _variant(
    V100_SXM2_16GB,
    "V100 SXM2 32GB",
    ["Tesla V100-SXM2-32GB", "V100-SXM2-32GB"],
    "Same compute as the 16 GB part. Volta tensor cores run FP16 only: no BF16, TF32, FP8 or INT8 tensor path.",
    memory_bytes=(32 * _GiB, _V100_DS),
)

T4 = _spec(
    "T4",
    "NVIDIA",
    ["Tesla T4", "NVIDIA T4"],
    {
        "sm_count": (40, _TURING_WP),
        "boost_clock_hz": (1.59e9, _TURING_WP),
        "l2_bytes": (4 * _MiB, _TURING_WP),
        "memory_bandwidth": (0.320e12, _T4_DS),
        "memory_bytes": (16 * _GiB, _T4_DS),
    },
    {
        ("vector", "float32"): (8.1 * _T, _T4_DS),
        ("matrix", "float16"): (65 * _T, _T4_DS + " (mixed precision FP16/FP32)"),
        ("matrix", "int8"): (130 * _T, _T4_DS),
    },
    notes="Turing, 70 W: sustained clocks under load are usually well below the boost clock. No BF16, TF32 or FP8 "
    "tensor path. The FP64 peak is left out: it was not confirmed against a vendor document for this table.",
)

MI300X = _spec(
    "MI300X",
    "AMD",
    ["AMD Instinct MI300X", "Instinct MI300X"],
    {
        "sm_count": (304, _ROCM_SPECS + " (compute units)"),
        "boost_clock_hz": (2.1e9, _MI300X_DS + " (peak engine clock)"),
        "l2_bytes": (32 * _MiB, _ROCM_SPECS + " (4 MB per XCD x 8)"),
        "memory_bandwidth": (5.3e12, _MI300_ARCH),
        "memory_bytes": (192 * _GiB, _ROCM_SPECS),
    },
    {
        ("vector", "float64"): (81.7 * _T, _MI300_ARCH),
        ("matrix", "float64"): (163.4 * _T, _MI300_ARCH),
        ("vector", "float32"): (163.4 * _T, _MI300_ARCH),
        ("matrix", "float32"): (163.4 * _T, _MI300_ARCH),
        ("matrix", "tfloat32"): (653.7 * _T, _MI300_ARCH),
        ("matrix", ("bfloat16", "float16")): (1307.4 * _T, _MI300_ARCH),
        ("matrix", ("float8_e4m3fnuz", "float8_e5m2fnuz")): (2614.9 * _T, _MI300_ARCH),
        ("matrix", "int8"): (2614.9 * _T, _MI300_ARCH),
    },
    notes="CDNA3. sm_count holds compute units (CUs). Its FP8 formats are the FNUZ variants "
    "(torch.float8_e4m3fnuz / float8_e5m2fnuz), not OCP FP8. Besides the 32 MB L2 there is a 256 MB Infinity "
    "Cache (last-level cache, per the ROCm specifications).",
)

# One GCD of an MI250X: what a trace's deviceProperties and torch.cuda.get_device_name() name "AMD Instinct MI250X"
# (the package holds two GCDs, each a device of its own with half the package's units, memory and bandwidth).
MI250X = _spec(
    "MI250X",
    "AMD",
    ["AMD Instinct MI250X", "Instinct MI250X", "MI250X GCD"],
    {
        "sm_count": (110, _MI250X_DS + " (220 compute units)" + _PER_GCD),
        "boost_clock_hz": (1.7e9, _MI250X_DS + " (peak engine clock)"),
        "l2_bytes": (8 * _MiB, _ROCM_SPECS + " (8 MB L2 per GCD)"),
        "memory_bandwidth": (1.6384e12, _MI250X_DS + " (3.2768 TB/s)" + _PER_GCD),
        "memory_bytes": (64 * _GiB, _MI250X_DS + " (128 GB HBM2e)" + _PER_GCD),
    },
    {
        ("vector", "float64"): (23.95 * _T, _MI250X_DS + " (47.9 TFLOP/s)" + _PER_GCD),
        ("matrix", "float64"): (47.85 * _T, _MI250X_DS + " (95.7 TFLOP/s)" + _PER_GCD),
        ("vector", "float32"): (47.85 * _T, _MI250X_DS + " (packed FP32, 95.7 TFLOP/s)" + _PER_GCD),
        ("matrix", "float32"): (47.85 * _T, _MI250X_DS + " (95.7 TFLOP/s)" + _PER_GCD),
        ("matrix", ("bfloat16", "float16")): (191.5 * _T, _MI250X_DS + " (383 TFLOP/s)" + _PER_GCD),
        ("matrix", "int8"): (191.5 * _T, _MI250X_DS + " (383 TOP/s)" + _PER_GCD),
    },
    notes="CDNA2. Figures are per GCD (graphics compute die): an MI250X package holds two, and the driver, "
    "torch and profiler traces list each as one device named 'AMD Instinct MI250X'; the data sheet's package "
    "figures are twice these (220 CUs, 128 GB, 3.2768 TB/s, 383 TFLOP/s BF16). sm_count holds compute units. "
    "The FP32 vector peak is the packed-FP32 rate (two FP32 operations per lane and clock). No TF32 or FP8 "
    "matrix path.",
)

MI355X = _spec(
    "MI355X",
    "AMD",
    ["AMD Instinct MI355X", "Instinct MI355X"],
    {
        "sm_count": (256, _ROCM_SPECS + " (compute units, 32 per XCD)"),
        "boost_clock_hz": (2.4e9, _MI355X_DS + " (peak engine clock)"),
        "l2_bytes": (32 * _MiB, _ROCM_SPECS + " (4 MB per XCD x 8)"),
        "memory_bandwidth": (8.0e12, _MI355X_DS),
        "memory_bytes": (288 * _GiB, _ROCM_SPECS),
    },
    {
        ("vector", "float64"): (78.6 * _T, _MI355X_DS),
        ("matrix", "float64"): (78.6 * _T, _MI355X_DS),
        ("vector", "float32"): (157.3 * _T, _MI355X_DS),
        ("matrix", "float32"): (157.3 * _T, _MI355X_DS),
        ("matrix", ("bfloat16", "float16")): (2516.6 * _T, _MI355X_DS + _SPARSE_HALVED),
        ("matrix", _FP8): (5033.2 * _T, _MI355X_DS + _SPARSE_HALVED),
        ("matrix", "int8"): (5033.2 * _T, _MI355X_DS + _SPARSE_HALVED),
    },
    notes="CDNA4 (gfx950). sm_count holds compute units. Its FP8 is OCP FP8 (float8_e4m3fn / float8_e5m2), unlike "
    "CDNA3's FNUZ variants; the MXFP6/MXFP4 rates have no dtype in this table, and the TF32 figure is left out "
    "(CDNA4 has no TF32 matrix instruction: "
    + _CDNA4_WP
    + "). Besides the 32 MB L2 there is a 256 MB Infinity Cache. 256 CUs x 2.4 GHz x 4096 dense BF16 FLOP per CU "
    "and clock = 2516.6 TFLOP/s.",
)


# ---------------------------------------------------------------------------------------------------------------
# GPU-to-GPU interconnect: the per-GPU link bandwidth, per direction (vendors quote the bidirectional total).


def _link(base: DeviceSpec, link: str, bidirectional: float, source: str) -> DeviceSpec:
    sources = dict(base.sources)
    sources["interconnect_bandwidth"] = f"{source}; {bidirectional / 1e9:g} GB/s bidirectional = " \
        f"{bidirectional / 2e9:g} GB/s per direction"
    return dataclasses.replace(base, interconnect=link, interconnect_bandwidth=bidirectional / 2, sources=sources)


_V100_DS_LINK = _V100_DS + " (Interconnect Bandwidth, V100 SXM2)"
A100_SXM = _link(A100_SXM, "NVLink 3", 600e9, _A100_DS + " (NVIDIA NVLink)")
A100_SXM_40GB = _link(A100_SXM_40GB, "NVLink 3", 600e9, _A100_DS + " (NVIDIA NVLink)")
A100_PCIE = _link(A100_PCIE, "PCIe Gen4 x16", 64e9, _A100_DS + " (PCIe Gen4; the optional 2-GPU NVLink bridge "
                  "is not assumed)")
A100_PCIE_40GB = _link(A100_PCIE_40GB, "PCIe Gen4 x16", 64e9, _A100_DS + " (PCIe Gen4; the optional 2-GPU NVLink "
                       "bridge is not assumed)")
H100_SXM = _link(H100_SXM, "NVLink 4", 900e9, _H100_DS + " (Interconnect, H100 SXM: NVLink)")
H100_PCIE = _link(H100_PCIE, "PCIe Gen5 x16", 128e9, _H100_DS + " (Interconnect, H100 PCIe: PCIe Gen5; the "
                  "optional 2-GPU NVLink bridge is not assumed)")
H200 = _link(H200, "NVLink 4", 900e9, _H200_DS + " (Interconnect, H200 SXM: NVLink)")
B200 = _link(B200, "NVLink 5", 1800e9, _HGX_B200 + " (NVLink bandwidth per GPU)")
GB200 = _link(GB200, "NVLink 5", 1800e9, _GB200_DS + " (NVLink bandwidth per GPU)")
L4 = _link(L4, "PCIe Gen4 x16", 64e9, _L4_DS + " (Interconnect: PCIe Gen4 x16, 64 GB/s)")
L40S = _link(L40S, "PCIe Gen4 x16", 64e9, _L40S_DS + " (Interconnect Interface: PCIe Gen4 x16, 64 GB/s "
             "bidirectional)")
V100_SXM2_16GB = _link(V100_SXM2_16GB, "NVLink 2", 300e9, _V100_DS_LINK)
V100_SXM2_32GB = _link(V100_SXM2_32GB, "NVLink 2", 300e9, _V100_DS_LINK)
T4 = _link(T4, "PCIe Gen3 x16", 32e9, _T4_DS + " (Interconnect Bandwidth: 32 GB/s)")

_ALL = (
    A100_SXM,
    A100_SXM_40GB,
    A100_PCIE,
    A100_PCIE_40GB,
    H100_SXM,
    H100_PCIE,
    H200,
    B200,
    GB200,
    L4,
    L40S,
    RTX_4090,
    RTX_PRO_6000,
    V100_SXM2_16GB,
    V100_SXM2_32GB,
    T4,
    MI250X,
    MI300X,
    MI355X,
)

#: Canonical name -> spec, in table order. Read-only.
DEVICES: Mapping[str, DeviceSpec] = types.MappingProxyType({spec.name: spec for spec in _ALL})


def names() -> list[str]:
    """Canonical names of every device in the table, in table order."""
    return list(DEVICES)


# ---------------------------------------------------------------------------------------------------------------
# Name matching.

_SEPARATORS = re.compile(r"[\s\-_/,()]+")
_VENDOR_WORDS = frozenset({"nvidia", "amd", "tesla", "geforce", "instinct"})
# "VF": an SR-IOV virtual function of the GPU (a cloud VM's view of the whole device, e.g. "AMD Instinct MI300X VF")
_PARTITION_WORDS = frozenset({"vf"})
_CAPACITY = re.compile(r"^(\d+)(gb|gib|g)$")
_MEMORY_TYPE = re.compile(r"^(hbm\d?e?|gddr\d+x?)$")
_SXM = re.compile(r"^sxm\d*$")


def _normalise(name: str) -> str:
    """Case-fold and collapse whitespace: the form exact alias matching uses."""
    return " ".join(str(name).casefold().split())


def _reduce(name: str) -> tuple[tuple[str, ...], frozenset[str], int | None]:
    """Split a device name into (identity tokens, memory-type tokens, capacity in bytes or None).

    Vendor and brand words ("NVIDIA", "Tesla", "GeForce", "AMD", "Instinct"), "VF" (an SR-IOV virtual function of
    the whole GPU) and capacity tokens ("80GB") are not part of the identity; "SXM4"/"SXM5" count as "sxm". Every
    other token, "NVL", "PCIe", "D", "Max-Q" included, is part of the identity, so an unseen product never collapses
    onto a listed one.
    """
    tokens = [t for t in _SEPARATORS.split(_normalise(name)) if t]
    identity: list[str] = []
    memory_types: set[str] = set()
    capacity: int | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        size = _CAPACITY.match(token)
        if size:
            capacity = int(size.group(1)) * _GiB
        elif token.isdigit() and i + 1 < len(tokens) and tokens[i + 1] in ("gb", "gib"):
            capacity = int(token) * _GiB
            i += 1
        elif _MEMORY_TYPE.match(token):
            memory_types.add(token)
        elif _SXM.match(token):
            identity.append("sxm")
        elif token not in _VENDOR_WORDS and token not in _PARTITION_WORDS:
            identity.append(token)
        i += 1
    return tuple(identity), frozenset(memory_types), capacity


def _build_indexes() -> tuple[dict[str, DeviceSpec], list[tuple[tuple[str, ...], frozenset[str], DeviceSpec]]]:
    exact: dict[str, DeviceSpec] = {}
    reduced: list[tuple[tuple[str, ...], frozenset[str], DeviceSpec]] = []
    for spec in _ALL:
        for alias in (spec.name, *spec.aliases):
            key = _normalise(alias)
            if key in exact and exact[key] is not spec:
                raise ValueError(f"alias {alias!r} names both {exact[key].name} and {spec.name}")
            exact[key] = spec
            identity, memory_types, _ = _reduce(alias)
            reduced.append((identity, memory_types, spec))
    return exact, reduced


_EXACT, _REDUCED = _build_indexes()


def lookup(name: str) -> DeviceSpec | None:
    """The spec for a device name, or None when the name is unknown or ambiguous.

    First an exact, case-insensitive, whitespace-normalised match against every canonical name and alias (which
    include the strings ``torch.cuda.get_device_name()`` returns). Then a conservative rule for unseen spellings:
    ignoring vendor words, capacity tokens and separators, the remaining tokens must equal those of a known alias;
    a memory type the alias names ("HBM3") must be named the same way; a capacity given in the name must match the
    device's memory size; and exactly one device may remain. So "nvidia h100-80gb-hbm3" finds the H100 SXM, while
    "NVIDIA H100 NVL", "H100" alone, or "RTX 4090 D" find nothing.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    spec = _EXACT.get(_normalise(name))
    if spec is not None:
        return spec
    identity, memory_types, capacity = _reduce(name)
    if not identity:
        return None
    candidates: list[DeviceSpec] = []
    for alias_identity, alias_memory_types, candidate in _REDUCED:
        if alias_identity != identity:
            continue
        if alias_memory_types and alias_memory_types != memory_types:
            continue  # the alias names a memory type ("HBM3"): the query must name the same one
        if capacity is not None and candidate.memory_bytes is not None and candidate.memory_bytes != capacity:
            continue
        if candidate not in candidates:
            candidates.append(candidate)
    return candidates[0] if len(candidates) == 1 else None


def get(name: str) -> DeviceSpec:
    """Like :func:`lookup`, but raise KeyError, listing the closest known names, when nothing matches."""
    spec = lookup(name)
    if spec is not None:
        return spec
    known: dict[str, str] = {}
    for candidate in _ALL:
        for alias in (candidate.name, *candidate.aliases):
            known.setdefault(_normalise(alias), alias)
    close = difflib.get_close_matches(_normalise(str(name)), list(known), n=5, cutoff=0.5)
    hint = "; close matches: " + ", ".join(repr(known[c]) for c in close) if close else ""
    raise KeyError(f"no datasheet entry for device {name!r}{hint}. Known devices: {', '.join(DEVICES)}")
