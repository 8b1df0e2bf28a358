"""Collectives inside ``measure``, in one process: the rows of the collectives table (message bytes, bus bytes,
group size, async flag, uncertain flag), the records of the collectives and of the ``fsdp::`` copies (no counts,
their dtype, their times with ``timing="op"``), the rank metadata, and the guard around DTensor's sharding
propagation (roofline/_capture/_collectives.py).

The collectives really run, on a gloo process group of one rank (a HashStore: no port, no file, no subprocess),
made and destroyed by each test that needs it so that no group outlives its test (tests/test_distributed.py and
roofline.distributed's tests expect none). On one rank every nccl-tests factor is 0 or 1, which hides most of the
arithmetic, so where a test needs n > 1 it patches what the recorder reads for the group size (``four_ranks``):
the collective still runs on the one real rank, only the recorded n is 4. Expected bytes are numel x itemsize
written out here, times the factors of nccl-tests' PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather,
reduce-scatter, all-to-all, gather, scatter (n-1)/n, broadcast and reduce 1, barriers and waits 0.
"""

from __future__ import annotations

import math
import sys
import threading
import types
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = torch.distributed
if not dist.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as mode_stack  # noqa: E402

import roofline  # noqa: E402
import roofline._capture._session  # noqa: E402,F401 - the first measure imports it (torch._dynamo: seconds); here, once
from roofline import distributed as rd  # noqa: E402
from roofline._capture import _collectives as coll  # noqa: E402
from roofline._datamodel._records import FORWARD  # noqa: E402
from roofline._hardware import _interconnect  # noqa: E402

# all_gather_into_tensor and reduce_scatter_tensor are deprecated names in recent torch, still the ones older torch has
pytestmark = pytest.mark.filterwarnings("ignore:`torch.distributed.* is deprecated:FutureWarning")

F = torch.ops._c10d_functional
C10D = torch.ops.c10d

# An op of the fsdp:: namespace that roofline's table of FSDP2 copies does not know: it is counted as a generic
# copy (every tensor argument read, the result written). Its int argument is not a tensor (no bytes), and with an
# empty list it has no tensor argument at all (dtype unknown). Defined once per process; the Library object is
# kept so the definition stays registered.
_FSDP_LIB = torch.library.Library("fsdp", "FRAGMENT")
_FSDP_LIB.define("roofline_test_pack(Tensor[] tensors, int pad) -> Tensor")


def _pack(tensors, pad):
    return torch.cat([*(t.reshape(-1).float() for t in tensors), torch.zeros(pad)])


_FSDP_LIB.impl("roofline_test_pack", _pack, "CompositeExplicitAutograd")
PACK = torch.ops.fsdp.roofline_test_pack.default

CODE_FIELDS = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "flop_counter_flops")


@pytest.fixture
def pg():
    """A gloo process group of this one process, destroyed when the test ends (whatever it raised)."""
    if dist.is_initialized():  # pragma: no cover - some other code left a group behind
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


class _Sized:
    """What the recorder asks a process group: its size."""

    def __init__(self, n):
        self.n = n

    def size(self):
        return self.n


@pytest.fixture
def four_ranks(pg, monkeypatch):
    """The recorder sees a group of 4 ranks; the collectives still run on the one real rank. The recorder reads the
    size of a c10d op's group through ``ProcessGroup.unbox(pg).size()`` and the size of a functional op's group
    through ``_resolve_process_group(group_name).size()``; the ops themselves resolve their group in C++, so patching
    these two Python entry points changes only what is recorded."""
    monkeypatch.setattr(dist.ProcessGroup, "unbox", staticmethod(lambda boxed: _Sized(4)))
    monkeypatch.setattr(dist.distributed_c10d, "_resolve_process_group", lambda name: _Sized(4))
    return pg


def _rows(report):
    """The collectives table as one dict per row, with the op's name and the record's dtype name."""
    t = report.meta.get("collectives")
    if t is None:
        return []
    out = []
    for i in range(len(t["record"])):
        row = {k: t[k][i] for k in t}
        rec = report.records[row["record"]]
        row["op"] = report.op_names[rec["op"]]
        row["dtype"] = report.dtype_names[int(rec["dtype"])]
        out.append(row)
    return out


def _only(rows, op):
    hit = [r for r in rows if r["op"] == op]
    assert len(hit) == 1, (op, rows)
    return hit[0]


def _records_of(report, prefix):
    return [i for i, o in enumerate(report.records["op"]) if report.op_names[o].startswith(prefix)]


def _assert_no_counts(report, i):
    for f in CODE_FIELDS:
        assert int(report.records[f][i]) == 0, (f, report.op_names[report.records["op"][i]])


# ---- outside any process group (first: no test of this file has made one yet) ------------------------------------
def test_wait_outside_a_process_group_assumes_one_rank():
    """A wait names no group: the recorder falls back to the world size, which is 1 outside a process group (not
    an error: torch's get_world_size raises there), and flags the row uncertain. No rank metadata either."""
    if dist.is_initialized():  # pragma: no cover
        pytest.skip("a process group is already initialized in this process")
    with roofline.measure() as r:
        F.wait_tensor(torch.ones(4))
    assert r.meta["collectives"] == {"record": [1], "collective": ["wait"], "group_size": [1], "message_bytes": [0],
                                     "bus_bytes": [0], "async_op": [False], "uncertain": [True]}
    assert "distributed" not in r.meta
    assert r.op_names[r.records["op"][1]] == "_c10d_functional.wait_tensor.default"


# ---- c10d ops (torch.distributed's API) --------------------------------------------------------------------------
def test_c10d_collectives_bytes_over_four_ranks(four_ranks):
    pg = four_ranks
    n = 4
    ar = 2 * (n - 1) / n  # 3/2
    part = (n - 1) / n  # 3/4
    with roofline.measure() as r:
        dist.all_reduce(torch.ones(10, dtype=torch.float16))
        dist.all_gather_into_tensor(torch.empty(6), torch.ones(6))
        dist.reduce_scatter_tensor(torch.empty(8), torch.ones(8))
        dist.broadcast(torch.ones(5, dtype=torch.int64), src=0)
        dist.scatter(torch.empty(3), [torch.ones(3)], src=0)
        dist.gather(torch.ones(3, dtype=torch.float64), [torch.empty(3, dtype=torch.float64)], dst=0)
        dist.all_to_all_single(torch.empty(4), torch.ones(4))
        dist.reduce(torch.ones(4), dst=0)
        dist.all_gather([torch.empty(4)], torch.ones(4))
        # the coalesced all-gathers return only a Work: their message is the output lists passed in
        C10D.allgather_coalesced_([[torch.empty(3)]], [torch.ones(3)], pg.boxed(), False).wait()
        C10D.allgather_into_tensor_coalesced_([torch.empty(5)], [torch.ones(5)], pg.boxed(), False).wait()
        # a barrier's tensor is a placeholder: float64 here, so the record's dtype is seen to come from it
        C10D.barrier(torch.ones(2, dtype=torch.float64), pg.boxed(), [], False).wait()
    rows = _rows(r)
    # op: (collective, message bytes, bus bytes, dtype)
    expect = {
        "c10d.allreduce_.default": ("all_reduce", 10 * 2, 10 * 2 * ar, "float16"),
        "c10d._allgather_base_.default": ("all_gather", 6 * 4, 6 * 4 * part, "float32"),  # the gathered output
        "c10d._reduce_scatter_base_.default": ("reduce_scatter", 8 * 4, 8 * 4 * part, "float32"),  # the input
        "c10d.broadcast_.default": ("broadcast", 5 * 8, 5 * 8, "int64"),
        # scatter: the whole input, n times what one rank receives
        "c10d.scatter_.default": ("scatter", 3 * 4 * n, 3 * 4 * n * part, "float32"),
        # gather: the whole output, n times what one rank sends
        "c10d.gather_.default": ("gather", 3 * 8 * n, 3 * 8 * n * part, "float64"),
        "c10d.alltoall_base_.default": ("all_to_all", 4 * 4, 4 * 4 * part, "float32"),
        "c10d.reduce_.default": ("reduce", 4 * 4, 4 * 4, "float32"),
        "c10d.allgather_.default": ("all_gather", 4 * 4, 4 * 4 * part, "float32"),
        "c10d.allgather_coalesced_.default": ("all_gather", 3 * 4, 3 * 4 * part, "float32"),
        "c10d.allgather_into_tensor_coalesced_.default": ("all_gather", 5 * 4, 5 * 4 * part, "float32"),
        "c10d.barrier.default": ("barrier", 0, 0, "float64"),
    }
    assert sorted(row["op"] for row in rows) == sorted(expect)
    for op, (collective, message, bus, dtype) in expect.items():
        row = _only(rows, op)
        assert float(bus).is_integer()  # sizes chosen so that the bus bytes are exact
        got = (row["collective"], row["message_bytes"], row["bus_bytes"], row["dtype"])
        assert got == (collective, message, int(bus), dtype), op
        assert row["group_size"] == n and row["uncertain"] is False and row["async_op"] is False, op
        assert r.op_kinds[r.records["op"][row["record"]]] == "collective"
        _assert_no_counts(r, row["record"])  # the work is on the network: no FLOPs, no memory bytes


def test_one_rank_all_reduce_moves_no_bus_bytes(pg):
    """On one rank 2(n-1)/n = 0: nothing crosses the bus. A broadcast's factor is 1 whatever n."""
    with roofline.measure() as r:
        dist.all_reduce(torch.ones(6))
        dist.all_gather_into_tensor(torch.empty(6), torch.ones(6))
        dist.broadcast(torch.ones(6), src=0)
    got = [(row["collective"], row["group_size"], row["message_bytes"], row["bus_bytes"]) for row in _rows(r)]
    assert got == [("all_reduce", 1, 24, 0), ("all_gather", 1, 24, 0), ("broadcast", 1, 24, 24)]
    # rank metadata of the default group (nothing measured: no interconnect entry)
    assert r.meta["distributed"] == {"rank": 0, "world_size": 1, "backend": "gloo"}


def test_empty_all_gather_has_an_empty_message(pg):
    with roofline.measure() as r:
        dist.all_gather_into_tensor(torch.empty(0), torch.ones(0))
    (row,) = _rows(r)
    assert (row["collective"], row["message_bytes"], row["bus_bytes"]) == ("all_gather", 0, 0)


def test_monitored_barrier_is_synchronous(pg):
    """monitored_barrier_'s schema has no async_op argument: it blocks, and is recorded so."""
    with roofline.measure() as r:
        dist.monitored_barrier()
    (row,) = _rows(r)
    assert (row["collective"], row["message_bytes"], row["bus_bytes"], row["async_op"], row["uncertain"]) == (
        "barrier", 0, 0, False, False)


def test_sync_collective_is_not_async(pg):
    with roofline.measure() as r:
        dist.all_reduce(torch.ones(3))
        dist.broadcast(torch.ones(3), src=0, async_op=False)
    assert [row["async_op"] for row in _rows(r)] == [False, False]


def test_async_c10d_collective_is_flagged_async(pg):
    """async_op=True equals the schema default of the c10d ops, so the dispatcher leaves it out of the arguments the
    mode sees: the recorder takes the schema's default (it took False, and every c10d collective was synchronous)."""
    with roofline.measure() as r:
        dist.all_reduce(torch.ones(3), async_op=True).wait()
        dist.broadcast(torch.ones(3), 0, async_op=True).wait()
        dist.all_reduce(torch.ones(3))
    assert [row["async_op"] for row in _rows(r)] == [True, True, False]


def test_uncertain_group_size_is_the_world_size(pg, monkeypatch):
    """A wait names no group: its group size is torch.distributed's world size (patched to 3 here: the wait itself
    talks to no group) and the row says so."""
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 3)
    with roofline.measure() as r:
        F.wait_tensor(torch.ones(2))
    (row,) = _rows(r)
    assert (row["collective"], row["group_size"], row["uncertain"], row["message_bytes"], row["bus_bytes"]) == (
        "wait", 3, True, 0, 0)


# ---- functional collectives (_c10d_functional) -------------------------------------------------------------------
def test_functional_collectives(four_ranks):
    name = four_ranks.group_name
    n = 4
    with roofline.measure() as r:
        a = F.all_reduce(torch.ones(8), "sum", name)
        F.wait_tensor(a)
        b = F.broadcast(torch.ones(4, dtype=torch.float16), 0, name)
        F.wait_tensor(b)
        # the group size argument of the op wins over its group's (one real rank: it must be 1)
        g = F.all_gather_into_tensor(torch.ones(3, dtype=torch.bfloat16), 1, name)
        F.wait_tensor(g)
        s = F.reduce_scatter_tensor(torch.ones(4), "sum", 1, name)
        F.wait_tensor(s)
        o = F.all_gather_into_tensor_out(torch.ones(5), 1, name, out=torch.empty(5))
        F.wait_tensor(o)
        F._wrap_tensor_autograd(torch.ones(2))  # a functional op with no traffic: no row
    rows = _rows(r)
    got = [(row["op"].split(".")[1], row["collective"], row["group_size"], row["message_bytes"], row["bus_bytes"],
            row["async_op"], row["uncertain"], row["dtype"]) for row in rows]
    wait = ("wait_tensor", "wait", 1, 0, 0, False, True)
    assert got == [
        ("all_reduce", "all_reduce", n, 32, 32 * 2 * (n - 1) // n, True, False, "float32"), (*wait, "float32"),
        ("broadcast", "broadcast", n, 8, 8, True, False, "float16"), (*wait, "float16"),
        # all-gather: the message is what the op returns (3 elements x 1 rank)
        ("all_gather_into_tensor", "all_gather", 1, 6, 0, True, False, "bfloat16"), (*wait, "bfloat16"),
        ("reduce_scatter_tensor", "reduce_scatter", 1, 16, 0, True, False, "float32"), (*wait, "float32"),
        ("all_gather_into_tensor_out", "all_gather", 1, 20, 0, True, False, "float32"), (*wait, "float32"),
    ]
    (wrap,) = _records_of(r, "_c10d_functional._wrap_tensor_autograd")
    assert r.op_kinds[r.records["op"][wrap]] == "zero"
    _assert_no_counts(r, wrap)
    (ar,) = _records_of(r, "_c10d_functional.all_reduce")
    assert r.op_kinds[r.records["op"][ar]] == "collective"
    for row in rows:
        _assert_no_counts(r, row["record"])


def test_collective_dtype_unknown_to_the_recorder(pg):
    """A dtype without a record code (bits16) is recorded as unknown (0), not as another dtype's code."""
    with roofline.measure() as r:
        F.wait_tensor(torch.empty(3, dtype=torch.bits16))
    (row,) = _rows(r)
    assert row["dtype"] == "unknown" and int(r.records["dtype"][row["record"]]) == 0


# ---- fsdp:: copies -----------------------------------------------------------------------------------------------
def test_fsdp_copy_counts_bytes_not_flops():
    with roofline.measure() as r:
        PACK([torch.ones(3, dtype=torch.float16), torch.ones(2, 2, dtype=torch.float16)], 4)
        PACK([], 5)  # no tensor argument at all
    first, second = _records_of(r, "fsdp.roofline_test_pack")
    rec = r.records
    # read: the tensors (7 float16 elements; the int is no tensor); written: the result, 7 + 4 float32
    assert (int(rec["bytes_read"][first]), int(rec["bytes_written"][first])) == (7 * 2, 11 * 4)
    assert r.dtype_names[int(rec["dtype"][first])] == "float16"
    assert (int(rec["bytes_read"][second]), int(rec["bytes_written"][second])) == (0, 5 * 4)
    assert int(rec["dtype"][second]) == 0 and r.dtype_names[0] == "unknown"
    for i in (first, second):
        for f in ("matrix_flops", "vector_flops", "special_ops", "flop_counter_flops"):
            assert int(rec[f][i]) == 0, f
        assert r.op_kinds[rec["op"][i]] == "copy"
    assert "collectives" not in r.meta  # a copy, not a collective
    # outside a backward pass (no autograd graph task running): both in the forward phase
    assert rec["phase"][first] == rec["phase"][second] == FORWARD


# ---- times -------------------------------------------------------------------------------------------------------
def _timed_block(pg):
    with roofline.measure(timing="op") as r:
        x = torch.ones(16)
        x = x * 2
        dist.all_reduce(x)
        x = x + 1
        w = F.wait_tensor(F.all_reduce(x, "sum", pg.group_name))
        w = w - 1
        PACK([w], 2)
        torch.ones(3).sin()
    return r


def test_op_timing_times_collectives_and_copies_within_the_block(pg):
    r = _timed_block(pg)
    rec = r.records
    starts, ends = rec["t_start"], rec["t_end"]
    assert np.isfinite(starts).all() and np.isfinite(ends).all()
    assert r.wall_time is not None and r.wall_time > 0
    mine = (_records_of(r, "c10d.") + _records_of(r, "_c10d_functional.") + _records_of(r, "fsdp."))
    assert len(mine) == 4
    for i in mine:
        # relative to the block's start, inside the block, after the record before it
        assert 0 <= starts[i] <= ends[i] <= r.wall_time, r.op_names[rec["op"][i]]
        assert i > 0 and ends[i - 1] <= starts[i]
    # every record in call order
    assert (np.diff(starts) >= 0).all() and (starts[1:] >= ends[:-1]).all()
    assert [c["time"] for c in rd.collectives(r)] == pytest.approx([ends[i] - starts[i] for i in mine[:3]])


def test_model_timing_leaves_collectives_and_copies_untimed(pg):
    with roofline.measure(timing="model") as r:
        x = torch.ones(8)
        dist.all_reduce(x)
        F.wait_tensor(F.all_reduce(x, "sum", pg.group_name))
        PACK([x], 1)
    mine = _records_of(r, "c10d.") + _records_of(r, "_c10d_functional.") + _records_of(r, "fsdp.")
    assert len(mine) == 4
    assert np.isnan(r.records["t_start"][mine]).all() and np.isnan(r.records["t_end"][mine]).all()
    assert all(math.isnan(c["time"]) for c in rd.collectives(r))


# ---- rank metadata -----------------------------------------------------------------------------------------------
def test_measured_interconnect_goes_into_the_rank_metadata(pg, monkeypatch):
    link = {"busbw": 2.0e9, "sweep": [{"bytes": 4096, "time": 2.048e-6, "busbw": 2.0e9}]}
    # what measure_interconnect() would have remembered for this backend and world size
    monkeypatch.setitem(_interconnect._MEASURED, ("gloo", 1), link)
    with roofline.measure() as r:
        dist.broadcast(torch.ones(250), src=0)
    assert r.meta["distributed"] == {"rank": 0, "world_size": 1, "backend": "gloo", "interconnect": link}


# ---- DTensor: the first-DTensor-op warning -----------------------------------------------------------------------
def test_defer_warns_once_at_its_caller(monkeypatch):
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    monkeypatch.setattr(coll, "_unguarded", [True])  # as install() leaves it on a torch without the lock
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        assert coll.defer([torch.Tensor, AsyncCollectiveTensor]) is True
        assert coll.defer([AsyncCollectiveTensor]) is True  # once per block
        assert coll.defer([torch.Tensor]) is False
    assert len(caught) == 1, [str(w.message) for w in caught]
    # attributed to the code that met the subclass (stacklevel=2), not to roofline's own line or to torch
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    assert "_fake_mode_lock" in str(caught[0].message)
    assert coll._unguarded == [False]


# ---- DTensor: the propagation guard ------------------------------------------------------------------------------
class _Lock:
    """Stands for ShardingPropagator._fake_mode_lock: a context manager that counts its uses."""

    def __init__(self):
        self.entered = self.exited = 0
        self.token = object()
        self.exc = []

    def __enter__(self):
        self.entered += 1
        return self.token

    def __exit__(self, *exc):
        self.exited += 1
        self.exc.append(exc[0])
        return False


class _Seen(TorchDispatchMode):
    """A user's dispatch mode: the ops it sees."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def _roofline_modes():
    from roofline._capture._modes import _Mode

    return [m for m in mode_stack() if isinstance(m, _Mode)]


def _in_new_thread(fn):
    """fn() in a thread of its own (the guard's state is per thread: a new thread starts with none)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_guard_state_of_a_new_thread():
    def body():
        lock = _Lock()
        before = coll.suppressed()
        with coll._PropagationGuard(lock) as got:
            during = coll.suppressed()
        return before, during, coll.suppressed(), got is lock.token, (lock.entered, lock.exited)

    assert _in_new_thread(body) == (False, True, False, True, (1, 1))


def test_guard_sets_the_roofline_mode_aside_while_held():
    lock = _Lock()
    guard = coll._PropagationGuard(lock)
    with roofline.measure() as r:
        torch.ones(2).cos()
        mode = _roofline_modes()
        assert len(mode) == 1
        with guard as got:
            assert got is lock.token
            assert coll.suppressed()
            assert _roofline_modes() == []
            torch.ones(2).sin()  # propagation's work: not counted
            with coll._PropagationGuard(_Lock()):  # nested: depth 2
                assert coll.suppressed()
                torch.ones(2).exp()
            assert coll.suppressed()  # still inside the outer one
            assert _roofline_modes() == []
        assert not coll.suppressed()
        assert _roofline_modes() == mode  # the same mode back on the stack
        torch.ones(2).tan()
    names = [r.op_names[o] for o in r.records["op"]]
    assert "aten.cos.default" in names and "aten.tan.default" in names
    assert "aten.sin.default" not in names and "aten.exp.default" not in names
    assert (lock.entered, lock.exited, lock.exc) == (1, 1, [None])


def test_guard_pops_only_the_roofline_modes_at_the_top():
    # a user's mode below the roofline mode stays; the roofline mode above it is set aside
    user = _Seen()
    with user:
        with roofline.measure() as r:
            with coll._PropagationGuard(_Lock()):
                assert mode_stack() == [user]
                torch.ones(2).sin()
            assert len(mode_stack()) == 2 and mode_stack()[0] is user
    assert "aten.sin.default" in user.seen
    assert "aten.sin.default" not in [r.op_names[o] for o in r.records["op"]]
    # a user's mode above the roofline mode: nothing at the top is roofline's, so nothing is popped
    user = _Seen()
    with roofline.measure():
        with user:
            before = list(mode_stack())
            with coll._PropagationGuard(_Lock()):
                assert list(mode_stack()) == before
            assert list(mode_stack()) == before


def test_guard_exit_passes_the_exception_on():
    lock = _Lock()

    def body():
        with pytest.raises(KeyError):
            with coll._PropagationGuard(lock):
                raise KeyError("x")
        return coll.suppressed()

    assert _in_new_thread(body) is False
    assert lock.exc == [KeyError]


# ---- DTensor: install / uninstall --------------------------------------------------------------------------------
_NEW = "torch.distributed.tensor._sharding_prop"
_OLD = "torch.distributed._tensor.sharding_prop"  # torch < 2.5


def _propagator_module(name, with_lock=True):
    mod = types.ModuleType(name)
    cls = type("ShardingPropagator", (), {"_fake_mode_lock": _Lock()} if with_lock else {})
    mod.ShardingPropagator = cls
    return mod, cls


@pytest.fixture
def fresh_install_state(monkeypatch):
    """install()'s module state of its own, and neither propagator module loaded."""
    monkeypatch.setattr(coll, "_holders", set())
    monkeypatch.setattr(coll, "_wrapped", [None, None])
    monkeypatch.setattr(coll, "_unguarded", [False])
    monkeypatch.delitem(sys.modules, _NEW, raising=False)
    monkeypatch.delitem(sys.modules, _OLD, raising=False)
    return monkeypatch


@pytest.mark.parametrize("where", [_NEW, _OLD])
def test_install_wraps_the_lock_while_a_holder_is_left(fresh_install_state, where):
    mod, cls = _propagator_module(where)
    fresh_install_state.setitem(sys.modules, where, mod)
    lock = cls.__dict__["_fake_mode_lock"]
    coll._unguarded[0] = True  # left by an earlier block on another torch: this one has the lock
    a, b = object(), object()
    assert coll.install(a) is None
    wrapped = cls.__dict__["_fake_mode_lock"]
    assert isinstance(wrapped, coll._PropagationGuard) and wrapped.inner is lock
    assert coll._unguarded == [False]
    coll.install(b)  # a second block: wrapped once only
    assert cls.__dict__["_fake_mode_lock"] is wrapped
    coll.uninstall(a)
    assert cls.__dict__["_fake_mode_lock"] is wrapped  # b still holds it
    coll.uninstall(b)
    assert cls.__dict__["_fake_mode_lock"] is lock
    coll.uninstall(b)  # idempotent
    coll.uninstall(a)
    assert cls.__dict__["_fake_mode_lock"] is lock and coll._wrapped == [None, None]


def test_install_without_the_lock_only_notes_it(fresh_install_state):
    mod, cls = _propagator_module(_NEW, with_lock=False)
    fresh_install_state.setitem(sys.modules, _NEW, mod)
    h = object()
    coll.install(h)
    assert coll._unguarded == [True]  # warned about at the first DTensor op (defer)
    assert "_fake_mode_lock" not in cls.__dict__ and coll._wrapped == [None, None]
    coll.uninstall(h)
    assert coll._wrapped == [None, None]


def test_install_without_dtensor_loaded_does_nothing(fresh_install_state):
    h = object()
    assert coll.install(h) is None
    assert coll._unguarded == [False] and coll._wrapped == [None, None]
    coll.uninstall(h)
    coll.uninstall(h)
    assert coll._wrapped == [None, None]


def test_bind_fills_only_the_arguments_left_out_with_their_defaults():
    """The dispatcher leaves out trailing arguments equal to their defaults: binding puts the schema's default back
    for those, and keeps what the call gave (positionally or by keyword) and what has no default (absent)."""
    op = torch.ops.c10d.allreduce_.default
    names = [a.name for a in op._schema.arguments]
    assert names[:2] == ["tensors", "process_group"] and "async_op" in names and "timeout" in names
    t = [torch.ones(2)]
    bound = coll._bind(op, (t,), {})
    assert bound["tensors"] is t and bound["async_op"] is True and bound["timeout"] == -1
    assert "process_group" not in bound  # no default: nothing made up
    bound = coll._bind(op, (t,), {"async_op": False})
    assert bound["async_op"] is False and bound["timeout"] == -1
