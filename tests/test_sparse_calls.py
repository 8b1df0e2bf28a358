"""Dense ops called with a sparse argument (the C path cannot describe a tensor without strides): mm, bmm-like
products, mv and sum are counted from the stored values; any other such call keeps its error record (listed in
Report.errors, counts 0), never a count from the dense shape. Expected figures are arithmetic written here and
torch's FlopCounterMode."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402
from roofline import _core  # noqa: E402
from roofline._capture._dtypes import TORCH_DTYPES  # noqa: E402

M, K, N = 6, 5, 4


@pytest.fixture(autouse=True)
def _quiet():
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


def sparse_csr():
    """An M x K CSR matrix with 7 stored values."""
    d = torch.zeros(M, K)
    for i, j in [(0, 0), (0, 3), (1, 1), (2, 4), (3, 2), (5, 0), (5, 4)]:
        d[i, j] = float(i + j + 1)
    return d.to_sparse_csr()


def by_op(r):
    return {name.rsplit(".", 1)[0] if name.count(".") > 1 else name: row for name, row in r.by_op().items()}


def test_products_and_sums_with_a_sparse_operand_are_counted_from_the_stored_values():
    a = sparse_csr()
    assert a.values().numel() == 7
    dense = torch.randn(K, N)
    left = torch.randn(N, M)  # dense (N x M) times sparse (M x K)
    with roofline.measure() as r:
        torch.mm(a, dense)
        torch.mm(left, a)
        torch.mv(a, torch.randn(K))
        a.sum()
    assert r.errors == {} and r.unknown_ops == {}
    ops = by_op(r)
    # sparse x dense: a multiply-add per stored value and column: 2 * 7 * N; dense x sparse: per stored value and
    # row of the dense operand: 2 * 7 * N (its rows)
    assert ops["aten.mm"]["matrix_flops"] == 2 * 7 * N + 2 * 7 * N
    assert ops["aten.mv"]["vector_flops"] == 2 * 7 and ops["aten.mv"]["matrix_flops"] == 0
    assert ops["aten.sum"]["vector_flops"] == 7
    # bytes: a CSR matrix stores its values (7 floats), its row offsets (M + 1 int64) and column indices (7 int64)
    csr = 7 * 4 + (M + 1) * 8 + 7 * 8
    assert ops["aten.sum"]["bytes_read"] == csr and ops["aten.sum"]["bytes_written"] == 4
    assert ops["aten.mm"]["bytes_read"] == 2 * csr + (K * N + N * M) * 4
    assert ops["aten.mm"]["bytes_written"] == (M * N + N * K) * 4
    # the FlopCounterMode-compatible figures are FlopCounterMode's own (it counts the dense shapes)
    with FlopCounterMode(display=False) as fcm:
        torch.mm(a, dense)
        torch.mm(left, a)
    assert fcm.get_total_flops() == 2 * M * K * N + 2 * N * M * K
    assert r.flop_counter_compatible()["Global"][torch.ops.aten.mm] == fcm.get_total_flops()


def test_sampled_addmm_forward_and_backward_match_flop_counter_mode():
    mask = sparse_csr().requires_grad_()
    m1 = torch.randn(M, 3, requires_grad=True)
    m2 = torch.randn(3, K, requires_grad=True)

    def step():
        out = torch.sparse.sampled_addmm(mask, m1, m2, beta=0.5, alpha=2.0)
        torch.autograd.grad(out.values().sum() if out.layout != torch.strided else out.sum(), [m1, m2])

    with roofline.measure() as r:
        step()
    with FlopCounterMode(display=False) as fcm:
        step()
    assert r.errors == {} and r.unknown_ops == {}
    # the product only at the 7 stored positions: 2 * 3 per position (inner size 3)
    assert by_op(r)["aten.sparse_sampled_addmm"]["matrix_flops"] == 2 * 3 * 7
    assert sum(r.flop_counter_compatible()["Global"].values()) == fcm.get_total_flops()


def test_a_call_not_counted_here_keeps_its_error_record():
    a, b = sparse_csr(), sparse_csr().t().to_sparse_csr()
    with roofline.measure() as r:
        torch.mm(a, b)  # both sparse: the work depends on where the stored values meet
    assert any("could not be described" in why for _, why in r.errors.values()), r.errors
    assert r.matrix_flops == 0  # no count guessed from the dense shapes


def test_the_recorders_hook_is_checked():
    rec = _core.Recorder(torch.Tensor, TORCH_DTYPES)
    with pytest.raises(TypeError, match="callable or None"):
        rec.undescribed = 3
    idx = rec.add_op(_core.K_COPY, name="aten.copy_.default")
    a = sparse_csr()
    calls = []
    rec.undescribed = lambda *c: calls.append(c) or None
    rec.record(idx, 0, 0, (a,), None, a)  # None: the error record stays
    assert len(calls) == 1 and calls[0][0] == idx and len(rec) == 1
    rec.undescribed = lambda *c: (1, 2, 3, 4, 5, 6)
    with pytest.raises(TypeError, match="tuple of 7 ints"):
        rec.record(idx, 0, 0, (a,), None, a)
    rec.undescribed = lambda *c: (1, 2, 3, 4, 5, -6, 0)
    with pytest.raises(ValueError, match="flop_counter_flops"):
        rec.record(idx, 0, 0, (a,), None, a)
    rec.undescribed = lambda *c: 1 / 0
    with pytest.raises(ZeroDivisionError):
        rec.record(idx, 0, 0, (a,), None, a)
    rec.undescribed = lambda *c: (1, 2, 3, 4, 5, 6, 0)
    rec.record(idx, 0, 0, (a,), None, a)
    assert len(rec) == 2  # the failed calls left no record
    rec.undescribed = None
    assert rec.undescribed is None
