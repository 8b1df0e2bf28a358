"""CPU ceilings next to what NumPy reaches on the same machine, in one run.

    python bench/cpu_ceilings.py [--thorough] [--n 3072] [--torch-n 2048] [--repeats 5] [--rounds 3]

Prints the measured FMA peaks (float64, float32) against the theoretical peak and NumPy's matmul rate on large
square matrices (2*n^3 FLOP per product), and the measured DRAM bandwidth (read, copy, triad) against np.copyto
on arrays much larger than the last-level cache (read + write bytes counted). Where the CPU has native bfloat16
products (AVX512-BF16, AMX) it prints the measured bfloat16 product peak beside ``torch.matmul`` in bfloat16 (when
torch is installed); otherwise it prints why there is no such peak. Targets: peaks >= 90% of theoretical and above
NumPy's matmul; the bfloat16 peak >= 90% of the better of itself and torch.matmul; DRAM triad >= NumPy's copy
bandwidth. The ceilings are measured afresh into
a temporary cache directory (the user's cache is left alone). On a shared machine other processes lower every
rate, so the script runs several rounds and shows the best round of each figure, for both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np


def timed_median(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def numpy_matmul_flops(n: int, dtype, repeats: int) -> float:
    rng = np.random.default_rng(0)
    a = rng.random((n, n)).astype(dtype)
    b = rng.random((n, n)).astype(dtype)
    out = np.empty((n, n), dtype=dtype)
    return 2.0 * n**3 / timed_median(lambda: np.matmul(a, b, out=out), repeats)


def torch_matmul_flops(n: int, dtype_name: str, repeats: int) -> float | None:
    """torch.matmul of two n x n matrices in `dtype_name` (2*n^3 FLOP), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    return 2.0 * n**3 / timed_median(lambda: torch.matmul(a, b, out=out), repeats)


def numpy_copy_bandwidth(array_bytes: int, repeats: int) -> float:
    src = np.ones(array_bytes // 8)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / timed_median(lambda: np.copyto(dst, src), repeats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thorough", action="store_true", help="measure the ceilings with quick=False")
    parser.add_argument("--n", type=int, default=3072, help="matrix size for NumPy's matmul (default 3072)")
    parser.add_argument("--torch-n", type=int, default=2048,
                        help="matrix size for torch.matmul in bfloat16 (default 2048)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each NumPy operation (median)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (roofline ceilings, NumPy figures); the best round of each figure is shown, "
                             "for roofline and NumPy alike, since other processes only ever lower a rate")
    args = parser.parse_args()

    import roofline
    from roofline._hardware._ceilings import ceilings

    rounds = []
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # busy-machine warnings: the share is printed below
        os.environ["ROOFLINE_CACHE_DIR"] = tmp
        for _ in range(args.rounds):
            c = ceilings("cpu", refresh=True, quick=not args.thorough)
            llc = max(c.info["cache_capacity_bytes"].values())
            array_bytes = max(2 * llc, 256 << 20)  # two arrays: a 4 x LLC working set, like the DRAM ceiling
            rounds.append({
                "c": c,
                "mm_float64": numpy_matmul_flops(args.n, np.float64, args.repeats),
                "mm_float32": numpy_matmul_flops(args.n, np.float32, args.repeats),
                "npcopy": numpy_copy_bandwidth(array_bytes, args.repeats),
                "mm_bfloat16": (torch_matmul_flops(args.torch_n, "bfloat16", args.repeats)
                                if ("matrix", "bfloat16") in c.peaks else None),
                "array_bytes": array_bytes,
            })

    def best(fn):
        return max(fn(r) for r in rounds)

    c0 = rounds[0]["c"]
    info = c0.info
    print(f"roofline {roofline.__version__}  {c0.name}  {info['cpus']} CPUs, {info['simd']}, numpy {np.__version__}")
    print(f"best of {len(rounds)} rounds for every figure (roofline and NumPy alike); "
          f"ceilings {'quick' if c0.quick else 'thorough'}")
    for i, r in enumerate(rounds):
        c = r["c"]
        share = ", ".join(f"{k} {100 * v:.0f}%" for k, v in c.info["cpu_share"].items())
        print(f"  round {i + 1}: ceilings measured in {c.duration_s:.2f} s; CPU share of the benchmark threads: "
              f"{share}{'  (busy machine)' if c.info.get('busy') else ''}")
    print()

    rows = []
    print(f"{'peak':8s} {'measured':>10s} {'theoretical':>12s} {'meas/theo':>9s} {'numpy matmul':>13s} "
          f"{'meas/numpy':>10s}   GFLOP/s (numpy: n={args.n}, 2*n^3 FLOP)")
    for dtype in ("float64", "float32"):
        measured = best(lambda r: r["c"].peaks[("vector", dtype)].measured)
        theo = c0.peaks[("vector", dtype)].datasheet
        mm = best(lambda r: r[f"mm_{dtype}"])
        r_theo = measured / theo if theo else float("nan")
        print(f"{dtype:8s} {measured / 1e9:10.1f} {theo / 1e9 if theo else float('nan'):12.1f} "
              f"{100 * r_theo:8.0f}% {mm / 1e9:13.1f} {100 * measured / mm:9.0f}%")
        rows.append((f"{dtype} peak >= 90% of theoretical", r_theo >= 0.9))
        rows.append((f"{dtype} peak > NumPy matmul", measured > mm))

    bf16 = c0.peaks.get(("matrix", "bfloat16"))
    if bf16 is None:
        why = [n for n in c0.notes if n.startswith("bfloat16")]
        print(f"bfloat16: no native product peak measured: {why[0] if why else 'see the notes'}")
    else:
        measured = best(lambda r: r["c"].peaks[("matrix", "bfloat16")].measured)
        kernel = c0.info.get("lowp_used", {}).get("bfloat16", "?")
        tm = [r["mm_bfloat16"] for r in rounds if r["mm_bfloat16"] is not None]
        line = (f"{'bfloat16':8s} {measured / 1e9:10.1f} "
                f"{bf16.datasheet / 1e9 if bf16.datasheet else float('nan'):12.1f} "
                f"{100 * measured / bf16.datasheet if bf16.datasheet else float('nan'):8.0f}%")
        if tm:
            mm = max(tm)
            ratio = measured / max(measured, mm)
            print(line + f" {mm / 1e9:13.1f} {100 * measured / mm:9.0f}%   (torch.matmul bf16, n={args.torch_n}; "
                  f"C kernel {kernel})")
            print(f"bfloat16 C peak / better of (C peak, torch.matmul) = {ratio:.2f}")
            rows.append(("bfloat16 C peak >= 90% of the better of itself and torch.matmul", ratio >= 0.9))
        else:
            print(line + "   (torch is not installed: no torch.matmul comparison)")
    print()

    # Sanity of the method, checked here rather than in the test suite (they depend on timing): fp32 has twice the
    # fp64 lanes of a SIMD register, and each cache level is at least as fast as the one below it.
    f64 = best(lambda r: r["c"].peaks[("vector", "float64")].measured)
    f32 = best(lambda r: r["c"].peaks[("vector", "float32")].measured)
    lanes = 1.0 if info["simd"] == "scalar" else 2.0
    print(f"fp32/fp64 peak ratio {f32 / f64:.2f} (lanes ratio {lanes:.0f})")
    rows.append((f"fp32/fp64 peak ratio within 20% of the lanes ratio {lanes:.0f}", abs(f32 / f64 / lanes - 1) <= 0.2))
    levels = [lvl for lvl in ("L1", "L2", "L3", "DRAM") if lvl in c0.bandwidths]
    plateau = {lvl: best(lambda r, lvl=lvl: r["c"].bandwidth(lvl)) for lvl in levels}
    print("triad plateaus: " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in plateau.items()))
    rows.append(("each cache level's bandwidth >= 85% of the next level's",
                 all(plateau[a] >= 0.85 * plateau[b] for a, b in zip(levels, levels[1:]))))
    rows.append(("quick ceilings in <= 3 s (best round)", min(r["c"].duration_s for r in rounds) <= 3.0))

    npcopy = best(lambda r: r["npcopy"])
    print()
    print(f"{'DRAM':8s} {'measured':>10s} {'numpy copy':>12s} {'meas/numpy':>10s}   GB/s "
          f"(numpy: np.copyto of {rounds[0]['array_bytes'] >> 20} MiB arrays, read + write bytes)")
    for key, label in (("DRAM_read", "read"), ("DRAM_copy", "copy"), ("DRAM", "triad")):
        value = best(lambda r: r["c"].bandwidths[key].measured)
        print(f"{label:8s} {value / 1e9:10.1f} {npcopy / 1e9:12.1f} {100 * value / npcopy:9.0f}%")
    triad = best(lambda r: r["c"].bandwidths["DRAM"].measured)
    rows.append(("DRAM triad >= NumPy copy bandwidth", triad >= npcopy))

    print()
    ok = True
    for label, passed in rows:
        ok &= passed
        print(f"{'met   ' if passed else 'MISSED'} {label}")
    print()
    print(f"theoretical = {c0.peaks[('vector', 'float64')].datasheet_source}")
    for note in c0.notes:
        if "contention" not in note:
            print(f"note: {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
