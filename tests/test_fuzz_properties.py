"""Property-based tests (Hypothesis) of the public entry points that take untrusted input: ``roofline.cost``,
``TensorSpec``, ``roofline.register(kind=...)``, ``roofline.load`` and the ceilings cache reader.

The invariants, for every generated input:

* nothing crashes the interpreter and the only exceptions are ``ValueError``, ``TypeError`` and ``OverflowError``
  (the documented errors of bad input), each with a message of bounded length (``ALLOWED``, ``attempt``);
* counts are never wrapped: every count is an int in [0, 2**64), and matrix products (grouped ones too),
  convolutions, attention, pooling and element-wise ops equal their formulas, computed here with Python ints
  (``2*M*N*K``, the convolution output-size formula, a brute-force count of the unmasked attention pairs, window
  taps); a call whose exact counts do not fit in 64 bits (or whose tensors torch could not create) raises instead;
* calls the model must refuse are refused, with ``ValueError``: a convolution weight that does not fit the input's
  channels and groups, a pooling window or stride below 1, a negative padding;
* ``roofline.cost`` gives the same answer with and without torch installed (a batch of generated calls is replayed
  in a subprocess where ``import torch`` fails);
* ``load`` and the ceilings cache reader reject corrupt documents with ``ValueError`` (the cache reader: ignores
  them, returning None), and a valid report survives ``to_json``/``load`` bit for bit.

Examples per property: ``ROOFLINE_FUZZ_EXAMPLES`` (default 30, which keeps this file well under a minute; bench/fuzz.sh
runs 10,000 per property). Unset, the examples are derandomized (the same on every run); set, they are random.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, assume, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import roofline  # noqa: E402
from roofline._counting import _registry  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_N = os.environ.get("ROOFLINE_FUZZ_EXAMPLES")
EXAMPLES = int(_N) if _N else 30
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=_N is None,
                suppress_health_check=list(HealthCheck))
# Properties that run subprocesses, and those expected to fail until an open defect is fixed, do not shrink: each
# shrinking step would cost seconds, and their messages already list what differs.
NO_SHRINK = settings(FUZZ, phases=[Phase.explicit, Phase.reuse, Phase.generate])
# The only exceptions bad input may raise (docs/api.md): anything else (RecursionError, KeyError, AttributeError,
# SystemError, MemoryError, a crash) is a defect.
ALLOWED = (ValueError, TypeError, OverflowError)
MAX_MESSAGE = 20_000  # an error message names what was wrong; it does not dump megabytes of input
U64 = 2**64

# Bytes per element, written out here (not read from the package).
ITEM = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
        "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1}

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def attempt(fn, *args, **kwargs):
    """fn(*args, **kwargs), or None when it raised one of ALLOWED with a non-empty, bounded message. Any other
    exception propagates and fails the property."""
    try:
        return fn(*args, **kwargs)
    except ALLOWED as e:
        msg = str(e)
        assert msg, f"{type(e).__name__} without a message"
        assert len(msg) <= MAX_MESSAGE, f"{type(e).__name__} message of {len(msg)} characters"
        return None


def numel(shape) -> int:
    return math.prod(shape)


def extent(shape) -> int:
    """Elements of storage torch needs for a contiguous tensor of `shape` (a 0 counted as 1): torch refuses a shape
    whose extent does not fit in int64."""
    return math.prod(max(s, 1) for s in shape)


def creatable(*shapes) -> bool:
    return all(extent(s) < 2**63 for s in shapes)


def check_cost(c):
    """A returned Cost holds exact, unwrapped counts."""
    for f in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "flop_counter_flops"):
        v = getattr(c, f)
        assert type(v) is int and 0 <= v < U64, (f, v)
    assert c.flops == c.matrix_flops + c.vector_flops
    assert isinstance(c.dtype, str)


def expect_counts(c, shapes, want: dict):
    """`c` (a Cost or None for an error) against `want` (field -> exact count): an error only when some count does
    not fit in 64 bits or a tensor could not exist; otherwise every field equal."""
    if c is None:
        assert max(want.values()) >= U64 or not creatable(*shapes), f"an error for a valid call: {want}"
        return
    check_cost(c)
    assert max(want.values()) < U64, f"a count >= 2**64 came back: {c}"
    got = {k: getattr(c, k) for k in want}
    assert got == want


# ---- strategies ------------------------------------------------------------------------------------------------

EDGE_DIMS = [0, 1, 2, 2**16, 2**21, 2642245, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 3037000499, 3037000500, 2**40,
             2**62, 2**63 - 1]
dims = st.one_of(st.integers(0, 9), st.integers(0, 2**16), st.sampled_from(EDGE_DIMS), st.integers(0, 2**63 - 1))
small_dims = st.integers(0, 9)
dtypes = st.sampled_from(sorted(ITEM))
junk_ints = st.one_of(st.integers(-3, 10), st.sampled_from(EDGE_DIMS), st.integers(-(2**70), 2**70))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                         st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), ch, max_size=4)),
                           max_leaves=20)


@st.composite
def tensor_specs(draw, max_rank=4, dim=small_dims):
    shape = tuple(draw(st.lists(dim, max_size=max_rank)))
    dt = draw(dtypes)
    if draw(st.booleans()) and shape:
        stride = tuple(draw(st.sampled_from([0, 1, 7])) for _ in shape)
        return roofline.TensorSpec(shape, dt, stride)
    return roofline.TensorSpec(shape, dt)


junk_values = st.one_of(
    st.none(), st.booleans(), junk_ints, st.floats(), st.text(max_size=6),
    st.tuples(junk_ints, junk_ints), st.lists(junk_ints, max_size=5), st.lists(st.booleans(), max_size=4),
    tensor_specs(), st.lists(tensor_specs(), min_size=1, max_size=3), st.tuples(small_dims, small_dims, small_dims),
    st.lists(st.tuples(small_dims, small_dims), min_size=1, max_size=3), st.dictionaries(st.text(max_size=3), junk_ints,
                                                                                            max_size=2),
)
OP_NAMES = sorted(_registry.TABLE)


# ---- roofline.cost: formulas ----------------------------------------------------------------------------------

@FUZZ
@given(m=dims, k=dims, n=dims, dt=dtypes)
@example(m=2**32, k=2**32, n=1, dt="float32")
@example(m=3037000500, k=1, n=3037000500, dt="int8")
def test_mm_equals_2mnk(m, k, n, dt):
    c = attempt(roofline.cost, "mm", [(m, k), (k, n)], dtype=dt)
    f = 2 * m * n * k
    expect_counts(c, [(m, k), (k, n), (m, n)],
                  dict(matrix_flops=f, flop_counter_flops=f, vector_flops=0, bytes_read=(m * k + k * n) * ITEM[dt],
                       bytes_written=m * n * ITEM[dt]))


@FUZZ
@given(b=dims, m=dims, k=dims, n=dims, dt=dtypes, bias=st.booleans())
def test_bmm_and_baddbmm_equal_2bmnk(b, m, k, n, dt, bias):
    ins = [(b, m, k), (b, k, n)]
    if bias:
        c = attempt(roofline.cost, "baddbmm", [(b, m, n)] + ins, dtype=dt)
        read = (b * m * n + b * m * k + b * k * n) * ITEM[dt]
    else:
        c = attempt(roofline.cost, "bmm", ins, dtype=dt)
        read = (b * m * k + b * k * n) * ITEM[dt]
    f = 2 * b * m * n * k
    expect_counts(c, ins + [(b, m, n)], dict(matrix_flops=f, vector_flops=b * m * n if bias else 0, bytes_read=read,
                                             bytes_written=b * m * n * ITEM[dt]))


@FUZZ
@given(m=dims, k=dims, n=dims, dt=dtypes)
def test_addmm_adds_one_per_output(m, k, n, dt):
    c = attempt(roofline.cost, "addmm", [(n,), (m, k), (k, n)], dtype=dt)
    expect_counts(c, [(m, k), (k, n), (m, n)],
                  dict(matrix_flops=2 * m * n * k, vector_flops=m * n,
                       bytes_read=(n + m * k + k * n) * ITEM[dt], bytes_written=m * n * ITEM[dt]))


@st.composite
def conv_cases(draw):
    sp = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    n = draw(st.integers(1, 3))
    size = [draw(st.integers(1, 9)) for _ in range(sp)]
    k = [draw(st.integers(1, 4)) for _ in range(sp)]
    s = [draw(st.integers(1, 3)) for _ in range(sp)]
    p = [draw(st.integers(0, 2)) for _ in range(sp)]
    d = [draw(st.integers(1, 2)) for _ in range(sp)]
    transposed = draw(st.booleans())
    return sp, groups, cin, cout, n, size, k, s, p, d, transposed, draw(st.booleans()), draw(dtypes)


@FUZZ
@given(conv_cases())
def test_convolution_equals_the_conv_formula(case):
    sp, groups, cin, cout, n, size, k, s, p, d, transposed, bias, dt = case
    if transposed:
        # output = (in - 1)*stride - 2*pad + dilation*(k - 1) + output_padding + 1; weight (C_in, C_out/groups, k...)
        out = [(i - 1) * st_ - 2 * pp + dd * (kk - 1) + 1 for i, kk, st_, pp, dd in zip(size, k, s, p, d)]
        w = (cin, cout // groups, *k)
        positions = numel(size)  # every input position scatters into k taps x C_out/groups outputs
    else:
        # output = floor((in + 2*pad - dilation*(k - 1) - 1) / stride) + 1; weight (C_out, C_in/groups, k...)
        out = [(i + 2 * pp - dd * (kk - 1) - 1) // st_ + 1 for i, kk, st_, pp, dd in zip(size, k, s, p, d)]
        w = (cout, cin // groups, *k)
        positions = numel(out)
    assume(all(o >= 1 for o in out))
    x, y = (n, cin, *size), (n, cout, *out)
    c = attempt(roofline.cost, "convolution", x, w, (cout,) if bias else None, s, p, d, transposed, [0] * sp, groups,
                dtype=dt)
    assert c is not None, f"convolution x={x} w={w} failed"
    flops = 2 * n * positions * numel(k) * cin * cout // groups  # each output: k taps x C_in/groups multiply-adds
    read = (numel(x) + numel(w) + (cout if bias else 0)) * ITEM[dt]
    expect_counts(c, [x, w, y], dict(matrix_flops=flops, flop_counter_flops=flops,
                                     vector_flops=numel(y) if bias else 0, bytes_read=read,
                                     bytes_written=numel(y) * ITEM[dt]))


def attention_pairs(sq, sk, mask):
    """Unmasked (query, key) pairs, one query row at a time: 0 no mask, 1 causal from the top-left (row i sees keys
    0..i), 2 causal from the bottom-right (row i sees keys 0..i+sk-sq)."""
    if mask == 0:
        return sq * sk
    if mask == 1:
        return sum(min(i + 1, sk) for i in range(sq))
    return sum(min(max(i + sk - sq + 1, 0), sk) for i in range(sq))


@FUZZ
@given(b=st.integers(1, 3), hkv=st.integers(1, 3), group=st.integers(1, 3), sq=st.integers(1, 40),
       sk=st.integers(1, 40), dq=st.integers(1, 16), dv=st.integers(1, 16), mask=st.integers(0, 2),
       dt=st.sampled_from(["float16", "bfloat16", "float32"]))
def test_attention_counts_the_unmasked_pairs(b, hkv, group, sq, sk, dq, dv, mask, dt):
    hq = hkv * group
    # _efficient_attention_forward: (batch, seq, heads, dim), custom_mask_type 0/1/2
    q, k, v = (b, sq, hq, dq), (b, sk, hkv, dq), (b, sk, hkv, dv)
    c = attempt(roofline.cost, "_efficient_attention_forward", q, k, v, None, None, None, None, None, 0.0, mask,
                dtype=dt)
    assert c is not None
    pairs = b * hq * attention_pairs(sq, sk, mask)
    check_cost(c)
    # QK^T: 2*dq per pair, PV: 2*dv per pair; softmax 4 FLOPs + 1 exp per pair, one division per output element
    assert (c.matrix_flops, c.special_ops, c.vector_flops) == (2 * pairs * (dq + dv), pairs,
                                                               4 * pairs + b * hq * sq * dv)


@FUZZ
@given(layout=st.sampled_from(["rows", "batch", "columns", "k"]), g=st.integers(1, 4), m=dims, k=dims, n=dims,
       bias=st.booleans(), dt=st.sampled_from(["bfloat16", "float16", "float32"]))
def test_grouped_mm_is_one_product_per_group(layout, g, m, k, n, bias, dt):
    """_grouped_mm splits the rows, the batch, the columns or K into g groups; whichever it splits, the groups
    together are 2*g*M*K*N FLOPs, plus one bias add per output element; FlopCounterMode has no formula for it."""
    a, b, out = {"rows": ((g * m, k), (g, k, n), (g * m, n)),
                 "batch": ((g, m, k), (g, k, n), (g, m, n)),
                 "columns": ((g, m, k), (k, g * n), (m, g * n)),
                 "k": ((m, g * k), (g * k, n), (g, m, n))}[layout]
    args = [a, b, roofline.TensorSpec((g,), "int32")] + ([(out[-1],)] if bias else [])
    c = attempt(roofline.cost, "_grouped_mm", *args, out=out, dtype=dt)
    read = (numel(a) + numel(b) + (out[-1] if bias else 0)) * ITEM[dt] + 4 * g
    expect_counts(c, [a, b, out], dict(matrix_flops=2 * g * m * k * n, vector_flops=numel(out) if bias else 0,
                                       flop_counter_flops=0, bytes_read=read, bytes_written=numel(out) * ITEM[dt]))


@FUZZ
@given(n=st.integers(1, 3), cin=st.integers(0, 6), cout=st.integers(0, 6), w1=st.integers(0, 6),
       groups=st.integers(-1, 4), transposed=st.booleans(), bias=st.booleans(), give_out=st.booleans())
def test_convolution_refuses_channels_that_do_not_fit(n, cin, cout, w1, groups, transposed, bias, give_out):
    """A convolution is counted only when its weight fits its input and groups (checked in Python when the result
    is inferred, in the C model when it is given): weight (C_out, C_in/groups, k) with C_out divisible by groups, or
    transposed (C_in, C_out/groups, k) with C_in divisible by groups. Anything else is a ValueError, not a count."""
    length, taps = 5, 3
    w = (cin if transposed else cout, w1, taps)
    if transposed:
        fits = groups >= 1 and cin % groups == 0
        y = (n, w1 * max(groups, 1), length + taps - 1)
    else:
        fits = groups >= 1 and w1 * groups == cin and cout % groups == 0
        y = (n, cout, length - taps + 1)
    c = attempt(roofline.cost, "convolution", (n, cin, length), w, (y[1],) if bias else None, [1], [0], [1],
                transposed, [0], groups, out=y if give_out else None)
    if not fits:
        assert c is None, f"counted a convolution whose weight {w} does not fit ({n}, {cin}, {length}), groups={groups}"
        return
    assert c is not None
    # every output element: taps x C_in/groups multiply-adds (transposed: every input element scatters into taps x
    # C_out/groups outputs)
    flops = 2 * n * taps * (cin * length * w1 if transposed else numel(y[1:]) * w1)
    expect_counts(c, [(n, cin, length), w, y], dict(matrix_flops=flops, vector_flops=numel(y) if bias else 0,
                                                    bytes_written=numel(y) * 4))


@FUZZ
@given(op_sp=st.sampled_from([("max_pool1d", 1), ("avg_pool2d", 2), ("avg_pool3d", 3)]), data=st.data())
def test_pooling_counts_window_taps_and_refuses_bad_windows(op_sp, data):
    """One FLOP per window tap, one window per element of the smaller of the input and the result; a kernel or
    stride entry below 1 or a negative padding is a ValueError (an empty stride means stride = kernel)."""
    op, sp = op_sp
    size = (1, 2) + tuple(data.draw(st.lists(st.integers(0, 9), min_size=sp, max_size=sp)))
    entries = st.sampled_from([1, sp])
    kernel = data.draw(st.lists(st.integers(-1, 4), min_size=1, max_size=1).flatmap(
        lambda one: st.just(one) | st.lists(st.integers(-1, 4), min_size=sp, max_size=sp)))
    stride = data.draw(st.just([]) | entries.flatmap(lambda k: st.lists(st.integers(-1, 3), min_size=k, max_size=k)))
    padding = data.draw(entries.flatmap(lambda k: st.lists(st.integers(-1, 2), min_size=k, max_size=k)))
    out = (1, 2) + tuple(data.draw(st.lists(st.integers(0, 9), min_size=sp, max_size=sp)))
    c = attempt(roofline.cost, op, size, kernel, stride, padding, out=out)
    if min(kernel) < 1 or min(stride, default=1) < 1 or min(padding) < 0:
        assert c is None, f"{op}: kernel {kernel}, stride {stride}, padding {padding} were accepted"
        return
    assert c is not None
    taps = math.prod(kernel[0] if len(kernel) == 1 else kernel[i] for i in range(sp))
    expect_counts(c, [size, out], dict(vector_flops=min(numel(size), numel(out)) * taps, matrix_flops=0,
                                       bytes_read=numel(size) * 4, bytes_written=numel(out) * 4))


@FUZZ
@given(out=st.lists(st.integers(0, 6), max_size=4), data=st.data(),
       op=st.sampled_from([("add", 1, 0, 2), ("mul", 1, 0, 2), ("div", 1, 0, 2), ("maximum", 1, 0, 2),
                           ("atan2", 0, 1, 2), ("exp", 0, 1, 1), ("sigmoid", 2, 1, 1), ("gelu", 4, 1, 1),
                           ("silu", 3, 1, 1), ("relu", 1, 0, 1), ("tanh", 0, 1, 1)]),
       dt=dtypes)
def test_elementwise_counts_per_result_element(out, data, op, dt):
    name, flops, special, arity = op  # per element of the result (docs/concepts.md)
    shapes = []
    for _ in range(arity):  # an operand that broadcasts to `out`: a suffix of it, some dims 1
        keep = data.draw(st.integers(0, len(out)))
        shapes.append(tuple(1 if data.draw(st.booleans()) else s for s in out[len(out) - keep:]))
    c = attempt(roofline.cost, name, *shapes, dtype=dt)
    assert c is not None, (name, shapes)
    # the broadcast result: per dim (aligned right) the operand size that is not 1, else 1
    result = [max((s[len(s) - len(out) + i] for s in shapes if len(s) >= len(out) - i), default=1)
              for i in range(len(out))]
    result = [0 if any(len(s) >= len(out) - i and s[len(s) - len(out) + i] == 0 for s in shapes) else x
              for i, x in enumerate(result)]
    r = numel(result)
    expect_counts(c, shapes, dict(vector_flops=r * flops, special_ops=r * special, matrix_flops=0,
                                  bytes_read=sum(numel(s) for s in shapes) * ITEM[dt], bytes_written=r * ITEM[dt]))


@FUZZ
@given(shape=st.lists(dims, max_size=3), dt=dtypes, f=st.sampled_from([("exp", 0, 1), ("relu", 1, 0), ("clone", 0, 0)]))
def test_elementwise_huge_shapes_never_wrap(shape, dt, f):
    name, flops, special = f
    shape = tuple(shape)
    c = attempt(roofline.cost, name, shape, dtype=dt, out=shape)
    n = numel(shape)
    expect_counts(c, [shape], dict(vector_flops=n * flops, special_ops=n * special, bytes_read=n * ITEM[dt],
                                   bytes_written=n * ITEM[dt]))


# ---- roofline.cost and TensorSpec: arbitrary input ------------------------------------------------------------

@FUZZ
@given(op=st.one_of(st.sampled_from(OP_NAMES), st.text(max_size=10), st.sampled_from(["aten::mm.out", "add_", "::",
                                                                                      "aten.", "mm.", "x::y.z"])),
       args=st.lists(junk_values, max_size=6), out=st.one_of(st.none(), junk_values),
       dt=st.one_of(dtypes, st.sampled_from(["fp16", "float", "half", "nope", ""])))
def test_cost_on_arbitrary_arguments_raises_only_documented_errors(op, args, out, dt):
    c = attempt(roofline.cost, op, *args, out=out, dtype=dt)
    if c is not None:
        check_cost(c)
        assert attempt(roofline.cost, op, *args, out=out, dtype=dt) == c  # a pure function of its arguments


@FUZZ
@given(shape=st.one_of(st.lists(st.one_of(junk_ints, st.floats(), st.text(max_size=2)), max_size=18),
                       st.tuples(junk_ints, junk_ints), st.text(max_size=4), junk_ints, st.none()),
       dt=st.one_of(dtypes, st.text(max_size=8), st.none(), st.integers()),
       stride=st.one_of(st.none(), st.lists(junk_ints, max_size=5)))
def test_tensorspec_validates_or_describes_exactly(shape, dt, stride):
    t = attempt(roofline.TensorSpec, shape, dt, stride)
    if t is None:
        return
    assert type(t.shape) is tuple and all(isinstance(s, int) and s >= 0 for s in t.shape)
    assert len(t.shape) <= 16
    assert t.numel == numel(t.shape)
    if t.dtype in ITEM:
        assert t.nbytes == t.numel * ITEM[t.dtype]
    assert len(t.stride()) == len(t.shape)
    again = roofline.TensorSpec(t.shape, t.dtype, t.stride())
    assert again == t and hash(again) == hash(t)


# ---- register(kind=...) -----------------------------------------------------------------------------------------

_counter = itertools.count()
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="roofline.register needs torch")


@needs_torch
@FUZZ
@given(kind=st.sampled_from(["ewise", "ewise_in", "foreach", "copy", "zero", "fill"]),
       flops=st.one_of(st.integers(0, 9), st.integers(0, 2**63 - 1)), special=st.integers(0, 2**40),
       shape=st.lists(st.integers(0, 2**20), max_size=3), dt=dtypes)
def test_register_kind_counts_per_element(kind, flops, special, shape, dt):
    name = f"roofline_fuzz::op{next(_counter)}"
    if kind in ("copy", "zero") and (flops or special):
        # Per-element costs belong to the per-element kinds only: anything else is refused at the call.
        with pytest.raises(ValueError, match=f"kind '{kind}' takes no"):
            roofline.register(name, kind=kind, flops=flops, special=special)
        assert name not in _registry.USER
        return
    roofline.register(name, kind=kind, flops=flops, special=special)
    try:
        shape = tuple(shape)
        c = attempt(roofline.cost, name, shape, out=shape, dtype=dt)
    finally:
        roofline.unregister(name)
    n = numel(shape)
    per = (0, 0) if kind in ("copy", "zero") else (flops, special)  # per element of the result / first tensor
    want = dict(vector_flops=n * per[0], special_ops=n * per[1], matrix_flops=0)
    expect_counts(c, [shape], want)


@needs_torch
@FUZZ
@given(kind=st.one_of(st.sampled_from(sorted(_registry.KINDS_BY_NAME)), st.text(max_size=6), st.none(), junk_ints),
       flops=st.one_of(junk_ints, st.floats(), st.booleans(), st.text(max_size=3), st.none()),
       special=st.one_of(junk_ints, st.floats(), st.none()))
def test_register_arbitrary_arguments_raise_only_documented_errors(kind, flops, special):
    name = f"roofline_fuzz::op{next(_counter)}"
    attempt(roofline.register, name, kind=kind, flops=flops, special=special)
    if name in _registry.USER:  # accepted: costing a call with it raises only documented errors too
        try:
            c = attempt(roofline.cost, name, (3, 5), out=(3, 5))
            if c is not None:
                check_cost(c)
        finally:
            roofline.unregister(name)


# ---- load(): JSON documents and mutated reports -----------------------------------------------------------------

def _valid_report(data):
    from roofline._datamodel._records import RECORD_DTYPE
    from roofline.report import OpInfo, Report

    n = data.draw(st.integers(0, 6))
    ops = [OpInfo(f"aten.op{i}.default", f"aten.op{i}", data.draw(st.sampled_from(["mm", "ewise", "copy"])))
           for i in range(data.draw(st.integers(1, 3)))]
    mods = [tuple(data.draw(st.lists(st.text("abc.", min_size=1, max_size=5), max_size=3)))
            for _ in range(data.draw(st.integers(1, 3)))]
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    for f in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "compat_flops"):
        rec[f] = data.draw(st.lists(st.integers(0, U64 - 1), min_size=n, max_size=n))
    rec["op"] = data.draw(st.lists(st.integers(0, len(ops) - 1), min_size=n, max_size=n))
    rec["module"] = data.draw(st.lists(st.integers(0, len(mods) - 1), min_size=n, max_size=n))
    rec["phase"] = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    rec["dtype"] = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    rec["t_start"], rec["t_end"] = np.nan, np.nan
    meta = {"timing": None, "devices": [], "version": roofline.__version__, "ceilings_source": "measured"}
    return Report(rec, ops, mods, wall_time=data.draw(st.one_of(st.none(), st.floats(0, 10))), meta=meta,
                  ceilings=None), rec


@FUZZ
@given(data=st.data())
def test_report_round_trips_through_json_exactly(data):
    r, rec = _valid_report(data)
    text = r.to_json()
    back = roofline.load(text)
    assert back.records.tobytes() == rec.tobytes()
    assert back.to_json() == text
    for f in ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written"):
        assert getattr(back, f) == sum(int(x) for x in rec[f])  # exact Python-int sums, beyond 2**64


@FUZZ
@given(doc=st.one_of(st.dictionaries(st.text(max_size=10), json_values, max_size=6), st.lists(json_values, max_size=4),
                     st.fixed_dictionaries({"schema": st.sampled_from([1, 2, "1", None])},
                                           optional={k: json_values for k in ("records", "n_records", "ops",
                                                                              "module_sets", "meta", "wall_time",
                                                                              "ceilings", "overhead")})))
def test_load_arbitrary_json_raises_only_documented_errors(doc):
    attempt(roofline.load, json.dumps(doc))


def _mutate(doc, data):
    """One random edit of a JSON document: replace, delete or add a value somewhere in it."""
    path, node = [], doc
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    if not path:  # a new document; an object or array, as load() reads any other text as a path
        return data.draw(st.one_of(st.lists(json_values, max_size=3),
                                   st.dictionaries(st.text(max_size=8), json_values, max_size=3)))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    action = data.draw(st.sampled_from(["replace", "delete", "records"]))
    if action == "delete":
        del parent[path[-1]]
    elif action == "records" and isinstance(doc, dict) and isinstance(doc.get("records"), str):
        raw = bytearray(base64.b64decode(doc["records"]))
        if raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        doc["records"] = base64.b64encode(bytes(raw[: data.draw(st.integers(0, len(raw)))])).decode()
    else:
        parent[path[-1]] = data.draw(json_values)
    return doc


@FUZZ
@given(data=st.data())
def test_load_mutated_reports_raises_only_documented_errors(data):
    r, _ = _valid_report(data)
    doc = json.loads(r.to_json())
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    attempt(roofline.load, json.dumps(doc))


# ---- the ceilings cache reader ----------------------------------------------------------------------------------

def _valid_ceilings():
    from roofline import devices
    from roofline._hardware._ceilings import Ceilings

    c = Ceilings.from_datasheet(devices.get("H100 SXM"))
    d = c.to_dict()
    d.update(fingerprint="fp", version=roofline.__version__, duration_s=1.5, quick=False,
             sweep={"sizes": [1024, 2048], "bandwidth": [1e9, 2e9]})
    return d


@FUZZ
@given(data=st.data(), mode=st.sampled_from(["bytes", "json", "mutated"]))
def test_ceilings_cache_reader_ignores_corrupt_files(tmp_path_factory, data, mode):
    from roofline._hardware._ceilings import Ceilings, _load_cache

    if mode == "bytes":
        raw = data.draw(st.binary(max_size=200))
    elif mode == "json":
        raw = json.dumps(data.draw(json_values)).encode()
    else:
        doc = _valid_ceilings()
        for _ in range(data.draw(st.integers(1, 3))):
            doc = _mutate(doc, data)
        # a sweep holding non-numbers is an open defect (test_ceilings_cache_reader_ignores_pathological_files)
        assume(not (isinstance(doc, dict) and isinstance(doc.get("sweep"), dict) and any(
            isinstance(v, list) and not all(type(x) in (int, float) for x in v) for v in doc["sweep"].values())))
        raw = json.dumps(doc).encode()
    path = tmp_path_factory.mktemp("cache") / "ceilings-cpu-fp.json"
    path.write_bytes(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _load_cache(str(path), "fp", need_thorough=False)  # documented: never raises
    assert got is None or isinstance(got, Ceilings)


# ---- with and without torch ---------------------------------------------------------------------------------------

# Training-mode batch norm is an open defect (test_out_overloads_and_transposed_conv_are_the_same_without_torch).
COMPARABLE_OPS = [op for op in OP_NAMES if not op.startswith("_native_batch_norm_legit")]


def T(shape):
    """A tensor argument in a JSON batch."""
    return {"t": list(shape)}


@st.composite
def comparable_calls(draw):
    """(op, args, out): tensors as {"t": shape}, so a batch travels as JSON to the replaying process."""
    kind = draw(st.sampled_from(["mm", "bmm", "addmm", "ewise", "conv", "attn", "reduce", "any"]))
    d = st.integers(0, 7)
    if kind == "mm":
        m, k, n = draw(d), draw(d), draw(d)
        return "mm", [T((m, k)), T((k, n))], None
    if kind == "bmm":
        b, m, k, n = draw(d), draw(d), draw(d), draw(d)
        return "bmm", [T((b, m, k)), T((b, k, n))], None
    if kind == "addmm":
        m, k, n = draw(d), draw(d), draw(d)
        return "addmm", [T((n,)), T((m, k)), T((k, n))], None
    if kind == "ewise":
        shape = draw(st.lists(d, max_size=3))
        return draw(st.sampled_from(["add", "mul", "sub", "exp", "relu", "sigmoid"])), [T(shape), T(shape)], None
    if kind == "conv":
        sp, groups, cin, cout, n, size, k, s, p, dl, _, bias, _ = draw(conv_cases())
        return "convolution", [T((n, cin, *size)), T((cout, cin // groups, *k)), T((cout,)) if bias else None, s, p,
                               dl, False, [0] * sp, groups], None
    if kind == "attn":
        b, h, sq, sk, dd = (draw(st.integers(1, 3)) for _ in range(5))
        return "_scaled_dot_product_flash_attention", [T((b, h, sq, dd)), T((b, h, sk, dd)), T((b, h, sk, dd)), 0.0,
                                                       draw(st.booleans())], None
    if kind == "reduce":
        shape = draw(st.lists(d, max_size=3))
        return draw(st.sampled_from(["sum", "mean", "_softmax"])), [T(shape)], T(shape)
    # any op of the table with arbitrary small arguments
    value = st.one_of(st.lists(d, max_size=3).map(T), d, st.none(), st.booleans(), st.lists(d, max_size=3))
    return (draw(st.sampled_from(COMPARABLE_OPS)), draw(st.lists(value, max_size=5)),
            draw(st.one_of(st.none(), st.lists(d, max_size=3).map(T))))


_REPLAY = r"""
import json, sys
if sys.argv[1] == "hide":
    sys.modules["torch"] = None  # import torch raises ImportError
import roofline

def arg(a):
    return tuple(a["t"]) if isinstance(a, dict) else a

out = []
for op, args, o in json.load(sys.stdin):
    try:
        c = roofline.cost(op, *map(arg, args), out=None if o is None else arg(o))
        out.append(["ok", c.matrix_flops, c.vector_flops, c.special_ops, c.bytes_read, c.bytes_written,
                    c.flop_counter_flops, c.dtype])
    except (ValueError, TypeError, OverflowError) as e:
        out.append(["error", type(e).__name__])
print(json.dumps(out))
"""


def _replay(batch, hide_torch: bool):
    p = subprocess.run([sys.executable, "-c", _REPLAY, "hide" if hide_torch else "keep"], input=json.dumps(batch),
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@needs_torch
@settings(NO_SHRINK, max_examples=max(2, EXAMPLES // 500))
@given(batch=st.lists(comparable_calls(), min_size=100, max_size=100))
def test_cost_is_the_same_with_and_without_torch(batch):
    """A batch of calls costed in two processes, one with torch importable and one without: identical results
    (counts and dtype, or the same exception type)."""
    with_torch, without = _replay(batch, False), _replay(batch, True)
    diffs = [(call, a, b) for call, a, b in zip(batch, with_torch, without) if a != b]
    assert not diffs, f"{len(diffs)} of {len(batch)} differ, e.g. {diffs[:3]}"


@st.composite
def out_and_transposed_calls(draw):
    """out= overloads, transposed _convolution and training-mode batch norm: calls whose answers depend on torch
    being installed."""
    d = st.integers(1, 6)
    if draw(st.integers(0, 3)) == 0:  # training-mode batch norm: (input, weight, bias, running_mean, running_var, ...)
        n, c, h = draw(d), draw(d), draw(d)
        return "_native_batch_norm_legit", [T((n, c, h)), T((c,)), T((c,)), T((c,)), T((c,)), True, 0.1, 1e-5], \
            T((n, c, h))
    if draw(st.booleans()):
        m, k, n = draw(d), draw(d), draw(d)
        return draw(st.sampled_from([("mm.out", [T((m, k)), T((k, n))], T((m, n))),
                                     ("add.out", [T((m, n)), T((m, n))], T((m, n))),
                                     ("exp.out", [T((m, n))], T((m, n)))]))
    sp, groups, cin, cout, n, size, k, s, p, dl, _, _, _ = draw(conv_cases())
    return "_convolution", [T((n, cin, *size)), T((cin, cout // groups, *k)), None, s, p, dl, True, [0] * sp, groups,
                            False, False, False, False], None


# ---- regressions: defects the fuzzers found, each fixed at its root -----------------------------------------

@NO_SHRINK
@given(shape=st.lists(st.one_of(st.booleans(), st.integers(0, 4)), min_size=1, max_size=4).filter(
    lambda s: any(isinstance(x, bool) for x in s)))
def test_tensorspec_rejects_bool_sizes(shape):
    assert attempt(roofline.TensorSpec, shape) is None


@needs_torch
@NO_SHRINK
@given(flops=st.one_of(st.floats().filter(lambda f: not f.is_integer()), st.integers(2**63, 2**80),
                       st.booleans(), st.text(max_size=3)))
def test_register_rejects_invalid_per_element_costs(flops):
    name = f"roofline_fuzz::op{next(_counter)}"
    try:
        attempt(roofline.register, name, kind="ewise", flops=flops)
        accepted = name in _registry.USER
    finally:
        if name in _registry.USER:
            roofline.unregister(name)
    assert not accepted, f"register accepted flops={flops!r}"


@NO_SHRINK
@given(data=st.data())
@example(data=None)
def test_loaded_reports_are_usable(data):
    """A document load() accepts prints, rolls up and saves; deep nesting is a ValueError."""
    if data is None:
        with pytest.raises(ValueError):
            roofline.load("[" * 100_000 + "]" * 100_000)
        return
    r, _ = _valid_report(data)
    doc = json.loads(r.to_json())
    doc = _mutate(doc, data)
    got = attempt(roofline.load, json.dumps(doc))
    if got is not None:
        str(got)
        got.by_op()
        got.to_json()


@needs_torch
@settings(NO_SHRINK, max_examples=max(2, EXAMPLES // 500))
@given(batch=st.lists(out_and_transposed_calls(), min_size=30, max_size=30))
def test_out_overloads_and_transposed_conv_are_the_same_without_torch(batch):
    with_torch, without = _replay(batch, False), _replay(batch, True)
    diffs = [(call, a, b) for call, a, b in zip(batch, with_torch, without) if a != b]
    assert not diffs, f"{len(diffs)} of {len(batch)} differ, e.g. {diffs[:3]}"


@pytest.mark.parametrize("text", ["[" * 100_000, '{"sweep": {"sizes": [1e30]}}', '{"sweep": {"sizes": [null]}}',
                                  '{"sweep": {"bandwidth": [{}]}}'])
def test_ceilings_cache_reader_ignores_pathological_files(tmp_path, text):
    from roofline._hardware._ceilings import _load_cache

    doc = _valid_ceilings()
    if text.startswith('{"sweep"'):  # a valid document whose sweep is replaced
        doc["sweep"] = json.loads(text)["sweep"]
        text = json.dumps(doc)
    path = tmp_path / "ceilings-cpu-fp.json"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _load_cache(str(path), "fp", need_thorough=False) is None
