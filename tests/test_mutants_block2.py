"""The block lock when blocks nest (csrc/track_block.c: Block_enter, block_acquire, block_release).

A step loop's entry step opens the measure block of its first step under the lock (the loop's class sets ``_nests``);
a block closed by a callback in the middle of another block's entry nests in that entry. Either way the inner block's
release must leave the lock held by the outer step: another thread's block keeps waiting until the outer step is
done, a block entered later in the middle of that (non-nesting) step is still refused, and once everything is closed
the lock is free and exclusive again. Each scenario runs in a worker thread joined with a timeout, so that a lock
that is never released fails the test instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import _core  # noqa: E402

WAIT = 0.3  # how long a blocked thread is given to (wrongly) get in: it needs microseconds once the lock is free


def _in_thread(fn, timeout=30):
    """fn() in a daemon thread; its exception re-raised here; a failure if it has not returned within `timeout` s
    (a block lock never released makes the next acquisition wait for ever)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "still running: the block lock was never released"
    if "error" in out:
        raise out["error"]
    return out.get("value")


class _Steps(_core.Block):
    """A block whose steps append '<name>.<step>' to a shared log; ``on_enter`` runs inside its _enter (under the
    lock); ``enter_error``/``abort_error`` make _enter/_abort raise."""

    def __init__(self, name, log, on_enter=None, enter_error=None, abort_error=None):
        self.name, self.log, self.on_enter = name, log, on_enter
        self.enter_error, self.abort_error = enter_error, abort_error
        self.args = {}  # step -> the (exc_type, exc, tb) it was given

    def _note(self, step):
        self.log.append(f"{self.name}.{step}")

    def _misuse(self, what):
        raise RuntimeError(f"misuse: {what}")

    def _prepare(self):
        self._note("prepare")

    def _enter(self):
        self._note("enter")
        if self.on_enter is not None:
            self.on_enter()
        if self.enter_error is not None:
            raise self.enter_error
        self._note("entered")
        return self.name

    def _abort(self):
        self._note("abort")
        if self.abort_error is not None:
            raise self.abort_error

    def _closing(self, exc_type, exc, tb):
        self._note("closing")
        self.args["closing"] = (exc_type, exc, tb)

    def _unwind(self):
        self._note("unwind")

    def _finish(self, exc_type, exc, tb):
        self._note("finish")
        self.args["finish"] = (exc_type, exc, tb)
        return False

    def _refused(self):
        self._note("refused")
        return "refused"

    def _finish_refused(self, exc_type, exc, tb):
        self._note("finish_refused")
        self.args["finish_refused"] = (exc_type, exc, tb)
        return False


class _Nesting(_Steps):
    _nests = True  # as a step loop: a block entered in its steps nests


def _full(name, body=()):
    """The log of an ordinary block `name` entered and left around `body`."""
    return [f"{name}.prepare", f"{name}.enter", f"{name}.entered", *body, f"{name}.closing", f"{name}.unwind",
            f"{name}.finish"]


def _other_thread_waits(hold_lock):
    """Thread A runs `hold_lock(ready, go, log)` (which must set `ready` while it holds the block lock, then wait for
    `go` and append 'A.released'); thread B then enters a plain block. B must not get past the lock while A holds
    it: B's _enter is logged after A's 'A.released'. Returns the shared log."""
    log, errors = [], []
    ready, go, b_prepared, b_in = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    class Probe(_Steps):
        def _prepare(self):
            super()._prepare()
            b_prepared.set()  # block_acquire comes next, with no Python in between

        def _enter(self):
            b_in.set()
            return super()._enter()

    def catching(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
        return threading.Thread(target=run, daemon=True)

    def b():
        with Probe("b", log):
            pass

    ta, tb = catching(lambda: hold_lock(ready, go, log)), catching(b)
    ta.start()
    try:
        assert ready.wait(30), "A never got to hold the lock"
        tb.start()
        assert b_prepared.wait(30)
        got_in = b_in.wait(WAIT)
    finally:
        go.set()
    ta.join(30)
    tb.join(30)
    assert not ta.is_alive() and not tb.is_alive(), "a thread never got the block lock"
    assert not errors, errors
    assert not got_in, f"B entered while A held the block lock: {log}"
    assert log.index("b.enter") > log.index("A.released"), log
    return log


# ---- one thread ----------------------------------------------------------------------------------------------------


def test_a_block_closed_in_the_middle_of_another_blocks_entry_leaves_that_entry_refusing_blocks():
    """p is open; q's entry (under the lock, a step that does not nest) closes p — p's exit takes the lock a second
    time and gives back only that — then a block h is entered: this thread is still inside q's step, so h is refused
    (nothing of it runs but _refused/_finish_refused). Then q finishes normally and the next block is ordinary."""
    log = []
    p = _Steps("p", log)

    def inside_q():
        p.__exit__(None, None, None)
        with _Steps("h", log) as v:
            log.append(f"h.body={v}")

    def run():
        assert p.__enter__() == "p"
        with _Steps("q", log, on_enter=inside_q):
            log.append("q.body")
        with _Steps("n", log):
            log.append("n.body")

    _in_thread(run)
    assert log == ["p.prepare", "p.enter", "p.entered",
                   "q.prepare", "q.enter",
                   "p.closing", "p.unwind", "p.finish",                   # p's exit, nested in q's entry
                   "h.refused", "h.body=refused", "h.finish_refused",    # h: refused, q's step still under way
                   "q.entered", "q.body", "q.closing", "q.unwind", "q.finish",
                   *_full("n", ["n.body"])]                               # afterwards: an ordinary block


def test_a_block_entered_in_a_step_that_does_not_nest_is_refused_at_the_first_level():
    """A class without ``_nests`` (as roofline.measure): a block entered in its _enter is refused at depth 1; a
    class with ``_nests`` (as a step loop): the inner block nests, and the inner block's own steps refuse in turn;
    after the inner block, the outer step nests again (its setting is restored)."""
    log = []

    def run():
        with _Steps("o", log, on_enter=lambda: _Steps("x", log).__enter__()):
            pass

        def nesting_step():
            with _Steps("i", log, on_enter=lambda: log.append(_Steps("y", log).__enter__())):
                log.append("i.body")
            with _Steps("j", log):  # after i, still in the nesting step: nests too
                pass

        with _Nesting("N", log, on_enter=nesting_step):
            pass

    _in_thread(run)
    assert log == ["o.prepare", "o.enter", "x.refused", "o.entered", "o.closing", "o.unwind", "o.finish",
                   "N.prepare", "N.enter",
                   "i.prepare", "i.enter", "y.refused", "refused", "i.entered", "i.body",
                   "i.closing", "i.unwind", "i.finish",
                   *_full("j"),
                   "N.entered", "N.closing", "N.unwind", "N.finish"]


def test_an_undo_that_never_completes_raises_its_last_exception_chained_to_the_entrys():
    """_enter raises ValueError, and _abort raises on every call: it is called BLOCK_TRIES = 16 times, then its last
    exception propagates with the ValueError as its __context__; the block is failed (its __exit__ is misuse) and
    the lock is free (the next block enters normally)."""
    log = []
    calls = []

    class Stubborn(_Steps):
        def _abort(self):
            calls.append(1)
            raise KeyError(f"abort {len(calls)}")

    def run():
        b = Stubborn("s", log, enter_error=ValueError("cannot enter"))
        with pytest.raises(KeyError, match="abort 16") as ei:
            b.__enter__()
        assert isinstance(ei.value.__context__, ValueError) and str(ei.value.__context__) == "cannot enter"
        with pytest.raises(RuntimeError, match="misuse: __exit__"):
            b.__exit__(None, None, None)
        with _Steps("n", log):
            pass

    _in_thread(run)
    assert len(calls) == 16
    assert log == ["s.prepare", "s.enter", *_full("n")]


# ---- two threads -----------------------------------------------------------------------------------------------------


def test_another_threads_block_waits_for_a_nesting_step_after_its_inner_block_entered_and_left():
    """A's step loop-like block enters and leaves an inner block in its _enter, then holds on: the lock is still
    A's (only the inner block's hold was given back), so B waits until A's entry step is done."""

    def hold(ready, go, log):
        def step():
            with _Steps("inner", log):
                pass
            ready.set()
            go.wait(30)
            log.append("A.released")

        with _Nesting("A", log, on_enter=step):
            pass

    log = _other_thread_waits(hold)
    mine = [e for e in log if not e.startswith("b.")]
    assert mine[:mine.index("A.released") + 1] == ["A.prepare", "A.enter", *_full("inner"), "A.released"]


def test_the_lock_is_exclusive_again_after_nested_blocks_are_all_closed():
    """Blocks nested three deep in entry steps, all closed; then A holds the lock in a plain block's entry step: B
    waits (the nested releases gave the lock back exactly once)."""
    log = []

    def n2_step():
        with _Steps("n3", log):
            pass

    def n1_step():
        with _Nesting("n2", log, on_enter=n2_step):
            pass

    def nested():
        with _Nesting("n1", log, on_enter=n1_step):
            pass

    _in_thread(nested)
    assert log == ["n1.prepare", "n1.enter", "n2.prepare", "n2.enter", *_full("n3"), "n2.entered", "n2.closing",
                   "n2.unwind", "n2.finish", "n1.entered", "n1.closing", "n1.unwind", "n1.finish"]

    def hold(ready, go, log):
        def step():
            ready.set()
            go.wait(30)
            log.append("A.released")

        with _Steps("A", log, on_enter=step):
            pass

    _other_thread_waits(hold)


_SHUTDOWN_SCRIPT = r"""
import os, threading, time
from roofline import _core

STEPS = '''
from roofline import _core


class Steps(_core.Block):
    def __init__(self, hold=None, ready=None, inner=False):
        self.hold, self.ready, self.inner = hold, ready, inner

    def _prepare(self):
        if self.ready is not None:  # the waiter: block_acquire comes next
            self.ready.set()

    def _enter(self):
        if self.hold is not None:  # keeps the block lock for ever: a daemon thread stopped inside a step
            self.hold[0].set()
            self.hold[1].wait()

    def _abort(self):
        pass

    def _closing(self, exc_type, exc, tb):
        pass

    def _unwind(self, write=__import__("os").write):
        if self.inner:  # a block entered in the middle of this step (as a finaliser could)
            got = type(self)().__enter__()
            write(1, b"inner %s\\n" % (b"refused" if got == "refused" else b"entered"))

    def _refused(self):
        return "refused"

    def _finish_refused(self, exc_type, exc, tb):
        return False

    def _finish(self, exc_type, exc, tb, write=__import__("os").write, clock=__import__("time").monotonic,
                sleep=__import__("time").sleep):
        write(1, b"left %.3f\\n" % clock())
        sleep(0.05)  # time for the waiting daemon thread to take the lock given back
        return False
'''

held = {}
exec(STEPS, held)
Steps = held["Steps"]


def gen(inner, Steps=Steps):
    with Steps(inner=inner):
        yield


gens = [gen(k == 0) for k in range(4)]
for g in gens:
    next(g)  # four blocks open in suspended generators: left when this module's globals are cleared, at shutdown
hold, ready = (threading.Event(), threading.Event()), threading.Event()
threading.Thread(target=Steps(hold).__enter__, daemon=True).start()
assert hold[0].wait(timeout=30)  # a daemon thread holds the block lock
threading.Thread(target=Steps(ready=ready).__enter__, daemon=True).start()
assert ready.wait(timeout=30)
time.sleep(0.2)  # another one waits for it
os.write(1, b"main done %.3f\n" % time.monotonic())
"""


def _run_here(script, cwd):
    """`script` in a fresh interpreter that imports this process's roofline (and its _core), wherever that is: not
    the one a working directory or an installed copy would give (bench/mutate_c.py tests a mutated copy)."""
    where = os.path.dirname(os.path.dirname(os.path.abspath(roofline.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (where, os.environ.get("PYTHONPATH")) if p))
    check = "import roofline._core as c, sys; assert c.__file__ == sys.argv[1], (c.__file__, sys.argv[1])\n"
    return subprocess.run([sys.executable, "-c", check + script, _core.__file__], capture_output=True, timeout=60,
                          cwd=cwd, env=env)


def test_blocks_left_during_shutdown_wait_for_a_frozen_threads_lock_once_and_still_refuse_blocks_in_their_steps(
        tmp_path):
    """Four blocks are left during interpreter shutdown while a frozen daemon thread holds the block lock and another
    waits for it: the first block waits for the lock (BLOCK_FINAL_WAIT_US, 1 s), then takes it over; later blocks
    never wait again, even when the waiting thread got the lock given back (it froze holding it too). Waiting again
    would take >= 1 s more; the bound allows 0.9 s for three block exits of 0.05 s each. A block entered in the middle
    of one of those exits is refused, as at any other time."""
    proc = _run_here(_SHUTDOWN_SCRIPT, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("main done") and lines.count("inner refused") == 1, lines
    times = [float(ln.split()[-1]) for ln in lines if ln.startswith(("main done", "left "))]
    assert len(times) == 5, lines
    assert times[1] - times[0] >= 0.9, lines  # the first waited (about 1 s)
    assert times[4] - times[1] < 0.9, lines  # the others did not


# ---- through the public API ----------------------------------------------------------------------------------------


def test_a_measure_block_closed_in_another_ones_entry_keeps_its_report_and_a_handler_block_there_is_refused(
        monkeypatch):
    """A block p is open; in the middle of q's entry (where a signal handler or callback could run) p is closed and
    a third block h entered. p's report is complete: one mm of (2x3)@(3x5) = 2*2*3*5 = 60 matrix FLOPs; h is refused
    (this thread is still inside q's entry), with its warning, an empty incomplete report; q counts its Linear(4, 8)
    on 3 rows: 2*3*4*8 = 192 matrix FLOPs; no mode is left on torch's dispatch stack."""
    from roofline._capture import _session

    original = _session.Session._hook_optimizer  # a step of the entry, under the lock, before q's mode is pushed
    p = roofline.measure(timing=None)
    got = {}

    def hook(self):
        if "p" in got and "h" not in got:  # q's entry (p's own entry passes through here first)
            p.__exit__(None, None, None)
            with roofline.measure(timing=None) as h:
                torch.add(torch.ones(2), 1)
            got["h"] = h
        return original(self)

    m = torch.nn.Linear(4, 8, bias=False)
    x, a, b = torch.randn(3, 4), torch.randn(2, 3), torch.randn(3, 5)

    def run():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got["p"] = p.__enter__()
            torch.mm(a, b)
            with roofline.measure(m, timing=None) as q:
                m(x)
        got["q"], got["warnings"] = q, [str(x.message) for x in w]

    monkeypatch.setattr(_session.Session, "_hook_optimizer", hook)
    _in_thread(run)
    monkeypatch.undo()
    rp, h, q = got["p"], got["h"], got["q"]
    assert torch._C._len_torch_dispatch_stack() == 0
    assert rp.complete and int(rp.records["matrix_flops"].sum()) == 60 and len(rp.records) == 1
    assert len(h.records) == 0 and not h.complete and "nothing in it was counted" in h.incomplete[0]
    assert sum("being entered or left" in s for s in got["warnings"]) == 1, got["warnings"]
    assert q.complete and int(q.records["matrix_flops"].sum()) == 192


def test_after_a_profiler_nested_its_first_steps_block_another_threads_block_still_waits():
    """A profiler whose step 0 is active opens that step's measure block inside its own entry step (nested, under
    the lock). Its reports are right (Linear(4, 8) on 3 rows: 2*3*4*8 = 192 matrix FLOPs a step), no mode is left,
    and afterwards the lock still excludes: a measure block of thread B waits while thread A's block is being
    entered (held inside its model's named_children, which the entry calls under the lock)."""
    m = torch.nn.Linear(4, 8, bias=False)
    x = torch.randn(3, 4)

    def run():
        with roofline.profile(m, schedule=roofline.schedule(wait=0, warmup=0, active=2, repeat=1),
                              ceilings="datasheet") as prof:
            for _ in range(2):
                m(x)
                prof.step()
        return prof

    prof = _in_thread(run)
    assert torch._C._len_torch_dispatch_stack() == 0
    assert len(prof.reports) == 1 and prof.reports[0].steps == [0, 1]
    assert prof.reports[0].matrix_flops == 192

    def hold(ready, go, log):
        class Slow(torch.nn.Module):
            def named_children(self):
                if not ready.is_set():
                    ready.set()
                    go.wait(30)
                    log.append("A.released")
                return super().named_children()

        with roofline.measure(Slow(), timing=None):
            pass

    _other_thread_waits(hold)
    assert torch._C._len_torch_dispatch_stack() == 0


# ---- leaving a block -----------------------------------------------------------------------------------------------


def test_exit_passes_its_three_arguments_to_closing_and_finish_and_to_finish_refused():
    log = []
    b = _Steps("b", log)
    with pytest.raises(ValueError, match="body") as ei:
        with b:
            raise ValueError("body")
    e = ei.value
    assert e.__traceback__ is not None
    assert b.args == {"closing": (ValueError, e, e.__traceback__), "finish": (ValueError, e, e.__traceback__)}
    ok = _Steps("ok", log)
    with ok:
        pass
    assert ok.args == {"closing": (None, None, None), "finish": (None, None, None)}

    refused = []

    def inside():
        r = _Steps("r", log)
        refused.append(r)
        with pytest.raises(KeyError):
            with r:
                raise KeyError("in refused")

    with _Steps("q", log, on_enter=inside):
        pass
    (r,) = refused
    et, ev, tb = r.args["finish_refused"]
    assert et is KeyError and str(ev) == "'in refused'" and tb is not None and tb is ev.__traceback__
    assert list(r.args) == ["finish_refused"]


def test_exit_with_the_wrong_number_of_arguments_is_a_type_error_and_leaves_the_block_open():
    log = []
    b = _Steps("b", log)
    b.__enter__()
    with pytest.raises(TypeError, match=r"__exit__ takes 3 arguments \(2 given\)"):
        b.__exit__(None, None)
    with pytest.raises(TypeError, match=r"__exit__ takes 3 arguments \(4 given\)"):
        b.__exit__(None, None, None, None)
    assert b.__exit__(None, None, None) is False
    assert log == _full("b")


class _Failing(_Steps):
    """_closing / _unwind raise KeyError('<step> <call number>') on the calls listed in `fails`."""

    def __init__(self, name, log, fails):
        super().__init__(name, log)
        self.fails, self.count = fails, {}

    def _maybe(self, step):
        self.count[step] = self.count.get(step, 0) + 1
        if self.count[step] in self.fails.get(step, ()):
            raise KeyError(f"{step} {self.count[step]}")

    def _closing(self, exc_type, exc, tb):
        super()._closing(exc_type, exc, tb)
        self._maybe("closing")

    def _unwind(self):
        super()._unwind()
        self._maybe("unwind")


def test_a_closing_step_that_never_completes_raises_its_last_exception_after_the_unwind():
    """_closing raises on all BLOCK_TRIES = 16 calls: _unwind still runs (once: it completes), _finish does not; the
    16th exception propagates, the first as its __context__; the block is left (a second __exit__ is misuse)."""
    log = []
    b = _Failing("b", log, {"closing": range(1, 17)})
    b.__enter__()
    with pytest.raises(KeyError, match="closing 16") as ei:
        b.__exit__(None, None, None)
    assert str(ei.value.__context__) == "'closing 1'"
    assert log == ["b.prepare", "b.enter", "b.entered", *["b.closing"] * 16, "b.unwind"]
    with pytest.raises(RuntimeError, match="misuse: __exit__"):
        b.__exit__(None, None, None)


def test_an_unwind_step_that_never_completes_raises_its_last_exception_and_skips_finish():
    log = []
    b = _Failing("b", log, {"unwind": range(1, 17)})
    b.__enter__()
    with pytest.raises(KeyError, match="unwind 16") as ei:
        b.__exit__(None, None, None)
    assert str(ei.value.__context__) == "'unwind 1'"
    assert log == ["b.prepare", "b.enter", "b.entered", "b.closing", *["b.unwind"] * 16]
    with _Steps("n", log):  # the lock was given back
        pass
    assert log[-1] == "n.finish"


def test_closing_and_unwind_that_each_fail_once_raise_the_unwinds_error_chained_to_the_closings():
    # in a thread of its own: an exception Python raises takes whatever exception its thread is handling as its
    # __context__, so the chain checked here is only the block's own (nothing handled around it)
    log, got = [], []
    b = _Failing("b", log, {"closing": {1}, "unwind": {1}})

    def run():
        b.__enter__()
        try:
            b.__exit__(None, None, None)
        except KeyError as e:
            got.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert len(got) == 1 and str(got[0]) == "'unwind 1'"
    assert str(got[0].__context__) == "'closing 1'" and got[0].__context__.__context__ is None
    assert log == ["b.prepare", "b.enter", "b.entered", "b.closing", "b.closing", "b.unwind", "b.unwind"]


def test_an_unwind_error_keeps_its_own_context_and_one_raised_again_is_not_its_own_context():
    """An exception _unwind raised while handling another keeps that one as its __context__ (nothing earlier to
    chain); the same exception object raised on every try is raised as is, never made its own __context__."""

    class Contexted(_Steps):
        def _unwind(self):
            super()._unwind()
            if self.log.count("c.unwind") == 1:
                try:
                    raise IndexError("inner")
                except IndexError:
                    raise KeyError("unwind")  # noqa: B904 - its __context__ is the IndexError

    log = []
    c = Contexted("c", log)
    c.__enter__()
    with pytest.raises(KeyError, match="unwind") as ei:
        c.__exit__(None, None, None)
    assert isinstance(ei.value.__context__, IndexError) and str(ei.value.__context__) == "inner"

    same = KeyError("same")

    class Same(_Steps):
        def _unwind(self):
            super()._unwind()
            raise same

    s = Same("s", log)
    s.__enter__()
    with pytest.raises(KeyError, match="same") as ei:
        s.__exit__(None, None, None)
    assert ei.value is same and same.__context__ is not same
    assert log.count("s.unwind") == 16


def test_a_step_missing_from_the_class_fails_like_one_that_raises():
    """An AttributeError raised by the C caller itself (no Python frame, no traceback): a missing _enter is undone
    by one _abort, then raised; a missing _unwind is tried 16 times, then raised."""

    class NoEnter(_Steps):
        _enter = None

    log = []
    b = NoEnter("b", log)
    with pytest.raises(TypeError):  # None is not callable
        b.__enter__()
    assert log == ["b.prepare", "b.abort"]

    class Missing(_core.Block):
        def _prepare(self):
            pass

        def _enter(self):
            return "in"

        def _closing(self, et, ev, tb):
            pass

    m = Missing()
    assert m.__enter__() == "in"
    with pytest.raises(AttributeError, match="_unwind"):
        m.__exit__(None, None, None)

    class NoEnterAtAll(_core.Block):
        calls = []

        def _prepare(self):
            pass

        def _abort(self):
            self.calls.append("abort")

    n = NoEnterAtAll()
    with pytest.raises(AttributeError, match="_enter"):
        n.__enter__()
    assert NoEnterAtAll.calls == ["abort"]
