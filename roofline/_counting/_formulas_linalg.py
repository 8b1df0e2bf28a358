"""Formulas of linear algebra (the standard LAPACK operation counts) and of distances (cdist, pdist).
"""

from __future__ import annotations

import math

from roofline._counting._formula_base import _counts, _numel, _read, _written


# ---- linear algebra: the standard LAPACK operation counts ---------------------------------------------------------
# The counts of LAPACK Working Note 41 (the real-arithmetic counts of the reference algorithms, multiply and add each
# one FLOP, leading terms) and of Golub & Van Loan, "Matrix Computations" (4th ed., tables 5.5.1 and 8.6.1) for the
# iterative decompositions, whose real count depends on how fast the iteration converges: those are estimates, and
# the audit table (roofline/_counting/_decisions.py) marks every op counted here as one. Per matrix of a batch; complex
# matrices 4x (a complex multiply-add is 8 real FLOPs, a real one 2). Counted as matrix FLOPs: the blocked algorithms
# spend their time in matrix products (BLAS 3). A factorization's result is written once, its input read once.
#   LU (getrf) m x n, m >= n: m n^2 - n^3 / 3 (square: 2 n^3 / 3)       Cholesky (potrf): n^3 / 3
#   QR (geqrf) m x n, m >= n: 2 m n^2 - 2 n^3 / 3                       forming Q (orgqr), k reflectors: 4 m n k -
#   2 (m + n) k^2 + 4 k^3 / 3; applying it (ormqr) to m x n, left: 4 m n k - 2 n k^2
#   triangular solve with k right-hand sides (trsm): n^2 k              LU or Cholesky solve (two of them): 2 n^2 k
#   inverse from LU (getri): 4 n^3 / 3, from Cholesky (potri): 2 n^3 / 3
#   symmetric eigenvalues (syevd): 4 n^3 / 3, with eigenvectors 9 n^3   general (geev): 10 n^3, with vectors 25 n^3
#   SVD m x n (m >= n; else transposed): values 4 m n^2 - 4 n^3 / 3; thin U, S, V: 14 m n^2 + 8 n^3;
#   full U, S, V: 4 m^2 n + 8 m n^2 + 9 n^3


def _mat(t):
    """(matrices in the batch, rows, columns, complex factor) of a (..., m, n) tensor."""
    if len(t.shape) < 2:
        raise ValueError(f"a matrix argument needs 2 dimensions, got shape {tuple(t.shape)}")
    m, n = int(t.shape[-2]), int(t.shape[-1])
    batch = _numel(t) // (m * n) if m * n else math.prod(int(d) for d in t.shape[:-2])
    return batch, m, n, (4 if "complex" in str(t.dtype) else 1)


def _rhs(b_t, left=True):
    """Columns of the right-hand side (k) of a solve with B (..., n, k), or rows when solving from the right."""
    if len(b_t.shape) == 1:
        return 1
    return int(b_t.shape[-1]) if left else int(b_t.shape[-2])


def _lu_flops(m, n):
    if m < n:
        m, n = n, m
    return m * n * n - n ** 3 // 3


def _qr_flops(m, n):
    if m < n:  # wide: the R factor is m x n, m reflectors
        return 2 * n * m * m - 2 * m ** 3 // 3
    return 2 * m * n * n - 2 * n ** 3 // 3


def _svd_flops(m, n, compute_uv=True, full=False):
    if m < n:
        m, n = n, m
    if not compute_uv:
        return 4 * m * n * n - 4 * n ** 3 // 3
    if full:
        return 4 * m * m * n + 8 * m * n * n + 9 * n ** 3
    return 14 * m * n * n + 8 * n ** 3


def _linalg(x, per_matrix, b, out, batch_of=None):
    """``per_matrix(m, n)`` real FLOPs for each matrix of ``x``'s batch (``batch_of``: the tensor whose leading
    dimensions give the batch, when it is broadcast), complex 4x; bytes by the compulsory rule."""
    batch, m, n, cf = _mat(x)
    if batch_of is not None and len(batch_of.shape) >= 2:
        batch = max(batch, math.prod(int(d) for d in batch_of.shape[:-2]))
    return _counts(matrix=batch * cf * per_matrix(m, n), read=_read(b), written=_written(out))


def _solve(b, out, a_name, b_name, factor, per_rhs, left_name=None):
    """A solve A X = B: ``factor(n)`` FLOPs to factor A (0 when given factored), then ``per_rhs`` n^2 per column of
    B."""
    a, rhs = b[a_name], b[b_name]
    left = True if left_name is None else bool(b.get(left_name, True))
    k = _rhs(rhs, left)
    return _linalg(a, lambda m, n: factor(n) + per_rhs * n * n * k, b, out, batch_of=rhs)


def _eig(b, out, symmetric, vectors):
    if symmetric:
        return _linalg(b.get("A", b.get("self")), lambda m, n: 9 * n ** 3 if vectors else 4 * n ** 3 // 3, b, out)
    return _linalg(b["self"], lambda m, n: 25 * n ** 3 if vectors else 10 * n ** 3, b, out)


def _svd(b, out):
    a = b.get("A", b.get("self"))
    uv = bool(b.get("compute_uv", True)) if "compute_uv" in b else True
    full = bool(b.get("full_matrices", False))
    return _linalg(a, lambda m, n: _svd_flops(m, n, uv, full), b, out)


def _lstsq(b, out):
    """Least squares by QR (the default drivers gelsy / gels): factor A (m x n), apply Q^T to the k columns of B
    (4 m n k - 2 n k^2 with n reflectors... taken as 4 m n k), one triangular solve (n^2 k)."""
    a, rhs = b["self"], b["b"]
    k = _rhs(rhs)
    return _linalg(a, lambda m, n: _qr_flops(m, n) + 4 * m * n * k + min(m, n) ** 2 * k, b, out, batch_of=rhs)


def _householder(b, out):
    """linalg_householder_product / orgqr: Q (m x n) from k reflectors: 4 m n k - 2 (m + n) k^2 + 4 k^3 / 3."""
    k = int(b["tau"].shape[-1])
    return _linalg(b["input"], lambda m, n: max(4 * m * n * k - 2 * (m + n) * k * k + 4 * k ** 3 // 3, 0), b, out)


def _ormqr(b, out):
    """ormqr(A, tau, C): Q (k reflectors of A) applied to C (m x n): 4 m n k - 2 n k^2 from the left, 4 m n k -
    2 m k^2 from the right."""
    k = int(b["input2"].shape[-1])
    left = bool(b.get("left", True))
    return _linalg(b["input3"], lambda m, n: max(4 * m * n * k - 2 * (n if left else m) * k * k, 0), b, out)


def _matrix_exp(b, out):
    """Scaling and squaring with a degree-18 Taylor polynomial (Bader, Blanes, Casas 2019, as torch implements it):
    at most 6 matrix products for the polynomial, plus the squarings, which depend on the matrix norm (values):
    counted as 6 products (12 n^3), a lower bound when the norm is large. An estimate."""
    return _linalg(b["self"], lambda m, n: 12 * n ** 3, b, out)


def _pinv(b, out):
    """Pseudo-inverse: an SVD with thin factors (an eigendecomposition, 9 n^3, when hermitian), then V diag(1/s) U^H:
    one product of (n x r) by (r x m), r = min(m, n): 2 m n r, and a scale per element of V (n r)."""
    if b.get("hermitian"):
        return _linalg(b["self"], lambda m, n: 9 * n ** 3 + 2 * n ** 3 + n * n, b, out)
    return _linalg(b["self"], lambda m, n: _svd_flops(m, n) + 2 * m * n * min(m, n) + n * min(m, n), b, out)


def _polar(b, out):
    """Polar decomposition A = U H from the thin SVD A = W S V^H: U = W V^H (2 m n^2), H = V S V^H (n^2 + 2 n^3)."""
    return _linalg(b["A"], lambda m, n: _svd_flops(m, n) + 2 * m * n * n + n * n + 2 * n ** 3, b, out)


def _matrix_sqrth(b, out):
    """Square root of a Hermitian matrix from its eigendecomposition: 9 n^3, then V diag(sqrt(w)) V^H: 2 n^3 + n^2."""
    return _linalg(b["self"], lambda m, n: 9 * n ** 3 + 2 * n ** 3 + n * n, b, out)


def _trace(b, out):
    """The sum of the diagonal: min(m, n) - 1 adds; reads the diagonal only."""
    x = b["self"]
    if len(x.shape) != 2:
        raise ValueError(f"trace of a {len(x.shape)}-d tensor")
    d = min(int(x.shape[0]), int(x.shape[1]))
    return _counts(vector=max(d - 1, 0), read=d * x.element_size(), written=_written(out))


def _mvlgamma(b, out):
    """The multivariate log-gamma of order p: sum of p lgamma values (x - j/2, j < p) and a constant: per element
    p special functions, p subtractions and p adds."""
    p = int(b["p"])
    n = _numel(b["self"])
    return _counts(vector=2 * p * n, special=p * n, read=_read(b), written=_written(out))


# ---- distances -------------------------------------------------------------------------------------------------------
# cdist: per pair of rows and feature a subtraction, an absolute value (or square) and an add: 3 FLOPs; a p-norm other
# than 1, 2 and infinity raises each difference to p (1 special per pair and feature); the root per pair (1 special,
# p not 1 or infinity).

def _pnorm_special(p, pairs, m):
    p = float(p)
    if p in (0.0, 1.0) or math.isinf(p):
        return 0
    return pairs + (0 if p == 2.0 else pairs * m)


def _cdist(b, out):
    x1, x2 = b["x1"], b["x2"]
    m = int(x1.shape[-1])
    pairs = _numel(out)
    return _counts(vector=3 * pairs * m, special=_pnorm_special(b["p"], pairs, m), read=_read(b),
                   written=_written(out))


def _cdist_backward(b, out):
    """Per pair and feature: the difference, its sign or ratio to the distance, the grad's scale and the add into the
    gradient: 4 FLOPs (p other than 1, 2, infinity: 1 special more for the power)."""
    x1 = b["x1"]
    m = int(x1.shape[-1])
    pairs = _numel(b["cdist"])
    p = float(b["p"])
    special = 0 if p in (1.0, 2.0) or math.isinf(p) else pairs * m
    return _counts(vector=4 * pairs * m, special=special, read=_read(b), written=_written(out))


def _pdist(b, out, backward=False):
    x = b["self"]
    m = int(x.shape[-1])
    pairs = _numel(out) if not backward else _numel(b["pdist"])
    if backward:
        return _counts(vector=4 * pairs * m, read=_read(b), written=_written(out))
    return _counts(vector=3 * pairs * m, special=_pnorm_special(b.get("p", 2.0), pairs, m), read=_read(b),
                   written=_written(out))


def _euclidean_dist(b, out):
    """The matrix-product form of the p = 2 distance: the rows' squared norms (2 per element of x1 and x2), the
    product of the (n, m + 2) augmented matrices (2 P R (M + 2), matrix FLOPs), a clamp and a root per pair."""
    x1, x2 = b["x1"], b["x2"]
    m = int(x1.shape[-1])
    pairs = _numel(out)
    return _counts(matrix=2 * pairs * (m + 2), vector=2 * (_numel(x1) + _numel(x2)) + pairs, special=pairs,
                   read=_read(b), written=_written(out))
