"""Counts of calls of dense ops that receive a sparse tensor.

An op counted by a C kind (``aten::mm``, ``aten::sum``, ...) describes its tensors by shape and strides; a sparse
tensor (COO, CSR, CSC, BSR, BSC) has no strides, so the C path cannot count the call (its record would carry
"an argument could not be described"). Such calls reach these ops from sparse code as often as from users: the
backward of ``torch.sparse.sampled_addmm`` multiplies a dense gradient by the sparse CSR input with ``aten::mm``,
and sums it with ``aten::sum``. :func:`counts` gives the counts of the ops below when one of their arguments is
sparse, from the stored values (what the sparse kernels compute with), and None for every other call, which then
keeps its error record (``Report.errors``): never a count from the dense shape, which would overstate the work by
the inverse of the density.

- ``mm``, ``bmm`` (A ``... x M x K`` times B ``... x K x N``, one of them sparse): one multiply-add per stored value
  of the sparse operand and column of B (A sparse: ``2 nnz(A) N``) or row of A (B sparse: ``2 nnz(B) M``) as matrix
  FLOPs; ``addmm`` and ``baddbmm`` add the bias, one vector FLOP per result element (as the dense ops' C kinds
  count). Both operands sparse: not counted here (the work depends on where the stored values meet). The
  FlopCounterMode-compatible figure is FlopCounterMode's own, from the shapes (``2 M K N``, per batch).
- ``mv`` (A sparse ``M x K``, a vector): ``2 nnz(A)`` vector FLOPs, as the dense ``mv``'s kind counts.
- ``sum`` (every overload, the summed tensor sparse): one add per stored value.

Bytes: every tensor argument read once at what it stores (values and indices for a sparse one), the results
written. Needs no torch at import.
"""

from __future__ import annotations

from roofline._counting._formula_base import _counts, _numel, _read, _sparse_bytes, _written
from roofline._counting._formulas_products import _nnz

# (op packet, e.g. "aten.mm") -> (argument names in schema order, rule)
_PRODUCTS = {"aten.mm": ("self", "mat2"), "aten.bmm": ("self", "mat2"),
             "aten.addmm": ("bias", "self", "mat2"), "aten.baddbmm": ("bias", "self", "mat2")}


def _sparse(t) -> bool:
    return t is not None and _sparse_bytes(t) is not None


def _product(names, args, out) -> dict | None:
    b = dict(zip(names, args))
    a, m = b.get("self"), b.get("mat2")
    if a is None or m is None or len(a.shape) < 2 or len(m.shape) < 2:
        return None
    sa, sm = _sparse(a), _sparse(m)
    if sa == sm:  # both sparse (or neither: not a call for this module)
        return None
    rows, inner, cols = int(a.shape[-2]), int(a.shape[-1]), int(m.shape[-1])
    batch = 1
    for s in a.shape[:-2]:
        batch *= int(s)
    matrix = 2 * _nnz(a) * cols if sa else 2 * _nnz(m) * rows
    res = out[0] if isinstance(out, (list, tuple)) else out
    bias = _numel(res) if "bias" in b and res is not None else 0
    return _counts(matrix=matrix, vector=bias, read=_read(b), written=_written(out),
                   flop_counter=2 * batch * rows * inner * cols)


def counts(op: str, args, kwargs, out) -> tuple | None:
    """``(matrix, vector, special, bytes_read, bytes_written, flop_counter, status)`` of one call of ``op`` (its
    name, ``"aten.mm.default"``) with a sparse argument, or None where this module does not count the call."""
    packet = op.rsplit(".", 1)[0] if op.count(".") >= 2 else op
    args = tuple(args)
    if packet in _PRODUCTS:
        c = _product(_PRODUCTS[packet], args, out)
    elif packet == "aten.mv" and len(args) >= 2 and _sparse(args[0]) and not _sparse(args[1]):
        c = _counts(vector=2 * _nnz(args[0]), read=_read({"self": args[0], "vec": args[1]}), written=_written(out))
    elif packet == "aten.sum" and args and _sparse(args[0]):
        c = _counts(vector=_nnz(args[0]), read=_read({"self": args[0]}), written=_written(out))
    else:
        return None
    if c is None:
        return None
    return (c["matrix_flops"], c["vector_flops"], c["special_ops"], c["bytes_read"], c["bytes_written"],
            c["flop_counter_flops"], 0)


def undescribed(ops):
    """The recorder's ``undescribed`` callable for a block whose op list is ``ops`` (``OpInfo``s by op index)."""

    def ask(idx, args, kwargs, out):
        return counts(ops[idx].name, args, kwargs or {}, out)

    return ask
