"""Vision-language models: the ops their image-token merge runs beyond a text model's, and a sample of the ``vlm``
family of the model-zoo sweep (bench/coverage.py, the whole family: ``python bench/coverage.py --only vlm``).

* ``_is_all_true`` (the check that the image tokens match the image features): one comparison per element read, the
  input read once, one bool written;
* ``masked_scatter_backward`` (the gradient of the image features merged into the text embeddings): a gather, no
  FLOPs; reads the mask at its stored size and one element of the gradient per element of the result;
* ``bucketize`` (Idefics3 and SmolVLM patch position ids): a binary search, ceil(log2(L + 1)) comparisons per value
  among L boundaries.

Every expected count is arithmetic written here (conventions in docs/concepts.md, "Formulas beyond FlopCounterMode").
FlopCounterMode has no formula for these ops: it counts 0 for them, and so does roofline's compatible count.
"""

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import TensorSpec  # noqa: E402
from roofline._counting import _formulas  # noqa: E402


def counts(r, name):
    d = r.by_op()[name]
    return (d["matrix_flops"], d["vector_flops"], d["bytes_read"], d["bytes_written"])


def measured(fn):
    with roofline.measure(timing=None) as r:
        out = fn()
    assert r.unknown_ops == {} and r.errors == {}
    assert int(r.records["flop_counter_flops"].sum()) == 0  # FlopCounterMode has no formula for any op here
    return r, out


# ---- _is_all_true / _is_any_true ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["_is_all_true", "_is_any_true"])
@pytest.mark.parametrize("shape, n", [((3, 5), 15), ((), 1), ((0,), 0), ((4, 0, 2), 0)],
                         ids=["3x5", "0-d", "empty", "empty-3d"])
def test_is_all_true_reads_its_input_once_and_writes_one_bool(op, shape, n):
    x = torch.ones(shape, dtype=torch.bool)
    r, out = measured(lambda: getattr(torch.ops.aten, op)(x))
    assert out.shape == () and out.dtype == torch.bool
    # n comparisons; n bools read (1 byte each); one bool written
    assert counts(r, f"aten.{op}.default") == (0, n, n * 1, 1)


def test_is_all_true_from_a_tensor_check():
    """torch._check_tensor_all, the check vision-language models make before merging image features, reaches
    _is_all_true: 6 bools compared and read, 1 written."""
    mask = torch.ones(2, 3, dtype=torch.bool)
    r, _ = measured(lambda: torch._check_tensor_all(mask, lambda: "image tokens and features differ"))
    assert counts(r, "aten._is_all_true.default") == (0, 6, 6, 1)


def test_is_all_true_cost_without_tensors_agrees_with_measure():
    c = roofline.cost("_is_all_true", TensorSpec((3, 5), "bool"), out=TensorSpec((), "bool"))
    assert (c.matrix_flops, c.vector_flops, c.bytes_read, c.bytes_written) == (0, 15, 15, 1)
    assert c.dtype == "bool" and c.flop_counter_flops == 0


def test_is_all_true_of_a_non_bool_tensor_is_torchs_error_not_a_count():
    with pytest.raises(RuntimeError):
        with roofline.measure(timing=None):
            torch.ops.aten._is_all_true(torch.ones(3))


# ---- masked_scatter_backward ----------------------------------------------------------------------------------------

def _merge(selected_tokens):
    """A LLaVA-style merge: image features (one row per selected token, width 8) scattered into the (2, 4, 8) text
    embeddings at the tokens the (2, 4, 1) mask selects, broadcast along the width; the backward of the features."""
    mask = torch.zeros(2, 4, 1, dtype=torch.bool)
    for b, s in selected_tokens:
        mask[b, s] = True
    feats = torch.randn(len(selected_tokens), 8, requires_grad=True)
    embeds = torch.zeros(2, 4, 8)

    def step():
        merged = embeds.masked_scatter(mask.expand_as(embeds), feats)
        (merged * torch.arange(8.0)).sum().backward()
        return feats.grad

    return step


def test_masked_scatter_backward_of_an_image_feature_merge():
    r, grad = measured(_merge([(0, 1), (0, 2), (1, 3)]))
    assert torch.equal(grad, torch.arange(8.0).expand(3, 8))
    # no FLOPs; reads the mask at its stored size (2*4 bools: broadcast along the width) and the 3*8 float32 gradient
    # elements gathered; writes the (3, 8) float32 gradient of the features
    assert counts(r, "aten.masked_scatter_backward.default") == (0, 0, 2 * 4 * 1 + 3 * 8 * 4, 3 * 8 * 4)


def test_masked_scatter_backward_with_fewer_selected_than_the_source_counts_the_zero_tail():
    """The mask selects 2 of the 3 rows of `sizes`: the third row of the result is zeros. The count of selected
    elements is a value, not a shape, so the whole result is counted as gathered (documented upper bound)."""
    grad = torch.ones(2, 4, 8)
    mask = torch.zeros(2, 4, 1, dtype=torch.bool)
    mask[0, 0] = mask[1, 1] = True
    mask = mask.expand(2, 4, 8)
    r, out = measured(lambda: torch.ops.aten.masked_scatter_backward(grad, mask, [3, 8]))
    assert torch.equal(out[2], torch.zeros(8)) and torch.equal(out[:2], torch.ones(2, 8))
    assert counts(r, "aten.masked_scatter_backward.default") == (0, 0, 2 * 4 + 3 * 8 * 4, 3 * 8 * 4)


def test_masked_scatter_backward_empty_and_0d():
    grad = torch.ones(2, 4, 8)
    none = torch.zeros(2, 4, 1, dtype=torch.bool).expand(2, 4, 8)
    r, out = measured(lambda: torch.ops.aten.masked_scatter_backward(grad, none, [0, 8]))
    assert out.shape == (0, 8)
    assert counts(r, "aten.masked_scatter_backward.default") == (0, 0, 2 * 4, 0)  # the mask only
    g0, m0 = torch.tensor(3.0), torch.tensor(True)
    r, out = measured(lambda: torch.ops.aten.masked_scatter_backward(g0, m0, []))
    assert out.shape == () and out.item() == 3.0
    assert counts(r, "aten.masked_scatter_backward.default") == (0, 0, 1 + 4, 4)  # 1 bool, 1 float32 in and out


def test_masked_scatter_backward_cost_without_tensors_agrees_with_measure():
    mask = TensorSpec((2, 4, 8), "bool", stride=(4, 1, 0))  # (2, 4, 1) expanded along the width
    c = roofline.cost("masked_scatter_backward", (2, 4, 8), mask, [3, 8], out=(3, 8))
    assert (c.matrix_flops, c.vector_flops, c.bytes_read, c.bytes_written) == (0, 0, 2 * 4 + 3 * 8 * 4, 3 * 8 * 4)
    assert c.dtype == "float32"


# ---- bucketize --------------------------------------------------------------------------------------------------

V7, B10 = torch.linspace(0, 1, 7), torch.linspace(0, 1, 10)


@pytest.mark.parametrize("fn, op, expected", [
    # 7 values among 10 boundaries: 11 buckets, ceil(log2 11) = 4 comparisons each; reads 7 + 10 float32, writes 7
    # int64
    (lambda: torch.bucketize(V7, B10), "Tensor", (0, 7 * 4, (7 + 10) * 4, 7 * 8)),
    (lambda: torch.bucketize(V7, B10, right=True, out_int32=True), "Tensor", (0, 7 * 4, (7 + 10) * 4, 7 * 4)),
    # out=: the destination is written, not read
    (lambda: torch.bucketize(V7, B10, out=torch.empty(7, dtype=torch.long)), "Tensor_out",
     (0, 7 * 4, (7 + 10) * 4, 7 * 8)),
    # a scalar value: one search, the boundaries read, one int64 written
    (lambda: torch.bucketize(0.5, B10), "Scalar", (0, 4, 10 * 4, 8)),
    # a (3, 5) grid of values among 3 boundaries: ceil(log2 4) = 2 each
    (lambda: torch.bucketize(torch.rand(3, 5), torch.tensor([0.25, 0.5, 0.75])), "Tensor",
     (0, 15 * 2, (15 + 3) * 4, 15 * 8)),
    # one boundary: 2 buckets, 1 comparison
    (lambda: torch.bucketize(V7, torch.tensor([0.5])), "Tensor", (0, 7, (7 + 1) * 4, 7 * 8)),
    # no boundaries: every value in bucket 0, no comparison
    (lambda: torch.bucketize(V7, torch.empty(0)), "Tensor", (0, 0, 7 * 4, 7 * 8)),
    # no values
    (lambda: torch.bucketize(torch.empty(0), B10), "Tensor", (0, 0, 10 * 4, 0)),
    # a 0-d value tensor: one search
    (lambda: torch.bucketize(torch.tensor(0.3), B10), "Tensor", (0, 4, (1 + 10) * 4, 8)),
], ids=["values", "right-int32", "out", "scalar", "2d-values", "one-boundary", "no-boundaries", "no-values", "0-d"])
def test_bucketize_is_a_binary_search(fn, op, expected):
    r, _ = measured(fn)
    assert counts(r, f"aten.bucketize.{op}") == expected


def test_bucketize_on_meta_needs_no_values():
    """The count depends on shapes only: on the meta device it is the same, with no error record."""
    r, _ = measured(lambda: torch.bucketize(torch.ones(3, device="meta"), torch.ones(4, device="meta")))
    # 3 values among 4 boundaries: ceil(log2 5) = 3 comparisons each; reads 3 + 4 float32, writes 3 int64
    assert counts(r, "aten.bucketize.Tensor") == (0, 3 * 3, (3 + 4) * 4, 3 * 8)


def test_bucketize_formula_refuses_boundaries_that_are_not_1d():
    with pytest.raises(ValueError, match="boundaries must be 1-d"):
        _formulas.OPS["aten::bucketize"]({"self": torch.ones(3), "boundaries": torch.ones(2, 2)},
                                         torch.zeros(3, dtype=torch.long))


# ---- a sample of the vlm family of bench/coverage.py ---------------------------------------------------------------

# LLaVA (SigLIP tower, Qwen2 language model: _is_all_true, masked_scatter_backward) and SmolVLM (bucketize as well):
# the cheapest models that run the three ops
SAMPLE = ["llava-siglip-qwen2", "smolvlm"]


@pytest.fixture(scope="module")
def coverage():
    pytest.importorskip("transformers")
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "coverage.py")
    spec = importlib.util.spec_from_file_location("roofline_bench_coverage_vlm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def vlm_runs(coverage):
    return {name: coverage.run_model("vlm", name, quick=True) for name in SAMPLE}


def test_vlm_family_in_the_zoo(coverage):
    pytest.importorskip("torchvision")  # the zoo lists torchvision's models
    assert all(("vlm", name) in coverage.zoo() for name in SAMPLE)
    assert coverage._modes("vlm") == ("infer", "frozen", "train")
    assert not set(coverage.VLM_SKIPPED) & set(coverage.VLM)


@pytest.mark.parametrize("name", SAMPLE)
def test_vlm_fully_covered_and_equal_to_flop_counter(vlm_runs, name):
    res = vlm_runs[name]
    assert "failed" not in res, res.get("failed")
    for mode in ("infer", "frozen", "train"):
        d = res[mode]
        assert d["unknown"] == {} and d["errors"] == {}, (mode, d["unknown"], d["errors"])
        assert d["fcm_mismatch"] == {}, (mode, d["fcm_mismatch"])
        assert d["matrix_flops"] > 0
    # a frozen vision tower computes no weight gradients for it: less work than the full fine-tune
    assert res["frozen"]["matrix_flops"] < res["train"]["matrix_flops"]
    assert res["covered"]
