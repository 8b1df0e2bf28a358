"""What the CPU is: model, cores, caches, SIMD set, native low-precision instructions, its fingerprint (the cache
key) and its theoretical peak."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from roofline import _core


# /proc/cpuinfo flags of native low-precision arithmetic, per dtype.
_NATIVE_LOWP_FLAGS = {
    "bfloat16": ("avx512_bf16", "amx_bf16", "bf16"),
    "float16": ("avx512_fp16", "amx_fp16", "asimdhp", "fphp"),
}


# FMA pipes per core assumed for the theoretical peak, per SIMD set (override: ROOFLINE_CPU_FMA_UNITS).
_FMA_UNITS_ASSUMED = {
    "avx512": (2, "2 assumed: typical of AVX-512 server cores (Xeon Gold/Platinum, Sapphire Rapids and later); "
                  "some parts have 1"),
    "avx2": (2, "2 assumed: typical of AVX2 cores since Haswell and Zen 2; Zen 1 splits 256-bit FMAs"),
    "neon": (2, "2 assumed: typical of Arm Neoverse N1/N2 and Cortex-A7x; Neoverse V1/V2 and Apple cores have 4"),
    "sse2": (1, "1 assumed: one multiply and one add per cycle per lane (no FMA instruction)"),
    "scalar": (1, "1 assumed: unknown instruction set, one multiply and one add per cycle"),
}


def _cache_capacities(info: dict[str, Any]) -> dict[str, int]:
    """Aggregate capacity per cache level over the CPUs in use: size of one instance x instances."""
    caps = {}
    for level, c in (info.get("caches") or {}).items():
        if c.get("bytes", 0) > 0:
            caps[level] = int(c["bytes"]) * max(1, int(c.get("instances", 1)))
    return caps


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_info() -> dict[str, Any]:
    """_core.cpu_info() plus the native low-precision instructions the CPU advertises."""
    info = _core.cpu_info()
    info["native_lowp"] = _native_lowp()
    kernels, _ = _core.cpu_lowp_kernels()
    info["lowp_kernels"] = {
        k["name"]: {"dtype": k["dtype"], "instruction": k["instruction"], "available": k["available"],
                    "reason": k["reason"]}
        for k in kernels
    }
    return info


def _native_lowp() -> dict[str, list[str]]:
    """Native low-precision instruction flags per dtype, from /proc/cpuinfo."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("flags", "Features"):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        return {}
    return {dtype: [f for f in names if f in flags] for dtype, names in _NATIVE_LOWP_FLAGS.items()}


def _cpu_fingerprint(info: dict[str, Any]) -> str:
    """Hash of what decides the CPU's ceilings: model, CPU counts, SIMD set, cache sizes and instances."""
    key = {
        "model": info.get("model"),
        "cpus": info.get("cpus"),
        "physical_cores": info.get("physical_cores"),
        "simd": info.get("simd"),
        "caches": info.get("caches"),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
