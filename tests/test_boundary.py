"""Bad input at the public entry points: register(), measure(), load() / Report.from_dict.

Every bad input gets a clear exception at the call, naming what is wrong; nothing is stored modulo 2**64, truncated,
or accepted only to fail later in print(r); a failed or misused measure block leaves PyTorch as it was.
"""

import base64
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: E402

import roofline  # noqa: E402
from roofline._counting import _registry  # noqa: E402
from roofline.report import Report  # noqa: E402


# ---- register() ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["flops", "special"])
def test_register_refuses_per_element_costs_beyond_the_c_field(field):
    # rl_op.p1 / p2 (csrc/cost.h) are int64: 2**63 used to be accepted and then failed inside a measure block
    with pytest.raises(ValueError, match=rf"rltest_b::big\): {field} must be an int in \[0, 9223372036854775807\], "
                                         r"got 9223372036854775808"):
        roofline.register("rltest_b::big", kind="ewise", **{field: 2**63})
    assert "rltest_b::big" not in _registry.USER
    roofline.register("rltest_b::big", kind="ewise", **{field: 2**63 - 1})  # the largest that fits
    try:
        assert _registry.USER["rltest_b::big"] == _registry.Entry(
            _registry.EWISE, 2**63 - 1 if field == "flops" else 0, 2**63 - 1 if field == "special" else 0)
    finally:
        roofline.unregister("rltest_b::big")


@pytest.mark.parametrize("value,exc,match", [
    (2.7, TypeError, r"flops must be an int.*got 2\.7 \(float\)"),  # used to become 2 silently
    (2.0, TypeError, r"flops must be an int"),
    (True, TypeError, r"flops must be an int.*bool"),
    ("2", TypeError, r"flops must be an int.*str"),
    (None, TypeError, r"flops must be an int"),
    (-1, ValueError, r"flops must be an int in \[0, 9223372036854775807\], got -1"),
])
def test_register_refuses_counts_that_are_not_non_negative_ints(value, exc, match):
    with pytest.raises(exc, match=rf"register\(rltest_b::op\): {match}"):
        roofline.register("rltest_b::op", kind="ewise", flops=value)
    assert "rltest_b::op" not in _registry.USER


def test_register_accepts_numpy_integers_exactly():
    roofline.register("rltest_b::np", kind="ewise", flops=np.int64(3), special=np.uint8(2))
    try:
        c = roofline.cost("rltest_b::np", (5,), out=(5,))
        assert (c.vector_flops, c.special_ops) == (3 * 5, 2 * 5)
        assert type(_registry.USER["rltest_b::np"].flops) is int
    finally:
        roofline.unregister("rltest_b::np")


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(kind=3), TypeError, r"kind must be a str.*int"),
    (dict(kind="mm", flops=2), ValueError, r"kind 'mm' takes no flops="),
    (dict(kind="gather", special=1), ValueError, r"kind 'gather' takes no special="),
    (dict(formula=lambda *a, out=None: {}, flops=2), TypeError, r"flops= and special= go with kind="),
    (dict(formula=lambda *a, out=None: {}, flops=2.5), TypeError, r"flops must be an int"),
    (dict(kind="attn"), ValueError, r"kind .attn. needs argument positions"),
])
def test_register_names_the_op_in_every_error(kwargs, exc, match):
    with pytest.raises(exc, match=rf"register\(rltest_b::named\): {match}"):
        roofline.register("rltest_b::named", **kwargs)
    assert "rltest_b::named" not in _registry.USER


@pytest.mark.parametrize("name", ["", "::", "mylib::", "::op", "my lib::op", "mylib::op.over load", "a::b::c"])
def test_register_refuses_strings_that_are_not_op_names(name):
    with pytest.raises(ValueError, match="not an operator name"):
        roofline.register(name, kind="ewise", flops=1)
    with pytest.raises(ValueError, match="unregister: .* not an operator name"):
        roofline.unregister(name)


# ---- counts returned by a Python formula --------------------------------------------------------------------------

@torch.library.custom_op("rltest_b::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x):
    return torch.empty_like(x)


def _run_with_formula(formula):
    roofline.register(torch.ops.rltest_b.twice, formula)
    try:
        with roofline.measure(timing=None) as r:
            torch.ops.rltest_b.twice(torch.ones(3))
        return r
    finally:
        roofline.unregister(torch.ops.rltest_b.twice)


@pytest.mark.parametrize("value,exc,match", [
    (2**64, OverflowError, r"vector_flops=18446744073709551616, which does not fit 64 bits"),  # was stored as 0
    (2**64 + 5, OverflowError, r"does not fit 64 bits"),
    (2.5, TypeError, r"vector_flops=2\.5 \(float\); counts must be ints"),  # was truncated to 2
    (True, TypeError, r"counts must be ints"),
    (-1, ValueError, r"negative count: vector_flops=-1"),
])
def test_formula_counts_are_checked_never_wrapped(value, exc, match):
    with pytest.raises(exc, match=rf"formula for rltest_b\.twice\.default returned .*{match}"):
        _run_with_formula(lambda x, out=None: {"vector_flops": value})
    assert _get_current_dispatch_mode_stack() == []


def test_formula_counts_up_to_64_bits_are_exact():
    r = _run_with_formula(lambda x, out=None: {"vector_flops": np.uint64(2**64 - 1), "bytes_read": 2**63})
    assert r.vector_flops == 2**64 - 1 and r.bytes_read == 2**63
    assert r.by_op()["rltest_b.twice.default"]["vector_flops"] == 2**64 - 1


# ---- measure(): arguments, single use, torch left as it was -------------------------------------------------------

def _torch_state():
    """Everything a measure block installs or changes in torch, by identity."""
    import torch.nn.modules.module as mm
    import torch.optim.optimizer as oo

    hooks = tuple(tuple(d.items()) for d in (
        mm._global_forward_pre_hooks, mm._global_forward_hooks, mm._global_backward_pre_hooks,
        mm._global_backward_hooks, mm._global_module_registration_hooks, oo._global_optimizer_pre_hooks,
        oo._global_optimizer_post_hooks))
    return (tuple(_get_current_dispatch_mode_stack()), torch._C._len_torch_function_stack(), hooks,
            torch.is_grad_enabled(), torch.is_inference_mode_enabled())


@pytest.mark.parametrize("args,kwargs,exc,match", [
    (("resnet",), {}, TypeError, r"model must be a torch\.nn\.Module or None, got str \(a model's name"),
    ((nn.Linear,), {}, TypeError, r"model must be a torch\.nn\.Module or None, got type"),
    ((), dict(timing="ops"), ValueError, r"timing must be 'model', 'op' or None, got 'ops'"),
    ((), dict(timing=1), TypeError, r"timing must be 'model', 'op' or None, got int"),
    ((), dict(ceilings=1.5), TypeError, r"ceilings must be .* got float"),
    ((), dict(ceilings="H100 SMX"), KeyError, r"H100"),
])
def test_measure_checks_its_arguments_at_the_call(args, kwargs, exc, match):
    before = _torch_state()
    with pytest.raises(exc, match=match):
        roofline.measure(*args, **kwargs)  # not only when the block is entered
    assert _torch_state() == before


def test_a_measure_object_is_single_use():
    before = _torch_state()
    m = roofline.measure(timing=None)
    with m as r:
        torch.ones(4) + 1
    assert r.vector_flops == 4
    with pytest.raises(RuntimeError, match="single-use"):
        with m:
            raise AssertionError("a used measure object must not run a block")
    assert _torch_state() == before
    m2 = roofline.measure(timing=None)
    with m2 as outer:
        with pytest.raises(RuntimeError, match="single-use"):
            with m2:
                pass
        torch.ones(2) * 3
    assert outer.vector_flops == 2  # the outer block went on counting
    assert _torch_state() == before


class _Boom(BaseException):  # not an Exception: KeyboardInterrupt-like, must still be cleaned up
    pass


class _BadChildren(nn.Module):
    def named_children(self):
        raise _Boom("while naming the modules")


def _raise_inside_block(timing):
    model = nn.Sequential(nn.Linear(3, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with roofline.measure(model, timing=timing):
        model(torch.ones(2, 3)).sum().backward()
        opt.step()
        with torch.no_grad():
            raise _Boom("inside the block")


def _raise_from_a_formula(timing):
    roofline.register(torch.ops.rltest_b.twice, lambda x, out=None: {"vector_flops": 2**70})
    try:
        with roofline.measure(timing=timing):
            torch.ops.rltest_b.twice(torch.ones(3))
    finally:
        roofline.unregister(torch.ops.rltest_b.twice)


def _raise_while_entering(timing):
    with roofline.measure(_BadChildren(), timing=timing):
        raise AssertionError("the block must not run")


def _raise_inside_an_optimizer_step(timing):
    p = nn.Parameter(torch.ones(3))

    class Bad(torch.optim.SGD):
        def step(self, closure=None):
            super().step()
            raise _Boom("inside the optimizer step")

    opt = Bad([p], lr=0.1)
    p.grad = torch.ones(3)
    with roofline.measure(timing=timing):
        opt.step()


@pytest.mark.parametrize("timing", ["model", "op", None])
@pytest.mark.parametrize("scenario,exc", [
    (_raise_inside_block, _Boom), (_raise_from_a_formula, OverflowError), (_raise_while_entering, _Boom),
    (_raise_inside_an_optimizer_step, _Boom),
])
def test_an_exception_leaves_torch_exactly_as_it_was(scenario, exc, timing):
    before = _torch_state()
    with pytest.raises(exc):
        scenario(timing)
    assert _torch_state() == before
    with roofline.measure(timing=None) as r:  # and the next block counts normally, in the forward phase
        torch.ones(5) + 1
    assert r.vector_flops == 5 and r.by_phase().keys() == {"forward"}


# ---- load() / Report.from_dict ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report_dict():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    with roofline.measure(model, timing="op", ceilings="H100 SXM") as r:
        model(torch.ones(2, 4)).sum().backward()
    d = r.to_dict()
    assert len(r.records) >= 4 and len(d["ops"]) >= 3
    return d


def _with_record(d, field, value, row=1):
    rec = np.frombuffer(base64.b64decode(d["records"]), dtype=roofline.report.RECORD_DTYPE).copy()
    rec[field][row] = value
    return {**d, "records": base64.b64encode(rec.tobytes()).decode()}


_CORRUPT = {
    # a record's codes: each used to load and fail later (IndexError / KeyError in print(r))
    "records[1].phase": lambda d: _with_record(d, "phase", 7),
    "records[1].op": lambda d: _with_record(d, "op", len(d["ops"])),
    "records[1].module": lambda d: _with_record(d, "module", 2**32 - 1),
    "records[1].dtype": lambda d: _with_record(d, "dtype", 250),
    "records[1].status": lambda d: _with_record(d, "status", 77),
    "records[1].t_start": lambda d: _with_record(d, "t_start", float("inf")),
    "records[1].t_end": lambda d: _with_record(d, "t_end", float("nan")),
    "records": lambda d: {**d, "records": d["records"][:-8]},
    "n_records": lambda d: {**d, "n_records": True},
    "wall_time": lambda d: {**d, "wall_time": "abc"},
    "meta": lambda d: {**d, "meta": [1, 2]},
    "meta.devices": lambda d: {**d, "meta": {**d["meta"], "devices": "cpu"}},
    "meta.timing": lambda d: {**d, "meta": {**d["meta"], "timing": "sometimes"}},
    "meta.projected_to": lambda d: {**d, "meta": {**d["meta"], "projected_to": 3}},
    "overhead.counting_per_op_s": lambda d: {**d, "overhead": {"counting_per_op_s": "fast"}},
    "overhead": lambda d: {**d, "overhead": [0.1]},
    "ops[0].kind": lambda d: {**d, "ops": [{**d["ops"][0], "kind": "magic"}] + d["ops"][1:]},
    "ops[1].name": lambda d: {**d, "ops": [d["ops"][0], {**d["ops"][1], "name": None}] + d["ops"][2:]},
    "ops[0]": lambda d: {**d, "ops": [["aten.mm.default"]] + d["ops"][1:]},
    "module_sets[0][0]": lambda d: {**d, "module_sets": [[1]] + d["module_sets"][1:]},
    "module_sets": lambda d: {**d, "module_sets": {"Global": 1}},
    "ceilings_source": lambda d: {**d, "ceilings_source": "guessed"},
    "ceilings": lambda d: {**d, "ceilings": {**d["ceilings"], "peaks": {"vector/float32": {"measured": "x"}}}},
}


@pytest.mark.parametrize("field", list(_CORRUPT))
def test_load_names_the_wrong_field(report_dict, field):
    bad = _CORRUPT[field](report_dict)
    with pytest.raises(ValueError, match=rf"corrupt roofline report: {__import__('re').escape(field)} "):
        roofline.load(json.dumps(bad))


def test_load_accepts_what_to_json_writes(report_dict, tmp_path):
    r = roofline.load(json.dumps(report_dict))
    assert r.to_dict() == report_dict
    assert "roofline report" in str(r)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(report_dict))
    assert roofline.load(p).records.tobytes() == r.records.tobytes()


@pytest.mark.parametrize("schema", [True, 1.0, "1", None, 2])
def test_load_checks_the_schema_version_exactly(report_dict, schema):
    with pytest.raises(ValueError, match="not a roofline report .schema 1 expected"):
        Report.from_dict({**report_dict, "schema": schema})


@pytest.mark.parametrize("text", [
    "[" * 200_000 + "]" * 200_000,             # used to raise RecursionError
    '{"a": ' * 200_000 + "1" + "}" * 200_000,
    "[" * 65 + "]" * 65,
])
def test_deep_nesting_is_a_value_error(text):
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        roofline.load(text)


def test_deep_nesting_inside_a_report_is_a_value_error(report_dict):
    deep = 1
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        roofline.load(json.dumps({**report_dict, "meta": {**report_dict["meta"], "extra": deep}}))
    # brackets inside strings are text, not nesting
    r = roofline.load(json.dumps({**report_dict, "meta": {**report_dict["meta"], "note": "[" * 1000 + "{\\\"["}}))
    assert r.meta["note"].startswith("[[[")


def test_load_rejects_other_junk_with_value_or_type_errors():
    with pytest.raises(ValueError, match="not a roofline report"):
        roofline.load('{"schema": 1, "n": ' + "9" * 5000 + "}")  # beyond Python's int digit limit
    with pytest.raises(ValueError, match="not UTF-8"):
        roofline.load(b"{\xff\xfe}")
    with pytest.raises(ValueError, match="a JSON object is needed"):
        roofline.load("[1, 2]")
    with pytest.raises(TypeError, match="load: expected a path or the JSON text"):
        roofline.load(42)


def test_any_mutation_of_a_report_loads_and_prints_or_raises_value_error(report_dict):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from conftest import json_paths, json_values

    values = json_values(st, 2**70, text_size=5, max_leaves=8)
    all_paths = [p for p in json_paths(report_dict, 3) if p]

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
    @hypothesis.given(st.sampled_from(all_paths), values, st.booleans())
    def check(path, value, delete):
        d = json.loads(json.dumps(report_dict))
        parent = d
        for k in path[:-1]:
            parent = parent[k]
        if delete:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        try:
            r = roofline.load(json.dumps(d))
        except ValueError:
            return
        str(r)  # whatever loads can be shown
        r.by_module()
        r.analysis("module")

    check()
