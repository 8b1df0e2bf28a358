"""A torch.compile'd model under ``roofline.measure``: does it stay compiled, and what does measuring cost?

For each model (an MLP with LayerNorm+GELU, ResNet-18 at 64x64, GPT-2 small with 2 layers; ``gpt2-tiny``, the
same at 128 wide, on request), training step and inference, prints side by side: the bare compiled step time, the compiled step under ``measure(timing="model")``
(a block of ``--steps`` steps, divided by the steps), the eager step time, the ratio measured / bare compiled,
and whether the counts of the compiled step equal the eager step's: ``matrix=`` (matrix FLOPs) and ``struct=`` (``flop_counter_compatible()``
against FlopCounterMode's ``get_flop_counts()``, module by module; the differing modules are listed).

    nice -n 10 python bench/compile_overhead.py [--models mlp,resnet18,gpt2,gpt2-tiny] [--steps 10] [--modes train,infer]

Compilation is slow on a small machine (minutes for ResNet-18 and GPT-2 training). The three steps are run
in interleaved rounds of ``--steps`` steps and the fastest round of each is shown; on a shared machine they are still
noisy (``--threads 1 --clock cpu`` helps).
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

import roofline


def mlp():
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(256, 2048)
            self.ln = torch.nn.LayerNorm(2048)
            self.fc2 = torch.nn.Linear(2048, 256)

        def forward(self, x):
            return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x))))

    return MLP(), (torch.randn(256, 256),), lambda m, x: m(x).sum()


def resnet18():
    import torchvision

    return torchvision.models.resnet18(num_classes=10), (torch.randn(2, 3, 64, 64),), lambda m, x: m(x).sum()


def _gpt2(n_embd, n_head, vocab):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=n_embd, n_head=n_head, n_positions=128, vocab_size=vocab,
                     attn_implementation="sdpa", bos_token_id=0, eos_token_id=0, loss_type="ForCausalLM")
    ids = torch.randint(0, vocab, (2, 64))
    return GPT2LMHeadModel(cfg), (ids,), lambda m, x: m(x, labels=x).loss


def gpt2():
    """GPT-2 small's layer (768 wide, 12 heads) and vocabulary (50257), 2 layers, 2 sequences of 64 tokens."""
    return _gpt2(768, 12, 50257)


def gpt2_tiny():
    """The same graph at 128 wide, 4 heads, 1000 tokens: a step of a few milliseconds, where the fixed cost of a
    block (entering, the first call of each graph, the report) is a visible share of a 10-step block."""
    return _gpt2(128, 4, 1000)


MODELS = {"mlp": mlp, "resnet18": resnet18, "gpt2": gpt2, "gpt2-tiny": gpt2_tiny}


def _step(model, inputs, loss_fn, train):
    if train:
        loss_fn(model, *inputs).backward()
    else:
        with torch.no_grad():
            loss_fn(model, *inputs)


def roofline_eager_matrix(model, inputs, loss_fn, train):
    with roofline.measure(model, timing=None) as r:
        _step(model, inputs, loss_fn, train)
    return r.matrix_flops


def _compat(d):
    return {m: {str(k): v for k, v in ops.items()} for m, ops in d.items()}


_CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter


def _time(fn):
    t0 = clock()
    fn()
    return clock() - t0


def run(name, train, steps, rounds=5):
    torch.manual_seed(0)
    model, inputs, loss_fn = MODELS[name]()
    model.train(train)
    with FlopCounterMode(display=False) as fc:
        _step(model, inputs, loss_fn, train)
    eager_counts = _compat(fc.get_flop_counts())
    eager_matrix = roofline_eager_matrix(model, inputs, loss_fn, train)
    cmodel = torch.compile(model)
    t0 = time.perf_counter()
    with roofline.measure(cmodel, timing="model") as first:  # the compilation happens in the block
        _step(cmodel, inputs, loss_fn, train)
    compile_s = time.perf_counter() - t0
    for _ in range(2):  # warm up outside too (no recompilation expected)
        _step(cmodel, inputs, loss_fn, train)

    def bare_steps():
        for _ in range(steps):
            _step(cmodel, inputs, loss_fn, train)

    def measured():  # one block of `steps` steps: the per-block cost (op table, report) is shared by them
        with roofline.measure(cmodel, timing="model") as r:
            for _ in range(steps):
                _step(cmodel, inputs, loss_fn, train)
        measured.last = r

    def eager_steps():
        for _ in range(steps):
            _step(model, inputs, loss_fn, train)

    # interleaved rounds, so that a change of machine load hits the three alike; the fastest round of each is kept
    ts = {"bare": [], "meas": [], "eager": []}
    for _ in range(rounds):
        ts["bare"].append(_time(bare_steps) / steps)
        ts["meas"].append(_time(measured) / steps)
        ts["eager"].append(_time(eager_steps) / steps)
    bare, meas, eager = (min(ts[k]) for k in ("bare", "meas", "eager"))
    r = measured.last
    same = _compat(first.flop_counter_compatible()) == eager_counts  # one step, as FlopCounterMode saw it
    matrix_same = first.matrix_flops == eager_matrix and r.matrix_flops == steps * eager_matrix
    c = dict(r.compiled or {}, graph_breaks=(first.compiled or {}).get("graph_breaks", 0))  # compiled in `first`
    print(f"{name:<9} {'train' if train else 'infer':<6} {bare * 1e3:>10.2f} {meas * 1e3:>10.2f} "
          f"{eager * 1e3:>10.2f} {meas / bare:>7.3f} {'yes' if matrix_same else 'NO':>7} {'yes' if same else 'NO':>7} "
          f"{c.get('graphs', 0):>6} "
          f"{len(c.get('kernels', ())):>7} {c.get('graph_breaks', 0):>6} {compile_s:>9.1f}", flush=True)
    if not same:
        got = _compat(first.flop_counter_compatible())
        for m in sorted(set(got) | set(eager_counts)):
            if got.get(m) != eager_counts.get(m):
                print(f"   {m}: compiled {got.get(m)} eager {eager_counts.get(m)}")
    return meas / bare, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp,resnet18,gpt2")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the fastest of each variant is shown")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--clock", choices=sorted(_CLOCK), default="wall",
                    help="wall: time.perf_counter; cpu: time.process_time (the process's CPU time: on a machine "
                         "shared with other work, with --threads 1, it is much less noisy than the wall clock)")
    a = ap.parse_args()
    global clock
    clock = _CLOCK[a.clock]
    if a.threads:
        torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.clock} clock")
    print(f"{'model':<9} {'mode':<6} {'bare ms':>10} {'meas. ms':>10} {'eager ms':>10} {'ratio':>7} "
          f"{'matrix=':>7} {'struct=':>7} {'graphs':>6} {'kernels':>7} {'breaks':>6} {'compile s':>9}")
    worst = 0.0
    for name in a.models.split(","):
        for mode in a.modes.split(","):
            ratio, _ = run(name, mode == "train", a.steps, a.rounds)
            worst = max(worst, ratio)
    print(f"worst ratio measured / bare compiled: {worst:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
