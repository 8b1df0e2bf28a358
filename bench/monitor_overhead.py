"""What ``roofline.monitor`` costs per training step, beside the bare loop, on CPU: GPT-2 small (``GPT2Config()``,
random weights, a short sequence) and torchvision's ResNet-18 (a small batch), each a full training step (forward,
loss, backward, optimizer step).

One process, one model per workload, the two loops side by side: each round runs ``--steps`` bare steps and
``--steps`` steps ending with ``mon.step(...)``, in alternating order (the machine's drifts hit both alike); a
round's figure is the difference of the two median step times over the bare median, and the printout gives the
median over rounds with a 90% bootstrap interval. On a shared machine a step's time varies by more than the
monitor's cost, so the time spent inside ``mon.step()`` is printed too: on the CPU the monitor does nothing during a
step (no hook, no dispatch mode), so that time is all it adds to a timed step. A counted step (inside a measure
block: the first one, one after a change of signature, and one every ``recount_every`` steps) costs more; its extra
time over a bare step is printed, and its share spread over ``recount_every`` steps.

It also checks, on the last monitored step, that the per-step figures are the counted work over the measured step
time: achieved FLOP/s = FLOPs / time, and MFU = (the time each op's FLOPs take at its own peak, summed) / time.

    python bench/monitor_overhead.py                       # 10 rounds of 3 + 3 steps per workload
    python bench/monitor_overhead.py --rounds 3 --steps 2  # a quick run
"""

import argparse
import gc
import math
import random
import statistics
import time

import numpy as np
import torch

import roofline


def gpt2(seq):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(loss_type="ForCausalLM"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (1, seq))

    def step():
        model(ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step, ids, ids.numel()


def resnet18(batch):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))

    def step():
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step, (x, y), None


def interval(values, rng, n_boot=2000):
    """The median of ``values`` and a 90% bootstrap interval of it."""
    n = len(values)
    boots = sorted(statistics.median(rng.choice(values) for _ in range(n)) for _ in range(n_boot))
    return statistics.median(values), boots[int(0.05 * (n_boot - 1))], boots[int(0.95 * (n_boot - 1))]


def run(name, make, rounds, steps, recount_every, rng):
    model, train_step, inputs, tokens = make()
    for _ in range(2):  # warm-up: optimizer state, allocator, kernel choice
        train_step()
    mon = roofline.monitor(model, recount_every=None).start()
    # step 0 (timed only) and step 1 (counted): the counting's cost, then timed steps only
    for _ in range(2):
        train_step()
        mon.step(inputs=inputs, token_count=tokens)
    counted = mon.history[-1]
    assert counted["recounted"]
    rows = {"bare": [], "monitor": []}
    alone = {"bare": [], "monitor": []}  # the train step alone, without the mon.step() call
    in_call = []
    last = None
    for r in range(rounds):
        order = ("bare", "monitor") if r % 2 == 0 else ("monitor", "bare")
        for variant in order:
            gc.collect()
            times, steps_alone = [], []
            for _ in range(steps):
                t0 = time.perf_counter()
                train_step()
                t1 = time.perf_counter()
                if variant == "monitor":
                    mon.step(inputs=inputs, token_count=tokens)
                    in_call.append(time.perf_counter() - t1)
                times.append(time.perf_counter() - t0)
                steps_alone.append(t1 - t0)
            if variant == "monitor":
                last = (mon.history[-1], times[-1])
            rows[variant].append(statistics.median(times))
            alone[variant].append(statistics.median(steps_alone))
    mon.stop()
    bare = statistics.median(rows["bare"])
    per_round = [(m - b) / b for m, b in zip(rows["monitor"], rows["bare"])]
    mid, lo, hi = interval(per_round, rng)
    call = statistics.median(in_call)
    extra = counted["time_s"] - bare
    print(f"\n{name}")
    print(f"  bare step (median of {rounds} rounds x {steps} steps): {bare * 1e3:.1f} ms; "
          f"rounds' spread {min(rows['bare']) * 1e3:.1f} to {max(rows['bare']) * 1e3:.1f} ms")
    print(f"  monitored - bare, side by side: {mid * 100:+.2f}% of the step (90% interval {lo * 100:+.2f}% to "
          f"{hi * 100:+.2f}%)")
    mid_a, lo_a, hi_a = interval([(m - b) / b for m, b in zip(alone["monitor"], alone["bare"])], rng)
    print(f"  the train step alone (mon.step() left out), monitored rounds - bare: {mid_a * 100:+.2f}% (90% interval "
          f"{lo_a * 100:+.2f}% to {hi_a * 100:+.2f}%): what the monitor changes inside a step, plus the machine's noise")
    print(f"  time inside mon.step() on a timed step: {call * 1e6:.0f} us = {call / bare * 100:.3f}% of the step "
          f"(max {max(in_call) * 1e6:.0f} us)")
    print(f"  counted step: {counted['time_s'] * 1e3:.1f} ms, {extra / bare * 100:+.0f}% over a bare step; spread "
          f"over recount_every={recount_every} steps: {extra / bare / recount_every * 100:.3f}% per step")
    print(f"  per-step cost at recount_every={recount_every}: {(call / bare + extra / bare / recount_every) * 100:.3f}% "
          f"of the step (target <= 1%)")
    m, bench_t = last
    rep = mon.last_report
    c = rep.classification()
    ok = (c["flops"] > 0) & np.isfinite(c["peak"]) & (c["peak"] > 0)
    peak_s = float((c["flops"][ok] / c["peak"][ok]).sum())
    flops = rep.matrix_flops + rep.vector_flops
    t = m["time_s"]
    print(f"  step {m['step']}: {flops:.4g} FLOPs counted (step {m['counts_from']}), {t * 1e3:.1f} ms measured "
          f"(the bench's clock around it: {bench_t * 1e3:.1f} ms)")
    print(f"    achieved {m['achieved_flops']:.6g} FLOP/s = FLOPs / time {flops / t:.6g}: "
          f"{math.isclose(m['achieved_flops'], flops / t, rel_tol=1e-12)}")
    print(f"    MFU {m['mfu']:.6g} = (sum of each op's FLOPs / its peak) / time {peak_s / t:.6g}: "
          f"{math.isclose(m['mfu'], peak_s / t, rel_tol=1e-12)}; tokens/s {m['tokens_per_s']}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="rounds per workload (default 10)")
    p.add_argument("--steps", type=int, default=3, help="steps per variant per round (default 3)")
    p.add_argument("--seq", type=int, default=16, help="GPT-2 sequence length (default 16)")
    p.add_argument("--batch", type=int, default=2, help="ResNet-18 batch (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier on a shared machine)")
    p.add_argument("--recount-every", type=int, default=500, help="the recount period the per-step figure assumes")
    p.add_argument("--workload", choices=("all", "gpt2", "resnet18"), default="all")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    rng = random.Random(1)
    print(f"roofline {roofline.__version__}, torch {torch.__version__}, {a.threads} thread(s), "
          f"ceilings: {roofline.ceilings().name}")
    if a.workload in ("all", "gpt2"):
        run(f"GPT-2 small (GPT2Config()), AdamW training step, CPU, batch 1, seq {a.seq}",
            lambda: gpt2(a.seq), a.rounds, a.steps, a.recount_every, rng)
    if a.workload in ("all", "resnet18"):
        run(f"ResNet-18, SGD training step, CPU, batch {a.batch}, 224x224",
            lambda: resnet18(a.batch), a.rounds, a.steps, a.recount_every, rng)


if __name__ == "__main__":
    main()
