"""The float8 products of mixture-of-experts and float8 training: ``_scaled_grouped_mm`` (and its ``_v2``) and
``_scaled_mm_v2``. They run only on CUDA, but torch's meta kernels give their result shapes, so they are measured here
on meta tensors; and they are costed from a trace's recorded shapes (what a GPU trace of such a job holds). Expected
counts are the arithmetic in the comments."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._traces._ops import cost_event  # noqa: E402

F8 = getattr(torch, "float8_e4m3fn", None)
pytestmark = pytest.mark.skipif(F8 is None, reason="this torch has no float8 dtype")


def _counts(r):
    return r.matrix_flops, r.vector_flops, r.bytes_read, r.bytes_written


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _measure(fn):
    with torch.device("meta"), roofline.measure(timing=None) as r:
        out = fn()
    assert r.unknown_ops == {}
    return r, out


@pytest.mark.parametrize("layout", ["2d-3d", "3d-3d", "3d-2d", "2d-2d"])
def test_scaled_grouped_mm_each_layout(layout):
    g, m, k, n = 4, 12, 32, 16  # 4 experts; float8 operands (1 byte), float32 scales, int32 offsets, bf16 result
    if layout == "2d-3d":  # tokens routed to experts: a (G*M, K) x b (G, K, N) -> (G*M, N)
        a, b, sa, sb, out_shape = (g * m, k), (g, n, k), (g * m,), (g, n), (g * m, n)
    elif layout == "3d-3d":  # batched: a (G, M, K) x b (G, K, N) -> (G, M, N)
        a, b, sa, sb, out_shape = (g, m, k), (g, n, k), (g, m), (g, n), (g, m, n)
    elif layout == "3d-2d":  # a (G, M, K) x b (K, G*N) -> (M, G*N)
        a, b, sa, sb, out_shape = (g, m, k), (g * n, k), (g, m), (g * n,), (m, g * n)
    else:  # the weight gradient: a (M, G*K) x b (G*K, N), the groups split K -> (G, M, N)
        a, b, sa, sb, out_shape = (m, g * k), (n, g * k), (g * m,), (g * n,), (g, m, n)
    with_offs = layout != "3d-3d"

    def run():
        x = torch.empty(a, dtype=F8)
        w = torch.empty(b, dtype=F8).transpose(-2, -1)  # column-major, as the kernel takes it
        offs = torch.empty(g, dtype=torch.int32) if with_offs else None
        return torch._scaled_grouped_mm(x, w, torch.empty(sa), torch.empty(sb), offs=offs,
                                        out_dtype=torch.bfloat16)

    r, out = _measure(run)
    assert tuple(out.shape) == out_shape
    rows_k_cols = {"2d-3d": g * m * k * n, "3d-3d": g * m * k * n, "3d-2d": m * k * g * n, "2d-2d": m * g * k * n}
    # float8 operands (1 byte an element), float32 scales, int32 offsets
    read = _numel(a) + _numel(b) + 4 * (_numel(sa) + _numel(sb)) + (4 * g if with_offs else 0)
    elements = _numel(out_shape)
    # 2 FLOPs per multiply-add over every (row, K, column) of the groups; one FLOP per output element for the scale
    assert _counts(r) == (2 * rows_k_cols[layout], elements, read, 2 * elements)


def test_scaled_mm_v2_counts_as_scaled_mm():
    m, k, n = 64, 32, 16

    def run(v2):
        a, b = torch.empty(m, k, dtype=F8), torch.empty(n, k, dtype=F8).t()
        sa, sb = torch.empty(m, 1), torch.empty(1, n)  # row-wise scales, float32
        if v2:
            return torch.ops.aten._scaled_mm_v2(a, b, [sa], [1], [0], [sb], [1], [0], None, torch.bfloat16)
        return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)

    r2, _ = _measure(lambda: run(True))
    r1, _ = _measure(lambda: run(False))
    # 2*64*32*16 = 65,536 matrix FLOPs; 64*16 = 1,024 scale FLOPs; read 64*32 + 32*16 (float8) + 4*(64 + 16) (scales)
    # = 2,880 bytes; written 64*16 bf16 = 2,048 bytes
    assert _counts(r2) == _counts(r1) == (65_536, 1_024, 2_880, 2_048)


def test_trace_events_of_the_scaled_products():
    f8 = "c10::Float8_e4m3fn"
    grouped = cost_event("aten::_scaled_grouped_mm", {
        "Input type": [f8, f8, "float", "float", "int", "", "", "Scalar", "Scalar"],
        "Input Dims": [[48, 32], [4, 32, 16], [48], [4, 16], [4], [], [], [], []],
        "Input Strides": [[32, 1], [512, 1, 32], [1], [16, 1], [1], [], [], [], []],
        "Concrete Inputs": ["", "", "", "", "", "", "", "15", "False"]})  # out_dtype 15: bfloat16
    # 2*48*32*16 = 49,152; 48*16 = 768 scale FLOPs; read 48*32 + 4*32*16 + 4*(48 + 64) + 4*4 = 4,048; 48*16*2 written
    assert grouped.status == "ok" and _counts(grouped) == (49_152, 768, 4_048, 1_536)
    v2 = cost_event("aten::_scaled_mm_v2", {
        "Input type": [f8, f8, "TensorList", "GenericList", "GenericList", "TensorList", "GenericList", "GenericList",
                       "", "Scalar", "GenericList", "Scalar"],
        "Input Dims": [[64, 32], [32, 16], [[64, 1]], [], [], [[1, 16]], [], [], [], [], [], []],
        "Input Strides": [[32, 1], [1, 32], [[1, 1]], [], [], [[16, 1]], [], [], [], [], [], []],
        "Concrete Inputs": ["", "", "", "[1]", "[0]", "", "[1]", "[0]", "", "15", "[]", "False"]})
    # a trace records no dtype for a list's tensors: the scales are taken as the first tensor's (1 byte), and said so
    assert v2.status == "ok" and _counts(v2) == (65_536, 1_024, 64 * 32 + 32 * 16 + 64 + 16, 2_048)
    assert "float8_e4m3fn" in v2.assumed


def _grouped_event(a, b, bias=None):
    f8 = "c10::Float8_e4m3fn"
    types = [f8, f8, "float", "float", "int", "c10::BFloat16" if bias else "", "", "Scalar", "Scalar"]
    dims = [a, b, [a[0]], [4, b[-1]], [4], bias or [], [], [], []]
    strides = [[1] * len(d) for d in dims]
    return cost_event("aten::_scaled_grouped_mm", {"Input type": types, "Input Dims": dims, "Input Strides": strides,
                                                   "Concrete Inputs": ["", "", "", "", "", "", "", "15", "False"]})


def test_scaled_grouped_mm_bias_and_refused_shapes():
    # a bias adds one FLOP per output element to the scale's: 2 * 48 * 16 = 1,536 (torch's kernels do not take a
    # bias yet; a trace may hold one)
    assert _grouped_event([48, 32], [4, 32, 16], bias=[4, 16]).vector_flops == 2 * 48 * 16
    assert _grouped_event([48, 32], [4, 32, 16]).vector_flops == 48 * 16
    # operands that do not multiply, or of 1 or 4 dims, are refused, not guessed
    for a, b in (([48, 32], [4, 31, 16]), ([4, 12, 32], [3, 32, 16]), ([32], [4, 32, 16]), ([48, 32], [16]),
                 ([1, 4, 12, 32], [4, 32, 16]), ([48, 32], [1, 4, 32, 16])):
        c = _grouped_event(a, b)
        assert c.status != "ok" and c.matrix_flops == 0, (a, b, c)


@pytest.mark.parametrize("a, b", [((32,), (32, 16)), ((48, 32), (32,)), ((2, 4, 12, 32), (32, 16)),
                                  ((48, 32), (2, 4, 32, 16)), ((2, 4, 12, 32), (4, 32, 16))])
def test_the_formula_itself_refuses_operands_of_1_or_4_dims(a, b):
    # the formula's own check, below torch's meta kernels and the trace's shape rule (which refuse such calls first):
    # operands of 1 or 4 dims are a ValueError naming their ranks, never a count
    from roofline._counting import _formulas_products as P

    desc = {"self": torch.empty(a, device="meta", dtype=F8), "mat2": torch.empty(b, device="meta", dtype=F8)}
    out = torch.empty((48, 16), device="meta", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=f"operands must have 2 or 3 dims, got {len(a)} and {len(b)}"):
        P._scaled_grouped_mm(desc, out)
