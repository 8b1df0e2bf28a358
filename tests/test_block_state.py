"""A measure block leaves nothing behind and never miscounts, whatever interrupts it or runs beside it: interrupts on
every line of entering and leaving a block, random interrupts, the attention choice in two threads, interleaved
blocks of asyncio tasks and generators, nested blocks' bookkeeping, misuse of the context manager, and steps that
are generators or coroutines."""

import asyncio
import gc
import importlib.util
import os
import sys
import threading
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch.utils.module_tracker import ModuleTracker  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import roofline  # noqa: E402
from roofline import _core  # noqa: E402

F = torch.nn.functional
_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "interrupt_stress.py")
_spec = importlib.util.spec_from_file_location("roofline_bench_interrupt_stress", _PATH)
stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stress)
global_state = stress.global_state


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())


# ---- an interrupt on any line of entering or leaving a block, or at random -------------------------------------------

class _InterruptAt:
    """A trace function that raises KeyboardInterrupt at the n-th line executed in the frames it traces (every frame
    started while it is set: roofline's, torch's, the standard library's); with n None it only counts."""

    def __init__(self, n=None):
        self.n, self.lines, self.where = n, 0, None

    def __call__(self, frame, event, arg):
        return self._line

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines += 1
            if self.lines == self.n:
                self.where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
                raise KeyboardInterrupt(f"line {self.n}")
        return self._line


def _traced(tracer, fn, *args):
    """fn(*args) with `tracer` set and the garbage collector off (its callbacks would take lines at random)."""
    old = sys.gettrace()
    gc.disable()
    sys.settrace(tracer)
    try:
        return fn(*args)
    finally:
        sys.settrace(old)
        gc.enable()


_Q = torch.empty(1, 2, 8, 4, device="meta", dtype=torch.bfloat16)


def _cut_off_mode_stash():
    """A KeyboardInterrupt raised in torch's ``_pop_mode_temporarily().__exit__`` before it resumes its generator, as
    an interrupt landing there does: the top dispatch mode is off the stack, held by the suspended generator that the
    exception's traceback keeps (its ``finally`` pushes the mode back when it is closed or freed)."""
    import contextlib

    from torch.utils._python_dispatch import _pop_mode_temporarily

    target = contextlib._GeneratorContextManager.__exit__.__code__

    def local(frame, event, arg):
        if event == "line":
            raise KeyboardInterrupt("in _pop_mode_temporarily's __exit__")
        return local

    old = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local if frame.f_code is target else None)
    try:
        with _pop_mode_temporarily():
            pass
    except KeyboardInterrupt as e:
        return e
    finally:
        sys.settrace(old)
    raise AssertionError("the interrupt did not land in _pop_mode_temporarily's __exit__")


def _block_with_interrupt(opts, nested, phase, tracer):
    """One block, `tracer` set while it is entered (phase "enter") or left ("exit"). Returns the global state before
    the block, after it, and whether it was entered."""
    model, x = _model(), torch.randn(2, 4, requires_grad=True)
    outer = roofline.measure(timing=None) if nested else None
    if outer is not None:
        outer.__enter__()
    before = global_state()
    block = roofline.measure(model if opts.get("model") else None, timing=opts["timing"], attention=opts["attention"])
    try:
        _traced(tracer if phase == "enter" else None, block.__enter__)
    except KeyboardInterrupt:
        entered = False
    else:
        entered = True
        model(x).sum().backward()
        if opts["attention"]:
            F.scaled_dot_product_attention(_Q, _Q, _Q, is_causal=True)
        exc = _cut_off_mode_stash() if opts.get("cut") else None
        try:
            _traced(tracer if phase == "exit" else None, block.__exit__,
                    *((type(exc), exc, exc.__traceback__) if exc is not None else (None, None, None)))
        except KeyboardInterrupt:
            pass
        del exc  # with its traceback, the generator it cut off: a generator left suspended pushes its mode back now
    after = global_state()
    if outer is not None:
        outer.__exit__(None, None, None)
    return before, after, entered


_SCENARIOS = [
    ({"model": True, "timing": "op", "attention": "flash"}, False, "enter"),
    ({"model": True, "timing": "op", "attention": "flash"}, False, "exit"),
    ({"model": True, "timing": "model", "attention": None}, True, "enter"),
    ({"model": True, "timing": "model", "attention": None}, True, "exit"),
    ({"model": False, "timing": "model", "attention": None, "cut": True}, False, "exit"),
]


@pytest.mark.parametrize("opts,nested,phase", _SCENARIOS, ids=[
    "model-op-flash-enter", "model-op-flash-exit", "nested-model-enter", "nested-model-exit", "cut-off-mode-exit"])
def test_an_interrupt_on_any_line_of_entering_or_leaving_a_block_leaves_nothing_behind(opts, nested, phase):
    """KeyboardInterrupt raised on each line in turn (one run per line) of every frame that runs while the block is
    entered or left: afterwards torch's mode stacks and flags, the hook tables, F.scaled_dot_product_attention and
    roofline's registries are as before (before the fix, an interrupt between the mode's push and the block being
    marked entered left the mode on the stack for good). In "cut-off-mode-exit" the block ends with an interrupt
    that cut torch's _pop_mode_temporarily off with the block's mode taken off the stack: the block's exit closes
    that generator (the mode goes back, then the block takes it off), even when a second interrupt lands in the
    step that does it (before the fix, that step was not repeated: the generator pushed the mode back for good when
    the exception was freed)."""
    _block_with_interrupt(opts, nested, phase, None)  # first block: lazy imports and probes, not traced
    counter = _InterruptAt()
    before, after, entered = _block_with_interrupt(opts, nested, phase, counter)
    assert entered and after == before
    assert counter.lines > 50  # the trace saw the steps (roofline's and torch's frames)
    for n in range(1, counter.lines + 1):
        tracer = _InterruptAt(n)
        before, after, entered = _block_with_interrupt(opts, nested, phase, tracer)
        assert after == before, (tracer.where, stress.differences(before, after))
    # and a block in another thread is not kept waiting (the lock blocks take is free)
    done = []
    t = threading.Thread(target=lambda: done.append(_one_block_counts()))
    t.start()
    t.join(timeout=60)
    assert done == [2 * 3 * 5 * 7]


def _one_block_counts():
    with roofline.measure(timing=None) as r:
        torch.ones(3, 5) @ torch.ones(5, 7)
    return r.matrix_flops


def test_random_interrupts_leave_nothing_behind_short_run():
    """bench/interrupt_stress.py, 200 blocks: every interrupt arrives, and after each block the state is as before.
    An interrupt that does not propagate was raised where CPython only reports it (a weakref or garbage-collector
    callback): each is accounted for by a report to sys.unraisablehook, none was caught silently."""
    res = stress.run(200, seed=1, out=sys.stderr)
    assert res["leaks"] == [] and res["lost"] == 0
    assert res["silent"] == [] and res["swallowed"] == res["unraisable"]
    assert sum(res["landed"].values()) + res["swallowed"] == 200
    assert res["landed"]["enter"] > 0 and res["landed"]["body"] > 0


class _Steps(_core.Block):
    """A Block whose steps log their calls; _unwind raises KeyboardInterrupt on its first `fail` calls."""

    __slots__ = ("log", "fail", "enter_error")

    def __init__(self, fail=0, enter_error=None):
        self.log, self.fail, self.enter_error = [], fail, enter_error

    def _misuse(self, what):
        raise RuntimeError(f"misuse: {what}")

    def _prepare(self):
        self.log.append("prepare")

    def _enter(self):
        self.log.append("enter")
        if self.enter_error is not None:
            raise self.enter_error
        return "value"

    def _abort(self):
        self.log.append("abort")
        if self.fail:
            self.fail -= 1
            raise KeyboardInterrupt("in abort")

    def _closing(self, exc_type, exc, tb):
        self.log.append("closing")

    def _unwind(self):
        self.log.append("unwind")
        if self.fail:
            self.fail -= 1
            raise KeyboardInterrupt("in unwind")

    def _finish(self, exc_type, exc, tb):
        self.log.append("finish")
        return False


def test_a_steps_interrupted_undo_is_repeated_until_it_completes_then_the_interrupt_propagates():
    b = _Steps(fail=2)
    with pytest.raises(KeyboardInterrupt, match="in unwind"):
        with b as v:
            assert v == "value"
    assert b.log == ["prepare", "enter", "closing", "unwind", "unwind", "unwind"]  # no finish: the interrupt wins
    b = _Steps(fail=1, enter_error=ValueError("cannot enter"))
    with pytest.raises(KeyboardInterrupt, match="in abort") as ei:
        b.__enter__()
    assert isinstance(ei.value.__context__, ValueError)  # what stopped the entry, chained
    assert b.log == ["prepare", "enter", "abort", "abort"]
    with pytest.raises(RuntimeError, match="misuse: __exit__"):
        b.__exit__(None, None, None)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_while_another_thread_is_entering_a_block_can_enter_blocks():
    """The lock that blocks take while they enter or leave is held by another thread at the fork: the child, where that
    thread does not exist, starts with a free one (else its first block would wait for ever)."""
    entering, proceed = threading.Event(), threading.Event()

    class Waiting(_Steps):
        __slots__ = ()

        def _enter(self):
            entering.set()
            proceed.wait(timeout=60)
            return "value"

    holder = Waiting()
    t = threading.Thread(target=holder.__enter__)
    t.start()
    try:
        assert entering.wait(timeout=60)
        pid = os.fork()
        if pid == 0:  # the child: a block enters and exits, or SIGALRM ends it after 30 s
            import signal

            signal.alarm(30)
            try:
                with roofline.measure(timing=None) as r:
                    pass
                os._exit(0 if len(r.records) == 0 else 1)
            except BaseException:  # noqa: BLE001
                os._exit(2)
    finally:
        proceed.set()
        t.join(timeout=60)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    holder.__exit__(None, None, None)


_SHUTDOWN_SCRIPT = r"""
import os, threading
from roofline import _core

STEPS = '''
from roofline import _core


class Steps(_core.Block):
    def __init__(self, hold=None):
        self.hold = hold

    def _prepare(self):
        pass

    def _enter(self):
        if self.hold is not None:  # keeps the block lock for ever: a daemon thread stopped inside a step
            self.hold[0].set()
            self.hold[1].wait()

    def _abort(self):
        pass

    def _closing(self, exc_type, exc, tb):
        pass

    def _unwind(self):
        pass

    def _finish(self, exc_type, exc, tb, write=__import__("os").write):
        write(1, b"left during shutdown\\n")
        return False
'''

# the daemon thread's frames keep their globals alive: those of the steps, apart from this module's
held = {}
exec(STEPS, held)


def gen(Steps=held["Steps"]):
    with Steps():
        yield


g = gen()
next(g)  # a block open in a suspended generator: left when this module's globals are cleared, at shutdown
hold = (threading.Event(), threading.Event())
threading.Thread(target=held["Steps"](hold).__enter__, daemon=True).start()
assert hold[0].wait(timeout=30)  # the daemon thread holds the block lock
os.write(1, b"main done\n")
"""


def test_a_block_left_during_interpreter_shutdown_does_not_wait_for_a_frozen_daemon_threads_lock(tmp_path):
    """A daemon thread holds the block lock when the interpreter shuts down (it is frozen, and never releases it);
    a block left during shutdown (a generator freed with the module globals) waits a bounded time for the lock,
    then takes it over (before the fix, it waited for ever: the process hung at exit)."""
    import subprocess

    # this process's roofline, not the one the repository root or an installed copy gives (bench/mutate_c.py tests a
    # mutated copy of the package)
    where = os.path.dirname(os.path.dirname(os.path.abspath(roofline.__file__)))
    proc = subprocess.run([sys.executable, "-c", _SHUTDOWN_SCRIPT], capture_output=True, timeout=30, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              p for p in (where, os.environ.get("PYTHONPATH")) if p)))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines() == ["main done", "left during shutdown"]


def test_the_compiled_view_is_summarised_once_after_the_block_lock_and_its_warning_raised_once(monkeypatch):
    """The compiled-code view's summary and its warnings come after everything is released (``_finish``), not in the
    undo step the block repeats while it raises: with warnings as errors, the summary is built once and the warning
    raised once, and nothing is left behind (before the fix, the summary was rebuilt and the warning raised 16 times,
    in the step under the block lock)."""
    from roofline._compiled import _collector

    calls = []
    summary = _collector.Collector.summary
    monkeypatch.setattr(_collector.Collector, "summary", lambda self, breaks: calls.append(1) or summary(self, breaks))
    before = global_state()
    block = roofline.measure(timing=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="roofline: a problem of this block"):
            with block:
                coll = block._session.compiled
                coll.eager_reason = "compiled code ran eagerly"  # as if a compiled frame had run in the block
                coll.problems.append("a problem of this block")
    assert calls == [1]
    assert global_state() == before


def test_the_attention_kernel_probe_runs_before_the_block_lock(monkeypatch):
    """The memory-efficient kernel's grouped-query probe (autograd on meta tensors) runs in the step before the
    block lock (``_prepare``), not in ``_enter`` under it, where every other block's entry and exit would wait."""
    import inspect

    from roofline._capture import _sdpa

    steps = []
    probe = _sdpa._efficient_takes_gqa

    def recording():
        steps.append([f.function for f in inspect.stack() if f.function in ("_prepare", "_enter")])
        return probe()

    monkeypatch.setattr(_sdpa, "_efficient_takes_gqa", recording)
    with roofline.measure(timing=None, attention="efficient"):
        pass
    assert steps and steps[0] == ["_prepare"]


# ---- the attention choice in two threads -----------------------------------------------------------------------------

def test_attention_choices_of_overlapping_blocks_in_two_threads_stay_in_their_threads():
    """Thread A (flash) and thread B (efficient) hold blocks open at the same time: each thread's calls are counted
    on its own choice, a third thread without a block is not redirected, and F.scaled_dot_product_attention is the
    original again once both have closed (before the fix, B's block saved A's wrapper and put it back)."""
    original = F.__dict__["scaled_dot_product_attention"]
    q = torch.empty(1, 2, 16, 8, device="meta", dtype=torch.float16)
    step = threading.Barrier(3)
    reports, errors = {}, []

    def block_b():
        try:
            with roofline.measure(timing=None, attention="efficient") as r:
                step.wait()  # 1
                F.scaled_dot_product_attention(q, q, q)
                step.wait()  # 2
                step.wait()  # 3
                step.wait()  # 4: A has closed; B's choice still holds for B
                F.scaled_dot_product_attention(q, q, q)
            reports["B"] = r
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            step.abort()

    def block_a():
        try:
            with roofline.measure(timing=None, attention="flash") as r:
                step.wait()  # 1
                F.scaled_dot_product_attention(q, q, q)
                step.wait()  # 2
                step.wait()  # 3
            reports["A"] = r
            step.wait()  # 4
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            step.abort()

    threads = [threading.Thread(target=block_a), threading.Thread(target=block_b)]
    for t in threads:
        t.start()
    try:
        step.wait()  # 1: both blocks open; this thread has none
        with roofline.measure(timing=None) as plain:  # no attention choice: counts what runs (the math path)
            F.scaled_dot_product_attention(q, q, q)
        step.wait()  # 2
        step.wait()  # 3
        step.wait()  # 4
    finally:
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    assert reports["A"].meta["attention"]["calls"] == {"flash": 1}
    assert reports["B"].meta["attention"]["calls"] == {"efficient": 2}
    assert "aten._scaled_dot_product_flash_attention.default" in reports["A"].op_names
    assert "aten._scaled_dot_product_efficient_attention.default" in reports["B"].op_names
    assert "attention" not in plain.meta
    assert not any("flash" in n or "efficient" in n for n in plain.op_names)
    # Q K^T and P V in full, as the math path runs: 2 products of 2 * 16 * 16 * 8 per head, 2 heads
    assert plain.matrix_flops == 2 * (2 * 2 * 16 * 16 * 8)
    assert F.__dict__["scaled_dot_product_attention"] is original


_MODE_FLAG_NAMES = ("_is_in_torch_dispatch_mode", "_is_in_non_infra_torch_dispatch_mode",
                    "_is_in_any_mode_without_ignore_compile_internals")


def _mode_flags():
    import torch.utils._python_dispatch as pd

    return {n: getattr(pd, n) for n in _MODE_FLAG_NAMES if hasattr(pd, n)}


@pytest.mark.parametrize("first_out", ["first-entered", "last-entered"])
def test_overlapping_blocks_in_two_threads_put_torch_mode_flags_back(first_out):
    """Thread A enters a block, then thread B; one of them leaves, then the other (both orders, forced by events).
    torch's mode flags are process-wide: they say a dispatch mode is active while either block is open, and are back
    to what they were once both have left, with the rest of the global state (before the fix, A leaving first wrote
    back the flags it saved, False while B was open, and B then wrote back the True it had saved: set for good)."""
    before = global_state()
    assert set(_mode_flags().values()) == {False}  # no mode is active anywhere
    entered = {k: threading.Event() for k in "AB"}
    leave = {k: threading.Event() for k in "AB"}
    reports, errors = {}, []
    a = torch.ones(2, 3)

    def block(name):
        try:
            with roofline.measure(timing=None, attention="flash" if name == "A" else None) as r:
                a @ a.T
                entered[name].set()
                assert leave[name].wait(timeout=60)
            reports[name] = r
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            entered[name].set()

    threads = {k: threading.Thread(target=block, args=(k,)) for k in "AB"}
    try:
        threads["A"].start()
        assert entered["A"].wait(timeout=60)
        threads["B"].start()
        assert entered["B"].wait(timeout=60)
        both = _mode_flags()
        first, second = ("A", "B") if first_out == "first-entered" else ("B", "A")
        leave[first].set()
        threads[first].join(timeout=60)
        one = _mode_flags()  # the other block is still open
        leave[second].set()
        threads[second].join(timeout=60)
    finally:
        for k in "AB":
            leave[k].set()
            threads[k].join(timeout=60)
    assert not errors, errors
    assert both["_is_in_torch_dispatch_mode"] and both["_is_in_non_infra_torch_dispatch_mode"]
    assert one == both
    assert set(_mode_flags().values()) == {False}
    assert global_state() == before, stress.differences(before, global_state())
    assert reports["A"].matrix_flops == reports["B"].matrix_flops == 2 * 2 * 3 * 2


def test_attention_wrapper_put_back_by_a_patch_after_its_block_closed_is_not_wrapped_in_itself():
    """F.scaled_dot_product_attention is patched while an attention block is open and the patch is undone after the
    block closed: the patch puts the block's wrapper back. The next attention block wraps the original function,
    not the wrapper (before the fix, the wrapper wrapped itself: every call raised RecursionError)."""
    from unittest import mock

    from roofline._capture import _sdpa

    original = F.__dict__["scaled_dot_product_attention"]
    q = torch.empty(1, 2, 16, 8, device="meta", dtype=torch.float16)
    try:
        block = roofline.measure(timing=None, attention="flash")
        block.__enter__()
        patch = mock.patch.object(F, "scaled_dot_product_attention", lambda *a, **k: original(*a, **k))
        patch.start()
        block.__exit__(None, None, None)  # the patch's function stays: it is not the block's to remove
        patch.stop()  # puts back what it replaced: the block's wrapper
        assert F.__dict__["scaled_dot_product_attention"] is _sdpa._redirect
        x = torch.ones(1, 1, 2, 4)  # real tensors: the original runs (equal scores: the mean of V's equal rows)
        with roofline.measure(timing=None, attention="flash") as r:
            F.scaled_dot_product_attention(q, q, q)
            assert torch.equal(F.scaled_dot_product_attention(x, x, x), x)
        assert r.meta["attention"]["calls"] == {"flash": 1, "as run (real tensors)": 1}
        assert F.__dict__["scaled_dot_product_attention"] is original  # the last block put the original back
        assert torch.equal(F.scaled_dot_product_attention(x, x, x), x)
    finally:
        F.scaled_dot_product_attention = original
        _sdpa._redirect.__wrapped__ = original


# ---- interleaved blocks ----------------------------------------------------------------------------------------------

def test_blocks_of_two_asyncio_tasks_cannot_interleave_on_one_thread():
    """Task A opens a block and awaits; task B then opens one on the same thread: B's entry raises a RuntimeError
    naming the problem (before the fix, A's exit popped B's mode and B silently lost ops: 192 of its 256 FLOPs);
    A's count is exactly its own ops, and nothing is left behind."""
    before = global_state()
    a = torch.ones(4, 4)

    async def task_a(opened, b_done):
        with roofline.measure(timing=None) as r:
            a @ a
            opened.set()
            await b_done.wait()
            a @ a
        return r

    async def task_b(opened, b_done):
        await opened.wait()
        try:
            with roofline.measure(timing=None) as r:
                a @ a
                a @ a
            return r
        finally:
            b_done.set()

    async def main():
        opened, b_done = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task_a(opened, b_done), task_b(opened, b_done), return_exceptions=True)

    ra, rb = asyncio.run(main())
    assert isinstance(rb, RuntimeError) and "another asyncio task" in str(rb)
    assert ra.matrix_flops == 2 * (2 * 4 * 4 * 4)  # A's two products, nothing of B's
    assert global_state() == before


def test_tasks_nested_in_one_block_may_each_open_a_block_in_turn():
    """Blocks of tasks created inside an open block nest in it (the tasks' contexts hold it): allowed, and counted."""
    a = torch.ones(4, 4)

    async def child():
        with roofline.measure(timing=None) as r:
            a @ a
        await asyncio.sleep(0)
        return r

    async def main():
        with roofline.measure(timing=None) as outer:
            first = await asyncio.create_task(child())
            second = await asyncio.create_task(child())
        return outer, first, second

    outer, first, second = asyncio.run(main())
    assert first.matrix_flops == second.matrix_flops == 2 * 4 * 4 * 4
    assert outer.matrix_flops == 2 * (2 * 4 * 4 * 4)


def test_interleaved_blocks_of_generators_raise_at_exit_and_leave_torch_clean():
    """A generator holds a block open across a yield; the caller opens one meanwhile; the generator's block is then
    left while the caller's is still open above it: that exit raises RuntimeError, and so does the caller's (its
    counts mixed with the generator's); torch is clean afterwards."""
    before = global_state()
    a = torch.ones(4, 4)

    def gen():
        with roofline.measure(timing=None):
            a @ a
            yield
            a @ a

    g = gen()
    next(g)
    with pytest.raises(RuntimeError, match="a block entered before this one was left while this one was open"):
        with roofline.measure(timing=None):
            a @ a
            with pytest.raises(RuntimeError, match=r"left while 1 dispatch mode\(s\) entered after it were still open"):
                next(g)
    assert global_state() == before
    with roofline.measure(timing=None) as r:  # and later blocks count normally
        a @ a
    assert r.matrix_flops == 2 * 4 * 4 * 4


# ---- a nested block's bookkeeping ------------------------------------------------------------------------------------

class _Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_an_outer_block_does_not_count_a_nested_blocks_bookkeeping():
    """The nested block's module tracker reaches the gradient node of the leaf input through a view; the outer block
    counts the same ops with the nested block as without it: those of torch's ModuleTracker with a plain mode, which
    FlopCounterMode sees (before the fix, 2 extra aten.view, one per module called with the leaf input)."""
    x = torch.randn(2, 4, requires_grad=True)

    model = _model()
    with ModuleTracker(), _Log() as log:
        model(x)
    expected = log.ops

    model = _model()
    with roofline.measure(timing=None) as outer:
        with roofline.measure(model, timing=None) as inner:
            model(x)
    assert [outer.op_names[i] for i in outer.records["op"]] == expected
    assert [inner.op_names[i] for i in inner.records["op"]] == expected
    assert expected.count("aten.view.default") == 2  # Sequential and Linear each see the leaf input
    with roofline.measure(timing=None) as outer:  # nested blocks' entering and leaving run no op of their own
        for kw in ({"timing": "op"}, {"attention": "flash"}, {}):
            with roofline.measure(model, **kw):
                pass
    assert len(outer.records) == 0


# ---- generator and coroutine steps -----------------------------------------------------------------------------------

def _gen_step():
    yield torch.ones(3) * 2


async def _coro_step():
    torch.ones(3) * 2


class _CallableGenerator:
    def __call__(self):
        yield torch.ones(3) * 2


@pytest.mark.parametrize("step,kind", [
    (_gen_step, "a generator function"),
    (_coro_step, r"a coroutine function \(async def\)"),
    (_CallableGenerator(), "a generator function"),
    (__import__("functools").partial(_gen_step), "a generator function"),
])
def test_profile_refuses_generator_and_coroutine_functions(step, kind):
    with pytest.raises(TypeError, match=f"step is {kind}: calling it only creates"):
        roofline.steady(step, warmup=0, repeat=1)


@pytest.mark.parametrize("warmup", [0, 1])
def test_profile_refuses_a_step_that_returns_a_generator_or_coroutine(warmup):
    ran = []

    def body():
        ran.append(1)
        yield

    async def coro():
        ran.append(1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed, not left to warn "never awaited"
        for make, what in ((lambda: body(), "generator"), (lambda: coro(), "coroutine")):
            before = global_state()
            with pytest.raises(TypeError, match=f"step\\(\\) returned a {what}: the work it stands for has not run"):
                roofline.steady(make, warmup=warmup, repeat=1)
            assert global_state() == before
    assert ran == []


# ---- the context manager misused -------------------------------------------------------------------------------------

def test_exit_of_a_block_that_is_not_open_raises_a_clear_error():
    before = global_state()
    with pytest.raises(RuntimeError, match="not open: it was never entered"):
        roofline.measure().__exit__(None, None, None)
    m = roofline.measure(timing=None)
    with m:
        pass
    with pytest.raises(RuntimeError, match="not open"):
        m.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="already been entered"):
        m.__enter__()
    assert global_state() == before
