"""Quantized linear products: the aten kernels behind weight-only and dynamic int8/int4 inference (called directly,
no torchao needed) and small MLPs quantized with torchao's CPU configs (skipped without torchao).

Expected counts are arithmetic written here: ``2 M N K`` matrix FLOPs whatever the weight's storage, the weight
read at its stored width (int8: 1 byte, packed int4: half a byte per element), the pointwise conventions of
docs/concepts.md ("Formulas beyond FlopCounterMode")."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402

aten = torch.ops.aten


def _measure(fn):
    with torch.no_grad(), roofline.measure(timing=None) as r:
        out = fn()
    return r, out


def _op(r, name):
    return r.by_op()[name]


def _need(name):
    if not hasattr(aten, name):
        pytest.skip(f"this torch has no aten.{name}")
    return getattr(aten, name)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype,size", [(torch.float32, 4), (torch.bfloat16, 2)])
def test_weight_int8pack_mm(device, dtype, size):
    op = _need("_weight_int8pack_mm")
    M, K, N = 8, 64, 32
    a = torch.randn(M, K, dtype=dtype, device=device)
    w = torch.randint(-128, 127, (N, K), dtype=torch.int8, device=device)
    s = torch.rand(N, dtype=dtype, device=device)
    r, out = _measure(lambda: op.default(a, w, s))
    assert tuple(out.shape) == (M, N)
    assert not r.unknown_ops and not r.errors
    c = _op(r, "aten._weight_int8pack_mm.default")
    assert c["matrix_flops"] == 2 * 8 * 32 * 64
    assert c["vector_flops"] == 8 * 32  # the per-channel scale, once per output element
    assert c["bytes_read"] == 8 * 64 * size + 32 * 64 * 1 + 32 * size  # activations, int8 weight, scales
    assert c["bytes_written"] == 8 * 32 * size
    if device == "cpu":  # the op is what the formula assumes: x @ (w * s).T
        ref = (a.float() @ w.float().t()) * s.float()
        assert torch.allclose(out.float(), ref, rtol=2e-2, atol=1e-1 * K)


def test_weight_int4pack_mm_for_cpu_and_repack():
    conv = _need("_convert_weight_to_int4pack_for_cpu")
    op = _need("_weight_int4pack_mm_for_cpu")
    M, K, N, G = 8, 64, 32, 32
    q = torch.randint(0, 16, (N, K), dtype=torch.int32)
    r1, packed = _measure(lambda: conv.default(q, 1))
    assert not r1.unknown_ops and not r1.errors
    c1 = _op(r1, "aten._convert_weight_to_int4pack_for_cpu.default")
    assert packed.dtype == torch.uint8 and tuple(packed.shape) == (32, 32)  # two int4 per byte
    assert c1["matrix_flops"] == 0 and c1["vector_flops"] == 0
    assert c1["bytes_read"] == 32 * 64 * 4 and c1["bytes_written"] == 32 * 32

    a = torch.randn(M, K)
    sz = torch.rand(K // G, N, 2)  # (scale, zero) per group of 32 along K and output channel
    r, out = _measure(lambda: op.default(a, packed, G, sz))
    assert tuple(out.shape) == (M, N)
    assert not r.unknown_ops and not r.errors
    c = _op(r, "aten._weight_int4pack_mm_for_cpu.default")
    assert c["matrix_flops"] == 2 * 8 * 32 * 64
    assert c["vector_flops"] == 2 * 32 * 64  # each weight dequantised once: a scale multiply and a zero add
    assert c["bytes_read"] == 8 * 64 * 4 + 32 * 64 // 2 + 2 * 32 * 2 * 4
    assert c["bytes_written"] == 8 * 32 * 4

    # on meta the same counts (no values needed)
    rm, _ = _measure(lambda: op.default(a.to("meta"), packed.to("meta"), G, sz.to("meta")))
    assert not rm.unknown_ops and not rm.errors
    assert _op(rm, "aten._weight_int4pack_mm_for_cpu.default") == c


def test_dyn_quant_matmul_4bit():
    pack = _need("_dyn_quant_pack_4bit_weight")
    op = _need("_dyn_quant_matmul_4bit")
    M, K, N, B = 4, 64, 32, 64  # one block per row (channel-wise): the layout every CPU build's packing accepts
    w = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8)
    sz = torch.rand(N * (K // B), 2)
    try:
        r1, pw = _measure(lambda: pack.default(w, sz, None, B, K, N))
    except RuntimeError as e:  # not every CPU build has a kernel for it
        pytest.skip(f"_dyn_quant_pack_4bit_weight does not run here: {e}")
    assert not r1.unknown_ops and not r1.errors
    c1 = _op(r1, "aten._dyn_quant_pack_4bit_weight.default")
    assert c1["matrix_flops"] == 0 and c1["vector_flops"] == 0
    assert c1["bytes_read"] == 32 * 32 + 32 * 1 * 2 * 4
    assert c1["bytes_written"] == pw.numel() * pw.element_size()

    a = torch.randn(M, K)
    r, out = _measure(lambda: op.default(a, pw, B, K, N))
    assert tuple(out.shape) == (M, N)
    assert not r.unknown_ops and not r.errors
    c = _op(r, "aten._dyn_quant_matmul_4bit.default")
    assert c["matrix_flops"] == 2 * 4 * 32 * 64
    # activations quantised per row (4 per element) + each block's partial sum rescaled (2 per output and block)
    assert c["vector_flops"] == 4 * 4 * 64 + 2 * 4 * 32 * 1
    assert c["bytes_read"] == 4 * 64 * 4 + pw.numel() * pw.element_size()
    assert c["bytes_written"] == 4 * 32 * 4


def test_int_mm_int8_bytes():
    M, K, N = 32, 64, 16
    a = torch.randint(-128, 127, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 127, (K, N), dtype=torch.int8)
    r, out = _measure(lambda: torch._int_mm(a, b))
    assert out.dtype == torch.int32
    c = _op(r, "aten._int_mm.default")
    assert c["matrix_flops"] == 2 * 32 * 16 * 64
    assert c["bytes_read"] == 32 * 64 + 64 * 16 and c["bytes_written"] == 32 * 16 * 4


def test_flop_counter_has_no_formula_for_weight_packed_products():
    """Pins the claim of docs/concepts.md: FlopCounterMode counts these kernels as 0 (roofline's count is the
    product's); when torch adds formulas, roofline must match them and the docs change."""
    from torch.utils.flop_counter import FlopCounterMode

    op = _need("_weight_int8pack_mm")
    a, w, s = torch.randn(8, 64), torch.randint(-128, 127, (32, 64), dtype=torch.int8), torch.rand(32)
    with FlopCounterMode(display=False) as fc:
        op.default(a, w, s)
    assert fc.get_total_flops() == 0


# ---- torchao-quantized MLPs --------------------------------------------------------------------------------------

_CONFIGS = ["Int8WeightOnlyConfig", "Int8DynamicActivationInt8WeightConfig", "IntxWeightOnlyConfig",
            "Int8DynamicActivationIntxWeightConfig", "Float8WeightOnlyConfig"]


def _quantized_mlp(config_name, device="cpu"):
    pytest.importorskip("torchao")
    import torchao.quantization as Q
    from torchao.quantization import quantize_

    if not hasattr(Q, config_name):
        pytest.skip(f"this torchao has no {config_name}")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).to(device)
    try:
        quantize_(m, getattr(Q, config_name)())
    except (RuntimeError, NotImplementedError, AssertionError, ImportError) as e:
        pytest.skip(f"{config_name} does not quantize on {device} here: {e}")
    return m


@pytest.mark.parametrize("config_name", _CONFIGS)
def test_torchao_mlp_fully_counted(config_name):
    m = _quantized_mlp(config_name)
    x = torch.randn(8, 64)
    with torch.no_grad(), roofline.measure(m, timing=None) as r:
        m(x)
    assert not r.unknown_ops, r.unknown_ops
    assert not r.errors, r.errors
    assert r.matrix_flops == 2 * 8 * (64 * 128 + 128 * 32)


def test_torchao_int8_dynamic_counts_int8_products():
    m = _quantized_mlp("Int8DynamicActivationInt8WeightConfig")
    with torch.no_grad(), roofline.measure(m, timing=None) as r:
        m(torch.randn(8, 64))
    c = r.by_op()["aten._int_mm.default"]
    assert c["calls"] == 2
    assert c["matrix_flops"] == 2 * 8 * (64 * 128 + 128 * 32)
    # int8 activations and int8 weights, 1 byte each; int32 results
    assert c["bytes_read"] == (8 * 64 + 64 * 128) + (8 * 128 + 128 * 32)
    assert c["bytes_written"] == (8 * 128 + 8 * 32) * 4


def test_torchao_int8_weight_only_reads_int8_weights():
    m = _quantized_mlp("Int8WeightOnlyConfig")
    with torch.no_grad(), roofline.measure(m, timing=None) as r:
        m(torch.randn(8, 64))
    assert not r.unknown_ops and not r.errors
    # the int8 weights are read at 1 byte per element where they are dequantised (on CPU: a dtype conversion)
    conv = r.by_op()["aten._to_copy.default"]
    assert conv["bytes_read"] >= 64 * 128 + 128 * 32


def test_torchao_mlp_on_meta():
    m = _quantized_mlp("Int8WeightOnlyConfig", device="meta")
    with torch.no_grad(), roofline.measure(m, timing=None) as r:
        m(torch.randn(8, 64, device="meta"))
    assert not r.unknown_ops and not r.errors
    assert r.matrix_flops == 2 * 8 * (64 * 128 + 128 * 32)


def test_dyn_quant_block_arithmetic_and_bad_block():
    """Blocks of 16 along K = 64: 4 partial sums per output element, each rescaled (a multiply and an add)."""
    from roofline._counting import _formulas

    f = _formulas.OPS["aten::_dyn_quant_matmul_4bit"]
    meta = dict(device="meta")
    b = {"inp": torch.empty(2, 3, 64, **meta), "packed_weights": torch.empty(1000, dtype=torch.uint8, **meta),
         "block_size": 16, "in_features": 64, "out_features": 8}
    c = f(b, torch.empty(2, 3, 8, **meta))
    assert c["matrix_flops"] == 2 * 6 * 8 * 64  # leading dims fold into M = 6
    assert c["vector_flops"] == 4 * 6 * 64 + 2 * 6 * 8 * 4
    assert c["bytes_read"] == 6 * 64 * 4 + 1000 and c["bytes_written"] == 6 * 8 * 4
    with pytest.raises(ValueError, match="block size"):
        f(dict(b, block_size=0), torch.empty(2, 3, 8, **meta))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_out_dtype_int8_mm(device):
    """The out_dtype higher-order op (int8 x int8 -> int32 mm), which torchao's int8 kernels call off the CPU and on
    meta or fake tensors: the product's FLOPs, counted once (its body is not counted again)."""
    try:
        from torch._higher_order_ops.out_dtype import out_dtype
    except ImportError:
        pytest.skip("this torch has no out_dtype higher-order op")
    a = torch.randint(-128, 127, (32, 64), dtype=torch.int8, device=device)
    b = torch.randint(-128, 127, (64, 16), dtype=torch.int8, device=device)
    r, out = _measure(lambda: out_dtype(aten.mm.default, torch.int32, a, b))
    assert out.dtype == torch.int32
    assert not r.unknown_ops and not r.errors
    c = _op(r, "higher_order.out_dtype")
    assert c["calls"] == 1
    assert c["matrix_flops"] == 2 * 32 * 16 * 64 and r.matrix_flops == 2 * 32 * 16 * 64
    assert c["bytes_read"] == 32 * 64 + 64 * 16 and c["bytes_written"] == 32 * 16 * 4


def test_out_dtype_other_ops_refused():
    from roofline._counting import _formulas

    f = _formulas.HOPS["out_dtype"]
    x = torch.empty(4, 4, dtype=torch.int8, device="meta")
    with pytest.raises(ValueError, match="no formula"):
        f((aten.mul.Tensor, torch.int32, x, x), {}, torch.empty(4, 4, dtype=torch.int32, device="meta"))


def test_torchao_int8_dynamic_on_meta():
    """On meta torchao's int8 dynamic path calls the out_dtype higher-order op instead of _int_mm: the same count."""
    m = _quantized_mlp("Int8DynamicActivationInt8WeightConfig", device="meta")
    with torch.no_grad(), roofline.measure(m, timing=None) as r:
        m(torch.randn(8, 64, device="meta"))
    assert not r.unknown_ops and not r.errors
    assert r.matrix_flops == 2 * 8 * (64 * 128 + 128 * 32)
    c = r.by_op()["higher_order.out_dtype"]
    assert c["matrix_flops"] == 2 * 8 * (64 * 128 + 128 * 32)
    assert c["bytes_read"] == (8 * 64 + 64 * 128) + (8 * 128 + 128 * 32)


def test_coverage_sweep_torchao_family():
    """bench/coverage.py lists the torchao family when torchao is installed and runs it inference-only."""
    pytest.importorskip("torchao")
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "coverage.py")
    spec = importlib.util.spec_from_file_location("roofline_bench_coverage_q", path)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    assert ("torchao", "mlp-int8-dynamic") in coverage.zoo()
    res = coverage.run_model("torchao", "mlp-int8-dynamic", quick=True)
    assert "failed" not in res, res.get("failed")
    assert res["train"] is None and res["covered"]
    assert res["infer"]["unknown"] == {} and res["infer"]["errors"] == {}
    assert res["infer"]["matrix_flops"] == 2 * 16 * (256 * 1024 + 1024 * 256)


def test_weight_int4pack_mm_cuda_layout_formula():
    """The CUDA int4 kernel's packed layout [N/8, K/(16 t), 32, t/2] int32 (t = inner K tiles; here N = 32, K = 64,
    t = 2), counted by calling the formula on meta tensors (no GPU): half a byte per weight element."""
    from roofline._counting import _formulas

    f = _formulas.OPS["aten::_weight_int4pack_mm"]
    meta = dict(device="meta")
    b = {"self": torch.empty(8, 64, dtype=torch.bfloat16, **meta),
         "mat2": torch.empty(4, 2, 32, 1, dtype=torch.int32, **meta), "qGroupSize": 32,
         "qScaleAndZeros": torch.empty(2, 32, 2, dtype=torch.bfloat16, **meta)}
    c = f(b, torch.empty(8, 32, dtype=torch.bfloat16, **meta))
    assert c["matrix_flops"] == 2 * 8 * 32 * 64
    assert c["vector_flops"] == 2 * 32 * 64
    assert c["bytes_read"] == 8 * 64 * 2 + 32 * 64 // 2 + 2 * 32 * 2 * 2
    assert c["bytes_written"] == 8 * 32 * 2


def test_weight_int8pack_mm_with_an_empty_inner_dimension():
    """K = 0: torch returns the M x N result (of zeros); the per-channel scale still multiplies each of its M N
    elements, and no product is summed (the rows were taken as 0 when K was 0)."""
    op = _need("_weight_int8pack_mm")
    r, out = _measure(lambda: op(torch.randn(3, 0), torch.zeros(5, 0, dtype=torch.int8), torch.ones(5)))
    c = _op(r, "aten._weight_int8pack_mm.default")
    assert tuple(out.shape) == (3, 5)
    assert c["matrix_flops"] == 0 and c["vector_flops"] == 3 * 5
