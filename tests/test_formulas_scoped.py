"""Formulas scoped to one block (``roofline.measure(model, formulas={op: formula})``, like FlopCounterMode's
``custom_mapping``): used inside that block only, ahead of a global ``roofline.register`` and of the built-in formula;
a registered formula still counts in the blocks around it; bad keys and values are refused when ``measure`` is called.
Also the one calling convention of Python formulas (``roofline._counting._resolve.Formula``)."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._counting import _resolve  # noqa: E402


def _counts_of(r, name):
    """(calls, vector_flops, bytes_read) of the records of op ``name`` (``"aten.gelu.default"``) in report ``r``."""
    ops = [i for i, n in enumerate(r.op_names) if n == name]
    recs = r.records[[int(op) in ops for op in r.records["op"]]]
    return len(recs), int(recs["vector_flops"].sum()), int(recs["bytes_read"].sum())


@pytest.fixture(scope="module")
def gelu_model():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()), torch.randn(3, 4)


def test_scoped_formula_is_used_in_its_block_only(gelu_model):
    model, x = gelu_model
    seen = []

    def formula(inp, *args, out=None, **kwargs):
        seen.append(tuple(out.shape))
        return {"vector_flops": 1000 + out.numel(), "bytes_read": 5}

    with roofline.measure(model) as before:
        model(x)
    with roofline.measure(model, formulas={torch.ops.aten.gelu.default: formula}) as scoped:
        model(x)
    with roofline.measure(model) as after:
        model(x)
    assert seen == [(3, 8)]  # called once, for the one gelu call of the scoped block, with the op's result
    # the gelu of the scoped block: 1000 + 3*8 = 1024 vector FLOPs and the 5 bytes the formula says
    assert _counts_of(scoped, "aten.gelu.default") == (1, 1024, 5)
    # outside it, the built-in count: GELU's C formula reads its 3x8 float32 input (96 bytes)
    assert _counts_of(before, "aten.gelu.default")[2] == 3 * 8 * 4
    assert _counts_of(after, "aten.gelu.default") == _counts_of(before, "aten.gelu.default")
    # the other ops are counted as in the blocks around it
    assert scoped.matrix_flops == before.matrix_flops == 2 * 3 * 4 * 8


def test_scoped_formula_by_packet_and_by_name(gelu_model):
    model, x = gelu_model
    for key in (torch.ops.aten.gelu, "aten::gelu", "gelu"):
        with roofline.measure(model, formulas={key: lambda *a, out=None, **k: {"vector_flops": 7}}) as r:
            model(x)
        assert _counts_of(r, "aten.gelu.default")[:2] == (1, 7), key


def test_scoped_formula_wins_over_a_registered_one_which_still_works_elsewhere(gelu_model):
    model, x = gelu_model
    roofline.register("aten::gelu", lambda *a, out=None, **k: {"vector_flops": 11})
    try:
        with roofline.measure(model) as registered:
            model(x)
        with roofline.measure(model, formulas={"aten::gelu": lambda *a, out=None, **k: {"vector_flops": 22}}) as scoped:
            model(x)
        with roofline.measure(model) as again:
            model(x)
    finally:
        roofline.unregister("aten::gelu")
    assert _counts_of(registered, "aten.gelu.default")[:2] == (1, 11)
    assert _counts_of(scoped, "aten.gelu.default")[:2] == (1, 22)
    assert _counts_of(again, "aten.gelu.default")[:2] == (1, 11)


def test_nested_blocks_each_use_their_own_formulas(gelu_model):
    model, x = gelu_model
    with roofline.measure(model, formulas={"aten::gelu": lambda *a, out=None, **k: {"vector_flops": 3}}) as outer:
        with roofline.measure(model) as inner:
            model(x)
    assert _counts_of(outer, "aten.gelu.default")[:2] == (1, 3)
    assert _counts_of(inner, "aten.gelu.default")[1] != 3


def test_scoped_formula_of_an_op_the_c_path_knows(gelu_model):
    """mm runs on the C path in blocks before (its resolution is kept for later blocks): a block with its own
    formula for it still counts it with that formula, on its first call and on later ones."""
    a, b = torch.randn(2, 3), torch.randn(3, 5)
    with roofline.measure():
        torch.mm(a, b)
    with roofline.measure(formulas={torch.ops.aten.mm.default: lambda x, y, out=None: {"matrix_flops": 1}}) as r:
        torch.mm(a, b)
        torch.mm(a, b)
    assert r.matrix_flops == 2  # two calls, 1 each (the C formula would give 2*2*3*5 = 60 each)


def test_scoped_formula_errors_surface_as_registered_ones_do(gelu_model):
    model, x = gelu_model
    with pytest.raises(TypeError, match="counts must be ints"):
        with roofline.measure(model, formulas={"aten::gelu": lambda *a, out=None, **k: {"vector_flops": 2.5}}):
            model(x)
    with pytest.raises(ValueError, match="unknown keys"):
        with roofline.measure(model, formulas={"aten::gelu": lambda *a, out=None, **k: {"flops": 1}}):
            model(x)
    # torch is as it was: a plain call runs, outside any mode
    assert torch.nn.functional.gelu(torch.ones(1)).item() == pytest.approx(0.8413, abs=1e-4)


@pytest.mark.parametrize("formulas, exc, match", [
    ([("aten::gelu", print)], TypeError, "formulas must be a dict"),
    ({1: print}, TypeError, "keys must be torch ops"),
    ({None: print}, TypeError, "keys must be torch ops"),
    ({print: print}, TypeError, "keys must be torch ops"),
    ({"aten::gelu": 3}, TypeError, r"formulas\[aten::gelu\] must be callable"),
    ({"aten::gelu": None}, TypeError, r"formulas\[aten::gelu\] must be callable"),
    ({"not an op!": print}, ValueError, "is not an operator name"),
    ({"aten::gelu": print, "gelu": print}, ValueError, "names aten::gelu twice"),
])
def test_bad_formulas_refused_when_measure_is_called(formulas, exc, match):
    with pytest.raises(exc, match=match):
        roofline.measure(formulas=formulas)


def test_one_calling_convention_for_every_python_formula():
    """User, built-in and higher-order-op formulas are called through Formula.counts(op, args, kwargs, out), which
    returns the record's counts (five counts, flop_counter_flops, status) or None."""
    user = _resolve.Formula(lambda x, out=None: roofline.Cost("x", 1, 2, 3, 4, 5, 6, "float32"), "user")
    assert user.counts("op", (torch.ones(2),), {}, torch.ones(2)) == (1, 2, 3, 4, 5, 0, 0)  # a Cost's five counts
    with pytest.raises(TypeError, match="must return a dict or roofline.Cost"):
        _resolve.Formula(lambda x, out=None: 3, "user").counts("op", (1,), {}, None)
    with pytest.raises(OverflowError, match="does not fit 64 bits"):
        _resolve.Formula(lambda x, out=None: {"bytes_read": 1 << 64}, "user").counts("op", (1,), {}, None)
    # a built-in formula gets the arguments bound to the schema's names; one that cannot count them is an error
    # record (status E_ARGS), never a failed step; None leaves the call to the C formula
    bound = _resolve.Formula(lambda b, out: {"vector_flops": b["self"] + b["other"], "status": 0}, "builtin",
                             ("self", "other"))
    assert bound.counts("op", (2,), {"other": 3}, None) == (0, 5, 0, 0, 0, 0, 0)
    broken = _resolve.Formula(lambda b, out: 1 // 0, "builtin", ("self",))
    assert broken.counts("op", (1,), {}, None)[-1] == 2  # E_ARGS (csrc/cost.h RL_E_ARGS)
    assert _resolve.Formula(lambda b, out: None, "builtin", ()).counts("op", (), {}, None) is None
    hop = _resolve.Formula(lambda args, kwargs, out: {"matrix_flops": len(args), "flop_counter_flops": 9}, "hop")
    assert hop.counts("op", (1, 2, 3), {}, None) == (3, 0, 0, 0, 0, 9, 0)
