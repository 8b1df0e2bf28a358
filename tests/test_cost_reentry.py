"""roofline.cost called again while a call of it is under way on the same thread: from a TensorSpec subclass's
``shape``/``stride()``, from a signal handler, from a finaliser. The inner call returns its own counts, the outer
call's counts are unchanged, and nothing waits forever.

Every test runs on the main thread under a watchdog: a thread that, if the test has not finished in time, sends the
main thread a signal whose handler raises. A regression that blocks on a lock then fails with that error (and the
outer call releases what it holds as the error unwinds) instead of hanging the suite."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import pytest

import roofline
from roofline import TensorSpec
from roofline._counting import _cost

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill") or not hasattr(signal, "SIGUSR1"),
                                reason="POSIX signals needed")

# mm of (2, 3) x (3, 4): 2*2*4*3 FLOPs, reads (6 + 12) float32 = 72 bytes, writes 8 float32 = 32 bytes
MM_FLOPS, MM_READ, MM_WRITTEN = 2 * 2 * 4 * 3, (6 + 12) * 4, 8 * 4
# the inner call: add of two (5,) float32 tensors: 5 FLOPs, reads 40 bytes, writes 20
ADD_FLOPS, ADD_READ, ADD_WRITTEN = 5, 2 * 5 * 4, 5 * 4


class Hung(BaseException):
    """Not an Exception: the recorder takes an ordinary exception from a tensor's ``stride()`` as "no strides" and
    goes on, which would swallow it."""


@contextlib.contextmanager
def deadline(seconds=10.0):
    """Fail with Hung, raised in the main thread, if the block has not finished within `seconds`."""
    main = threading.main_thread()
    if threading.current_thread() is not main:
        pytest.skip("signal handlers run on the main thread only")

    def on_timeout(signum, frame):
        raise Hung(f"roofline.cost did not return within {seconds} s (blocked on its own lock?)")

    old = signal.signal(signal.SIGUSR2, on_timeout)
    done = threading.Event()

    def watch():
        if not done.wait(seconds):
            signal.pthread_kill(main.ident, signal.SIGUSR2)
            while not done.wait(1.0):  # again, until the test has ended
                signal.pthread_kill(main.ident, signal.SIGUSR2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGUSR2, old)


def inner_add():
    return roofline.cost("add", (5,), (5,))


def check_inner(c):
    assert (c.flops, c.bytes_read, c.bytes_written) == (ADD_FLOPS, ADD_READ, ADD_WRITTEN)


def check_outer(c):
    assert (c.matrix_flops, c.bytes_read, c.bytes_written) == (MM_FLOPS, MM_READ, MM_WRITTEN)


def test_cost_from_a_stride_callback():
    inner = []

    class Spec(TensorSpec):
        __slots__ = ()

        def stride(self):
            inner.append(inner_add())
            return super().stride()

    with deadline():
        c = roofline.cost("mm", Spec((2, 3)), Spec((3, 4)))
    check_outer(c)
    assert len(inner) == 2
    for x in inner:
        check_inner(x)


def test_cost_from_a_shape_property_nested_twice():
    """The shape read of the outer call runs cost on a tensor whose own shape read runs cost again."""
    seen = []

    class Deep(TensorSpec):
        __slots__ = ()

        @property
        def shape(self):
            seen.append(("deep", inner_add()))
            return TensorSpec.shape.__get__(self)

        @shape.setter
        def shape(self, v):
            TensorSpec.shape.__set__(self, v)

    class Spec(TensorSpec):
        __slots__ = ()

        @property
        def shape(self):
            seen.append(("outer", roofline.cost("add", Deep((5,)), (5,))))
            return TensorSpec.shape.__get__(self)

        @shape.setter
        def shape(self, v):
            TensorSpec.shape.__set__(self, v)

    with deadline():
        c = roofline.cost("mm", Spec((2, 3)), (3, 4))
    check_outer(c)
    # the shape is read while the result shape is inferred and while the call is recorded: each read of Spec's shape
    # reads Deep's at least once
    assert {k for k, _ in seen} == {"outer", "deep"}
    for _, x in seen:
        check_inner(x)


def test_cost_from_a_shape_entry_index():
    """A shape entry whose __index__ calls cost: converted before any recorder is used."""
    calls = []

    class N:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            calls.append(inner_add())
            return self.v

    with deadline():
        c = roofline.cost("mm", (N(2), 3), (3, N(4)))
    check_outer(c)
    assert len(calls) == 2
    for x in calls:
        check_inner(x)


def _at_every_line(action):
    """A trace function that runs `action()` at every line of cost and of the functions it runs under its lock."""
    codes = {f.__code__ for f in (_cost.cost, getattr(_cost, "_evaluate", None), getattr(_cost, "_record_one", None))
             if f is not None}

    def local(frame, event, arg):
        if event == "line":
            action()
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code in codes else None

    return tracer


def _traced(tracer, fn):
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn()
    finally:
        sys.settrace(old)


def test_cost_from_a_signal_handler_at_every_line():
    """A handler that calls cost, run (signal.raise_signal) at every line of an outer call, its locked part
    included."""
    inner = []

    def handler(signum, frame):
        inner.append(inner_add())

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        with deadline():
            c = _traced(_at_every_line(lambda: signal.raise_signal(signal.SIGUSR1)),
                        lambda: roofline.cost("mm", (2, 3), (3, 4)))
    finally:
        signal.signal(signal.SIGUSR1, old)
    check_outer(c)
    assert len(inner) >= 20  # the lines of the call, each with its handler call
    for x in inner:
        check_inner(x)


def test_cost_from_a_signal_sent_with_os_kill_during_a_callback():
    inner = []

    def handler(signum, frame):
        inner.append(inner_add())

    class Spec(TensorSpec):
        __slots__ = ()

        def stride(self):
            os.kill(os.getpid(), signal.SIGUSR1)  # handled on this (the main) thread before the next line
            return super().stride()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        with deadline():
            c = roofline.cost("mm", Spec((2, 3)), (3, 4))
    finally:
        signal.signal(signal.SIGUSR1, old)
    check_outer(c)
    assert len(inner) == 1
    check_inner(inner[0])


def test_cost_from_a_finaliser_at_every_line():
    """An object whose __del__ calls cost, released at every line of an outer call, its locked part included."""
    inner, started = [], []

    class Finalised:
        def __del__(self):  # an error raised here would only be printed: count the calls that returned
            started.append(1)
            inner.append(inner_add())

    pending = [Finalised() for _ in range(400)]

    def release():
        if pending:
            pending.pop()  # the last reference: __del__ runs here

    try:
        with deadline():
            c = _traced(_at_every_line(release), lambda: roofline.cost("mm", (2, 3), (3, 4)))
    finally:
        started.append(None)
        Finalised.__del__ = lambda self: None
        pending.clear()
    check_outer(c)
    assert len(inner) == len(started) - 1 >= 20
    for x in inner:
        check_inner(x)


def test_inner_error_leaves_the_outer_call_intact():
    """An inner call that fails (bad shapes) raises inside the callback; the outer call, which catches it, still
    counts its own op, and later calls work."""
    errors = []

    class Spec(TensorSpec):
        __slots__ = ()

        def stride(self):
            try:
                roofline.cost("mm", (2, 3), (4, 5))
            except ValueError as e:
                errors.append(e)
            return super().stride()

    with deadline():
        c = roofline.cost("mm", Spec((2, 3)), (3, 4))
        check_outer(c)
        check_outer(roofline.cost("mm", (2, 3), (3, 4)))
    assert len(errors) == 1
