"""Per-op overhead of counting alone and of counting + per-op timing (timing="op"), on CPU, beside the bare run.

The first workload isolates the per-op path (tiny ops, no modules); the model workloads also include the per-module
cost of attributing ops to modules (hooks on every module call) and the fixed cost of a measure block, spread over
their op calls.

Each variant runs interleaved with the others (so drifts in machine load hit all alike); medians of repeats after a
warm-up; overhead per op = (variant - bare) / number of op calls.

    python bench/timing_overhead.py [--repeats N]
"""

import argparse
import statistics
import time

import torch

import roofline


def workloads():
    import torchvision
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    resnet = torchvision.models.resnet50().eval()
    img = torch.randn(1, 3, 224, 224)

    def resnet_step():
        with torch.no_grad():
            resnet(img)

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=4))
    ids = torch.randint(0, 50257, (1, 128))

    def gpt2_step():
        gpt2(ids, labels=ids).loss.backward()
        gpt2.zero_grad(set_to_none=True)

    a, b = torch.ones(4), torch.ones(4)

    def tiny_ops():  # the per-op path alone: no modules, ops that take well under a microsecond
        for _ in range(2000):
            torch.add(a, b)

    return [("2000 tiny adds (no modules)", None, tiny_ops),
            ("ResNet-50 inference, batch 1", resnet, resnet_step),
            ("GPT-2 (4 layers) fwd+bwd, seq 128", gpt2, gpt2_step)]


def once(fn, ctx=None):
    t0 = time.perf_counter()
    if ctx is None:
        fn()
    else:
        with ctx:
            fn()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"{'workload':<36} {'ops':>6} {'bare ms':>9} {'count ms':>9} {'count+time ms':>14} "
          f"{'count us/op':>12} {'timing us/op':>13}")
    for name, model, step in workloads():
        with roofline.measure(model, timing=None) as r:
            step()
        n = len(r.records)
        step()  # warm-up
        bare, count, timed = [], [], []
        for _ in range(args.repeats):
            bare.append(once(step))
            count.append(once(step, roofline.measure(model, timing=None)))
            timed.append(once(step, roofline.measure(model, timing="op")))
        b, c, t = (statistics.median(x) for x in (bare, count, timed))
        print(f"{name:<36} {n:>6} {b * 1e3:>9.1f} {c * 1e3:>9.1f} {t * 1e3:>14.1f} "
              f"{(c - b) / n * 1e6:>12.1f} {(t - c) / n * 1e6:>13.1f}")
    print("count us/op: counting alone over the bare run; timing us/op: what timing='op' adds on top of counting.")
    print("On the models these include module attribution and the block's fixed cost, spread over the op calls.")


if __name__ == "__main__":
    main()
