"""The CPU benchmark drivers: the registry of the C microbenchmarks (FMA peaks, the bandwidth sweep, low-precision
products), their settings, and the measurement of one CPU's ceilings from them."""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from roofline import _core
from roofline._hardware._ceilings_model import Ceiling, Ceilings, Progress, _jsonable, _version
from roofline._hardware._cpu_contention import _loadavg, contention_reasons
from roofline._hardware._cpu_info import _FMA_UNITS_ASSUMED, _cache_capacities, _cpu_fingerprint
from roofline._hardware._sweep import _dram_size, _plateaus, _sweep_sizes
from roofline._util._format import fmt
from roofline._util._warn import warn


# Measurement settings: FMA seconds per dtype and timed repeats; sweep repeats per (kernel, size), minimum seconds
# per timed sweep run, working-set sizes per octave (doubling).
_QUICK = {"fma_seconds": 0.12, "fma_repeats": 5, "bw_repeats": 3, "bw_min_seconds": 0.001, "per_octave": 1}


_THOROUGH = {"fma_seconds": 0.6, "fma_repeats": 9, "bw_repeats": 5, "bw_min_seconds": 0.005, "per_octave": 2}






@dataclass
class _CpuRun:
    """What the CPU benchmarks of one measurement share: the settings and machine facts they read, and the results
    they fill in (``peaks``, ``bandwidths``, ``sweep``; ``durations`` and ``shares``, the benchmark threads' CPU
    share, keyed by timed part; ``notes``)."""

    quick: bool
    settings: dict[str, Any]
    info: dict[str, Any]
    threads: int
    simd: str
    theory: dict[str, Any]
    caps: dict[str, int]
    dram_size: int
    say: Callable[[str], None]
    peaks: dict[tuple[str, str], Ceiling] = field(default_factory=dict)
    bandwidths: dict[str, Ceiling] = field(default_factory=dict)
    sweep: dict[str, Any] | None = None
    durations: dict[str, float] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lowp_used: dict[str, str] = field(default_factory=dict)  # dtype -> the low-precision kernel measured

    @property
    def nt_min(self) -> int:
        """Working sets from this size (the aggregate last-level cache) up are written with non-temporal stores."""
        return self.caps[max(self.caps)]


@dataclass(frozen=True)
class CpuBenchmark:
    """One CPU ceiling benchmark: ``key`` names it, ``supported(info)`` says whether it runs on the machine
    ``_cpu_info()`` describes, ``runner(run, bench)`` measures and fills ``run`` (see ``_CpuRun``), ``rows`` are
    the ceilings it fills ("vector/float64"; "bandwidth/{level}..." for one per memory level), ``params`` what the
    runner reads with ``param``."""

    key: str
    label: str
    supported: Callable[[dict[str, Any]], bool]
    runner: Callable[[_CpuRun, "CpuBenchmark"], None]
    rows: tuple[str, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str) -> Any:
        return dict(self.params)[name]


def _timed_peak(run: _CpuRun, key: str, what: str, peak_fn, arg) -> dict:
    """One all-core peak benchmark of the C core (``peak_fn(arg, seconds, threads, repeats=)``), announced, with
    its duration and CPU share kept under ``key``."""
    settings = run.settings
    run.say(f"measuring the {what} on {run.threads} threads")
    t = time.perf_counter()
    r = peak_fn(arg, settings["fma_seconds"], run.threads, repeats=settings["fma_repeats"])
    run.durations[key] = time.perf_counter() - t
    run.shares[key] = r["cpu_share"]
    return r


def _run_fma(run: _CpuRun, bench: CpuBenchmark) -> None:
    """All-core FMA peak of one dtype (``_core.cpu_fma_peak``): FLOPs = FMAs x 2, per second."""
    dtype = bench.param("dtype")
    r = _timed_peak(run, f"fma_{dtype}", f"{dtype} FMA peak", _core.cpu_fma_peak, dtype)
    op = "FMA x = x*m + a (2 FLOP)" if r["fma"] else "multiply + add x = x*m + a (2 FLOP)"
    method = (
        f"{r['threads']} {'pinned ' if r['pinned'] else ''}threads x {r['accumulators']} independent {run.simd} "
        f"chains of {r['lanes']} {dtype} lanes, {op}; median of {r['repeats']} timed repeats after calibration"
    )
    run.peaks[("vector", dtype)] = Ceiling(
        measured=r["flops"],
        datasheet=run.theory["peak"].get(dtype),
        method=method,
        datasheet_source=run.theory["formula"].get(dtype, ""),
    )


class _BwKernel(NamedTuple):
    text: str  # how the method line names the kernel
    stores: bool  # it writes memory (so non-temporal stores apply beyond the last-level cache)
    suffix: str  # of its ceiling key: "" for the level's headline figure, else "_<kernel>"


# The kernels of the bandwidth sweep (each one a row of cpu.c's kernel table, same name), in sweep order. The
# bytes of a pass are `arrays` x N*8, `arrays` from _core.cpu_kernels(). Triad is each level's headline figure.
_BW_KERNELS = {
    "read": _BwKernel("read", False, "_read"),
    "copy": _BwKernel("copy", True, "_copy"),
    "triad": _BwKernel("triad a = b + s*c", True, ""),
}


KERNELS = tuple(_BW_KERNELS)


def _run_bandwidth(run: _CpuRun, bench: CpuBenchmark) -> None:
    """The bandwidth sweep of every kernel over working sets from L1 to DRAM, reduced to a plateau per level."""
    kernels = bench.param("kernels")
    settings, threads = run.settings, run.threads
    sizes = _sweep_sizes(run.caps, run.dram_size, threads, run.quick, settings["per_octave"])
    run.say(
        f"measuring bandwidth: {', '.join(kernels)} over {len(sizes)} working sets up to {run.dram_size >> 20} MiB"
    )
    t = time.perf_counter()
    rates, stats = _core.cpu_bandwidth_sweep(
        sizes,
        kernels,
        threads,
        settings["bw_repeats"],
        min_seconds=settings["bw_min_seconds"],
        nt_min_bytes=run.nt_min,
        return_stats=True,
        # Transparent huge pages raise the DRAM figure (fewer TLB misses), but their first touch can stall for
        # seconds while the kernel compacts memory: only the thorough run asks for them.
        hugepages=not run.quick,
    )
    run.durations["bandwidth_sweep"] = time.perf_counter() - t
    run.shares["bandwidth_sweep"] = stats["cpu_share"]
    run.sweep = {"sizes": sizes}
    run.sweep.update({k: rates[i] for i, k in enumerate(kernels)})
    arrays = dict(_core.cpu_kernels()["bandwidth"])
    headline_first = sorted(kernels, key=lambda k: _BW_KERNELS[k].suffix != "")
    for level, (lo, hi, values) in _plateaus(sizes, rates, run.caps, run.dram_size, kernels).items():
        n = len([s for s in sizes if lo <= s <= hi])
        span = fmt(lo, "B", binary=True) if lo == hi else f"{fmt(lo, 'B', binary=True)} to {fmt(hi, 'B', binary=True)}"
        nt_text = (
            "; stores are non-temporal (the working set exceeds the last-level cache)"
            if lo >= run.nt_min and run.simd != "neon" and run.simd != "scalar"
            else ""
        )
        base = (
            f"median over {n} working set{'s' if n != 1 else ''} of {span} ({threads} "
            f"{'pinned ' if stats['pinned'] else ''}threads, "
            f"{settings['bw_repeats']} repeats each, median)"
        )
        for k in headline_first:
            kernel = _BW_KERNELS[k]
            count = "N*8" if arrays[k] == 1 else f"{arrays[k]}*N*8"
            run.bandwidths[f"{level}{kernel.suffix}"] = Ceiling(
                measured=values[k],
                datasheet=None,
                method=f"{kernel.text}, {count} bytes per pass; {base}{nt_text if kernel.stores else ''}",
            )


# The low-precision product kernels of cpu.c (``_core.cpu_lowp_kernels()``): what one instruction does, and the
# operations per core per cycle the theoretical peak assumes ("fma": per FMA unit, like the float32 FMA peak).
_LOWP_KERNELS = {
    "avx512_bf16": ("each vdpbf16ps adds 2 bf16 x bf16 products into each of 16 fp32 lanes (4 FLOP per lane)",
                    ("fma", 64), "16 fp32 lanes x 2 bf16 products x 2 FLOP per vdpbf16ps"),
    "avx512_fp16": ("each vfmadd231ph is 32 fp16 lanes x FMA (2 FLOP)", ("fma", 64),
                    "32 fp16 lanes x 2 FLOP per vfmadd231ph"),
    "avx512_vnni": ("each vpdpbusd adds 4 u8 x s8 products into each of 16 int32 lanes (8 operations per lane)",
                    ("fma", 128), "16 int32 lanes x 4 int8 products x 2 operations per vpdpbusd"),
    "avx_vnni": ("each vpdpbusd ymm adds 4 u8 x s8 products into each of 8 int32 lanes (8 operations per lane)",
                 ("fma", 64), "8 int32 lanes x 4 int8 products x 2 operations per vpdpbusd ymm"),
    "amx_bf16": ("4 tiles, each tdpbf16ps 16x16 fp32 += 16x32 bf16 x 32x16 bf16 (16,384 FLOP)", ("core", 1024),
                 "1,024 bf16 FLOP per cycle per core (one 16x16x32 tdpbf16ps per 16 cycles, as on Sapphire Rapids: "
                 "assumed)"),
    "amx_int8": ("4 tiles, each tdpbssd 16x16 int32 += 16x64 s8 x 64x16 s8 (32,768 operations)", ("core", 2048),
                 "2,048 int8 operations per cycle per core (one 16x16x64 tdpbssd per 16 cycles, as on Sapphire "
                 "Rapids: assumed)"),
}


def _lowp_usable(bench: "CpuBenchmark", info: dict[str, Any]) -> list[str]:
    """The kernels of a low-precision benchmark that can run on the machine ``info`` describes, fastest first."""
    kernels = info.get("lowp_kernels") or {}
    return [k for k in bench.param("kernels") if (kernels.get(k) or {}).get("available")]


def _run_lowp(run: _CpuRun, bench: CpuBenchmark) -> None:
    """All-core peak of the fastest low-precision product kernel of one dtype that runs here
    (``_core.cpu_lowp_peak``), as the ("matrix", dtype) ceiling: the rate of products in that dtype."""
    dtype = bench.param("dtype")
    usable = _lowp_usable(bench, run.info)
    kernel = usable[0]
    r = _timed_peak(run, f"lowp_{dtype}", f"{dtype} product peak ({kernel})", _core.cpu_lowp_peak, kernel)
    run.lowp_used[dtype] = kernel
    what, _, _ = _LOWP_KERNELS[kernel]
    skipped = [
        (run.info["lowp_kernels"].get(k) or {}).get("reason", "")
        for k in bench.param("kernels") if k not in usable
    ]
    method = (
        f"{r['threads']} {'pinned ' if r['pinned'] else ''}threads x {r['accumulators']} independent "
        f"accumulators; {what}; median of {r['repeats']} timed repeats after calibration"
        + "".join(f"; not used: {why}" for why in skipped if why)
    )
    peak, formula = _lowp_theory(run, kernel)
    run.peaks[("matrix", dtype)] = Ceiling(measured=r["flops"], datasheet=peak, method=method,
                                           datasheet_source=formula)


def _lowp_theory(run: _CpuRun, kernel: str) -> tuple[float | None, str]:
    """Theoretical peak of a low-precision kernel: cores x clock x operations per cycle, with its assumptions."""
    clock = float(run.info.get("clock_hz") or 0.0)
    if clock <= 0:
        return None, ""
    cores = run.theory["cores"]
    _, (per, ops), text = _LOWP_KERNELS[kernel]
    src = run.info.get("clock_source", "unknown")
    if per == "fma":
        units = run.theory["fma_units"]
        return (cores * clock * ops * units,
                f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({src}) x {text} x {units} units "
                f"({run.theory['fma_units_source']}; the float32 FMA assumption)")
    return cores * clock * ops, f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({src}) x {text}"


def _always(info: dict[str, Any]) -> bool:
    return True


def _lowp_supported(dtype: str) -> Callable[[dict[str, Any]], bool]:
    def supported(info: dict[str, Any]) -> bool:
        bench = next(b for b in _CPU_REGISTRY if b.key == f"matrix/{dtype}")
        return bool(_lowp_usable(bench, info))

    supported.__name__ = f"_lowp_supported_{dtype}"
    return supported


# The CPU benchmarks, in the order they run. A new ceiling is one entry here; a new kernel is also a row in one of
# cpu.c's tables (the FMA dtypes, the bandwidth kernels), which _core.cpu_kernels() lists.
_CPU_REGISTRY: tuple[CpuBenchmark, ...] = (
    CpuBenchmark("vector/float64", "float64 FMA", _always, _run_fma, ("vector/float64",),
                 (("dtype", "float64"), ("elem_bytes", 8))),
    CpuBenchmark("vector/float32", "float32 FMA", _always, _run_fma, ("vector/float32",),
                 (("dtype", "float32"), ("elem_bytes", 4))),
    # Native low-precision products: the first kernel that runs here, in the order given (AMX before AVX-512).
    CpuBenchmark("matrix/bfloat16", "bfloat16 products", _lowp_supported("bfloat16"), _run_lowp,
                 ("matrix/bfloat16",), (("dtype", "bfloat16"), ("kernels", ("amx_bf16", "avx512_bf16")))),
    CpuBenchmark("matrix/float16", "float16 products", _lowp_supported("float16"), _run_lowp,
                 ("matrix/float16",), (("dtype", "float16"), ("kernels", ("avx512_fp16",)))),
    CpuBenchmark("matrix/int8", "int8 products", _lowp_supported("int8"), _run_lowp,
                 ("matrix/int8",), (("dtype", "int8"), ("kernels", ("amx_int8", "avx512_vnni", "avx_vnni")))),
    CpuBenchmark("bandwidth", "bandwidth sweep", _always, _run_bandwidth,
                 tuple(f"bandwidth/{{level}}{_BW_KERNELS[k].suffix}" for k in KERNELS), (("kernels", KERNELS),)),
)


def cpu_benchmarks(info: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The CPU benchmark registry: one dict per benchmark with ``key``, ``label`` and ``rows`` (the ceilings it
    fills) and, when ``info`` (a ``_cpu_info()`` dict) is given, ``supported`` on that machine."""
    out = []
    for bench in _CPU_REGISTRY:
        entry: dict[str, Any] = {"key": bench.key, "label": bench.label, "rows": list(bench.rows)}
        if info is not None:
            entry["supported"] = bool(bench.supported(info))
        out.append(entry)
    return out


def _measure_cpu(quick: bool, progress: Progress | None, info: dict[str, Any]) -> Ceilings:
    """Run the CPU benchmarks of the registry and build a Ceilings (the cache is handled by the caller)."""
    settings = _QUICK if quick else _THOROUGH
    start = time.perf_counter()
    load_before = _loadavg()
    threads = int(info["cpus"])
    simd = str(info["simd"])
    theory = _theoretical(info, simd)  # first: a bad ROOFLINE_CPU_FMA_UNITS fails before any measuring
    notes = []
    caps = _cache_capacities(info)
    if not caps:
        caps = {"L1": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
        notes.append("cache sizes unknown: assumed 32 KiB L1, 1 MiB L2, 32 MiB L3 (aggregate) for the sweep ranges")
    llc = caps[max(caps)]
    dram_size, capped = _dram_size(llc, threads)
    if capped:
        notes.append(
            f"the DRAM working set is {dram_size >> 20} MiB, less than 4 x the last-level cache "
            f"({4 * llc >> 20} MiB), to stay within a quarter of the available memory: the DRAM figure may "
            "include cache hits"
        )
    benches = [b for b in _CPU_REGISTRY if b.supported(info)]
    step = [0]

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"{msg} ({step[0]}/{len(benches)})")

    run = _CpuRun(quick, settings, info, threads, simd, theory, caps, dram_size, say, notes=notes)
    for bench in benches:
        step[0] += 1
        bench.runner(run, bench)

    if theory["clock_note"]:
        notes.append(theory["clock_note"])
    f64 = run.peaks.get(("vector", "float64"))
    if f64 is not None and f64.datasheet and f64.measured > 1.05 * f64.datasheet:
        implied = f64.measured / (theory["cores"] * _lanes(simd, 8) * theory["fma_units"] * 2)
        notes.append(
            f"the measured float64 peak exceeds the theoretical one: it implies an all-core clock of "
            f"{implied / 1e9:.2f} GHz at {theory['fma_units']} FMA units per core, above the "
            f"{info['clock_hz'] / 1e9:.2f} GHz used for the theoretical peak"
        )
    native = info.get("native_lowp") or {}
    lowp = info.get("lowp_kernels") or {}
    for dtype in ("bfloat16", "float16", "int8"):
        if ("matrix", dtype) in run.peaks:
            continue  # measured by a benchmark of its own
        why = "; ".join(k["reason"] for k in lowp.values() if k.get("dtype") == dtype and k.get("reason"))
        why = f" ({why})" if why else ""
        if dtype == "int8":
            notes.append(f"int8: no native int8 product kernel ran{why}; there is no int8 peak")
        elif native.get(dtype):
            notes.append(
                f"{dtype}: the CPU advertises {', '.join(native[dtype])}, but no kernel of this package ran{why}; "
                f"{dtype} peaks fall back to the float32 peak (a lower bound)"
            )
        else:
            notes.append(f"{dtype}: no native product kernel ran{why}; {dtype} peaks fall back to the float32 peak")

    recheck = None
    f32 = run.peaks.get(("vector", "float32"))
    if f32 is not None and f32.measured:
        # A short second measurement of the float32 peak: the two disagree when the machine's load changed.
        r = _core.cpu_fma_peak("float32", settings["fma_seconds"] / 3, threads, repeats=3)
        recheck = {"vector/float32": r["flops"]}
        run.shares["recheck_float32"] = r["cpu_share"]
    reasons = contention_reasons(run.shares, run.bandwidths, run.peaks, recheck)
    if reasons:
        msg = (
            "the ceilings look measured under contention (" + "; ".join(reasons) + "): they are not cached; "
            "reports judge against the last idle measurement of this machine, else its theoretical peak "
            "(`python -m roofline ceilings --save` on an idle machine keeps one)"
        )
        notes.append(msg)
        warn(msg, RuntimeWarning)

    duration = time.perf_counter() - start
    run.durations["total"] = duration
    cpu_info = dict(info)
    cpu_info.update(
        {
            "threads": threads,
            "fma_units": theory["fma_units"],
            "fma_units_source": theory["fma_units_source"],
            "theoretical_cores": theory["cores"],
            "cache_capacity_bytes": caps,
            "dram_working_set_bytes": dram_size,
            "nt_min_bytes": run.nt_min,
            "durations_s": run.durations,
            "cpu_share": run.shares,
            "busy": bool(reasons),
            "contention": reasons,
            "lowp_used": run.lowp_used,
            "recheck": recheck,
            "loadavg": [load_before, _loadavg()],
        }
    )
    return Ceilings(
        device="cpu",
        name=str(info.get("model") or "CPU"),
        fingerprint=_cpu_fingerprint(info),
        peaks=run.peaks,
        bandwidths=run.bandwidths,
        duration_s=duration,
        version=_version(),
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        quick=quick,
        info=_jsonable(cpu_info),
        sweep=run.sweep,
        notes=notes,
    )


def _theoretical(info: dict[str, Any], simd: str) -> dict[str, Any]:
    """Theoretical peak = cores x clock x SIMD lanes x FMA units x 2 FLOP, per dtype, with its assumptions."""
    cores = int(info.get("physical_cores") or 0) or int(info["cpus"])
    clock = float(info.get("clock_hz") or 0.0)
    clock_source = info.get("clock_source", "unknown")
    env = os.environ.get("ROOFLINE_CPU_FMA_UNITS")
    if env:
        try:
            units = int(env)
            if units < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"ROOFLINE_CPU_FMA_UNITS must be a positive integer, not {env!r}") from None
        units_source = "ROOFLINE_CPU_FMA_UNITS"
    else:
        units, units_source = _FMA_UNITS_ASSUMED.get(simd, _FMA_UNITS_ASSUMED["scalar"])
    lanes = {b.param("dtype"): _lanes(simd, b.param("elem_bytes")) for b in _CPU_REGISTRY if b.runner is _run_fma}
    out = {"cores": cores, "fma_units": units, "fma_units_source": units_source, "peak": {}, "formula": {},
           "clock_note": ""}
    if clock <= 0:
        out["clock_note"] = "the CPU clock is unknown: no theoretical peak"
        return out
    if "cpuinfo" in clock_source:
        out["clock_note"] = (
            f"clock {clock / 1e9:.2f} GHz from {clock_source}: often the nominal (base) clock in a VM; all-core "
            "turbo can exceed it, so measured/theoretical above 100% is possible"
        )
    for dtype, n in lanes.items():
        out["peak"][dtype] = cores * clock * n * units * 2.0
        out["formula"][dtype] = (
            f"theoretical: {cores} cores x {clock / 1e9:.2f} GHz ({clock_source}) x {n} {simd} {dtype} lanes x "
            f"{units} FMA units ({units_source}) x 2 FLOP"
        )
    return out


def _lanes(simd: str, elem_bytes: int) -> int:
    width = {"avx512": 64, "avx2": 32, "sse2": 16, "neon": 16}.get(simd)
    return 1 if width is None else width // elem_bytes
