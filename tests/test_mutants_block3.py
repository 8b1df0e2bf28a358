"""roofline._core.remove_mode and call_alone (csrc/track_block.c) against a mode stack made of Python callables, as
torch's are (length, at, pop, push): where the mode is found, what the stack holds afterwards and in which order,
what is logged, and what each failing callable leaves behind. Expected stacks are written out by hand."""

from __future__ import annotations

import pytest

from roofline import _core


class Stack:
    """A mode stack with torch's four functions; `fail` maps a function name to the 1-based calls that raise."""

    def __init__(self, *items, fail=None):
        self.items, self.fail, self.calls = list(items), fail or {}, {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] in self.fail.get(name, ()):
            raise Failed(f"{name} call {self.calls[name]}")

    def length(self):
        self._count("length")
        return len(self.items)

    def at(self, i):
        self._count("at")
        return self.items[i]

    def pop(self):
        self._count("pop")
        return self.items.pop()

    def push(self, m):
        self._count("push")
        self.items.append(m)


class Failed(Exception):
    pass


class Mode:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


A, B, C, D, M = (Mode(n) for n in "ABCDM")


def remove(stack, mode=M, log=None):
    log = [] if log is None else log
    return _core.remove_mode(mode, stack.length, stack.at, stack.pop, stack.push, log), log


# ---- remove_mode -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("before,after,above", [
    ([A, B, M, C, D], [A, B, C, D], (C, D)),  # in the middle: the two above it popped and pushed back in order
    ([A, M], [A], ()),                        # on top
    ([M, A, B], [A, B], (A, B)),              # at the bottom (index 0)
    ([M], [], ()),                            # alone
    ([M, A, M], [M, A], ()),                  # twice: the top one goes
])
def test_remove_mode_takes_the_mode_out_and_puts_the_ones_above_back_in_order(before, after, above):
    s = Stack(*before)
    ok, log = remove(s)
    assert ok is True and s.items == after and log == [above]
    # pops: the modes above it and the mode itself; pushes: the modes above it
    assert s.calls.get("pop") == len(above) + 1 and s.calls.get("push", 0) == len(above)


@pytest.mark.parametrize("before", [[], [A, B]])
def test_remove_mode_of_a_mode_not_on_the_stack_changes_nothing(before):
    s = Stack(*before)
    ok, log = remove(s)
    assert ok is False and s.items == before and log == [] and "pop" not in s.calls and "push" not in s.calls


def test_remove_mode_matches_by_identity_not_equality():
    class Equal(Mode):
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    s = Stack(Equal("E"), A)
    ok, log = remove(s)
    assert ok is False and len(s.items) == 2


def test_remove_mode_appends_to_the_log_it_is_given():
    log = [("earlier",)]
    s = Stack(A, M, B)
    ok, log = remove(s, log=log)
    assert ok and log == [("earlier",), (B,)]


def test_remove_mode_checks_its_arguments():
    s = Stack(M)
    with pytest.raises(TypeError, match="log must be a list"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push, ())
    with pytest.raises(TypeError, match="log must be a list"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push)
    with pytest.raises(TypeError, match="log must be a list"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push, [], [])
    assert s.items == [M] and s.calls == {}


def test_remove_mode_raises_what_length_or_at_raises_and_touches_nothing():
    s = Stack(A, M, fail={"length": {1}})
    with pytest.raises(Failed, match="length call 1"):
        remove(s)
    s = Stack(A, M, B, fail={"at": {2}})  # at(2) is B, at(1) fails
    with pytest.raises(Failed, match="at call 2"):
        remove(s)
    assert s.items == [A, M, B] and "pop" not in s.calls


def test_a_length_of_minus_one_without_an_error_is_an_empty_stack():
    log = []
    assert _core.remove_mode(M, lambda: -1, None, None, None, log) is False and log == []


def test_remove_mode_whose_pop_fails_puts_back_what_it_took_and_raises():
    s = Stack(A, M, B, C, fail={"pop": {2}})  # C popped, then popping B fails
    ok_log = []
    with pytest.raises(Failed, match="pop call 2"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push, ok_log)
    assert s.items == [A, M, B, C] and ok_log == []  # C pushed back; nothing logged


def test_remove_mode_of_a_stack_that_changed_under_it_puts_everything_back_and_raises():
    X = Mode("X")
    s = Stack(A, X, B)
    looks = [A, M, B]  # at() says M is at index 1; pop finds X there
    log = []
    with pytest.raises(RuntimeError, match="stack changed while it was read"):
        _core.remove_mode(M, s.length, looks.__getitem__, s.pop, s.push, log)
    assert s.items == [A, X, B] and log == []


def test_remove_mode_whose_push_back_fails_still_logs_the_removal_and_raises():
    s = Stack(M, A, B, fail={"push": {1}})  # A's push back fails, B's succeeds
    log = []
    with pytest.raises(Failed, match="push call 1"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push, log)
    assert s.items == [B] and log == [(A, B)]


def test_remove_mode_whose_second_push_back_fails_raises_that_one():
    s = Stack(M, A, B, C, fail={"push": {2}})
    log = []
    with pytest.raises(Failed, match="push call 2"):
        _core.remove_mode(M, s.length, s.at, s.pop, s.push, log)
    assert s.items == [A, C] and log == [(A, B, C)]


# ---- call_alone ------------------------------------------------------------------------------------------------------


def alone(stack, fn, arg="arg", mode=M):
    return _core.call_alone(mode, fn, arg, stack.length, stack.pop, stack.push)


@pytest.mark.parametrize("before", [[], [A], [A, B, C]])
def test_call_alone_runs_fn_with_the_mode_alone_then_puts_the_stack_back(before):
    s = Stack(*before)
    seen = []

    def fn(arg):
        seen.append((arg, list(s.items)))
        return "out"

    assert alone(s, fn) == "out"
    assert seen == [("arg", [M])] and s.items == before


@pytest.mark.parametrize("left", [[], [M, D], [D]])
def test_call_alone_takes_off_whatever_fn_left_on_the_stack(left):
    s = Stack(A, B)

    def fn(arg):
        s.items[:] = list(left)
        return arg

    assert alone(s, fn, arg=7) == 7
    assert s.items == [A, B]


def test_call_alone_raises_what_fn_raises_with_the_stack_put_back():
    s = Stack(A, B)

    def fn(arg):
        raise Failed("fn")

    with pytest.raises(Failed, match="fn"):
        alone(s, fn)
    assert s.items == [A, B]


def test_call_alone_whose_pop_fails_does_not_call_fn_and_puts_back_what_it_took():
    s = Stack(A, B, C, fail={"pop": {2}})  # C taken, taking B fails
    called = []
    with pytest.raises(Failed, match="pop call 2"):
        alone(s, called.append)
    assert called == [] and s.items == [A, B, C]


def test_call_alone_whose_push_of_the_mode_fails_does_not_call_fn_and_puts_the_stack_back():
    s = Stack(A, B, fail={"push": {1}})
    called = []
    with pytest.raises(Failed, match="push call 1"):
        alone(s, called.append)
    assert called == [] and s.items == [A, B]


def test_call_alone_whose_length_fails_after_fn_raises_that_and_puts_the_saved_modes_back_on_top():
    s = Stack(A, B, fail={"length": {2}})
    with pytest.raises(Failed, match="length call 2"):
        alone(s, lambda arg: "out")
    assert s.items == [M, A, B]  # the mode could not be taken off; the saved modes go back above it


def test_call_alone_whose_cleanup_pop_fails_raises_that():
    s = Stack(A, fail={"pop": {2}})  # pop 1 takes A; pop 2 (the mode, after fn) fails
    with pytest.raises(Failed, match="pop call 2"):
        alone(s, lambda arg: "out")
    assert s.items == [M, A]


def test_call_alone_whose_push_back_fails_raises_that():
    s = Stack(A, B, fail={"push": {2}})  # push 1: the mode; push 2: A fails; push 3: B
    with pytest.raises(Failed, match="push call 2"):
        alone(s, lambda arg: "out")
    assert s.items == [B]


def test_call_alone_raises_what_the_first_length_raises_and_calls_nothing():
    s = Stack(A, fail={"length": {1}})
    called = []
    with pytest.raises(Failed, match="length call 1"):
        alone(s, called.append)
    assert called == [] and s.items == [A] and "pop" not in s.calls


@pytest.mark.parametrize("size", [-1, -7])
def test_call_alone_refuses_a_negative_stack_size_and_calls_nothing(size):
    called = []
    with pytest.raises(ValueError, match=rf"call_alone: length\(\) gave {size}, not a stack size"):
        _core.call_alone(M, called.append, 1, lambda: size, called.append, called.append)
    assert called == []


def test_call_alone_checks_its_arguments():
    s = Stack(A)
    with pytest.raises(TypeError, match=r"call_alone\(mode, fn, arg, length, pop, push\)"):
        _core.call_alone(M, print, 1, s.length, s.pop)
    with pytest.raises(TypeError, match=r"call_alone\(mode, fn, arg, length, pop, push\)"):
        _core.call_alone(M, print, 1, s.length, s.pop, s.push, None)
    assert s.calls == {}
