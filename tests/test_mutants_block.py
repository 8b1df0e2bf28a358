"""The block lock (csrc/track_block.c): one thread at a time enters or leaves a measure block. A thread whose block
entry is under way (here: held inside the model's ``named_children``, which the entry calls to name the modules)
keeps another thread's block waiting until it is done."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402


def test_a_block_waits_while_another_threads_block_is_being_entered():
    armed, inside, release = threading.Event(), threading.Event(), threading.Event()

    class Slow(torch.nn.Module):
        def named_children(self):
            if armed.is_set() and not release.is_set():
                inside.set()
                release.wait(30)
            return super().named_children()

    model, entered_b, errors = Slow(), threading.Event(), []

    def run(f):
        try:
            f()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def a():
        armed.set()
        with roofline.measure(model, timing=None):
            pass

    def b():
        with roofline.measure(timing=None):
            entered_b.set()

    ta = threading.Thread(target=run, args=(a,))
    ta.start()
    try:
        assert inside.wait(30)  # A's entry is under way, under the lock
        tb = threading.Thread(target=run, args=(b,))
        tb.start()
        time.sleep(0.5)
        assert not entered_b.is_set()  # B waits for it
    finally:
        release.set()
        ta.join(30)
    tb.join(30)
    assert entered_b.is_set() and not errors, errors
    assert torch._C._len_torch_dispatch_stack() == 0
