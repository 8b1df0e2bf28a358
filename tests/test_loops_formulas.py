"""The step loops take a block's own formulas as measure does (``formulas={op: formula}``): roofline.steady,
roofline.profile and roofline.monitor count every measured step with them, and refuse bad ones when called."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402


@pytest.fixture(scope="module")
def gelu_step():
    model, x = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()), torch.randn(3, 4)
    return model, x, (lambda: model(x))


def _formula(*args, out=None, **kwargs):
    return {"vector_flops": 1000 + out.numel()}  # 1000 + 3*8 = 1024 for the (3, 8) GELU


def _gelu_flops(r):
    ops = [i for i, n in enumerate(r.op_names) if n == "aten.gelu.default"]
    recs = r.records[[int(op) in ops for op in r.records["op"]]]
    return len(recs), int(recs["vector_flops"].sum())


def test_steady_counts_with_the_formulas(gelu_step):
    model, _, step = gelu_step
    r = roofline.steady(step, model, warmup=1, repeat=2, ceilings="H100 SXM",
                        formulas={torch.ops.aten.gelu.default: _formula})
    assert _gelu_flops(r) == (1, 1024)


def test_profile_counts_each_cycle_with_the_formulas(gelu_step):
    model, _, step = gelu_step
    reports = []
    with roofline.profile(model, schedule=roofline.schedule(warmup=1, active=2), on_report=reports.append,
                          ceilings="H100 SXM", formulas={"aten::gelu": _formula}) as prof:
        for _ in range(3):
            step()
            prof.step()
    assert len(reports) == 1 and _gelu_flops(reports[0]) == (1, 1024)
    # without them, the built-in count of the same step: GELU's C formula, not 1024
    with roofline.measure(model) as plain:
        step()
    assert _gelu_flops(plain)[1] != 1024


def test_monitor_counts_steps_with_the_formulas(gelu_step):
    model, x, step = gelu_step
    with roofline.measure(model, formulas={"aten::gelu": _formula}) as scoped:
        step()
    seen = []
    with roofline.monitor(model, on_step=seen.append, ceilings="H100 SXM",
                          formulas={"aten::gelu": _formula}) as mon:
        for _ in range(3):
            step()
            mon.step(inputs=x)
    # step 0 is timed only; step 1 is counted, step 2 reuses its counts: the measured block's FLOPs with the formula
    flops = scoped.matrix_flops + scoped.vector_flops
    assert scoped.vector_flops >= 1024 and [m["flops"] for m in seen[1:]] == [flops, flops]


@pytest.mark.parametrize("call", [
    lambda m, f: roofline.steady(lambda: None, m, formulas=f),
    lambda m, f: roofline.profile(m, formulas=f),
    lambda m, f: roofline.monitor(m, formulas=f),
])
def test_bad_formulas_are_refused_when_the_loop_is_made(gelu_step, call):
    model = gelu_step[0]
    with pytest.raises(TypeError):
        call(model, {"aten::gelu": 3})  # a formula must be callable
    with pytest.raises(TypeError):
        call(model, [("aten::gelu", _formula)])  # a mapping of op -> formula
