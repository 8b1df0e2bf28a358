"""No memory leak: the resident set does not grow over 1,000 measure cycles of a tiny model, nor over 10**6
cost-model evaluations through the recorder that ``roofline.cost`` uses (plus 100,000 ``roofline.cost`` calls,
error paths included).

Each part runs in its own subprocess, so the rest of the suite does not disturb the resident set; RSS is read from
/proc/self/statm after a warm-up and again at the end, after a garbage collection. The bound is 1 MB in all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm (Linux)")
LIMIT = 1 << 20  # bytes

RSS = textwrap.dedent("""
    import gc, os
    def rss():
        gc.collect()
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
""")

MEASURE = RSS + textwrap.dedent("""
    import torch, roofline
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)

    def cycle():
        with roofline.measure(model, timing="op") as r:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
        assert len(r.records) > 0 and r.matrix_flops > 0

    for _ in range(100):  # warm-up: caches, op resolution, allocator pools
        cycle()
    before = rss()
    for _ in range(1000):
        cycle()
    print("growth", rss() - before)
""")

COST = RSS + textwrap.dedent("""
    import sys
    sys.modules["torch"] = None  # the analytic path, as without torch
    import roofline
    from roofline._counting import _cost
    from roofline._counting._cost import TensorSpec

    a, b, out = TensorSpec((64, 32)), TensorSpec((32, 16), "bf16"), TensorSpec((64, 16))
    calls = [("mm", [(8, 4), (4, 2)], {}), ("add", [(4, 1, 8), (3, 8)], {}),
             ("convolution", [(1, 3, 8, 8), (4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1], {}),
             ("mm", [(3, 4), (5, 6)], {}), ("mm", [(2**40, 2**40), (2**40, 2**40)], {}), ("nope", [], {}),
             ("sum", [(4, 10)], {"out": ()}), ("mm", ["x", None], {})]

    def full_calls(n):
        for i in range(n):
            op, args, kw = calls[i % len(calls)]
            try:
                roofline.cost(op, *args, **kw)
            except (ValueError, TypeError, OverflowError):
                pass

    rec = _cost._get_recorder()
    mm = rec.add_op(roofline._core.K_MM)
    ew = rec.add_op(roofline._core.K_EWISE, 1, 0)
    args_mm, args_ew = (a, b), ([a, out], [1, 2, 3], 2.5, None, True, "x", 2**70)

    def evaluations(n):  # the per-call path of cost(): describe the tensors, evaluate, append a record
        for i in range(n // 1000):
            for _ in range(500):
                rec.record(mm, 0, 0, args_mm, None, out)
                rec.record(ew, 0, 0, args_ew, None, (out, None, [out]))
            rec.clear()

    full_calls(2000)
    evaluations(20000)
    before = rss()
    evaluations(10**6)
    full_calls(100000)
    print("growth", rss() - before)
""")


def _growth(script: str, timeout: int) -> int:
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert p.returncode == 0, p.stderr[-3000:]
    return int(p.stdout.split("growth")[-1])


def test_no_leak_over_1000_measure_cycles():
    pytest.importorskip("torch")
    growth = _growth(MEASURE, timeout=300)
    assert growth < LIMIT, f"RSS grew {growth / 2**20:.2f} MiB over 1,000 measure cycles"


def test_no_leak_over_a_million_cost_evaluations():
    growth = _growth(COST, timeout=300)
    assert growth < LIMIT, f"RSS grew {growth / 2**20:.2f} MiB over 10**6 evaluations and 100,000 cost() calls"
