"""Print roofline's measured GPU ceilings beside the datasheet and beside PyTorch's own rates.

    python bench/gpu_ceilings.py [--full] [--json PATH] [--no-torch]
    python bench/gpu_ceilings.py --wgmma-smoke     # launch each Hopper wgmma kernel once; exit 1 if one fails

PyTorch reference rates (medians of CUDA-event timings after warm-up):
  * copy: ``y.copy_(x)`` of a 1 GiB float32 tensor, counted as bytes read + bytes written (2 GiB per copy);
  * matmul: an 8192 x 8192 x 8192 bf16 product on random data, counted as 2*n^3 FLOPs, with
    ``torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False``.

Targets checked at the end: DRAM copy >= 95% of PyTorch's copy rate; fp32 FMA >= 90% of the datasheet;
bf16 tensor >= 95% of PyTorch's bf16 matmul rate; every quick run <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roofline import _core  # noqa: E402
from roofline._hardware import _gpu, _gpu_bench

T = 1e12
# Dense datasheet figures (TFLOP/s, TOPS for int8, TB/s) from docs/reference: shared/reference/gpu-datasheet.md.
# Used only when roofline.devices offers no lookup. None: no confirmed figure.
DATASHEET = {
    "H200": {"vector/float64": 33.5, "vector/float32": 67.0, "matrix/tfloat32": 494.5, "matrix/bfloat16": 989.0,
             "matrix/float16": 989.0, "matrix/float8_e4m3fn": 1979.0, "matrix/int8": 1979.0, "DRAM": 4.8},
    "H100 SXM": {"vector/float64": 33.5, "vector/float32": 67.0, "matrix/tfloat32": 494.5, "matrix/bfloat16": 989.0,
                 "matrix/float16": 989.0, "matrix/float8_e4m3fn": 1979.0, "matrix/int8": 1979.0, "DRAM": 3.35},
    "H100 PCIe": {"vector/float32": 51.0, "matrix/tfloat32": 378.0, "matrix/bfloat16": 756.0,
                  "matrix/float16": 756.0, "matrix/float8_e4m3fn": 1513.0, "matrix/int8": 1513.0, "DRAM": 2.0},
    "A100": {"vector/float64": 9.7, "vector/float32": 19.5, "matrix/tfloat32": 156.0, "matrix/bfloat16": 312.0,
             "matrix/float16": 312.0, "matrix/int8": 624.0, "DRAM": 2.039},
    "L4": {"matrix/tfloat32": 60.0, "matrix/bfloat16": 121.0, "matrix/float16": 121.0,
           "matrix/float8_e4m3fn": 242.5, "matrix/int8": 242.5, "DRAM": 0.300},
    "L40S": {"vector/float32": 91.6, "matrix/tfloat32": 183.0, "matrix/bfloat16": 362.0, "matrix/float16": 362.0,
             "matrix/float8_e4m3fn": 733.0, "matrix/int8": 733.0, "DRAM": 0.864},
}


def _datasheet_key(name: str) -> str | None:
    upper = name.upper()
    if "H200" in upper:
        return "H200"
    if "H100" in upper:
        return "H100 PCIe" if "PCIE" in upper else "H100 SXM"
    if "A100" in upper:
        return "A100"
    if "L40S" in upper:
        return "L40S"
    if " L4" in upper or upper.endswith("L4"):
        return "L4"
    return None


def datasheet_for(name: str) -> tuple[dict, str]:
    """Datasheet figures in base units (FLOP/s, bytes/s) keyed like measure()'s output, and where they came from."""
    try:
        from roofline import devices  # another layer of the package; may not exist yet

        spec = devices.lookup(name)
    except Exception:  # noqa: BLE001 - any failure means "no device table": fall back to the dict above
        spec = None
    if spec is not None:
        found = {}
        source = spec if isinstance(spec, dict) else getattr(spec, "__dict__", {})
        peaks = source.get("peaks") or source.get("peak") or {}
        for key in _gpu.PEAK_KEYS:
            value = peaks.get(key) if isinstance(peaks, dict) else None
            if value:
                found[key] = float(value)
        bw = source.get("memory_bandwidth") or source.get("bandwidth")
        if isinstance(bw, (int, float)):
            found["DRAM"] = float(bw)
        if found:
            return found, "roofline.devices.lookup"
    key = _datasheet_key(name)
    if key is None:
        return {}, "no datasheet entry"
    out = {k: v * T for k, v in DATASHEET[key].items() if k != "DRAM"}
    out["DRAM"] = DATASHEET[key]["DRAM"] * T
    return out, f"built-in table ({key}, from shared/reference/gpu-datasheet.md)"


def torch_rates() -> dict:
    """PyTorch's copy and bf16 matmul rates on device 0 (see the module docstring for the counting)."""
    import torch

    if not torch.cuda.is_available():
        return {}

    def median_time(fn, warmup, reps):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(times)

    out = {"torch": torch.__version__}
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda").uniform_()  # 1 GiB
    y = torch.empty_like(x)
    out["copy"] = 2 * x.numel() * x.element_size() / median_time(lambda: y.copy_(x), 5, 20)
    del x, y
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    out["matmul_bf16"] = 2 * n**3 / median_time(lambda: torch.matmul(a, b, out=c), 3, 10)
    del a, b, c
    torch.cuda.empty_cache()
    return out


def wgmma_smoke() -> int:
    """Run every wgmma kernel in its check mode (all-ones operands, D compared with start + K per instruction),
    then time each briefly; 0 if all are right (or the device is not Hopper), 1 otherwise."""
    info = _gpu.device_info(0)
    cc = tuple(info["compute_capability"])
    if cc != (9, 0):
        print(f"wgmma smoke: {info['name']} is compute capability {cc}, not 9.0: nothing to check")
        return 0
    ctx = _gpu_bench._Context(0, info, _gpu_bench._QUICK)
    failures = 0
    for bench in _gpu_bench._REGISTRY:
        if bench.source != "wgmma":
            continue
        try:
            _gpu_bench._tensor_check(ctx, bench)
            integer = bench.param("integer")
            sentinel = ("i32", -1) if integer else ("f32", float("nan"))
            res = _gpu_bench._launch(ctx, bench, [(256, 0)], [("buffer", 0), ("i32", 256), ("u32", 1), sentinel,
                                                        ("i32", 0)], block=256, warmup=1, reps=3, max_blocks_per_sm=1)
        except _gpu.GpuError as exc:
            failures += 1
            print(f"wgmma smoke: {bench.kernel} FAILED: {exc}")
            if getattr(exc, "code", None) in _gpu_bench._STICKY_ERRORS:
                break
            continue
        median = statistics.median(res["times_s"])
        _m, _n, k = bench.param("shape")
        flops = res["grid"] * 2 * 256 * 16 * 2 * 64 * 256 * k  # 2 warpgroups x 256 loops x 16 wgmma x 2*m*n*k
        clock = _gpu_bench._clock_hz(res)
        print(f"wgmma smoke: {bench.kernel}: result ok, {median * 1e3:.3f} ms, ~{flops / median / T:.0f} T/s at SM "
              f"clock {clock / 1e9 if clock else float('nan'):.3f} GHz, {res['registers']} registers, "
              f"{res['local_bytes']} local bytes, grid {res['grid']}, params checked: {res['params_checked']}")
    return 1 if failures else 0


def fmt(value, unit=T):
    return "-" if value is None else f"{value / unit:9.1f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:6.1%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also run the full (slower) measurement")
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference rates")
    parser.add_argument("--wgmma-smoke", action="store_true", help="only launch the wgmma kernels once")
    args = parser.parse_args()
    if args.wgmma_smoke:
        return wgmma_smoke()

    report: dict = {"nvrtc": None}
    t0 = time.perf_counter()
    progress = lambda label: print(f"  [{time.perf_counter() - t0:6.2f} s] {label}", flush=True)  # noqa: E731
    print("measure(quick=True), first run (compiles the kernels unless cached):")
    quick_cold = _gpu.measure(0, quick=True, progress=progress)
    print(f"  -> {quick_cold['duration_s']:.2f} s")
    report["nvrtc"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in _gpu.nvrtc_info().items()}
    t0 = time.perf_counter()
    print("measure(quick=True), second run (cubins cached):")
    quick = _gpu.measure(0, quick=True, progress=progress)
    print(f"  -> {quick['duration_s']:.2f} s")
    results = {"quick": quick, "quick_cold_duration_s": quick_cold["duration_s"]}
    final = quick
    if args.full:
        t0 = time.perf_counter()
        print("measure(quick=False):")
        full = _gpu.measure(0, quick=False, progress=progress)
        print(f"  -> {full['duration_s']:.2f} s")
        results["full"] = full
        final = full

    device = final["device"]
    sheet, sheet_source = datasheet_for(device["name"])
    reference = {}
    if not args.no_torch:
        try:
            reference = torch_rates()
        except Exception as exc:  # noqa: BLE001 - the comparison is optional; say why it is missing
            print(f"PyTorch reference rates unavailable: {exc!r}")
    report.update(results=results, datasheet=sheet, datasheet_source=sheet_source, torch=reference,
                  device_info=_gpu.device_info(0))

    print()
    print(f"Device: {device['name']} (cc {device['compute_capability'][0]}.{device['compute_capability'][1]}, "
          f"{device['sm_count']} SMs, boost clock {device['clock_hz'] or 0:.4g} Hz, theoretical DRAM "
          f"{fmt(device['memory_bandwidth_theoretical'])} TB/s), fingerprint {device['fingerprint']}")
    print(f"NVRTC {report['nvrtc']['version']} from {report['nvrtc']['path']}; datasheet: {sheet_source}")
    if reference:
        print(f"PyTorch {reference['torch']}")
    print()
    print(f"{'ceiling':24} {'quick':>9} {'final':>9} {'datasheet':>9} {'vs sheet':>8} {'torch':>9} {'vs torch':>8}"
          f" {'SM GHz':>7}   (T = 1e12 per second; SM clock of the final run, measured in the kernel)")
    torch_ref = {"matrix/bfloat16": reference.get("matmul_bf16")}
    clocks = final.get("sm_clock_hz", {})
    rows = [(k, quick["peaks"][k], final["peaks"][k], sheet.get(k), torch_ref.get(k), clocks.get(k))
            for k in _gpu.PEAK_KEYS]
    for k in _gpu.BANDWIDTH_KEYS:
        rows.append((f"bandwidth/{k}", quick["bandwidth"][k], final["bandwidth"][k],
                     sheet.get("DRAM") if k.startswith("DRAM") else None,
                     reference.get("copy") if k in ("DRAM", "DRAM_copy") else None, clocks.get(k)))
    for key, q, f, s, t, c in rows:
        print(f"{key:24} {fmt(q)} {fmt(f)} {fmt(s)} {ratio(f, s):>8} {fmt(t)} {ratio(f, t):>8} "
              f"{fmt(c, 1e9):>7}")
    for note in final.get("notes", []):
        print(f"note: {note}")

    print()
    print("How each figure was measured (final run):")
    for key, text in final["method"].items():
        print(f"  {key}: {text}")

    checks = []
    copy, ref_copy = final["bandwidth"]["DRAM_copy"], reference.get("copy")
    checks.append(("DRAM copy >= 95% of PyTorch copy", copy, ref_copy, 0.95))
    fp32, sheet_fp32 = final["peaks"]["vector/float32"], sheet.get("vector/float32")
    checks.append(("fp32 FMA >= 90% of datasheet", fp32, sheet_fp32, 0.90))
    bf16, ref_mm = final["peaks"]["matrix/bfloat16"], reference.get("matmul_bf16")
    checks.append(("bf16 tensor >= 95% of PyTorch matmul", bf16, ref_mm, 0.95))
    checks.append(("quick ceilings (cubins cached) in <= 10 s", 10.0, quick["duration_s"], 1.0))
    print()
    print("Targets:")
    report["targets"] = []
    for label, value, ref, want in checks:
        if not value or not ref:
            verdict = "NOT CHECKED (no reference)"
        else:
            verdict = ("MET" if value / ref >= want else "MISSED") + f" ({value / ref:.1%})"
        report["targets"].append({"target": label, "value": value, "reference": ref, "verdict": verdict})
        print(f"  {label:40} {verdict}")

    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        print(f"\nfull results: {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except _gpu.CudaUnavailableError as exc:
        print(f"CUDA is not usable here: {exc}", file=sys.stderr)
        sys.exit(2)
