"""measure(): modes, devices, custom ops, failure behaviour; the cost model without torch."""

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import _get_current_dispatch_mode, _len_torch_dispatch_stack  # noqa: E402

import roofline  # noqa: E402


def _global_hook_counts():
    import torch.nn.modules.module as mm
    import torch.optim.optimizer as oo

    return (len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks), len(mm._global_backward_hooks),
            len(oo._global_optimizer_pre_hooks), len(oo._global_optimizer_post_hooks))


def test_exception_propagates_and_leaves_nothing_behind():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    before = _global_hook_counts()

    class Boom(Exception):
        pass

    with pytest.raises(Boom, match="inside the block"):
        with roofline.measure(model):
            model(torch.randn(2, 4)).sum().backward()
            raise Boom("inside the block")
    assert _len_torch_dispatch_stack() == 0 and _get_current_dispatch_mode() is None
    assert _global_hook_counts() == before
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    # and a later measure works normally
    with roofline.measure(model) as r:
        model(torch.randn(2, 4))
    assert r.matrix_flops == 2 * 2 * 4 * 4


def test_error_raised_by_an_op_propagates_unchanged():
    before = _global_hook_counts()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        with roofline.measure():
            torch.randn(2, 3) @ torch.randn(4, 5)
    assert _len_torch_dispatch_stack() == 0
    assert _global_hook_counts() == before


def test_phases_and_module_paths():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with roofline.measure(model) as r:
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    ph = r.by_phase()
    assert ph["forward"]["matrix_flops"] == 2 * 4 * 16 * 8 + 2 * 4 * 2 * 16  # two addmm
    # backward: grad wrt input of layer 2 (4x16 = 4x2 @ 2x16) + weight grads of both layers (16x8, 2x16 over 4 rows)
    assert ph["backward"]["matrix_flops"] == 2 * 4 * 16 * 2 + 2 * 2 * 16 * 4 + 2 * 16 * 8 * 4
    assert ph["optimizer"]["vector_flops"] > 0 and ph["optimizer"]["matrix_flops"] == 0
    mods = r.by_module(depth=2)
    assert set(mods) == {"Global", "Sequential", "Sequential.0", "Sequential.1", "Sequential.2"}
    assert mods["Sequential.0"]["matrix_flops"] == 2 * 4 * 16 * 8 + 2 * 16 * 8 * 4  # forward + weight grad
    assert "Sequential" in str(r.by_module(depth=1))


@pytest.mark.parametrize("ctx", ["no_grad", "inference_mode"])
def test_no_grad_and_inference_mode(ctx):
    m = nn.Linear(32, 64)
    with getattr(torch, ctx)(), roofline.measure(m) as r:
        m(torch.randn(8, 32))
    assert r.matrix_flops == 2 * 8 * 64 * 32
    assert r.vector_flops == 8 * 64  # bias add inside addmm


def test_autocast_bf16_counts_in_bf16():
    m = nn.Linear(32, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16), roofline.measure(m) as r:
        m(torch.randn(8, 32))
    mm_rows = r.records[r.records["matrix_flops"] > 0]
    assert len(mm_rows) == 1 and r.dtype_names[int(mm_rows["dtype"][0])] == "bfloat16"
    assert r.matrix_flops == 2 * 8 * 64 * 32
    assert "aten._to_copy.default" in r.by_op()  # the casts autocast inserts are counted as traffic


def test_fake_tensor_mode_counts_without_memory():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        m = nn.Linear(8192, 8192)  # 256 MiB of weights that are never allocated
        x = torch.randn(4096, 8192)
        with roofline.measure(m) as r:
            m(x)
    assert r.matrix_flops == 2 * 4096 * 8192 * 8192
    assert r.bytes_read == (4096 * 8192 + 8192 * 8192 + 8192) * 4


def test_overflow_is_reported_not_wrapped():
    with pytest.raises(OverflowError):
        roofline.cost("mm", [(2**40, 2**40), (2**40, 2**40)])
    a = torch.empty(2**30, 2**30, device="meta")  # 4 EiB of fp32: only meta can hold it
    with roofline.measure() as r:
        a @ a  # 2 * 2^90 FLOPs
    assert r.errors["aten.mm.default"][0] == 1
    assert "64 bits" in r.errors["aten.mm.default"][1]
    assert "could not be evaluated" in str(r)


def test_custom_op_unknown_then_registered():
    @torch.library.custom_op("rltest::scale3", mutates_args=())
    def scale3(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    @scale3.register_fake
    def _(x):
        return torch.empty_like(x)

    x = torch.randn(10)
    with roofline.measure() as r:
        torch.ops.rltest.scale3(x)
    assert r.unknown_ops == {"rltest.scale3.default": 1}
    assert r.bytes == 80  # compulsory bytes are still counted: 10 fp32 read, 10 written
    assert "without a formula" in str(r)

    roofline.register("rltest::scale3", kind="ewise", flops=1)
    try:
        with pytest.raises(ValueError, match="already registered"):
            roofline.register(torch.ops.rltest.scale3, kind="ewise", flops=1)
        with roofline.measure() as r:
            torch.ops.rltest.scale3(x)
        assert r.unknown_ops == {}
        assert r.vector_flops == 10 and r.bytes == 80
    finally:
        roofline.unregister("rltest::scale3")

    roofline.register(torch.ops.rltest.scale3, lambda x, out=None: {"vector_flops": x.numel(), "bytes_read": 7})
    try:
        with roofline.measure() as r:
            torch.ops.rltest.scale3(x)
        assert (r.vector_flops, r.bytes_read, r.unknown_ops) == (10, 7, {})
    finally:
        roofline.unregister(torch.ops.rltest.scale3)


def test_register_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown kind"):
        roofline.register("rltest::x", kind="nope")
    with pytest.raises(TypeError, match="exactly one"):
        roofline.register("rltest::x")
    with pytest.raises(TypeError, match="callable"):
        roofline.register("rltest::x", formula=3)
    with pytest.raises(KeyError):
        roofline.unregister("rltest::never")


def test_cost_api_errors():
    with pytest.raises(ValueError, match="no cost formula"):
        roofline.cost("definitely_not_an_op", [(2, 2)])
    with pytest.raises(ValueError, match="unknown dtype"):
        roofline.cost("mm", [(2, 2), (2, 2)], dtype="float13")
    with pytest.raises(ValueError, match="inconsistent shapes"):
        roofline.cost("mm", [(2, 3), (4, 5)])
    with pytest.raises(ValueError, match="pass out="):
        roofline.cost("sum", (4, 4))
    with pytest.raises(ValueError, match="negative"):
        roofline.TensorSpec((2, -1))


def test_print_summary_names_the_top_ops():
    m = nn.Linear(64, 64)
    with roofline.measure(m) as r:
        m(torch.randn(16, 64)).relu()
    s = str(r)
    assert "aten.addmm.default" in s and "lower bound" in s
    assert r.records.dtype.names[:2] == ("matrix_flops", "vector_flops")


def test_import_and_cost_model_without_torch():
    """torch is hidden from the import system: roofline imports and its cost model answers."""
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is hidden for this test")
        sys.meta_path.insert(0, Block())
        import roofline
        c = roofline.cost("mm", [(128, 256), (256, 64)], dtype="bfloat16")
        assert c.matrix_flops == 2 * 128 * 64 * 256, c
        assert c.bytes == (128 * 256 + 256 * 64 + 128 * 64) * 2, c
        conv = roofline.cost("convolution", (1, 3, 8, 8), (4, 3, 3, 3), None, [1, 1], [1, 1], [1, 1], False,
                             [0, 0], 1)
        assert conv.matrix_flops == 2 * 64 * 9 * 4 * 3, conv
        assert "torch" not in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_register_rejects_kinds_that_need_a_schema():
    with pytest.raises(ValueError, match="needs argument positions"):
        roofline.register("rltest::pooling", kind="pool")


def test_outer_measure_sees_only_the_inner_blocks_ops():
    """The first block's instrumentation calibration must not leak ops into an enclosing measure."""
    from roofline._capture import _session

    _session._OVERHEAD.clear()
    a = torch.randn(8)
    with roofline.measure(timing=None) as outer:
        with roofline.measure(timing="op") as inner:
            a + a
    assert len(inner.records) == 1
    assert len(outer.records) == 1


def test_higher_order_ops_run_and_are_listed():
    def true_fn(x):
        return x.sin()

    def false_fn(x):
        return x.cos()

    x = torch.randn(4)
    with roofline.measure(timing=None) as r:
        y = torch.cond(x.sum() > 0, true_fn, false_fn, (x,))
    assert torch.allclose(y, true_fn(x) if x.sum() > 0 else false_fn(x))
    assert r.unknown_ops.get("higher_order.cond") == 1


def test_nested_optimizer_steps_stay_in_the_optimizer_phase():
    m = nn.Linear(4, 4)
    inner = torch.optim.SGD(m.parameters(), lr=0.1)

    class Wrapper(torch.optim.Optimizer):  # a Lookahead-style wrapper whose step calls the inner step
        def __init__(self, inner):
            self.inner = inner
            super().__init__(inner.param_groups[0]["params"], {})

        def step(self, closure=None):
            self.inner.step()
            for p in self.inner.param_groups[0]["params"]:
                p.data.mul_(1.0)

    opt = Wrapper(inner)
    m(torch.randn(2, 4)).sum().backward()
    with roofline.measure(m, timing=None) as r:
        opt.step()
        m(torch.randn(2, 4))
    ph = r.by_phase()
    assert ph["optimizer"]["calls"] >= 4 and ph["forward"]["matrix_flops"] == 2 * 2 * 4 * 4


def test_user_formula_on_an_out_overload():
    roofline.register("aten::add.out", lambda *a, out=None, **k: {"vector_flops": out.numel()})
    try:
        x, z = torch.randn(5), torch.empty(5)
        with roofline.measure(timing=None) as r:
            torch.add(x, x, out=z)
        assert r.vector_flops == 5
    finally:
        roofline.unregister("aten::add.out")


def test_bad_ceilings_fail_before_the_run():
    with pytest.raises(KeyError, match="H100"):
        with roofline.measure(ceilings="H100 SMX"):
            raise AssertionError("the block must not run")
    with pytest.raises(TypeError, match="ceilings"):
        with roofline.measure(ceilings=123):
            raise AssertionError("the block must not run")


def test_load_rejects_corrupt_reports(tmp_path):
    with roofline.measure(timing=None) as r:
        torch.randn(4) + 1
    d = r.to_dict()
    for bad in ({**d, "records": "@@@"}, {**d, "n_records": 7}, {k: v for k, v in d.items() if k != "ops"},
                {**d, "ops": []}):
        with pytest.raises(ValueError, match="corrupt"):
            roofline.Report.from_dict(bad)
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        roofline.load(p)


def test_matrix_vector_products_have_formulas():
    W, x, b = torch.randn(64, 32), torch.randn(32), torch.randn(64)
    with roofline.measure(timing=None) as r:
        W @ x
        torch.addmv(b, W, x)
        torch.dot(x, x)
    ops = r.by_op()
    assert ops["aten.mv.default"]["vector_flops"] == 2 * 64 * 32  # one multiply-add per matrix element
    assert ops["aten.addmv.default"]["vector_flops"] == 2 * 64 * 32
    assert ops["aten.dot.default"]["vector_flops"] == 2 * 32
    assert r.unknown_ops == {}


def test_cost_honours_formulas_registered_by_kind():
    with pytest.raises(ValueError, match="no cost formula"):
        roofline.cost("rltest::axpy", (8,), (8,), out=(8,))
    roofline.register("rltest::axpy", kind="ewise", flops=2)
    try:
        c = roofline.cost("rltest::axpy", (8,), (8,), out=(8,))
        assert c.vector_flops == 2 * 8 and c.bytes == (8 + 8 + 8) * 4
    finally:
        roofline.unregister("rltest::axpy")


class _BroadcastStride(torch.Tensor):
    """A tensor subclass whose stride() claims every dimension is broadcast (stride 0): one element is read."""

    def stride(self, *dim):
        return 0 if dim else (0,) * self.dim()


def _bytes_read(r, name):
    return [int(x["bytes_read"]) for x in r.records if r.op_names[x["op"]] == name]


def test_a_subclass_overriding_stride_is_read_through_its_override():
    """torch.Tensor's own shape, stride() and dtype are called directly for types that resolve the names to them;
    a subclass with its own stride() is still read through it (as attribute access reads it)."""
    a, b = torch.ones(4, 8), torch.ones(4, 8)
    with roofline.measure(timing=None) as r:
        torch.add(a, b)  # plain tensors: 2 x 32 elements read
        torch.add(a.as_subclass(_BroadcastStride), b)  # the first argument reads one element
    assert _bytes_read(r, "aten.add.Tensor") == [64 * 4, 33 * 4]


def test_a_method_patched_on_torch_tensor_mid_block_is_seen(monkeypatch):
    """A type changed after the recorder found it plain (its version tag changes) is looked at again."""
    a, b = torch.ones(4, 8), torch.ones(4, 8)
    with roofline.measure(timing=None) as r:
        torch.add(a, b)
        monkeypatch.setattr(torch.Tensor, "stride", _BroadcastStride.stride)
        torch.add(a, b)  # both arguments now claim stride 0: one element each
        monkeypatch.undo()
        torch.add(a, b)
    assert _bytes_read(r, "aten.add.Tensor") == [64 * 4, 2 * 4, 64 * 4]
