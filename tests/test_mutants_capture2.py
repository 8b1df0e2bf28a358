"""The capture session's op table and Python-path recording (roofline/_capture/_optable.py, _recording.py) where
other tests leave them open: the arguments a user formula's op writes (``out=``), the caches that let a later block
skip an op's resolution (they give the same answer as a fresh resolution, and a block's own formula wins over them),
what runs an op, the warning of a resolution that failed, the host times of ops with a Python formula, a
higher-order operator's empty record and an op whose composite kernel declines. Expected values are
worked out here (bytes of float32 tensors by hand)."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._capture import _optable  # noqa: E402
from roofline._counting import _resolve  # noqa: E402

F32 = 4
COUNTS = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "flop_counter_flops")


def sid(t):
    """The storage id as the dataflow rows give it: the StorageImpl address through the untyped storage."""
    return t.untyped_storage()._cdata


def _rows(r, i):
    a = r.accesses[r.accesses["record"] == i]
    return sorted((int(s), int(w), int(n)) for s, w, n in zip(a["storage"], a["write"], a["nbytes"]))


@pytest.fixture
def fresh_caches(monkeypatch):
    """Empty op-table caches, as in a new process (the ones other tests filled are put back afterwards)."""
    monkeypatch.setattr(_optable, "_RESOLVED", {})
    monkeypatch.setattr(_optable, "_PLAIN", {})


def _spy_resolve(monkeypatch):
    seen = []
    real = _resolve.resolve

    def spy(qualified, overload, schema, scoped=None):
        seen.append(qualified)
        return real(qualified, overload, schema, scoped)

    monkeypatch.setattr(_resolve, "resolve", spy)
    return seen


# ---- a user formula's op: the arguments it writes --------------------------------------------------------------------
@pytest.mark.parametrize("where", ["block", "registered"])
def test_an_out_argument_of_an_op_counted_by_a_users_formula_is_its_one_written_storage(where):
    a, b, c = torch.randn(4, 8), torch.randn(4, 8), torch.empty(4, 8)

    def formula(*args, **kw):
        return {"vector_flops": 32, "bytes_read": 2 * 32 * F32, "bytes_written": 32 * F32}

    if where == "block":
        with roofline.measure(formulas={"aten::add.out": formula}) as r:
            torch.add(a, b, out=c)
    else:
        roofline.register(torch.ops.aten.add.out, formula)
        try:
            with roofline.measure() as r:
                torch.add(a, b, out=c)
        finally:
            roofline.unregister(torch.ops.aten.add.out)
    (i,) = [k for k, o in enumerate(r.records["op"].tolist()) if r.op_names[o] == "aten.add.out"]
    rows = _rows(r, i)
    # out= is keyword-only: c, passed by keyword, is the one storage written, its 4*8 float32 = 128 bytes
    assert [(s, n) for s, w, n in rows if w] == [(sid(c), 4 * 8 * F32)]
    read = {s for s, w, n in rows if not w}
    assert {sid(a), sid(b)} <= read


# ---- the caches of resolved ops --------------------------------------------------------------------------------------
def test_a_blocks_own_formula_wins_over_the_resolution_an_earlier_block_kept():
    x = torch.randn(4, 8)
    with roofline.measure(timing=None) as plain:  # gelu resolved to its C formula, and kept
        torch.nn.functional.gelu(x)
    assert plain.vector_flops != 7
    with roofline.measure(timing=None, formulas={"aten::gelu": lambda *a, **k: {"vector_flops": 7}}) as r:
        torch.nn.functional.gelu(x)
    assert r.vector_flops == 7
    five = {torch.ops.aten.gelu.default: lambda *a, **k: {"vector_flops": 5}}
    with roofline.measure(timing=None, formulas=five) as r:
        torch.nn.functional.gelu(x)
        torch.nn.functional.gelu(x)  # its second call: on the table the first one made
    assert r.vector_flops == 2 * 5


def test_an_op_is_resolved_once_per_process_and_a_later_blocks_counts_and_rows_are_the_first_ones(
        fresh_caches, monkeypatch):
    seen = _spy_resolve(monkeypatch)
    x, w = torch.randn(4, 8), torch.randn(8, 8)

    def run():
        y = torch.mm(x, w)
        y.add_(1.0)
        return torch.sort(y, dim=1)  # a built-in Python formula

    with roofline.measure() as first:
        run()
    n_first = len(seen)
    assert {"aten::mm", "aten::add_", "aten::sort"} <= set(seen)
    reports = []
    for formulas in (None, {"aten::gelu": lambda *a, **k: {"vector_flops": 1}}):  # another op's formula changes nothing
        with roofline.measure(formulas=formulas) as r:
            run()
        reports.append(r)
    assert len(seen) == n_first  # no op resolved again
    for r in reports:
        assert r.op_names == first.op_names
        for f in COUNTS:
            np.testing.assert_array_equal(r.records[f], first.records[f])
        # the same dataflow rows, storage for storage (the same tensors; fresh outputs may differ in address)
        assert [(int(i), int(w), int(n)) for i, w, n in zip(r.accesses["record"], r.accesses["write"],
                                                             r.accesses["nbytes"])] == \
            [(int(i), int(w), int(n)) for i, w, n in zip(first.accesses["record"], first.accesses["write"],
                                                         first.accesses["nbytes"])]
    # mm: 2*4*8*8 = 512 products; the in-place add_: 4*8 = 32 elements read and written
    mm = [k for k, o in enumerate(reports[1].records["op"].tolist()) if reports[1].op_names[o] == "aten.mm.default"]
    assert reports[1].records["matrix_flops"][mm].tolist() == [2 * 4 * 8 * 8]


def test_a_resolution_without_error_warns_of_nothing(fresh_caches):
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with roofline.measure(timing=None) as r:
            torch.mm(x, w).relu()
    assert not [w for w in caught if "unknown_ops" in str(w.message)]
    assert r.matrix_flops == 2 * 4 * 8 * 8


# ---- what runs an op -------------------------------------------------------------------------------------------------
def test_an_op_runs_as_its_cpp_op_unless_a_python_dispatcher_may_divert_it():
    op = torch.ops.aten.mm.default
    assert _optable._runner(op) is op._op
    plain = types.SimpleNamespace(_op=object(), _pyobj_dispatcher=None)
    assert _optable._runner(plain) is plain._op
    diverted = types.SimpleNamespace(_op=object(), _pyobj_dispatcher=object())
    assert _optable._runner(diverted) is diverted
    no_op = types.SimpleNamespace()
    assert _optable._runner(no_op) is no_op


# ---- the Python path's records ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("timing", ["op", "model"])
def test_an_op_with_a_python_formula_is_timed_from_the_blocks_start_under_per_op_timing_only(timing):
    x = torch.randn(4, 8)
    with roofline.measure(timing=timing, formulas={"aten::gelu": lambda *a, **k: {"vector_flops": 7}}) as r:
        torch.nn.functional.gelu(x)
    (i,) = [k for k, o in enumerate(r.records["op"].tolist()) if r.op_names[o] == "aten.gelu.default"]
    t0, t1 = float(r.records["t_start"][i]), float(r.records["t_end"][i])
    if timing == "op":
        assert 0.0 <= t0 <= t1 <= r.wall_time  # seconds from the block's start
    else:
        assert np.isnan(t0) and np.isnan(t1)


def test_a_higher_order_operators_record_has_no_counts_and_no_dtype():
    x = torch.randn(4)
    with roofline.measure(timing=None) as r:
        torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
    (i,) = [k for k, o in enumerate(r.records["op"].tolist()) if r.op_names[o] == "higher_order.cond"]
    assert [float(r.records[f][i]) for f in COUNTS] == [0.0] * len(COUNTS)
    assert int(r.records["dtype"][i]) == 0


def test_an_op_whose_composite_kernel_declines_is_counted_as_an_op_of_its_own():
    lib = torch.library.Library("rlmutcap", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        op = torch.ops.rlmutcap.twice.default
        # a Python kernel for CompositeImplicitAutograd that declines: op.decompose() gives NotImplemented
        op.py_impl(torch._C.DispatchKey.CompositeImplicitAutograd)(lambda x: NotImplemented)
        x = torch.randn(5)
        with roofline.measure(timing=None) as r:
            y = op(x)
            op(x)
        assert torch.equal(y, x * 2)
        assert r.unknown_ops.get("rlmutcap.twice.default") == 2
    finally:
        lib._destroy()


@pytest.fixture
def mutlib():
    lib = torch.library.Library("rlmutcap2", "DEF")
    lib.define("bump(Tensor(a!) x, Tensor y) -> ()")  # writes x in place, returns nothing
    lib.impl("bump", lambda x, y: x.add_(y).sum() and None, "CPU")
    lib.define("scale(Tensor x) -> Tensor")  # no formula anywhere: an unknown op
    lib.impl("scale", lambda x: x * 3, "CPU")
    yield torch.ops.rlmutcap2
    lib._destroy()


def test_an_argument_written_in_place_by_an_op_counted_by_a_users_formula_is_written(mutlib):
    n = 6
    x, y = torch.zeros(n), torch.ones(n)
    def formula(x, y, out=None):
        return {"vector_flops": n, "bytes_read": 2 * n * F32, "bytes_written": n * F32}

    with roofline.measure(formulas={"rlmutcap2::bump": formula}) as r:
        mutlib.bump(x, y)
    assert torch.equal(x, torch.ones(n))
    (i,) = [k for k, o in enumerate(r.records["op"].tolist()) if r.op_names[o] == "rlmutcap2.bump.default"]
    rows = _rows(r, i)
    # x (argument 0, alias-annotated a!) is the one storage written: 6 float32 = 24 bytes; y is only read
    assert [(s, n_) for s, w, n_ in rows if w] == [(sid(x), n * F32)]
    assert (sid(y), 0, n * F32) in rows


def test_an_unknown_ops_records_and_rows_in_a_later_block_are_the_first_blocks(fresh_caches, mutlib):
    x = torch.randn(5)
    reports = []
    for _ in range(2):
        with roofline.measure() as r:
            mutlib.scale(x)
        reports.append(r)
    first, later = reports
    assert first.unknown_ops == later.unknown_ops == {"rlmutcap2.scale.default": 1}
    for f in COUNTS:
        np.testing.assert_array_equal(later.records[f], first.records[f])
    # x is read (5 float32 = 20 bytes) and not written, in both blocks
    for r in reports:
        assert (sid(x), 0, 5 * F32) in _rows(r, 0) and (sid(x), 1, 5 * F32) not in _rows(r, 0)
    assert [(int(w), int(n)) for w, n in zip(later.accesses["write"], later.accesses["nbytes"])] == \
        [(int(w), int(n)) for w, n in zip(first.accesses["write"], first.accesses["nbytes"])]


def test_a_users_formula_gets_the_calls_keyword_arguments_and_its_record_the_first_tensors_dtype():
    x, w = torch.randn(4, 8), torch.randn(8, 8)

    def gelu(x, approximate="none", out=None):
        return {"vector_flops": 3 if approximate == "tanh" else 5}

    with roofline.measure(timing=None, formulas={"aten::gelu": gelu}) as r:
        torch.nn.functional.gelu(x, approximate="tanh")  # approximate is keyword-only: it comes as a keyword
        torch.nn.functional.gelu(x)
        torch.mm(x, w)  # a float32 op on the C path: the dtype code a second way
    assert r.records["vector_flops"][:2].tolist() == [3, 5]
    dt = r.records["dtype"].tolist()
    assert dt[0] == dt[1] == dt[2] != 0


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_a_users_formula_record_without_a_tensor_of_a_known_dtype_has_the_unknown_dtype():
    lib = torch.library.Library("rlmutcap3", "DEF")
    try:
        lib.define("count(int n) -> int")  # no tensor in or out
        lib.impl("count", lambda n: n + 1, "CompositeExplicitAutograd")
        q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint8)  # a dtype the recorder does not know
        one = lambda *a, out=None, **k: {"vector_flops": 1}  # noqa: E731
        with roofline.measure(timing=None, formulas={"rlmutcap3::count": one, "aten::int_repr": one}) as r:
            assert torch.ops.rlmutcap3.count(2) == 3
            torch.int_repr(q)
        names = [r.op_names[o] for o in r.records["op"].tolist()]
        assert "rlmutcap3.count.default" in names and "aten.int_repr.default" in names
        assert r.records["dtype"].tolist() == [0] * len(names)
    finally:
        lib._destroy()
