"""Write the seed corpus of the C cost-model fuzzer (tests/fuzz/fuzz_cost.c).

    python bench/fuzz_seeds.py OUTDIR

Each seed is one op call encoded in the fuzzer's input format (see the comments of fuzz_cost.c: an rl_op, a pool
of tensors, a pool of ints, the arguments, the outputs). The seeds come from

* the cases of tests/test_cost_table.py (needs torch): each case's callable runs under a dispatch mode that
  captures the case's op call, and the call is encoded with the op's registry entry compiled against its schema,
  exactly as ``roofline.measure`` would record it;
* analytic calls (no torch needed) for every cost kind, including the branches the table does not reach:
  attention with sq != sk, dq != dv, both causal alignments and the (batch, seq, heads, dim) layout, convolution
  backward, transposed and grouped convolutions, pooling, NLL, fused multi-head attention, in-place and out=
  variants, broadcast (stride-0) operands, and sizes on the edge of 64-bit counts.

Prints the number of seeds written. Exit status 0.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from roofline import _registry  # noqa: E402
from roofline._records import DTYPE_CODES, canonical_dtype  # noqa: E402
from roofline._spec import TensorSpec, _schema, _split_name  # noqa: E402

MAX_TENSORS, MAX_INTS, MAX_ARGS, MAX_OUTS = 24, 64, 40, 6
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


class Seed:
    """Accumulates one call: the tensor and int pools, the arguments and the outputs."""

    def __init__(self):
        self.tensors: list[bytes] = []
        self.ints: list[int] = []
        self.args: list[bytes] = []

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
        """convert_arg (csrc/binding_cost.c) in the fuzzer's encoding."""
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
            if all(isinstance(x, int) for x in v):
                kind = ARG_BOOLLIST if v and all(isinstance(x, bool) for x in v) else ARG_INTLIST
                first = len(self.ints)
                self.ints.extend(int(x) for x in v)
                return bytes([kind, first if v else 0, len(v)])
        return bytes([ARG_OTHER])

    def encode(self, spec: dict, args, kwargs, out) -> bytes | None:
        kwnames = spec.get("kwnames") or ()
        kwpos = spec.get("kwpos", -1)
        npos = len(args)
        kw0 = kwpos if (kwnames and kwpos > npos) else npos
        encoded = [self.arg(a) for a in args]
        encoded += [bytes([ARG_ABSENT])] * (kw0 - npos)
        for name in kwnames:
            encoded.append(self.arg(kwargs[name]) if kwargs and name in kwargs else bytes([ARG_ABSENT]))
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
        head = bytes([spec["kind"]]) + enc_int(spec.get("p1", 0)) + enc_int(spec.get("p2", 0))
        head += struct.pack("<QQI", spec.get("noread_mask", 0) & (2**64 - 1), spec.get("write_mask", 0),
                            spec.get("flags", 0))
        body = bytes([len(self.tensors)]) + b"".join(self.tensors)
        body += bytes([len(self.ints)]) + b"".join(enc_int(i) for i in self.ints)
        body += bytes([len(encoded)]) + b"".join(encoded)
        body += bytes([len(outs)]) + b"".join(outs)
        return head + body


def analytic_spec(op: str) -> dict:
    """Recorder.add_op arguments for `op` as roofline.cost compiles them (without torch: the built-in schemas)."""
    qualified, overload = _split_name(op)
    entry = _registry.lookup(qualified, overload)
    sch = _schema(qualified, overload)
    short = qualified.split("::", 1)[1]
    inplace = short.endswith("_") and not short.endswith("__")
    if sch is None:
        names = [f"arg{i}" for i in range(40)]
        written, outs = ((names[0],) if inplace else ()), []
    else:
        names, written, outs = list(sch.names), list(sch.written), list(sch.outs)
    return _registry.compile_entry(entry, short.rstrip("_") if inplace else short, names, written, outs)


def T(*shape, dtype="float32", stride=None):
    return TensorSpec(shape, dtype, stride)


BIG = 3037000500  # ~sqrt(2**63): products of two such sizes are on the edge of 64 bits


def analytic_calls():
    """(op, args, out, spec overrides) covering every kind and the branches the table does not reach."""
    q, k, v = T(2, 4, 7, 16), T(2, 2, 11, 16), T(2, 2, 11, 8)  # sq=7 != sk=11, dq=16 != dv=8, grouped-query
    qb, kb, vb = T(2, 7, 4, 16), T(2, 11, 2, 16), T(2, 11, 2, 8)  # the same in (batch, seq, heads, dim)
    calls = [
        ("mm", [T(3, 5), T(5, 7)], T(3, 7), {}),
        ("mm", [T(BIG, 2), T(2, BIG)], T(BIG, BIG), {}),
        ("mm", [T(1 << 31, 1 << 31), T(1 << 31, 2)], T(1 << 31, 2), {}),
        ("addmm", [T(7), T(3, 5), T(5, 7)], T(3, 7), {}),
        ("bmm", [T(2, 3, 5), T(2, 5, 7)], T(2, 3, 7), {}),
        ("baddbmm", [T(2, 3, 7), T(2, 3, 5), T(2, 5, 7)], T(2, 3, 7), {}),
        ("_scaled_mm", [T(16, 32, dtype="float8_e4m3fn"), T(32, 8, dtype="float8_e4m3fn"), T(), T()],
         T(16, 8, dtype="bfloat16"), {}),
        ("convolution", [T(2, 4, 9, 9), T(6, 2, 3, 3), T(6), [2, 2], [1, 1], [1, 1], False, [0, 0], 2],
         T(2, 6, 5, 5), {}),
        ("convolution", [T(1, 4, 5, 5), T(4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1],
         T(1, 3, 10, 10), {}),
        ("convolution", [T(1, 2, 8), T(4, 2, 3), None, [1], [0], [2], False, [0], 1], T(1, 4, 4), {}),
        ("convolution", [T(1, 2, 4, 4, 4), T(3, 2, 2, 2, 2), T(3), [1, 1, 1], [0, 0, 0], [1, 1, 1], False,
                         [0, 0, 0], 1], T(1, 3, 3, 3, 3), {}),
        ("_scaled_dot_product_flash_attention", [q, T(2, 4, 11, 16), T(2, 4, 11, 8), 0.0, True], T(2, 4, 7, 8), {}),
        ("_scaled_dot_product_flash_attention", [T(1, 2, 11, 4), T(1, 2, 7, 4), T(1, 2, 7, 4), 0.0, True],
         T(1, 2, 11, 4), {}),
        ("_scaled_dot_product_efficient_attention", [q, k, v, None, False, 0.0, True], T(2, 4, 7, 8), {}),
        ("_flash_attention_forward", [qb, T(2, 11, 4, 16), T(2, 11, 4, 8), None, None, 7, 11, 0.0, True],
         T(2, 7, 4, 8), {}),
    ]
    for mask in (0, 1, 2):
        for qq, kk in ((qb, kb), (T(2, 11, 4, 16), T(2, 7, 2, 16))):
            calls.append(("_efficient_attention_forward",
                          [qq, kk, T(*kk.shape[:3], 8), None, None, None, None, None, 0.0, mask], T(2, 7, 4, 8), {}))
    calls += [
        ("_scaled_dot_product_flash_attention_backward",
         [T(2, 4, 7, 8), q, T(2, 4, 11, 16), T(2, 4, 11, 8), T(2, 4, 7, 8), T(2, 4, 7), None, None, 7, 11, 0.0,
          True], [T(2, 4, 7, 16), T(2, 4, 11, 16), T(2, 4, 11, 8)], {}),
        ("convolution_backward", [T(2, 6, 5, 5), T(2, 4, 9, 9), T(6, 2, 3, 3), [6], [2, 2], [1, 1], [1, 1], False,
                                  [0, 0], 2, [True, True, True]], [T(2, 4, 9, 9), T(6, 2, 3, 3), T(6)], {}),
        ("convolution_backward", [T(1, 3, 10, 10), T(1, 4, 5, 5), T(4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True,
                                  [1, 1], 1, [True, False, False]], [T(1, 4, 5, 5), None, None], {}),
        ("_native_multi_head_attention", [T(2, 5, 16), T(2, 9, 16), T(2, 9, 16), 16, 4, T(48, 16), T(48), T(16, 16),
                                          T(16), None, False], [T(2, 5, 16), None], {}),
        ("max_pool2d_with_indices", [T(1, 3, 8, 8), [2, 2], [2, 2]], [T(1, 3, 4, 4), T(1, 3, 4, 4, dtype="int64")],
         {}),
        ("avg_pool3d", [T(1, 1, 8, 8, 8), [2]], T(1, 1, 4, 4, 4), {}),
        ("avg_pool2d_backward", [T(1, 3, 4, 4), T(1, 3, 8, 8), [2, 2], [2, 2]], T(1, 3, 8, 8), {}),
        ("nll_loss_forward", [T(4, 10), T(4, dtype="int64"), None, 1, -100], [T(), T()], {}),
        ("nll_loss_backward", [T(), T(4, 10), T(4, dtype="int64"), None, 1, -100, T()], T(4, 10), {}),
        ("embedding", [T(1000, 16), T(2, 5, dtype="int64")], T(2, 5, 16), {}),
        ("gather", [T(10, 10), 1, T(10, 3, dtype="int64")], T(10, 3), {}),
        ("add", [T(4, 1, 8), T(3, 8)], T(4, 3, 8), {}),
        ("add", [T(4, 3, 8), T(4, 3, 8, stride=(0, 8, 1))], T(4, 3, 8), {}),
        ("add_", [T(4, 3, 8), T(3, 8)], T(4, 3, 8), {}),
        ("exp", [T(8, 4, stride=(8, 2))], T(8, 4), {}),
        ("sum", [T(BIG, BIG)], T(), {}),
        ("clone", [T(1 << 40, 1 << 20, 0)], T(1 << 40, 1 << 20, 0), {}),
        ("_softmax", [T(4, 10), -1, False], T(4, 10), {}),
        ("native_layer_norm", [T(4, 10), [10], T(10), T(10), 1e-5], [T(4, 10), T(4, 1), T(4, 1)], {}),
        ("addmv", [T(8), T(8, 16), T(16)], T(8), {}),
        ("cat", [[T(4, 8), T(6, 8)]], T(10, 8), {}),
        ("zeros", [[5, 5]], T(5, 5), {}),
        ("randn", [[10]], T(10), {}),
        ("view", [T(8, 8), [64]], T(64), {}),
        ("_foreach_add_", [[T(10), T(5)], 1.0], None, {}),
        ("_fused_adam_", [[T(10)], [T(10)], [T(10)], [T(10)], [], [T()], 1e-3, 0.9, 0.999, 0.0, 1e-8, False, False],
         None, {}),
    ]
    return calls


def table_calls():
    """(spec, args, kwargs, out) of each case of tests/test_cost_table.py, captured under a dispatch mode."""
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return []
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
        schema = func._schema.arguments
        names = [a.name for a in schema]
        written = [a.name for a in schema if a.alias_info is not None and a.alias_info.is_write]
        outs = [a.name for a in schema if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
        kwnames = tuple(a.name for a in schema if a.kwarg_only)
        _, name, overload = str(func).split(".")
        entry = _registry.lookup(f"aten::{name}", "" if overload == "default" else overload)
        if entry is None:
            continue
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        spec = _registry.compile_entry(entry, base, names, written, outs)
        spec["kwnames"] = kwnames
        spec["kwpos"] = len(names) - len(kwnames)
        yield spec, args, kwargs, out


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    seeds = []
    for op, args, out, extra in analytic_calls():
        spec = dict(analytic_spec(op), **extra)
        seeds.append(Seed().encode(spec, args, None, out))
    for spec, args, kwargs, out in table_calls():
        seeds.append(Seed().encode(spec, args, kwargs, out))
    n = 0
    for s in seeds:
        if s is None:
            continue
        name = hashlib.sha1(s).hexdigest()
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(s)
        n += 1
    print(f"{n} seeds written to {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
