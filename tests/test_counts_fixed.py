"""Counts that used to be wrong, and inputs that used to be accepted silently.

* Training BatchNorm writes its output, the saved mean and inverse std, and the running statistics (updated in place,
  so also read); evaluation only reads the running statistics; backward in training does not read them.
* roofline.cost() answers the same with and without torch: schemas come from the built-in table
  (roofline/_counting/_schemas.py), checked here against the installed torch; out= overloads write their destination.
* Convolution output shapes follow each op's own argument layout.
* Impossible shapes and arguments are clear errors naming what is wrong, found before any work proportional to them.

Expected values are arithmetic written beside each assertion (fp32 = 4 bytes, int64 = 8).
"""

import ast
import subprocess
import sys
import textwrap
import tracemalloc

import pytest

import roofline
from roofline import TensorSpec
from roofline._counting import _registry, _schemas

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

aten = torch.ops.aten

# x (2, 4, 3, 3): 72 elements; per-channel vectors of 4
N, C, H, W = 2, 4, 3, 3
X = N * C * H * W
BN_ARGS = ((N, C, H, W), (C,), (C,), (C,), (C,))  # input, weight, bias, running_mean, running_var


def _fields(c):
    return (c.matrix_flops, c.vector_flops, c.special_ops, c.bytes_read, c.bytes_written, c.flop_counter_flops,
            c.dtype)


# ---- BatchNorm ------------------------------------------------------------------------------------------------


def test_training_batch_norm_counts_output_saved_and_running_statistics():
    x, w, b = torch.randn(N, C, H, W), torch.randn(C), torch.randn(C)
    rm, rv = torch.zeros(C), torch.ones(C)
    with roofline.measure() as r:
        F.batch_norm(x, rm, rv, w, b, training=True)
    row = r.by_op()["aten._native_batch_norm_legit.default"]
    assert row["vector_flops"] == 8 * X
    assert row["bytes_read"] == (X + 4 * C) * 4  # input, weight, bias, running mean and var
    # out (72) + save_mean (4) + save_invstd (4), and the running mean and var written back (4 + 4); the old count
    # was the running statistics alone: 8 * 4 = 32 bytes
    assert row["bytes_written"] == (X + C + C) * 4 + (C + C) * 4
    with roofline.measure() as r:
        F.batch_norm(x, rm, rv, w, b, training=False)
    row = r.by_op()["aten._native_batch_norm_legit_no_training.default"]
    assert row["bytes_read"] == (X + 4 * C) * 4
    assert row["bytes_written"] == X * 4  # the CPU kernel returns empty saved statistics in evaluation


def test_batch_norm_variants_in_cost():
    out3 = [(N, C, H, W), (C,), (C,)]
    train_w = (X + C + C) * 4 + (C + C) * 4  # out, save_mean, save_invstd + running stats updated
    eval_w = (X + C + C) * 4
    read = (X + 4 * C) * 4
    for op in ("_native_batch_norm_legit", "native_batch_norm"):  # the second's schema does not mark the update
        c = roofline.cost(op, *BN_ARGS, True, 0.1, 1e-5, out=out3)
        assert (c.vector_flops, c.bytes_read, c.bytes_written) == (8 * X, read, train_w), op
        c = roofline.cost(op, *BN_ARGS, False, 0.1, 1e-5, out=out3)
        assert (c.bytes_read, c.bytes_written) == (read, eval_w), op
    # cudnn returns a fourth output (reserve space, here 16 bytes); miopen three
    c = roofline.cost("cudnn_batch_norm", *BN_ARGS, True, 0.1, 1e-5, out=out3 + [(16,)])
    assert c.bytes_written == train_w + 16 * 4
    c = roofline.cost("miopen_batch_norm", *BN_ARGS, True, 0.1, 1e-5, out=out3)
    assert c.bytes_written == train_w
    c = roofline.cost("_batch_norm_with_update", *BN_ARGS, 0.1, 1e-5, out=out3 + [(0,)])
    assert c.bytes_written == train_w
    # no running statistics at all
    c = roofline.cost("_native_batch_norm_legit.no_stats", (N, C, H, W), (C,), (C,), True, 0.1, 1e-5, out=out3)
    assert (c.bytes_read, c.bytes_written) == ((X + 2 * C) * 4, eval_w)
    # functional: the new running statistics are returned, nothing is written in place
    c = roofline.cost("_native_batch_norm_legit_functional", *BN_ARGS, True, 0.1, 1e-5,
                      out=out3 + [(C,), (C,)])
    assert (c.bytes_read, c.bytes_written) == (read, eval_w + 2 * C * 4)
    # out= overload: the destinations are written (in evaluation too), the running stats only in training
    c = roofline.cost("_native_batch_norm_legit.out", *BN_ARGS, False, 0.1, 1e-5, out=out3)
    assert (c.bytes_read, c.bytes_written) == (read, eval_w)
    c = roofline.cost("_native_batch_norm_legit.out", *BN_ARGS, True, 0.1, 1e-5, out=out3)
    assert c.bytes_written == train_w


def test_batch_norm_backward_reads_running_statistics_only_in_evaluation():
    # native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
    # eps, output_mask) -> grad_input, grad_weight, grad_bias
    args = ((N, C, H, W), (N, C, H, W), (C,), (C,), (C,), (C,), (C,))
    out3 = [(N, C, H, W), (C,), (C,)]
    c = roofline.cost("native_batch_norm_backward", *args, True, 1e-5, [True, True, True], out=out3)
    assert c.vector_flops == 12 * X
    assert c.bytes_read == (X + X + C + C + C) * 4  # grad, input, weight, save_mean, save_invstd
    assert c.bytes_written == (X + C + C) * 4
    c = roofline.cost("native_batch_norm_backward", *args, False, 1e-5, [True, True, True], out=out3)
    assert c.bytes_read == (X + X + 5 * C) * 4  # + running mean and var
    # and through measure, training: grad_out is a full tensor here (the product's gradient)
    bn = torch.nn.BatchNorm2d(C)
    x, g = torch.randn(N, C, H, W, requires_grad=True), torch.randn(N, C, H, W)
    with roofline.measure() as r:
        (bn(x) * g).sum().backward()
    row = r.by_op()["aten.native_batch_norm_backward.default"]
    assert row["bytes_read"] == (X + X + C + C + C) * 4
    assert row["bytes_written"] == (X + C + C) * 4


# ---- schemas: the built-in table against torch ------------------------------------------------------------------


def _same_torch_minor():
    v = torch.__version__.split("+")[0].split(".")[:2]
    return v == _schemas.TORCH_VERSION.split(".")[:2]


@pytest.mark.skipif(not _same_torch_minor(), reason="the schema table was generated from another torch release")
def test_schema_table_matches_the_installed_torch():
    rows, default = _registry.schemas_from_torch()
    assert rows == _schemas.SCHEMAS, "regenerate with roofline._counting._registry.write_schema_table()"
    assert default == _schemas.DEFAULT_OVERLOAD


@pytest.mark.skipif(not _same_torch_minor(), reason="the schema table was generated from another torch release")
def test_every_op_with_a_formula_has_its_schema_in_the_table():
    missing = []
    for key in _registry.TABLE:
        ns, _, name = key.rpartition("::")
        packet = getattr(getattr(torch.ops, ns or "aten"), name, None)
        if packet is not None and hasattr(packet, "overloads"):
            for ov in packet.overloads():
                if _registry.schema(f"{ns or 'aten'}::{name}", ov) is None:
                    missing.append(f"{key}.{ov}")
    assert missing == [], "a formula was added: regenerate the table with roofline._counting._registry.write_schema_table()"


def test_results_are_new_rule_agrees_with_every_schema():
    """compile_entry decides from argument names alone whether an op that writes arguments also returns new tensors
    (measure() passes it no return annotations); the schemas' return annotations must agree."""
    checked = 0
    for key, (names, kwonly, written, returns_alias) in _schemas.SCHEMAS.items():
        name, _, ov = key.rpartition(".")
        ns, _, short = name.rpartition("::")
        overload = getattr(getattr(getattr(torch.ops, ns or "aten"), short, None), ov, None)
        if overload is None:
            continue  # an op or overload of the release the table was generated from that this torch lacks
        sch = overload._schema
        if not written or not any("Tensor" in str(r.type) for r in sch.returns):
            continue  # nothing written, or no tensor results (TorchScript list ops)
        s = _registry.schema(f"{ns or 'aten'}::{short}", ov)
        assert _registry.results_are_new(list(s.names), s.written, s.outs) == (not returns_alias), key
        checked += 1
    assert checked > 300  # in-place and out= overloads of the table's ops


# ---- the same cost() with and without torch ----------------------------------------------------------------------

_HIDE_TORCH = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is hidden for this test")
sys.meta_path.insert(0, _Block())
"""

_RUN_CALLS = _HIDE_TORCH + """
import ast
import roofline
calls = ast.literal_eval(open(sys.argv[1]).read())
results = []
for op, args, out in calls:
    try:
        c = roofline.cost(op, *args, out=out)
        results.append((c.matrix_flops, c.vector_flops, c.special_ops, c.bytes_read, c.bytes_written,
                        c.flop_counter_flops, c.dtype))
    except (ValueError, TypeError, OverflowError) as e:
        results.append((type(e).__name__, str(e)))
assert "torch" not in sys.modules
print(repr(results))
"""


def _value(t, default_tensor=(4, 4)):
    """A plain value for an argument of type t, for a call built from the schema."""
    s = str(t)
    if s in ("Tensor", "Optional[Tensor]"):
        return default_tensor
    if s in ("List[Tensor]", "List[Optional[Tensor]]"):
        return [default_tensor, default_tensor]
    if s in ("int", "SymInt"):
        return 1
    if s in ("List[int]", "List[SymInt]"):
        return [1]
    if s == "bool":
        return False
    if s == "List[bool]":
        return [True, True, True]
    if s == "float":
        return 0.5
    if s == "number":
        return 1.0
    return None


# Calls whose arguments make the formula do real work (the generic calls above often stop at a shape error):
# the ops that could not be costed without torch, transposed _convolution, out= overloads.
_Q = (2, 4, 16, 8)
_QS = (2, 16, 4, 8)  # (batch, seq, heads, dim)
HAND_CALLS = [
    ("addmv", ((8,), (8, 16), (16,)), None),
    ("addmv", ((8,), (8, 16), (16,)), (8,)),
    ("_convolution", ((1, 4, 5, 5), (4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 2, False, False,
                      False, False), None),
    ("_convolution.deprecated", ((1, 4, 5, 5), (4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 2,
                                 False, False, False), None),
    ("add.out", ((4, 8), (8,)), None),
    ("add.out", ((4, 8), (8,)), (4, 8)),
    ("mm.out", ((4, 8), (8, 2)), None),
    ("clamp.out", ((10,), 0.0), (10,)),
    ("max_pool2d_with_indices.out", ((1, 1, 4, 4), [2, 2]), [(1, 1, 2, 2), (1, 1, 2, 2)]),
    ("_native_batch_norm_legit", ((2, 4, 3, 3), (4,), (4,), (4,), (4,), True, 0.1, 1e-5),
     [(2, 4, 3, 3), (4,), (4,)]),
    ("_scaled_dot_product_efficient_attention", (_Q, _Q, _Q, None, True, 0.0, True), None),
    ("_scaled_dot_product_efficient_attention_backward",
     (_Q, _Q, _Q, _Q, None, _Q, (2, 4, 16), (2,), (2,), 0.0, [True, True, True, False], True),
     [_Q, _Q, _Q, None]),
    ("_scaled_dot_product_cudnn_attention_backward",
     (_Q, _Q, _Q, _Q, _Q, (2, 4, 16), (2,), (2,), None, None, None, 16, 16, 0.0, True), [_Q, _Q, _Q]),
    ("_scaled_dot_product_fused_attention_overrideable", (_Q, _Q, _Q, None, 0.0, True), [_Q, (2, 4, 16)]),
    ("_scaled_dot_product_fused_attention_overrideable_backward",
     (_Q, _Q, _Q, _Q, None, [True, True, True, False], _Q, (2, 4, 16), None, None, 16, 16, 0.0, True, (2,),
      (2,)), [_Q, _Q, _Q, None]),
    ("_flash_attention_backward", (_QS, _QS, _QS, _QS, _QS, (2, 4, 16), None, None, 16, 16, 0.0, True, (2,), (2,)),
     [_QS, _QS, _QS]),
    ("_efficient_attention_backward",
     (_QS, _QS, _QS, _QS, None, _QS, None, None, 16, 16, (2, 4, 16), 0.0, (2,), (2,), 1, False),
     [_QS, _QS, _QS, None]),
    ("_efficient_attention_forward", (_QS, _QS, _QS, None, None, None, 16, 16, 0.0, 2, False), [_QS, (2, 4, 16)]),
]


def test_cost_is_the_same_with_and_without_torch(tmp_path):
    calls = list(HAND_CALLS)
    for key in sorted(_schemas.SCHEMAS):
        name, _, ov = key.rpartition(".")
        ns, _, short = name.rpartition("::")
        if _registry.lookup(name if ns else f"aten::{short}", ov) is None:
            continue
        overload = getattr(getattr(getattr(torch.ops, ns or "aten"), short, None), ov, None)
        if overload is None:
            continue  # not in this torch release (the table was generated from another one)
        sch = overload._schema
        args = tuple(_value(a.type) for a in sch.arguments if not a.kwarg_only)
        op = f"{name}.{ov}"
        calls.append((op, args, None))
        calls.append((op, args, (4, 4)))
    path = tmp_path / "calls.txt"
    path.write_text(repr(calls))
    here = []
    for op, args, out in calls:
        try:
            here.append(_fields(roofline.cost(op, *args, out=out)))
        except (ValueError, TypeError, OverflowError) as e:
            here.append((type(e).__name__, str(e)))
    proc = subprocess.run([sys.executable, "-c", _RUN_CALLS, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = ast.literal_eval(proc.stdout)
    assert len(there) == len(calls)
    diff = [(calls[i][0], here[i], there[i]) for i in range(len(calls)) if here[i] != there[i]]
    assert diff == []
    # not vacuous: many calls are counted, and every hand-made call is
    assert sum(1 for h in here if isinstance(h[0], int)) > 1000
    for i in range(len(HAND_CALLS)):
        assert isinstance(here[i][0], int), (HAND_CALLS[i][0], here[i])


def test_out_overloads_write_their_destination():
    c = roofline.cost("add.out", (4, 8), (8,))
    assert (c.vector_flops, c.bytes_read, c.bytes_written) == (32, (32 + 8) * 4, 32 * 4)
    c = roofline.cost("mm.out", (4, 8), (8, 2))
    assert (c.matrix_flops, c.bytes_read, c.bytes_written) == (2 * 4 * 2 * 8, (32 + 16) * 4, 8 * 4)
    # two destinations: values fp32 and indices int64
    c = roofline.cost("max_pool2d_with_indices.out", (1, 1, 4, 4), [2, 2],
                      out=[TensorSpec((1, 1, 2, 2)), TensorSpec((1, 1, 2, 2), "int64")])
    assert (c.vector_flops, c.bytes_read, c.bytes_written) == (4 * 4, 16 * 4, 4 * 4 + 4 * 8)


def test_ops_that_needed_torch_to_be_costed():
    c = roofline.cost("addmv", (8,), (8, 16), (16,))
    assert c.vector_flops == 2 * 8 * 16  # one multiply-add per element of the matrix
    c = roofline.cost("_efficient_attention_forward", _QS, _QS, _QS, None, None, None, 16, 16, 0.0, 2, False,
                      out=[_QS, (2, 4, 16)])
    # custom_mask_type 2 = causal from the bottom right, sq = sk = 16: 16*17/2 = 136 pairs per (batch, head)
    assert c.matrix_flops == 2 * (2 * 4 * 136) * (8 + 8)
    c = roofline.cost("_flash_attention_backward", _QS, _QS, _QS, _QS, _QS, (2, 4, 16), None, None, 16, 16, 0.0,
                      True, (2,), (2,), out=[_QS, _QS, _QS])
    assert c.matrix_flops == 2 * (2 * 4 * 136) * (3 * 8 + 2 * 8)  # causal: 136 pairs; backward 3 dq + 2 dv
    # transposed _convolution: x (1,4,5,5), w (4,3,3,3), stride 2, padding 1, output_padding 1, groups 2
    c = roofline.cost("_convolution", (1, 4, 5, 5), (4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 2,
                      False, False, False, False)
    side = (5 - 1) * 2 - 2 * 1 + 1 * (3 - 1) + 1 + 1  # 10
    assert c.bytes_written == 1 * (3 * 2) * side * side * 4  # C_out = w[1] * groups = 6
    assert c.matrix_flops == 2 * 1 * 25 * 9 * 4 * 3  # transposed: input spatial x kernel x C_in x C_out/groups


# ---- convolution output shapes, per op --------------------------------------------------------------------------


def _fcm(fn):
    with FlopCounterMode(display=False) as f:
        out = fn()
    return out, f.get_total_flops()


CONV_CASES = [
    # (op, args as shapes, the same call on tensors, FlopCounterMode counts it)
    ("convolution", ((1, 4, 9, 9), (6, 2, 3, 3), (6,), [2, 2], [1, 1], [2, 2], False, [0, 0], 2), True),
    ("convolution", ((1, 4, 5, 5), (4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 2), True),
    ("_convolution", ((1, 4, 9, 9), (6, 4, 3, 3), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, False, False,
                      False, False), True),
    ("mkldnn_convolution", ((1, 4, 9, 9), (6, 2, 3, 3), (6,), [1, 1], [2, 2], [1, 1], 2), False),
    ("_slow_conv2d_forward", ((1, 4, 9, 9), (6, 4, 3, 3), [3, 3], (6,), [2, 2], [1, 1]), False),
    ("slow_conv_dilated2d", ((1, 4, 9, 9), (6, 4, 3, 3), [3, 3], None, [2, 2], [1, 1], [2, 2]), False),
    ("slow_conv3d_forward", ((1, 4, 5, 9, 9), (6, 4, 3, 3, 3), [3, 3, 3], None, [2, 2, 2], [1, 1, 1]), False),
    ("slow_conv_transpose2d", ((1, 4, 5, 5), (4, 3, 3, 3), [3, 3], None, [2, 2], [1, 1], [1, 1], [1, 1]), False),
    ("slow_conv_transpose3d", ((1, 4, 3, 5, 5), (4, 3, 3, 3, 3), [3, 3, 3], None, [2, 2, 2], [1, 1, 1],
                               [0, 1, 1], [1, 1, 1]), False),
]


@pytest.mark.parametrize("op,args,fcm", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONV_CASES)])
def test_conv_output_shape_follows_the_op_layout(op, args, fcm):
    g = torch.Generator().manual_seed(0)
    targs = [torch.randn(*a, generator=g) if isinstance(a, tuple) else a for a in args]
    if fcm:
        out, flops = _fcm(lambda: getattr(aten, op)(*targs))
    else:
        out, flops = getattr(aten, op)(*targs), None
    c = roofline.cost(op, *args)
    assert c.bytes_written == out.numel() * 4, (op, tuple(out.shape))
    x, w = args[0], args[1]
    transposed = op.startswith("slow_conv_transpose") or (op in ("convolution", "_convolution") and args[6])
    if flops is not None:
        assert c.matrix_flops == flops and c.flop_counter_flops == flops
    # 2 * N * (output spatial, or input spatial when transposed) * kernel * w[0] * w[1]
    spatial = 1
    for d in (x[2:] if transposed else out.shape[2:]):
        spatial *= d
    kernel = 1
    for d in w[2:]:
        kernel *= d
    assert c.matrix_flops == 2 * x[0] * spatial * kernel * w[0] * w[1]


def test_conv_shapes_of_cuda_only_ops():
    """No CPU or meta kernel: shapes derived by hand from each op's own argument order."""
    # _conv_depthwise2d(self, weight, kernel_size, bias, stride, padding, dilation): groups = input channels
    c = roofline.cost("_conv_depthwise2d", (1, 4, 9, 9), (8, 1, 3, 3), [3, 3], None, [2, 2], [1, 1], [1, 1])
    assert c.bytes_written == 8 * 5 * 5 * 4  # (9 + 2 - 2 - 1) // 2 + 1 = 5
    assert c.matrix_flops == 2 * 25 * 9 * 8 * 1
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): padding before stride
    c = roofline.cost("cudnn_convolution", (1, 4, 9, 9), (6, 2, 3, 3), [1, 1], [2, 2], [1, 1], 2, False, False,
                      False)
    assert c.bytes_written == 6 * 5 * 5 * 4
    # cudnn_convolution_transpose(self, weight, padding, output_padding, stride, dilation, groups, ...)
    c = roofline.cost("cudnn_convolution_transpose", (1, 4, 9, 9), (4, 3, 3, 3), [1, 1], [1, 1], [2, 2], [1, 1], 2,
                      False, False, False)
    side = (9 - 1) * 2 - 2 + 2 + 1 + 1  # 18
    assert c.bytes_written == 6 * side * side * 4


# ---- invalid inputs: clear errors -------------------------------------------------------------------------------


def test_conv_with_mismatched_channels_is_an_error():
    with pytest.raises(ValueError, match="input channels"):  # weight expects 2 * 1 = 2 input channels, x has 3
        roofline.cost("convolution", (1, 3, 8, 8), (4, 2, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(ValueError, match="inconsistent shapes"):  # the C model checks a given result too
        roofline.cost("convolution", (1, 3, 8, 8), (4, 2, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                      out=(1, 4, 6, 6))
    with pytest.raises(ValueError, match="stride"):
        roofline.cost("convolution", (1, 2, 8, 8), (4, 2, 3, 3), None, [0, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(ValueError, match="groups"):
        roofline.cost("convolution", (1, 2, 8, 8), (4, 2, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 0)
    with pytest.raises(ValueError, match="does not fit the input"):  # a 9x9 kernel on a 4x4 input
        roofline.cost("convolution", (1, 2, 4, 4), (4, 2, 9, 9), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


def test_pool_with_a_bad_window_is_an_error():
    ok = roofline.cost("max_pool2d", (1, 1, 4, 4), [2, 2], [2, 2], out=(1, 1, 2, 2))
    assert ok.vector_flops == 4 * 4  # 4 windows x 4 taps
    for kernel, stride, padding in (([-2, 2], [2, 2], [0, 0]), ([0, 2], [2, 2], [0, 0]), ([2, 2], [0, 2], [0, 0]),
                                    ([2, 2], [2, 2], [-1, 0])):
        with pytest.raises(ValueError, match="out of range"):
            roofline.cost("max_pool2d", (1, 1, 4, 4), kernel, stride, padding, out=(1, 1, 2, 2))
    with pytest.raises(ValueError, match="out of range"):
        roofline.cost("avg_pool2d_backward", (1, 1, 2, 2), (1, 1, 4, 4), [2, 2], [0, 0], [0, 0], False, True, None,
                      out=(1, 1, 4, 4))


def test_max_pool1d_has_one_spatial_dimension():
    c = roofline.cost("max_pool1d", (1, 1, 8), [2], out=(1, 1, 4))
    assert c.vector_flops == 4 * 2  # 4 windows x 2 taps (it was counted as 2x2 windows)


def test_tensor_spec_rejects_what_is_not_a_shape():
    with pytest.raises(TypeError, match="entry 0 of the shape must be an int"):
        TensorSpec((True, 2))
    with pytest.raises(TypeError, match="entry 0 of the stride must be an int"):
        TensorSpec((2, 2), stride=(False, 1))
    with pytest.raises(ValueError, match="negative size -3 at dimension 1"):
        TensorSpec((2, -3))
    with pytest.raises(ValueError, match="negative stride"):
        TensorSpec((2, 3), stride=(3, -1))
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        TensorSpec((2 ** 64,))
    with pytest.raises(TypeError, match="shape must be a sequence"):
        TensorSpec("ab")
    with pytest.raises(TypeError, match="shape must be a sequence"):
        TensorSpec(5)


def test_cost_names_the_bad_argument():
    with pytest.raises(TypeError, match="argument 0: .*entry 0 of the shape"):
        roofline.cost("mm", (True, 2), (2, 2))
    with pytest.raises(ValueError, match="argument 1: .*negative size"):
        roofline.cost("add", (2, 3), (2, -3))
    with pytest.raises(OverflowError, match="argument 1"):
        roofline.cost("sum", (4,), 2 ** 70, out=())
    with pytest.raises(ValueError, match="out: .*negative size"):
        roofline.cost("relu", (2, 3), out=(2, -3))
    with pytest.raises(TypeError, match="out: .*entry 0 of the shape"):
        roofline.cost("relu", (2, 3), out=(True, 3))


def test_huge_inputs_are_rejected_before_work_proportional_to_them():
    junk, tensors = list(range(10 ** 6)), [(2,)] * (10 ** 6)  # built before memory is traced
    calls = [
        (lambda: TensorSpec(range(10 ** 12)), "at most 16"),  # iterated no further than 17 entries
        (lambda: roofline.cost("sum", (4,), junk, out=()), "argument 1: a list of 1000000 entries"),
        (lambda: roofline.cost("_foreach_add", tensors, 1.0, out=[]), "argument 0: a list of 1000000 entries"),
    ]
    for call, message in calls:
        tracemalloc.start()
        try:
            with pytest.raises(ValueError) as e:
                call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 ** 20, (message, peak)  # no copy of a million-entry list (8 MB and more)
        assert message in str(e.value) and len(str(e.value)) < 300, str(e.value)[:300]


def test_error_messages_stay_short():
    with pytest.raises(ValueError) as e:
        roofline.cost("mm", (2, 3), (4, 5), out=(2, 5))  # inner dimensions differ; arguments repeated briefly
    assert "inconsistent shapes" in str(e.value)
    with pytest.raises(ValueError) as e:
        roofline.cost("add", (3,) * 16, (2,) * 16)
    assert "do not broadcast" in str(e.value) and len(str(e.value)) < 400


def test_cost_rejects_more_arguments_than_the_schema_has():
    with pytest.raises(ValueError, match="3 arguments for a schema of 2"):
        roofline.cost("mm", (2, 2), (2, 2), (2, 2))


def test_measure_and_cost_agree_on_training_batch_norm():
    x, w, b = torch.randn(N, C, H, W), torch.randn(C), torch.randn(C)
    rm, rv = torch.zeros(C), torch.ones(C)
    with roofline.measure() as r:
        aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5)
    row = r.by_op()["aten._native_batch_norm_legit.default"]
    c = roofline.cost("_native_batch_norm_legit", *BN_ARGS, True, 0.1, 1e-5, out=[(N, C, H, W), (C,), (C,)])
    assert (row["vector_flops"], row["bytes_read"], row["bytes_written"]) == (
        c.vector_flops, c.bytes_read, c.bytes_written) == (8 * X, (X + 4 * C) * 4, (X + 4 * C) * 4)


def test_cost_errors_name_the_op_not_an_internal_slot():
    # 2**62 * 2**62 * 4 elements = 2**126: no 64-bit count can hold it; the error names cost()'s op and argument.
    with pytest.raises(OverflowError, match=r"^cost\('sum'\): argument 0: .*does not fit in 64 bits"):
        roofline.cost("sum", (2**62, 2**62, 4), out=())
