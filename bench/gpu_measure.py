"""roofline.measure on a CUDA device: per-op CUDA-event timing, FlopCounterMode equality on the CUDA attention and
matmul kernels, classification against measured (or datasheet) GPU ceilings. Prints a PASS/FAIL line per check.

    python bench/gpu_measure.py
"""

import sys

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import roofline


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 1
    dev = torch.device("cuda")
    print("device:", torch.cuda.get_device_name(dev))
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
        failures += not ok

    torch.manual_seed(0)
    b, h, s, d = 4, 16, 2048, 64
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def work():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.float().sum().backward()
        return x @ w

    work()
    torch.cuda.synchronize()
    with FlopCounterMode(display=False) as fcm:
        work()
    with roofline.measure(timing="op", ceilings="datasheet") as r:
        work()
    check("flop_counter_compatible == FlopCounterMode", r.flop_counter_compatible() == fcm.get_flop_counts())
    attn = {n: row for n, row in r.by_op().items() if "attention" in n}
    print("attention ops:", {n: (row["matrix_flops"], row["calls"]) for n, row in attn.items()})
    fwd_full = 2 * b * h * s * s * (d + d)
    fwd_causal = 2 * b * h * (s * (s + 1) // 2) * (d + d)
    fwd = [row for n, row in attn.items() if "backward" not in n]
    check("causal forward counted as S(S+1)/2 pairs", bool(fwd) and fwd[0]["matrix_flops"] == fwd_causal,
          f"({fwd[0]['matrix_flops'] if fwd else None} vs {fwd_causal}; FlopCounterMode counts {fwd_full})")
    times = r.records["t_end"] - r.records["t_start"]
    check("every op timed by CUDA events", bool(torch.tensor(times).isfinite().all()))
    check("sum of op times <= wall time", float(times.sum()) <= r.wall_time, f"({times.sum():.4f} vs {r.wall_time:.4f} s)")
    print(r)
    try:
        rm = None
        with roofline.measure(timing="op", ceilings="measured") as rm:
            work()
        print(rm.table(top=8))
        check("classified against measured GPU ceilings", rm.ceilings is not None)
    except Exception as e:  # report, do not hide
        check("measured GPU ceilings", False, repr(e))
    print(r.project("H100 SXM").summary(top=5))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
