"""A fixed sample of the OpInfo sweep (bench/opinfo.py, the whole of torch's op_db): OpInfos whose ops got formulas
from it, run through the same check (first sample, float32 and bfloat16, forward and backward) and fully counted: no
unknown op, no count error, nothing raised inside the block, FlopCounterMode's count where it has one."""

import importlib.util
import os

import pytest

pytest.importorskip("torch")

SAMPLE = ["logaddexp", "nn.functional.glu", "nn.functional.pixel_shuffle", "nn.functional.grid_sample", "cdist",
          "cummax", "linalg.svd", "linalg.solve", "linalg.eigh", "special.bessel_j0", "nn.functional.ctc_loss",
          "bitwise_left_shift", "mm", "nn.functional.conv2d", "nn.functional.linear_cross_entropy.chunked",
          "_segment_reduce.lengths", "nn.functional.max_unpool2d", "logcumsumexp", "hypot", "trace"]


@pytest.fixture(scope="module")
def sweep():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "opinfo.py")
    spec = importlib.util.spec_from_file_location("_opinfo_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.op_database()


@pytest.mark.parametrize("name", SAMPLE)
def test_opinfo_fully_counted(sweep, name):
    mod, ops = sweep
    res = mod.check_op(ops[name], samples=1, dtypes=("float32", "bfloat16"))
    assert res["runs"] > 0, f"{name}: no runnable sample"
    assert res["unknown"] == {} and res["errors"] == {} and res["raised"] == [] and res["fcm"] == [], res


# ---- item: bytes and FLOPs checked, not only present ----------------------------------------------------------------
# For the element-wise, reduction and data-movement kinds, over OpInfo samples: every record's bytes read are at least
# the inputs the op must read (each distinct tensor argument it does not write, at the size it occupies: a broadcast
# dimension once), its bytes written are exactly its outputs' sizes when it writes no argument (out-of-place), and its
# FLOPs and special functions are the kind's per-element cost (the registry's table) times the elements it counts: the
# result's (ewise, fill) or the first tensor argument's (ewise_in). The tensors are seen by a dispatch mode of the test,
# entered outside the block: it sees each op after roofline has recorded it, in the same order.

PROPERTY_SAMPLE = ["abs", "exp", "sin", "add", "mul", "sub", "div.no_rounding_mode", "where", "clamp", "sigmoid",
                   "nn.functional.gelu", "nn.functional.silu", "logaddexp", "hypot", "sum", "mean", "amax", "prod",
                   "var", "softmax", "log_softmax", "nn.functional.layer_norm", "cumsum", "cummax", "logcumsumexp",
                   "cat", "stack", "flip", "roll", "repeat", "tril", "nn.functional.pad.constant", "clone",
                   "masked_fill", "full_like", "zeros_like", "polygamma.polygamma_n_0", "special.bessel_j0",
                   "nn.functional.glu", "nn.functional.pixel_shuffle", "bitwise_left_shift", "logit", "nan_to_num"]
CHECKED_KINDS = ("ewise", "ewise_in", "copy", "fill")


def _touched(t):
    n = 1
    for s, st in zip(t.shape, t.stride()):
        if st != 0:
            n *= int(s)
    if any(int(s) == 0 for s in t.shape):
        n = 0
    return n * t.element_size()


def _flat_tensors(x):
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _flat_tensors(y)]
    return []


@pytest.fixture(scope="module")
def property_records(sweep):
    """(op name, kind, bound arguments, written argument names, outputs, record) for every record of the sample's
    calls whose kind is checked."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import roofline

    mod, ops = sweep

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self.calls.append((func, args, kwargs, out))
            return out

    rows = []
    for name in PROPERTY_SAMPLE:
        op = ops[name]
        dtype = torch.float32 if torch.float32 in op.supported_dtypes("cpu") else torch.int64
        grad = op.supports_autograd and dtype.is_floating_point
        sample = next(iter(op.sample_inputs("cpu", dtype, requires_grad=grad)))
        for bwd in ((False, True) if grad else (False,)):
            seen = Seen()
            with seen:
                with roofline.measure() as r:
                    mod._run(op, sample, bwd)
            names, kinds = r.op_names, r.op_kinds
            recs = r.records
            calls = [c for c in seen.calls if str(c[0]) in set(names)]
            assert [str(c[0]) for c in calls] == [names[i] for i in recs["op"]], f"{name}: op streams differ"
            for (func, args, kwargs, out), rec in zip(calls, recs):
                kind = kinds[rec["op"]]
                if kind not in CHECKED_KINDS:
                    continue
                argnames = [a.name for a in func._schema.arguments]
                bound = dict(zip(argnames, args))
                bound.update(kwargs)
                written = {a.name for a in func._schema.arguments if a.alias_info is not None and
                           a.alias_info.is_write}
                rows.append((f"{name}: {func}", kind, bound, written, out, rec, func))
    return rows


def test_property_sample_covers_every_checked_kind(property_records):
    kinds = {row[1] for row in property_records}
    assert kinds == set(CHECKED_KINDS), kinds
    assert len(property_records) >= 80


def test_bytes_read_cover_the_inputs(property_records):
    """bytes read >= each distinct tensor argument not written (the op's inputs), at its touched size; a fill reads
    nothing. Arguments the registry marks as shape-only (``noread``: a backward's ``self`` giving the size) are
    left out of the bound."""
    from roofline._counting import _resolve

    bad = []
    for where, kind, bound, written, out, rec, func in property_records:
        if kind == "fill":
            continue
        entry = _resolve.find(func._schema.name, func._overloadname).entry
        skip = set(written)
        if entry is not None and entry.noread:
            skip |= {n if isinstance(n, str) else list(bound)[n] for n in entry.noread if n != "*"}
        seen, need = set(), 0
        for k, v in bound.items():
            if k in skip:
                continue
            for t in _flat_tensors(v):
                key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
                if key not in seen:
                    seen.add(key)
                    need += _touched(t)
        if int(rec["bytes_read"]) < need:
            bad.append((where, int(rec["bytes_read"]), need))
    assert not bad, bad[:10]


def test_bytes_written_are_the_outputs(property_records):
    """An out-of-place op (it writes no argument) writes exactly its outputs: numel x element size of each result."""
    bad = []
    for where, kind, bound, written, out, rec, func in property_records:
        if written:
            continue
        expected = sum(t.numel() * t.element_size() for t in _flat_tensors(out))
        if int(rec["bytes_written"]) != expected:
            bad.append((where, int(rec["bytes_written"]), expected))
    assert not bad, bad[:10]


def test_flops_per_element_from_the_table(property_records):
    """vector FLOPs and special functions = the registry's per-element cost x the elements the kind counts: the
    result's for ewise and fill, the first tensor argument's (or the one the entry names) for ewise_in; copy kinds
    count none."""
    from roofline._counting import _resolve

    bad = []
    for where, kind, bound, written, out, rec, func in property_records:
        entry = _resolve.find(func._schema.name, func._overloadname).entry
        if kind == "copy":
            per = (0, 0)
            n = 0
        else:
            per = (entry.flops, entry.special)
            if kind == "ewise_in":
                of = entry.params.get("of")
                src = bound[of] if of else next(t for v in bound.values() for t in _flat_tensors(v))
                n = sum(t.numel() for t in _flat_tensors(src))
            else:
                targets = [bound[w] for w in written] if written else [out]
                n = _flat_tensors(targets)[0].numel()
        got = (int(rec["vector_flops"]), int(rec["special_ops"]))
        if got != (per[0] * n, per[1] * n):
            bad.append((where, got, (per[0] * n, per[1] * n)))
    assert not bad, bad[:10]
