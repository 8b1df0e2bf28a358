"""A CPU workload on a machine with CUDA available leaves CUDA alone: a measure block (either timing), the steady
loop and the instrumentation's overhead measurement neither create CUDA events nor initialise the device while the
process has not used CUDA itself (initialising costs seconds and device memory, and a process forked after it,
DataLoader workers included, can no longer use CUDA). Without a GPU, CUDA is made to look available and every call
that would initialise it raises."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._capture import _session  # noqa: E402


class _Touched(AssertionError):
    pass


def _boom(*args, **kwargs):
    raise _Touched("CUDA touched by a CPU-only block")


@pytest.fixture
def cuda_unused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for name in ("Event", "_lazy_init", "synchronize", "current_device", "get_device_properties", "init"):
        monkeypatch.setattr(torch.cuda, name, _boom)
    # the overhead is measured once per process: measured again here, with CUDA looking available
    monkeypatch.setattr(_session, "_OVERHEAD", {})
    yield


@pytest.mark.parametrize("timing", ["op", "model"])
def test_a_cpu_block_leaves_an_unused_cuda_alone(cuda_unused, timing):
    m = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    with roofline.measure(m, timing=timing) as r:
        m(x).sum().backward()
    # 2 x 8 x 4 multiply-adds forward, twice that backward (grad of the weight; no grad of the input)
    assert r.total_flops >= 2 * (2 * 8 * 4) and r.wall_time > 0
    assert "cuda_timing_per_op_s" not in r.overhead
    if timing == "op":
        assert r.timed


def test_the_steady_loop_leaves_an_unused_cuda_alone(cuda_unused):
    m = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    r = roofline.steady(lambda: m(x).sum().backward(), m, timing="op", repeat=2, step_time="ops_min")
    assert r.meta["steady"]["step_time"]["kind"] == "ops_min" and "missing" not in r.meta["steady"]["step_time"]


class _FakeEvent:
    """A CUDA event whose recording time is the host clock's, in milliseconds from the first one made."""
    made = []

    def __init__(self, enable_timing=False):
        self.t = None
        self.timing = enable_timing
        _FakeEvent.made.append(self)

    def record(self):
        import time
        self.t = time.perf_counter() * 1e3

    def elapsed_time(self, other):
        if not (self.timing and other.timing):  # as CUDA's: only events made with enable_timing=True
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        return other.t - self.t


def test_the_first_cuda_op_of_a_block_records_the_base_event(monkeypatch):
    # CUDA unused at entry; the block's ops are taken for CUDA ops: the first one records the base event, and the
    # ops' times, resolved from the events at exit, count from the block's start, in call order, within the block
    from roofline._capture import _modes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    init = {"done": False}
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: init["done"])
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: syncs.append(a))
    monkeypatch.setattr(_modes, "_on_cuda", lambda args, kwargs=None: True)
    monkeypatch.setattr(_session, "_OVERHEAD", {"counting_per_op_s": 0.0, "timing_per_op_s": 0.0})
    _FakeEvent.made.clear()
    m = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    import time
    with roofline.measure(m, timing="op") as r:
        time.sleep(0.01)  # 10 ms before the first op: the base event's offset
        m(x).sum()
    assert len(_FakeEvent.made) == 1 + 2 * len(r.records)  # one base event, a pair per op
    assert len(syncs) == 1  # the device synchronised once, before the base event (CUDA was not in use at entry)
    start, end = r.records["t_start"], r.records["t_end"]
    assert start[0] >= 0.01  # counted from the block's start, not from the first op
    assert (start[1:] >= end[:-1]).all() and (end >= start).all() and end[-1] <= r.wall_time
