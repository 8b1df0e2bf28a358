"""Write the seed corpus of the C cost-model fuzzer (tests/fuzz/fuzz_cost.c).

    python bench/fuzz_seeds.py OUTDIR

Each seed is one op call encoded in the fuzzer's input format (see the comments of fuzz_cost.c: the kind, its
named parameters, the masks and flags, a pool of tensors, a pool of ints, the arguments, the outputs). The seeds
come from

* analytic calls (no torch needed) for every cost kind, compiled exactly as ``roofline.cost`` compiles them (the
  registry entry against the built-in schema, roofline._counting._resolve): attention with sq != sk, dq != dv, both causal
  alignments and the (batch, seq, heads, dim) layout, convolution backward, transposed, grouped and depthwise
  convolutions, the four layouts of _grouped_mm, pooling, NLL, fused multi-head attention, BatchNorm in training and
  in evaluation, in-place and out= variants, broadcast (stride-0) operands, sizes on the edge of 64-bit counts, and a
  few calls the model must refuse (a window of 0, a negative padding, mismatched channels);
* with torch installed, also the cases of tests/test_cost_table.py: each case's callable runs under a dispatch mode
  that captures the case's op call, encoded with the op's entry compiled against torch's schema, as
  ``roofline.measure`` records it. Without torch these are left out (the analytic calls still cover every kind).

Prints the number of seeds written (and how many came from the table). Exit status 0.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from roofline._counting import _registry, _resolve  # noqa: E402
from roofline._datamodel._records import DTYPE_CODES, canonical_dtype  # noqa: E402
from roofline._counting._cost import TensorSpec  # noqa: E402

MAX_TENSORS, MAX_INTS, MAX_ARGS, MAX_OUTS, MAX_SETS = 24, 64, 40, 6, 16
ARG_ABSENT, ARG_NONE, ARG_TENSOR, ARG_TENSORLIST, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_INTLIST, ARG_BOOLLIST, ARG_OTHER = (
    range(10))


def enc_int(v: int) -> bytes:
    """The fuzzer's integer encoding (rd_int)."""
    if 0 <= v < 0x80:
        return bytes([v])
    if -64 <= v < 0:
        return bytes([0x80 + (-v - 1)])
    if 0 <= v < 1 << 16:
        return b"\xc0" + struct.pack("<H", v)
    if 0 <= v < 1 << 32:
        return b"\xc1" + struct.pack("<I", v)
    return b"\xc2" + struct.pack("<q", v)


def enc_params(spec: dict) -> bytes:
    """The parameter assignments of a compiled op: (selector, value) with the selector the parameter's index in its
    kind's parameter list (id order, as roofline._core.kind_table() lists them and the fuzzer's pick_param counts)."""
    kind = _registry.KINDS[_registry.KIND_NAMES[spec["kind"]]]
    order = [p.name for p in kind.params]
    sets = [bytes([order.index(name)]) + enc_int(int(v)) for name, v in sorted(spec.get("params", {}).items())]
    assert len(sets) <= MAX_SETS, spec
    return bytes([len(sets)]) + b"".join(sets)


class Seed:
    """Accumulates one call: the tensor and int pools, the arguments and the outputs."""

    def __init__(self):
        self.tensors: list[bytes] = []
        self.ints: list[int] = []

    @staticmethod
    def is_tensor(v) -> bool:
        return (isinstance(v, TensorSpec) or type(v).__name__ in ("Tensor", "Parameter")
                or hasattr(v, "__torch_function__"))

    @staticmethod
    def tensor_bytes(t, out: bool) -> bytes:
        shape = tuple(int(s) for s in t.shape)
        stride = tuple(int(s) for s in t.stride())
        dtype = DTYPE_CODES[canonical_dtype(t.dtype)]
        b = bytes([len(shape) + 1 if out else len(shape), dtype])
        for s, st in zip(shape, stride):
            b += enc_int(s) + enc_int(st)
        return b

    def push_tensor(self, t) -> int:
        self.tensors.append(self.tensor_bytes(t, out=False))
        return len(self.tensors) - 1

    def arg(self, v) -> bytes:
        """convert_arg (csrc/cost_describe.c) in the fuzzer's encoding."""
        if v is None:
            return bytes([ARG_NONE])
        if self.is_tensor(v):
            return bytes([ARG_TENSOR, self.push_tensor(v)])
        if isinstance(v, bool):
            return bytes([ARG_BOOL, int(v)])
        if isinstance(v, int):
            return bytes([ARG_INT]) + enc_int(v) if -(1 << 63) <= v < 1 << 63 else bytes([ARG_OTHER])
        if isinstance(v, float):
            return bytes([ARG_FLOAT]) + struct.pack("<d", v)
        if isinstance(v, (list, tuple)):
            if any(x is not None and self.is_tensor(x) for x in v):
                idx = [self.push_tensor(x) for x in v if x is not None and self.is_tensor(x)]
                return bytes([ARG_TENSORLIST, idx[0], len(idx)])
            if not v:
                return bytes([ARG_INTLIST, 0, 0])
            if all(isinstance(x, int) for x in v):
                kind = ARG_BOOLLIST if all(isinstance(x, bool) for x in v) else ARG_INTLIST
                first = len(self.ints)
                self.ints.extend(int(x) for x in v)
                return bytes([kind, first, len(v)])
        return bytes([ARG_OTHER])

    def encode(self, spec: dict, args, out) -> bytes | None:
        """The seed of one call: `args` positional in schema order (keyword-only arguments at their schema
        positions, as roofline.cost passes them), `out` a tensor, None or a list of them."""
        encoded = [bytes([ARG_ABSENT]) if a is _ABSENT else self.arg(a) for a in args]
        outs = []
        for o in (out if isinstance(out, (list, tuple)) else [out]):
            if o is None:
                outs.append(bytes([0, 0]))  # absent output: ndim -1
            elif self.is_tensor(o):
                outs.append(self.tensor_bytes(o, out=True))
            elif isinstance(o, (list, tuple)):
                outs.extend(self.tensor_bytes(x, out=True) for x in o if self.is_tensor(x))
        if len(self.tensors) > MAX_TENSORS or len(self.ints) > MAX_INTS or len(encoded) > MAX_ARGS or \
                len(outs) > MAX_OUTS:
            return None
        head = bytes([spec["kind"]]) + enc_params(spec)
        head += struct.pack("<QQB", spec.get("noread_mask", 0) & (2**64 - 1), spec.get("write_mask", 0),
                            spec.get("flags", 0))
        body = bytes([len(self.tensors)]) + b"".join(self.tensors)
        body += bytes([len(self.ints)]) + b"".join(enc_int(i) for i in self.ints)
        body += bytes([len(encoded)]) + b"".join(encoded)
        body += bytes([len(outs)]) + b"".join(outs)
        return head + body


_ABSENT = object()  # an argument not passed (the schema default applies)


def analytic_spec(op: str) -> dict:
    """Recorder.add_op arguments for `op` as roofline.cost compiles them without torch: its entry (roofline._counting._resolve)
    against the built-in schema, or, for an op the schema table lacks, positional argument names."""
    qualified, overload = _resolve.split_name(op)
    found = _resolve.find(qualified, overload)
    if found.entry is None:
        raise ValueError(f"no cost formula for {op!r}")
    sch = _registry.schema(qualified, overload)
    if sch is None:
        short = qualified.split("::", 1)[1]
        names = tuple(f"arg{i}" for i in range(MAX_ARGS))
        inplace = _registry.functional_name(short) != short
        sch = _registry.Schema(names, 0, names[:1] if inplace else (), inplace)
    return _resolve.compile_op(qualified, found.entry, sch)


def T(*shape, dtype="float32", stride=None):
    return TensorSpec(shape, dtype, stride)


BIG = 3037000500  # ~sqrt(2**63): products of two such sizes are on the edge of 64 bits


def analytic_calls():
    """(op, args, out[, changes to the compiled op]) covering every kind and the branches the table does not reach;
    args positional in schema order."""
    q, k, v = T(2, 4, 7, 16), T(2, 2, 11, 16), T(2, 2, 11, 8)  # sq=7 != sk=11, dq=16 != dv=8, grouped-query
    qb, kb, vb = T(2, 7, 4, 16), T(2, 11, 2, 16), T(2, 11, 2, 8)  # the same in (batch, seq, heads, dim)
    calls = [
        ("mm", [T(3, 5), T(5, 7)], T(3, 7)),
        ("mm", [T(BIG, 2), T(2, BIG)], T(BIG, BIG)),
        ("mm", [T(1 << 31, 1 << 31), T(1 << 31, 2)], T(1 << 31, 2)),
        ("addmm", [T(7), T(3, 5), T(5, 7)], T(3, 7)),
        ("bmm", [T(2, 3, 5), T(2, 5, 7)], T(2, 3, 7)),
        ("baddbmm", [T(2, 3, 7), T(2, 3, 5), T(2, 5, 7)], T(2, 3, 7)),
        ("_scaled_mm", [T(16, 32, dtype="float8_e4m3fn"), T(32, 8, dtype="float8_e4m3fn"), T(), T()],
         T(16, 8, dtype="bfloat16")),
        ("convolution", [T(2, 4, 9, 9), T(6, 2, 3, 3), T(6), [2, 2], [1, 1], [1, 1], False, [0, 0], 2],
         T(2, 6, 5, 5)),
        ("convolution", [T(1, 4, 5, 5), T(4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1],
         T(1, 3, 10, 10)),
        ("convolution", [T(1, 2, 8), T(4, 2, 3), None, [1], [0], [2], False, [0], 1], T(1, 4, 4)),
        ("convolution", [T(1, 2, 4, 4, 4), T(3, 2, 2, 2, 2), T(3), [1, 1, 1], [0, 0, 0], [1, 1, 1], False,
                         [0, 0, 0], 1], T(1, 3, 3, 3, 3)),
        ("_scaled_dot_product_flash_attention", [q, T(2, 4, 11, 16), T(2, 4, 11, 8), 0.0, True], T(2, 4, 7, 8)),
        ("_scaled_dot_product_flash_attention", [T(1, 2, 11, 4), T(1, 2, 7, 4), T(1, 2, 7, 4), 0.0, True],
         T(1, 2, 11, 4)),
        ("_scaled_dot_product_efficient_attention", [q, k, v, None, False, 0.0, True], T(2, 4, 7, 8)),
        ("_flash_attention_forward", [qb, T(2, 11, 4, 16), T(2, 11, 4, 8), None, None, 7, 11, 0.0, True],
         T(2, 7, 4, 8)),
    ]
    for mask in (0, 1, 2):
        for qq, kk in ((qb, kb), (T(2, 11, 4, 16), T(2, 7, 2, 16))):
            calls.append(("_efficient_attention_forward",
                          [qq, kk, T(*kk.shape[:3], 8), None, None, None, None, None, 0.0, mask], T(2, 7, 4, 8)))
    calls += [
        ("_scaled_dot_product_flash_attention_backward",
         [T(2, 4, 7, 8), q, T(2, 4, 11, 16), T(2, 4, 11, 8), T(2, 4, 7, 8), T(2, 4, 7), None, None, 7, 11, 0.0,
          True], [T(2, 4, 7, 16), T(2, 4, 11, 16), T(2, 4, 11, 8)]),
        ("convolution_backward", [T(2, 6, 5, 5), T(2, 4, 9, 9), T(6, 2, 3, 3), [6], [2, 2], [1, 1], [1, 1], False,
                                  [0, 0], 2, [True, True, True]], [T(2, 4, 9, 9), T(6, 2, 3, 3), T(6)]),
        ("convolution_backward", [T(1, 3, 10, 10), T(1, 4, 5, 5), T(4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True,
                                  [1, 1], 1, [True, False, False]], [T(1, 4, 5, 5), None, None]),
        ("_native_multi_head_attention", [T(2, 5, 16), T(2, 9, 16), T(2, 9, 16), 16, 4, T(48, 16), T(48), T(16, 16),
                                          T(16), None, False], [T(2, 5, 16), None]),
        ("max_pool2d_with_indices", [T(1, 3, 8, 8), [2, 2], [2, 2]], [T(1, 3, 4, 4), T(1, 3, 4, 4, dtype="int64")]),
        ("avg_pool3d", [T(1, 1, 8, 8, 8), [2]], T(1, 1, 4, 4, 4)),
        ("avg_pool2d_backward", [T(1, 3, 4, 4), T(1, 3, 8, 8), [2, 2], [2, 2]], T(1, 3, 8, 8)),
        ("nll_loss_forward", [T(4, 10), T(4, dtype="int64"), None, 1, -100], [T(), T()]),
        ("nll_loss_backward", [T(), T(4, 10), T(4, dtype="int64"), None, 1, -100, T()], T(4, 10)),
        ("embedding", [T(1000, 16), T(2, 5, dtype="int64")], T(2, 5, 16)),
        ("gather", [T(10, 10), 1, T(10, 3, dtype="int64")], T(10, 3)),
        ("add", [T(4, 1, 8), T(3, 8)], T(4, 3, 8)),
        ("add", [T(4, 3, 8), T(4, 3, 8, stride=(0, 8, 1))], T(4, 3, 8)),
        ("add_", [T(4, 3, 8), T(3, 8)], T(4, 3, 8)),
        ("exp", [T(8, 4, stride=(8, 2))], T(8, 4)),
        ("sum", [T(BIG, BIG)], T()),
        ("clone", [T(1 << 40, 1 << 20, 0)], T(1 << 40, 1 << 20, 0)),
        ("_softmax", [T(4, 10), -1, False], T(4, 10)),
        ("native_layer_norm", [T(4, 10), [10], T(10), T(10), 1e-5], [T(4, 10), T(4, 1), T(4, 1)]),
        ("addmv", [T(8), T(8, 16), T(16)], T(8)),
        ("cat", [[T(4, 8), T(6, 8)]], T(10, 8)),
        ("zeros", [[5, 5]], T(5, 5)),
        ("randn", [[10]], T(10)),
        ("view", [T(8, 8), [64]], T(64)),
        ("_foreach_add_", [[T(10), T(5)], 1.0], None),
        ("_fused_adam_", [[T(10)], [T(10)], [T(10)], [T(10)], [], [T()], 1e-3, 0.9, 0.999, 0.0, 1e-8, False, False],
         None),
    ]
    # FFTs: real to complex (half spectrum), complex to real scaled by 1/n, complex over two dims (48 points, not a
    # power of two), a dimension named twice (refused)
    c64 = "complex64"
    calls += [
        ("_fft_r2c", [T(4, 64), [1], 0, True], T(4, 33, dtype=c64)),
        ("_fft_c2r", [T(4, 33, dtype=c64), [-1], 2, 64], T(4, 64)),
        ("_fft_c2c", [T(3, 3, 16, dtype=c64), [1, 2], 1, True], T(3, 3, 16, dtype=c64)),
        ("_fft_c2c", [T(3, 3, 16, dtype=c64), [1, -2], 0, True], T(3, 3, 16, dtype=c64)),
    ]
    # _grouped_mm, its four layouts: rows, batch, columns or K split into 3 groups; with and without a bias
    offs = T(3, dtype="int32")
    calls += [
        ("_grouped_mm", [T(12, 8), T(3, 8, 5), offs], T(12, 5)),
        ("_grouped_mm", [T(3, 4, 8), T(3, 8, 5), None, T(3, 5)], T(3, 4, 5)),
        ("_grouped_mm", [T(3, 4, 8), T(8, 15), offs], T(4, 15)),
        ("_grouped_mm", [T(4, 24), T(24, 5), offs, T(3, 5)], T(3, 4, 5)),
        # convolution variants: depthwise (no groups argument), always transposed, padding before stride
        ("_conv_depthwise2d", [T(1, 4, 8, 8), T(4, 1, 3, 3), [3, 3], T(4), [1, 1], [1, 1], [1, 1]], T(1, 4, 8, 8)),
        ("slow_conv_transpose2d", [T(1, 4, 5, 5), T(4, 3, 3, 3), [3, 3], None, [2, 2], [1, 1], [1, 1], [1, 1]],
         T(1, 3, 10, 10)),
        ("mkldnn_convolution", [T(1, 4, 9, 9), T(6, 2, 3, 3), T(6), [1, 1], [2, 2], [1, 1], 2], T(1, 6, 5, 5)),
        # BatchNorm: training updates the running statistics in place and returns new tensors; evaluation reads them
        ("native_batch_norm", [T(2, 3, 4, 4), T(3), T(3), T(3), T(3), True, 0.1, 1e-5],
         [T(2, 3, 4, 4), T(3), T(3)]),
        ("native_batch_norm", [T(2, 3, 4, 4), T(3), T(3), T(3), T(3), False, 0.1, 1e-5],
         [T(2, 3, 4, 4), T(0), T(0)]),
        ("_native_batch_norm_legit", [T(2, 3, 4, 4), T(3), T(3), T(3), T(3), True, 0.1, 1e-5],
         [T(2, 3, 4, 4), T(3), T(3)]),
        ("native_batch_norm_backward", [T(2, 3, 4, 4), T(2, 3, 4, 4), T(3), T(3), T(3), T(3), T(3), True, 1e-5,
                                        [True, True, True]], [T(2, 3, 4, 4), T(3), T(3)]),
        ("native_batch_norm_backward", [T(2, 3, 4, 4), T(2, 3, 4, 4), T(3), T(3), T(3), None, None, False, 1e-5,
                                        [True, False, False]], [T(2, 3, 4, 4), None, None]),
        ("max_pool1d", [T(1, 3, 16), [2], [2], [0], [1], False], T(1, 3, 8)),
        # an out= variant (the destination written, not read) and an in-place copy (the destination not read)
        ("add.out", [T(4, 8), T(4, 8), 1, T(4, 8)], T(4, 8)),
        ("copy_", [T(4, 8), T(4, 8, dtype="float16"), False], T(4, 8)),
        # calls the model refuses: a window of 0, a negative padding (RL_E_VALUE), mismatched channels (RL_E_SHAPE)
        ("max_pool2d_with_indices", [T(1, 3, 8, 8), [0, 2], [2, 2]], [T(1, 3, 4, 4), T(1, 3, 4, 4, dtype="int64")]),
        ("avg_pool2d", [T(1, 3, 8, 8), [2, 2], [2, 2], [-1, 0]], T(1, 3, 4, 4)),
        ("convolution", [T(2, 4, 9, 9), T(6, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1],
         T(2, 6, 7, 7)),
        # depthwise backward over 2**32 channels without FlopCounterMode's count, which would be 2**65 (its flag is
        # cleared: the true count, 2**33, fits and must come back)
        ("convolution_backward", [T(1, 1 << 32, 1), T(1, 1 << 32, 1), T(1 << 32, 1, 1), None, [1], [0], [1], False,
                                  [0], 1 << 32, [False, True, False]], [None, T(1 << 32, 1, 1), None], {"flags": 0}),
    ]
    return calls


def table_calls():
    """(spec, args, out) of each case of tests/test_cost_table.py, captured under a dispatch mode; nothing without
    torch."""
    try:
        import torch  # noqa: F401
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import test_cost_table  # noqa: E402

    captured = []

    class Capture(TorchDispatchMode):
        """Keeps the first call of the op named `want`."""

        def __init__(self, want):
            super().__init__()
            self.want = want

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if str(func) == self.want and not captured:
                captured.append((func, args, kwargs or {}, out))
            return out

    for case in test_cost_table.CASES:
        captured.clear()
        with Capture(case[2]):
            case[1]()
        if not captured:
            continue
        func, args, kwargs, out = captured[0]
        sch = _registry.Schema.from_torch(func._schema)
        qualified, overload = _resolve.split_name(str(func))
        resolved = _resolve.resolve(qualified, overload, sch)
        if resolved.spec is None:
            continue
        # positional arguments, then keyword arguments at their schema positions (the recorder's layout)
        full = list(args) + [_ABSENT] * (len(sch.names) - len(args))
        for name, value in kwargs.items():
            if name in sch.names:
                full[sch.names.index(name)] = value
        while full and full[-1] is _ABSENT:
            full.pop()
        yield resolved.spec, full, out


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    seeds = [Seed().encode(dict(analytic_spec(op), **(rest[0] if rest else {})), args, out)
             for op, args, out, *rest in analytic_calls()]
    table = [Seed().encode(spec, args, out) for spec, args, out in table_calls()]
    files = {hashlib.sha1(s).hexdigest(): s for s in seeds + table if s is not None}  # identical calls once
    for name, s in files.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(s)
    print(f"{len(files)} seeds written to {outdir} ({len(seeds)} analytic calls, {len(table)} table cases"
          f"{'' if table else ': torch is not installed'}; identical calls written once)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
