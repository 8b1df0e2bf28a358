"""roofline.monitor: counted MFU on every step of a loop, one step counted, the others timed at the step boundary."""

import time
import types

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline._loops import _monitor  # noqa: E402

D_IN, D_H, D_OUT = 16, 32, 4
VECTOR_PEAK, MATRIX_PEAK, DRAM = 1e12, 2e12, 1e11  # the test device's float32 peaks and bandwidth
CEIL = ceilings(vector=VECTOR_PEAK, matrix=MATRIX_PEAK, dram=DRAM)


def _matrix_flops(b):
    """One SGD training step of Linear(16, 32) -> ReLU -> Linear(32, 4) on a batch of b: 2*M*N*K per product,
    2 forward and 3 backward (no input gradient for the first layer)."""
    return (2 * b * D_IN * D_H + 2 * b * D_H * D_OUT) + (2 * (2 * b * D_H * D_OUT) + 2 * b * D_IN * D_H)


def _train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D_IN, D_H), torch.nn.ReLU(), torch.nn.Linear(D_H, D_OUT))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(x, extra=False):
        opt.zero_grad()
        y = model(x)
        if extra:
            y = y * 2.0  # one more op, same shapes
        y.square().mean().backward()
        opt.step()

    return model, step


def test_per_step_mfu_is_counted_flops_over_measured_time():
    model, step = _train()
    x = torch.randn(8, D_IN)
    seen, before, after = [], [], []
    with roofline.monitor(model, on_step=seen.append, ceilings=CEIL) as mon:
        for _ in range(6):
            step(x)
            before.append(time.perf_counter())
            mon.step(inputs=x, tokens=8)
            after.append(time.perf_counter())
    assert seen == list(mon.history) and [m["step"] for m in seen] == list(range(6))
    assert [m["recounted"] for m in seen] == [False, True, False, False, False, False]
    assert seen[0]["flops"] is None and seen[0]["mfu"] is None and seen[0]["counts_from"] is None  # warm-up
    r = mon.last_report
    assert r.matrix_flops == _matrix_flops(8)
    # the peak time of the counted step, from its records: matrix records at the matrix peak, the others at the
    # vector peak (float32 throughout)
    rec = r.records
    assert {r.dtype_names[int(d)] for d, f in zip(rec["dtype"], rec["matrix_flops"] + rec["vector_flops"]) if f} \
        == {"float32"}
    peak_s = sum(int(m + v) / (MATRIX_PEAK if m else VECTOR_PEAK)
                 for m, v in zip(rec["matrix_flops"], rec["vector_flops"]))
    flops = r.matrix_flops + r.vector_flops
    nbytes = r.bytes_read + r.bytes_written
    assert seen[1]["time_s"] == r.wall_time  # the counted step: the block's own time
    for m in seen[1:]:
        t = m["time_s"]
        assert m["counts_from"] == 1 and m["flops"] == flops and m["bytes"] == nbytes
        assert m["mfu"] == pytest.approx(peak_s / t, rel=1e-12)
        assert m["hfu"] == m["mfu"]  # nothing recomputed
        assert m["mbu"] == pytest.approx(nbytes / (t * DRAM), rel=1e-12)
        assert m["achieved_flops"] == pytest.approx(flops / t, rel=1e-12)
        assert m["achieved_bytes"] == pytest.approx(nbytes / t, rel=1e-12)
        assert m["tokens"] == 8 and m["tokens_per_s"] == pytest.approx(8 / t, rel=1e-12)
    for k in range(2, 6):  # timed steps: from inside the previous step() call to inside this one
        assert before[k] - after[k - 1] <= seen[k]["time_s"] <= after[k] - before[k - 1]


def test_a_shape_change_makes_the_next_step_counted_and_shapes_seen_before_are_not_recounted():
    model, step = _train()
    batches = [8, 8, 8, 8, 4, 4, 4, 8, 8]
    with roofline.monitor(model, ceilings=CEIL) as mon:
        for b in batches:
            x = torch.randn(b, D_IN)
            step(x)
            mon.step(inputs=x)
    h = list(mon.history)
    assert [m["recounted"] for m in h] == [False, True, False, False, False, True, False, False, False]
    assert [m["changed"] for m in h] == [False, False, False, False, True, False, False, True, False]
    assert h[4]["flops"] is None and h[4]["mfu"] is None  # the step that changed: no counts of its shapes yet
    assert [m["counts_from"] for m in h[5:]] == [5, 5, 1, 1]  # batch 8 again: step 1's counts, no recount
    assert mon.last_report.matrix_flops == _matrix_flops(4)
    # the module mode is part of the signature: eval() changes what the step runs
    with roofline.monitor(model, ceilings=CEIL) as mon:
        x = torch.randn(8, D_IN)
        for k in range(5):
            if k == 3:
                model.eval()
            step(x)
            mon.step(inputs=x)
    assert [m["recounted"] for m in mon.history] == [False, True, False, False, True]


def test_the_periodic_recount_finds_other_ops_with_the_same_signature():
    model, step = _train()
    x = torch.randn(8, D_IN)
    with pytest.warns(UserWarning, match=r"step 4 ran other ops than step 1, .* steps 2 to 3 of that signature "
                                         r"were given step 1's counts"):
        with roofline.monitor(model, ceilings=CEIL, recount_every=3) as mon:
            for k in range(6):
                step(x, extra=k >= 3)  # an op more from step 3, with the same shapes: not seen until the recount
                mon.step(inputs=x)
    h = list(mon.history)
    assert [m["recounted"] for m in h] == [False, True, False, False, True, False]
    assert h[4]["changed"] is True and h[5]["counts_from"] == 4
    # the extra multiply by 2.0: one FLOP per output element forward, and its gradient (times 2.0) backward
    assert h[5]["flops"] == h[3]["flops"] + 2 * 8 * D_OUT


def test_on_step_runs_outside_the_counted_step():
    model, step = _train()
    x = torch.randn(8, D_IN)
    with roofline.monitor(model, ceilings=CEIL, on_step=lambda m: torch.ones(7).exp()) as mon:
        for _ in range(3):
            step(x)
            mon.step(inputs=x)
    assert [m["recounted"] for m in mon.history] == [False, True, False]
    assert "aten.exp.default" not in mon.last_report.by_op()  # step 0's on_step ran before step 1's block opened


class _FakeEvent:
    """A CUDA event on one stream: recorded at a time set by the test; events complete in the order they were
    recorded, up to the one the test (or a synchronize) completes."""

    now, done_upto, made = 0.0, -1, []

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t, self.index = None, len(_FakeEvent.made)
        _FakeEvent.made.append(self)

    def record(self):
        self.t = _FakeEvent.now

    def query(self):
        return self.index <= _FakeEvent.done_upto

    def synchronize(self):
        _FakeEvent.done_upto = max(_FakeEvent.done_upto, self.index)

    def elapsed_time(self, end):
        assert self.query() and end.query()
        return (end.t - self.t) * 1e3


def test_on_cuda_a_step_is_timed_by_events_without_synchronising(monkeypatch):
    monkeypatch.setattr(_monitor, "_clock_for", lambda model: _monitor._EventClock(_FakeEvent))
    _FakeEvent.made, _FakeEvent.now, _FakeEvent.done_upto = [], 0.0, -1
    model, step = _train()
    x = torch.randn(8, D_IN)
    seen = []
    mon = roofline.monitor(model, on_step=seen.append, ceilings=CEIL, warmup=3, recount_every=None).start()
    for k in range(3):
        _FakeEvent.now = 0.5 * (k + 1) ** 2  # step k ends at 0.5, 2.0, 4.5 s
        step(x)
        mon.step(inputs=x)
    assert seen == []  # no event has completed: nothing handed over, nothing waited for
    _FakeEvent.done_upto = 1  # the GPU has reached step 0's end
    _FakeEvent.now = 8.0
    step(x)
    mon.step(inputs=x)  # step 3 (counted): step 0 is handed over, the others wait for their events
    assert [m["step"] for m in seen] == [0] and seen[0]["time_s"] == 0.5
    mon.stop()  # waits for the last events
    assert [m["step"] for m in seen] == [0, 1, 2, 3]
    assert [m["time_s"] for m in seen[:3]] == [0.5, 1.5, 2.5] and seen[3]["recounted"]
    assert seen[3]["time_s"] == mon.last_report.wall_time


def test_the_clock_is_cuda_events_for_a_model_on_cuda():
    on_cuda = types.SimpleNamespace(parameters=lambda: iter([types.SimpleNamespace(device=torch.device("cuda", 0))]))
    assert isinstance(_monitor._clock_for(on_cuda), _monitor._EventClock)
    assert isinstance(_monitor._clock_for(torch.nn.Linear(2, 2)), _monitor._PerfClock)


def _torch_state():
    import torch.nn.modules.module as mm
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    hooks = tuple(tuple(d.items()) for d in (mm._global_forward_pre_hooks, mm._global_forward_hooks,
                                             mm._global_backward_hooks))
    return tuple(_get_current_dispatch_mode_stack()), torch._C._len_torch_function_stack(), hooks


def test_an_exception_in_the_loop_leaves_torch_as_it_was():
    model, step = _train()
    x = torch.randn(8, D_IN)
    before = _torch_state()
    with pytest.raises(ZeroDivisionError):
        with roofline.monitor(model, ceilings=CEIL) as mon:
            for k in range(4):
                step(x)
                if k == 1:  # step 1 is being counted: its block is open
                    1 / 0
                mon.step(inputs=x)
    assert _torch_state() == before and [m["step"] for m in mon.history] == [0]
    with pytest.raises(RuntimeError, match=r"monitor\(\.\.\.\)\.step\(\) called outside start\(\)/stop\(\)"):
        mon.step()


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(warmup=-1), ValueError, "monitor: warmup must be an int >= 0"),
    (dict(recount_every=1.5), TypeError, r"monitor: recount_every must be an int >= 0, got 1.5 \(float\)"),
    (dict(history_size=0), ValueError, r"monitor: history_size must be an int in \[1, \d+\], got 0"),
    (dict(max_signatures=0), ValueError, "monitor: max_signatures must be an int >= 1"),
    (dict(on_step="print"), TypeError, "monitor: on_step must be None or a callable"),
    (dict(ceilings=1.5), TypeError, "ceilings must be"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        roofline.monitor(**kwargs)


def test_misuse():
    mon = roofline.monitor(ceilings=CEIL)
    with pytest.raises(RuntimeError, match=r"start\(\) it first"):
        mon.step()
    mon.start()
    with pytest.raises(ValueError, match=r"monitor.step: tokens must be an int in \[0, \d+\], got -1"):
        mon.step(tokens=-1)
    with pytest.raises(TypeError, match=r"monitor.step: tokens must be an int in \[0, \d+\], got 1.5 \(float\)"):
        mon.step(tokens=1.5)
    with pytest.raises(RuntimeError, match="already been started"):
        mon.start()
    mon.stop()
    with pytest.raises(RuntimeError, match="already stopped"):
        mon.stop()
