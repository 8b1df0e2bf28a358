"""Formulas for the ops the OpInfo sweep (bench/opinfo.py) and the new model families found without one: shifts,
special functions, logaddexp, gated activations, pixel shuffles, cumulative max, padding backward, segment reductions,
distances, sampling grids, CTC, sequence packing, fake quantization, prims, sparse products and linear algebra (the
standard LAPACK counts, roofline/_counting/_formulas.py). Every expected count is arithmetic written in the row's
comment: fp32 = 4 bytes, int64 = 8, int32 = 4, bool = 1.
"""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import roofline  # noqa: E402

g = torch.Generator().manual_seed(0)


def rnd(*shape):
    return torch.randn(*shape, generator=g)


X = rnd(4, 10)  # 40 elements, 160 B
X2 = rnd(4, 10)
I32 = torch.randint(0, 100, (4, 10), generator=g, dtype=torch.int32)
SH = torch.randint(0, 4, (4, 10), generator=g, dtype=torch.int32)
M88 = rnd(8, 8)
SPD = M88 @ M88.T + 8 * torch.eye(8)  # symmetric positive definite
A64 = rnd(6, 4)
B83 = rnd(8, 3)

# (id, callable, op overload name, (matrix, vector, special, bytes_read, bytes_written))
CASES = [
    # 40 elements: max, subtract, add (3) + exp, log1p (2) each; reads 2 x 160, writes 160
    ("logaddexp", lambda: torch.logaddexp(X, X2), "aten.logaddexp.default", (0, 120, 80, 320, 160)),
    # one shift per element; int32 operands 2 x 160 read, 160 written
    ("bitwise_left_shift", lambda: torch.bitwise_left_shift(I32, SH), "aten.bitwise_left_shift.Tensor",
     (0, 40, 0, 320, 160)),
    # result (4, 5) = 20 elements, a * sigmoid(b): 3 FLOPs + 1 exp each; reads 160, writes 80
    ("glu", lambda: F.glu(X, dim=-1), "aten.glu.default", (0, 60, 20, 160, 80)),
    # per grad_output element (20): 6 FLOPs + 1 exp; reads grad_output 80 + self 160, writes grad_input 160
    ("glu_backward", lambda: torch.ops.aten.glu_backward(rnd(4, 5), X, -1), "aten.glu_backward.default",
     (0, 120, 20, 240, 160)),
    # one comparison per element; writes values 160 + int64 indices 320
    ("cummax", lambda: torch.cummax(X, dim=1), "aten.cummax.default", (0, 40, 0, 160, 480)),
    # one special function per element
    ("special_bessel_j0", lambda: torch.special.bessel_j0(X), "aten.special_bessel_j0.default",
     (0, 0, 40, 160, 160)),
    ("polygamma", lambda: torch.polygamma(1, X), "aten.polygamma.default", (0, 0, 40, 160, 160)),
    # x*x + y*y (3) and a square root per element
    ("hypot", lambda: torch.hypot(X, X2), "aten.hypot.default", (0, 120, 40, 320, 160)),
    # grad_output (1, 1, 6, 6) = 36 elements each added once into grad_input (1, 1, 4, 4): reads 144 (self: its shape
    # only), writes 64
    ("reflection_pad2d_backward", lambda: torch.ops.aten.reflection_pad2d_backward(rnd(1, 1, 6, 6), rnd(1, 1, 4, 4),
                                                                                   [1, 1, 1, 1]),
     "aten.reflection_pad2d_backward.default", (0, 36, 0, 144, 64)),
    # 6 data elements summed into 2 segments: 6 adds; reads data 24 + int64 lengths 16, writes 8
    ("segment_reduce", lambda: torch.segment_reduce(rnd(6), "sum", lengths=torch.tensor([2, 4])),
     "aten.segment_reduce.default", (0, 6, 0, 40, 8)),
    # 5 x 4 = 20 pairs of 3 features: 3 FLOPs per pair and feature (180), a root per pair (20); reads (15 + 12) x 4,
    # writes 20 x 4
    ("cdist p=2", lambda: torch.cdist(rnd(5, 3), rnd(4, 3)), "aten._cdist_forward.default",
     (0, 180, 20, 108, 80)),
    # 9 output points x 2 channels = 18 elements: 9 FLOPs each (bilinear), 4 per point for the coordinates (36);
    # reads the grid 72 + min(input 128, 4 taps x 18 x 4 = 288) = 200, writes 72
    ("grid_sampler_2d bilinear", lambda: F.grid_sample(rnd(1, 2, 4, 4), rnd(1, 3, 3, 2), align_corners=False),
     "aten.grid_sampler_2d.default", (0, 9 * 18 + 36, 0, 200, 72)),
    # T = 5, N = 1, C = 4, S = 2: log_alpha (1, 5, 2 * 2 + 1) = 25 lattice points, 8 FLOPs + 4 special each;
    # reads log_probs 80 + targets 16, writes the loss 4 + log_alpha 100
    ("_ctc_loss", lambda: torch.ops.aten._ctc_loss(rnd(5, 1, 4).log_softmax(-1), torch.tensor([[1, 2]]), [5], [2]),
     "aten._ctc_loss.default", (0, 200, 100, 96, 104)),
    # lengths 4 and 2 of a (4, 2, 3) batch: 6 rows of 3 packed (72 B read and written), lengths read (16), batch
    # sizes (4 int64, 32) written
    ("_pack_padded_sequence", lambda: torch.ops.aten._pack_padded_sequence(rnd(4, 2, 3), torch.tensor([4, 2]), False),
     "aten._pack_padded_sequence.default", (0, 0, 0, 88, 104)),
    # x / scale + zero point, round, clamp, back: 7 per element; writes the result 160 and the bool mask 40
    ("fake_quantize_per_tensor_affine", lambda: torch.fake_quantize_per_tensor_affine(X, 0.1, 0, 0, 255),
     "aten.fake_quantize_per_tensor_affine_cachemask.default", (0, 280, 0, 160, 200)),
    # 7 adds over the 8 diagonal elements; reads the diagonal (32), writes 4
    ("trace", lambda: torch.trace(M88), "aten.trace.default", (0, 7, 0, 32, 4)),
    # LAPACK Working Note 41 and Golub & Van Loan, n = 8 (n^3 = 512):
    # Cholesky n^3 / 3 = 170 (integer); writes L 256 + int32 info 4
    ("cholesky", lambda: torch.linalg.cholesky(SPD), "aten.linalg_cholesky_ex.default", (170, 0, 0, 256, 260)),
    # inverse: LU 2n^3/3 + getri 4n^3/3 = 2 n^3 = 1024
    ("inv", lambda: torch.linalg.inv(SPD), "aten.linalg_inv_ex.default", (1024, 0, 0, 256, 260)),
    # solve with k = 3 right-hand sides: 2 n^3 / 3 (341) + 2 n^2 k (384) = 725; reads A 256 + B 96; writes the result
    # 96, LU 256, int32 pivots 32, info 4
    ("solve", lambda: torch.linalg.solve(SPD, B83), "aten._linalg_solve_ex.default", (725, 0, 0, 352, 388)),
    # symmetric eigendecomposition with vectors 9 n^3 = 4608; writes values 32 + vectors 256
    ("eigh", lambda: torch.linalg.eigh(SPD), "aten._linalg_eigh.default", (4608, 0, 0, 256, 288)),
    # eigenvalues only 4 n^3 / 3 = 682 (eigvalsh itself asks for the vectors too under a dispatch mode, where its
    # input counts as a tensor subclass: the call here asks for none)
    ("eigh without vectors", lambda: torch.ops.aten._linalg_eigh(SPD, "L", False), "aten._linalg_eigh.default", (682, 0, 0, 256, 32)),
    # thin SVD of 6 x 4: 14 m n^2 + 8 n^3 = 14 * 6 * 16 + 8 * 64 = 1856; writes U 96, S 16, Vh 64
    ("svd thin", lambda: torch.linalg.svd(A64, full_matrices=False), "aten._linalg_svd.default",
     (1856, 0, 0, 96, 176)),
    # singular values only: 4 m n^2 - 4 n^3 / 3 = 384 - 85 = 299; writes S 16
    ("svd without vectors", lambda: torch.ops.aten._linalg_svd(A64, False, False), "aten._linalg_svd.default", (299, 0, 0, 96, 16)),
    # QR, reduced: geqrf 2 m n^2 - 2 n^3 / 3 = 192 - 42 = 150, forming Q as much again: 300; writes Q 96 + R 64
    ("qr", lambda: torch.linalg.qr(A64), "aten.linalg_qr.default", (300, 0, 0, 96, 160)),
    # grid_sampler_2d_backward, bilinear, both gradients: 9 points x 2 channels = 18 grad elements, 8 FLOPs each for
    # the input's gradient and 8 for the grid's (288), 4 per point for the coordinates (36); reads grad 72 + input 128
    # + grid 72, writes grad_input 128 + grad_grid 72
    ("grid_sampler_2d_backward", lambda: torch.ops.aten.grid_sampler_2d_backward(
        rnd(1, 2, 3, 3), rnd(1, 2, 4, 4), rnd(1, 3, 3, 2), 0, 0, False, [True, True]),
     "aten.grid_sampler_2d_backward.default", (0, 324, 0, 272, 200)),
    # 16 grad_output elements added into a (1, 2, 6) grad_input: reads 64 (self: its shape), writes 48
    ("reflection_pad1d_backward", lambda: torch.ops.aten.reflection_pad1d_backward(rnd(1, 2, 8), rnd(1, 2, 6), [1, 1]),
     "aten.reflection_pad1d_backward.default", (0, 16, 0, 64, 48)),
    # theta (1, 2, 3) over a 4 x 5 grid: 20 points x 2 coordinates = 40 results, each a row of theta times (x, y, 1):
    # 6 FLOPs; reads theta 24, writes 160
    ("affine_grid_generator", lambda: torch.ops.aten.affine_grid_generator(rnd(1, 2, 3), [1, 1, 4, 5], False),
     "aten.affine_grid_generator.default", (0, 240, 0, 24, 160)),
    # CTC backward, T = 5, N = 1, C = 4, S = 2: the beta lattice like alpha (25 points: 8 FLOPs + 4 special), their
    # combination (2 per point) and per gradient element (20) an exp and 3 FLOPs: 200 + 50 + 60 FLOPs, 100 + 20
    # special; reads grad 4, log_probs 80, targets 16, the loss 4, log_alpha 100; writes the gradient 80
    ("_ctc_loss_backward", lambda: torch.ops.aten._ctc_loss_backward(
        torch.ones(1), rnd(5, 1, 4), torch.tensor([[1, 2]]), [5], [2], rnd(1), rnd(1, 5, 5), 0),
     "aten._ctc_loss_backward.default", (0, 310, 120, 204, 80)),
    # 3-d: theta (1, 3, 4) over a 2 x 2 x 3 grid: 12 points x 3 coordinates = 36 results, 2 x 4 FLOPs each; reads
    # theta 48, writes 144
    ("affine_grid_generator 3-d", lambda: torch.ops.aten.affine_grid_generator(rnd(1, 3, 4), [1, 1, 2, 2, 3], False),
     "aten.affine_grid_generator.default", (0, 288, 0, 48, 144)),
    # prims: a cast is a copy (reads 160, writes fp16 80); iota writes 10 int64
    ("prims.convert_element_type", lambda: torch.ops.prims.convert_element_type(X, torch.float16),
     "prims.convert_element_type.default", (0, 0, 0, 160, 80)),
    ("prims.iota", lambda: torch.ops.prims.iota(10, start=0, step=1, dtype=torch.int64, device="cpu",
                                                requires_grad=False), "prims.iota.default", (0, 0, 0, 0, 80)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_cost(case):
    _, fn, op, expected = case
    with roofline.measure() as r:
        fn()
    rows = r.by_op()
    assert op in rows, f"{op} not recorded; saw {list(rows)}"
    t = rows[op]
    got = (t["matrix_flops"], t["vector_flops"], t["special_ops"], t["bytes_read"], t["bytes_written"])
    assert got == expected
    assert r.unknown_ops == {} and r.errors == {}


def test_sparse_times_dense():
    """A COO matrix (4 x 6, 3 stored values) times a dense 6 x 5 matrix: one multiply-add per stored value and output
    column, 2 * 3 * 5 = 30 matrix FLOPs; reads the values (3 x 4 B) and indices (2 x 3 int64 = 48 B) and the dense
    operand (120 B)."""
    s = torch.sparse_coo_tensor(torch.tensor([[0, 1, 3], [2, 0, 5]]), torch.tensor([1.0, 2.0, 3.0]), (4, 6))
    d = rnd(6, 5)
    with roofline.measure() as r:
        torch.sparse.mm(s, d)
    assert r.unknown_ops == {} and r.errors == {}
    assert r.matrix_flops == 30
    assert r.bytes_read >= 12 + 48 + 120


def test_pixel_shuffle_moves_bytes_only():
    """pixel_shuffle (1, 8, 3, 3) -> (1, 2, 6, 6): 72 elements moved, no arithmetic: 288 B read and written."""
    x = rnd(1, 8, 3, 3)
    with roofline.measure() as r:
        F.pixel_shuffle(x, 2)
    assert r.unknown_ops == {} and r.errors == {}
    assert (r.matrix_flops, r.vector_flops, r.special_ops) == (0, 0, 0)
    assert r.bytes_read == 288 and r.bytes_written == 288


def test_coalesce_sorts_and_merges():
    """_coalesce of 4 stored values, two at the same index: sort the 4 indices (4 x ceil(log2 4) = 8 comparisons) and
    add the duplicates (one add per value: 4): 12 FLOPs; reads the values (16 B) and int64 indices (2 x 4 x 8 = 64),
    writes 3 values (12) and their indices (48)."""
    s = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1, 2], [1, 1, 0, 2]]), torch.tensor([1.0, 2.0, 3.0, 4.0]), (3, 3))
    with roofline.measure() as r:
        torch.ops.aten._coalesce(s)
    row = r.by_op()["aten._coalesce.default"]
    assert (row["vector_flops"], row["bytes_read"], row["bytes_written"]) == (12, 80, 60)
    assert r.unknown_ops == {} and r.errors == {}


def test_fused_linear_cross_entropy():
    """F.linear_cross_entropy's chunked kernel, N = 4 rows, D = 8 features, V = 6 classes, no bias, the gradients
    computed in the forward for the input and the weight: logits 2 N V D = 384, the two gradient products 2 x 384
    (matrix 1152); per logit (24) the log-sum-exp (3) and the softmax gradient (2): 120 vector FLOPs, 24 exp."""
    x = rnd(4, 8).requires_grad_()
    w = rnd(6, 8).requires_grad_()
    t = torch.tensor([0, 3, 5, 1])
    opts = pytest.importorskip("torch.nn.modules.linear_cross_entropy_options").LinearCrossEntropyOptions
    with roofline.measure() as r:
        torch.nn.functional.linear_cross_entropy(x, w, t, options=opts(batch_chunk_size=2))
    rows = {k: v for k, v in r.by_op().items() if "linear_cross_entropy" in k}
    assert len(rows) == 1, list(r.by_op())
    row = next(iter(rows.values()))
    assert (row["matrix_flops"], row["vector_flops"], row["special_ops"]) == (1152, 120, 24)
    assert r.unknown_ops == {} and r.errors == {}


# ---- more of the formulas, each row's arithmetic in its comment -------------------------------------------------------
A44 = rnd(4, 4) + 4 * torch.eye(4)  # well conditioned
SPD4 = A44 @ A44.T
L4 = torch.linalg.cholesky(SPD4)
U4 = torch.triu(A44)
B42 = rnd(4, 2)
QR_A, QR_TAU = torch.geqrf(A64)
LU4, PIV4 = torch.linalg.lu_factor(A44)
POS = X.abs() + 1  # mvlgamma of order 2 needs x > 0.5
S_COO = torch.sparse_coo_tensor(torch.tensor([[0, 1, 3], [2, 0, 5]]), torch.tensor([1.0, 2.0, 3.0]), (4, 6))

MORE = [
    # n = 4 (n^3 = 64). LU: m n^2 - n^3 / 3 = 64 - 21 = 43; writes LU 64, int32 pivots 16, info 4
    ("lu_factor", lambda: torch.linalg.lu_factor_ex(A44), "aten.linalg_lu_factor_ex.default", (43, 0, 0, 64, 84)),
    # the same factorization, unpacked into P, L, U (3 x 64)
    ("lu", lambda: torch.linalg.lu(A44), "aten.linalg_lu.default", (43, 0, 0, 64, 192)),
    # LDL^T like Cholesky: n^3 / 3 = 21
    ("ldl_factor", lambda: torch.linalg.ldl_factor_ex(SPD4), "aten.linalg_ldl_factor_ex.default", (21, 0, 0, 64, 84)),
    # geqrf of 6 x 4: 2 m n^2 - 2 n^3 / 3 = 192 - 42 = 150; writes the factor 96 and tau 16
    ("geqrf", lambda: torch.geqrf(A64), "aten.geqrf.default", (150, 0, 0, 96, 112)),
    # Q of 6 x 4 from k = 4 reflectors: 4 m n k - 2 (m + n) k^2 + 4 k^3 / 3 = 384 - 320 + 85 = 149
    ("householder_product", lambda: torch.linalg.householder_product(QR_A, QR_TAU),
     "aten.linalg_householder_product.default", (149, 0, 0, 112, 96)),
    # Q (k = 4) applied from the left to C 6 x 3: 4 m n k - 2 n k^2 = 288 - 96 = 192; reads 96 + 16 + 72
    ("ormqr", lambda: torch.ormqr(QR_A, QR_TAU, rnd(6, 3)), "aten.ormqr.default", (192, 0, 0, 184, 72)),
    # general eigendecomposition with vectors: 25 n^3 = 1600; writes complex64 values 32 and vectors 128
    ("eig", lambda: torch.linalg.eig(A44), "aten.linalg_eig.default", (1600, 0, 0, 64, 160)),
    # 6 products of the degree-18 Taylor scheme: 12 n^3 = 768
    ("matrix_exp", lambda: torch.linalg.matrix_exp(A44 / 10), "aten.linalg_matrix_exp.default", (768, 0, 0, 64, 64)),
    # triangular solves with k = 2: n^2 k = 32
    ("solve_triangular", lambda: torch.linalg.solve_triangular(U4, B42, upper=True),
     "aten.linalg_solve_triangular.default", (32, 0, 0, 96, 32)),
    ("triangular_solve", lambda: torch.triangular_solve(B42, U4), "aten.triangular_solve.default",
     (32, 0, 0, 96, 96)),  # writes the solution 32 and the coefficient's copy 64
    # two triangular solves: 2 n^2 k = 64
    ("cholesky_solve", lambda: torch.cholesky_solve(B42, L4), "aten.cholesky_solve.default", (64, 0, 0, 96, 32)),
    ("lu_solve", lambda: torch.linalg.lu_solve(LU4, PIV4, B42), "aten.linalg_lu_solve.default",
     (64, 0, 0, 112, 32)),  # reads LU 64, pivots 16, B 32
    # the inverse from the Cholesky factor (potri): 2 n^3 / 3 = 42
    ("cholesky_inverse", lambda: torch.cholesky_inverse(L4), "aten.cholesky_inverse.default", (42, 0, 0, 64, 64)),
    # determinant from LU (43); writes det 4, LU 64, pivots 16
    ("det", lambda: torch.linalg.det(A44), "aten._linalg_det.default", (43, 0, 0, 64, 84)),
    # log-determinant: LU (43) and a log and an add per diagonal element (2 n = 8); writes sign, logabsdet, LU, pivots
    ("slogdet", lambda: torch.linalg.slogdet(A44), "aten._linalg_slogdet.default", (51, 0, 0, 64, 88)),
    # mvlgamma of order 2 over 40 elements: 2 p = 4 FLOPs and p = 2 lgamma each
    ("mvlgamma", lambda: torch.mvlgamma(POS, 2), "aten.mvlgamma.default", (0, 160, 80, 160, 160)),
    # pdist of 5 rows of 3: 10 pairs x 3 features x 3 FLOPs = 90, a root per pair; reads 60, writes 40
    ("pdist", lambda: torch.pdist(rnd(5, 3)), "aten._pdist_forward.default", (0, 90, 10, 60, 40)),
    # multilabel margin: 2 samples x C^2 = 16 pairs x 4 FLOPs; reads x 32 + int64 targets 64; writes the mean 4 and
    # is_target (2, 4) 32
    ("multilabel_margin_loss", lambda: F.multilabel_margin_loss(rnd(2, 4), torch.tensor([[1, 2, -1, 0],
                                                                                         [0, -1, 0, 0]])),
     "aten.multilabel_margin_loss_forward.default", (0, 128, 0, 96, 36)),
    # conv_tbc: T 5 (padding 1, kernel 3: 5 outputs), B 2, C_in 3, C_out 4: 40 outputs x 2 x 3 x 3 = 720, a bias add
    # each; reads 120 + 144 + 16, writes 160
    ("conv_tbc", lambda: torch.conv_tbc(rnd(5, 2, 3), rnd(3, 3, 4), rnd(4), 1), "aten.conv_tbc.default",
     (720, 40, 0, 280, 160)),
    # addmm + ReLU: 2 x 8 x 4 x 16 = 1024, the bias add and the ReLU per result (2 x 32)
    ("_addmm_activation", lambda: torch.ops.aten._addmm_activation(rnd(4), rnd(8, 16), rnd(16, 4)),
     "aten._addmm_activation.default", (1024, 64, 0, (4 + 128 + 64) * 4, 128)),
    # result (2, 4) = sum over 3 coefficients of coefficient x input row: 2 x 6 coefficients x 4 elements = 48
    ("_compute_linear_combination", lambda: torch.ops.aten._compute_linear_combination(rnd(3, 4), rnd(2, 3)),
     "aten._compute_linear_combination.default", (0, 48, 0, 72, 32)),
    # one comparison per element, nothing written (a Python bool)
    ("equal", lambda: torch.equal(X, X2), "aten.equal.default", (0, 40, 0, 320, 0)),
    # |a - b| <= atol + rtol |b|: 6 FLOPs per element, nothing written (a Python bool)
    ("allclose", lambda: torch.allclose(X, X2), "aten.allclose.default", (0, 240, 0, 320, 0)),
    # 10 values into 4 bins: 4 FLOPs each; writes the histogram 16 and 5 edges 20
    ("histogram", lambda: torch.histogram(rnd(10), bins=4), "aten.histogram.bin_ct", (0, 40, 0, 40, 36)),
    # 3 stored values summed along dimension 1 (rows 0, 1, 3 have one each); reads values 12 + int64 indices 48,
    # writes a sparse vector of 3 values (12) and their int64 indices (1 x 3 x 8 = 24)
    ("sparse sum", lambda: torch.ops.aten._sparse_sum.dim(S_COO, [1]), "aten._sparse_sum.dim", (0, 3, 0, 60, 36)),
    # trilinear (1 x 2 x 4 x 4 input, 2 x 2 x 2 output points): 8 points x 1 channel x 21 + 3 coordinates x 2 per
    # point (48); reads the grid 96 + min(input 128, 8 taps x 8 x 4 = 256), writes 32
    ("grid_sampler_3d", lambda: F.grid_sample(rnd(1, 1, 2, 4, 4), rnd(1, 2, 2, 2, 3), align_corners=False),
     "aten.grid_sampler_3d.default", (0, 216, 0, 224, 32)),
    # sin(pi x) / (pi x): 2 FLOPs + 1 sin
    ("sinc", lambda: torch.sinc(X), "aten.sinc.default", (0, 80, 40, 160, 160)),
    # x * 2**e: 1 FLOP + 1 exp2; reads x 160 + int32 e 160
    ("ldexp", lambda: torch.ldexp(X, SH), "aten.ldexp.Tensor", (0, 40, 40, 320, 160)),
    # abs * (cos, sin): 2 multiplies, 2 special; writes complex64 40 x 8
    ("polar", lambda: torch.polar(X.abs(), X2), "aten.polar.default", (0, 80, 80, 320, 320)),
    # -x log x: 2 FLOPs + log
    ("special_entr", lambda: torch.special.entr(X), "aten.special_entr.default", (0, 80, 40, 160, 160)),
    ("softshrink", lambda: F.softshrink(X), "aten.softshrink.default", (0, 120, 0, 160, 160)),
    ("hardshrink", lambda: F.hardshrink(X), "aten.hardshrink.default", (0, 80, 0, 160, 160)),
    # x > 0 ? x : w x: 2 per element; reads x 160 + the weight 4
    ("prelu", lambda: F.prelu(X, torch.tensor([0.25])), "aten._prelu_kernel.default", (0, 80, 0, 164, 160)),
    # 4 vectors of 3: 3 FLOPs per component, 12 components
    ("linalg_cross", lambda: torch.linalg.cross(rnd(4, 3), rnd(4, 3)), "aten.linalg_cross.default",
     (0, 36, 0, 96, 48)),
    # |x - y|^p summed over 40 elements: 3 FLOPs + 1 pow each; writes a scalar
    ("dist", lambda: torch.dist(X, X2, 3), "aten.dist.default", (0, 120, 40, 320, 4)),
    # log(1 + exp(-y x)) summed: 4 FLOPs + 2 special per element
    ("soft_margin_loss", lambda: F.soft_margin_loss(X, X2.sign()), "aten.soft_margin_loss.default",
     (0, 160, 80, 320, 4)),
    # per input element (2 x 4) 4 FLOPs; reads x 32 + int64 targets 16
    ("multi_margin_loss", lambda: F.multi_margin_loss(rnd(2, 4), torch.tensor([1, 3])),
     "aten.multi_margin_loss.default", (0, 32, 0, 48, 4)),
    # 8 windows of 2 taps: 16 adds; reads 64, writes 32 (the out= variant: F.avg_pool1d decomposes into avg_pool2d)
    ("avg_pool1d.out", lambda: torch.ops.aten.avg_pool1d.out(rnd(1, 2, 8), [2], out=torch.empty(1, 2, 4)),
     "aten.avg_pool1d.out", (0, 16, 0, 64, 32)),
    # 4 x 4 outputs, 2 x 2 windows: 64 comparisons; reads x 256 + the random samples 8, writes 64 + int64 indices 128
    ("fractional_max_pool2d", lambda: F.fractional_max_pool2d(rnd(1, 1, 8, 8), 2, output_size=4,
                                                              _random_samples=torch.rand(1, 1, 2)),
     "aten.fractional_max_pool2d.default", (0, 64, 0, 264, 192)),
    # one comparison per input element (64); writes 8 values 32 + int64 indices 64
    ("adaptive_max_pool3d", lambda: F.adaptive_max_pool3d(rnd(1, 1, 4, 4, 4), 2),
     "aten.adaptive_max_pool3d.default", (0, 64, 0, 256, 96)),
    # a draw per element; reads the rates
    ("poisson", lambda: torch.poisson(X.abs()), "aten.poisson.default", (0, 0, 40, 160, 160)),
    # the 6 lower-triangle index pairs of a 3 x 3 matrix: 2 x 6 int64 written
    ("tril_indices", lambda: torch.tril_indices(3, 3), "aten.tril_indices.default", (0, 0, 0, 0, 96)),
    # two tensors of 40: one sin each
    ("_foreach_sin", lambda: torch._foreach_sin([X, X2]), "aten._foreach_sin.default", (0, 0, 80, 320, 320)),
]


@pytest.mark.parametrize("case", MORE, ids=[c[0] for c in MORE])
def test_more_op_costs(case):
    test_op_cost(case)
