"""CPU ceilings next to what NumPy reaches on the same machine, in one run.

    python bench/cpu_ceilings.py [--thorough] [--n 3072] [--repeats 5]

Prints the measured FMA peaks (float64, float32) against the theoretical peak and NumPy's matmul rate on large
square matrices (2*n^3 FLOP per product), and the measured DRAM bandwidth (read, copy, triad) against np.copyto
on arrays much larger than the last-level cache (read + write bytes counted). Targets: peaks >= 90% of
theoretical and above NumPy's matmul; DRAM triad >= NumPy's copy bandwidth. The ceilings are measured afresh into
a temporary cache directory (the user's cache is left alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

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


def numpy_copy_bandwidth(array_bytes: int, repeats: int) -> float:
    src = np.ones(array_bytes // 8)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / timed_median(lambda: np.copyto(dst, src), repeats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thorough", action="store_true", help="measure the ceilings with quick=False")
    parser.add_argument("--n", type=int, default=3072, help="matrix size for NumPy's matmul (default 3072)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each NumPy operation")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ROOFLINE_CACHE_DIR"] = tmp
        import roofline
        from roofline.ceilings import ceilings

        t = time.perf_counter()
        c = ceilings("cpu", refresh=True, quick=not args.thorough)
        wall = time.perf_counter() - t

    info = c.info
    print(f"roofline {roofline.__version__}  {c.name}  {info['cpus']} CPUs, {info['simd']}, "
          f"numpy {np.__version__}")
    print(f"ceilings measured in {c.duration_s:.2f} s ({'quick' if c.quick else 'thorough'}; {wall:.2f} s wall "
          f"including import of cpu info); CPU share of the benchmark threads: "
          + ", ".join(f"{k} {100 * v:.0f}%" for k, v in info["cpu_share"].items()))
    if info.get("busy"):
        print("WARNING: other processes competed for the CPUs: figures are low")
    print()

    rows = []
    ok = True
    print(f"{'peak':8s} {'measured':>10s} {'theoretical':>12s} {'meas/theo':>9s} {'numpy matmul':>13s} "
          f"{'meas/numpy':>10s}   GFLOP/s")
    for dtype, np_dtype in (("float64", np.float64), ("float32", np.float32)):
        entry = c.peaks[("vector", dtype)]
        mm = numpy_matmul_flops(args.n, np_dtype, args.repeats)
        theo = entry.datasheet
        r_theo = entry.measured / theo if theo else float("nan")
        r_np = entry.measured / mm
        print(f"{dtype:8s} {entry.measured / 1e9:10.1f} {theo / 1e9 if theo else float('nan'):12.1f} "
              f"{100 * r_theo:8.0f}% {mm / 1e9:13.1f} {100 * r_np:9.0f}%")
        rows.append((f"{dtype} peak >= 90% of theoretical", r_theo >= 0.9))
        rows.append((f"{dtype} peak > NumPy matmul (n={args.n})", r_np > 1.0))

    llc = max(info["cache_capacity_bytes"].values())
    array_bytes = max(2 * llc, 256 << 20)  # two arrays: a working set of 4 x LLC, as the DRAM ceiling uses
    npcopy = numpy_copy_bandwidth(array_bytes, args.repeats)
    print()
    print(f"{'DRAM':8s} {'measured':>10s} {'numpy copy':>12s} {'meas/numpy':>10s}   GB/s "
          f"(numpy: np.copyto of {array_bytes >> 20} MiB arrays, read + write bytes)")
    for key in ("DRAM_read", "DRAM_copy", "DRAM"):
        value = c.bandwidths[key].measured
        label = key.replace("DRAM_", "") if key != "DRAM" else "triad"
        print(f"{label:8s} {value / 1e9:10.1f} {npcopy / 1e9:12.1f} {100 * value / npcopy:9.0f}%")
    rows.append(("DRAM triad >= NumPy copy bandwidth", c.bandwidths["DRAM"].measured >= npcopy))

    print()
    for label, passed in rows:
        ok &= passed
        print(f"{'met   ' if passed else 'MISSED'} {label}")
    print()
    print(f"theoretical = {c.peaks[('vector', 'float64')].datasheet_source}")
    for note in c.notes:
        print(f"note: {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
