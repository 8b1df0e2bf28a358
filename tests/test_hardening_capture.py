"""Hostile use of the capture session (issue 40): gradients with respect to inputs, recomputation of plain
functions, token layouts checked against the calls, the package's own bookkeeping kept out of reports, fake and
meta masks, huge token counts, and the token layout's schema on both sides of ``to_json`` / ``load``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import roofline

# ---- gradients with respect to inputs (torch.autograd.grad on a leaf input, jacrev, hessian) ------------------------


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _functional(m):
    """The same computation as ``m`` without modules: FlopCounterMode's module tracker then hooks nothing, so it
    counts calls that fail under its tracker with a module (its multi-grad hook asks torch about a leaf input's
    accumulator inside ``autograd.grad``)."""
    (w1, b1), (w2, b2) = (m[0].weight, m[0].bias), (m[2].weight, m[2].bias)
    return lambda z: F.linear(torch.tanh(F.linear(z, w1, b1)), w2, b2)


def _fcm(fn, *a):
    with FlopCounterMode(display=False) as f:
        fn(*a)
    return f.get_total_flops()


def _matrix(r):
    return int(r.records["matrix_flops"].sum())


def _penalty(f, x):
    y = f(x).sum()
    g, = torch.autograd.grad(y, x, create_graph=True)
    (y + g.pow(2).sum()).backward()


def test_grad_wrt_input_leaf_gradient_penalty():
    m = _mlp()
    x = torch.randn(3, 4, requires_grad=True)
    with roofline.measure(m) as r:  # raised autograd's _will_engine_execute_node error
        _penalty(m, x)
    expected = _fcm(_penalty, _functional(m), torch.randn(3, 4, requires_grad=True))
    assert _matrix(r) == expected
    # forward 2*3*4*8 + 2*3*8*2 = 288; the same model's plain backward adds twice that and more: the count is past it
    assert expected > 3 * 288


def test_autograd_grad_wrt_input_only_counts_input_gradients():
    m = _mlp()
    x = torch.randn(3, 4, requires_grad=True)
    with roofline.measure(m) as r:
        g, = torch.autograd.grad(m(x).sum(), x)
    # forward: 2*3*4*8 = 192 and 2*3*8*2 = 96; backward to the input only (no weight gradients):
    # (3,2)@(2,8): 2*3*2*8 = 96 and (3,8)@(8,4): 2*3*8*4 = 192
    assert _matrix(r) == 192 + 96 + 96 + 192
    assert g.shape == x.shape
    # each layer's input-gradient product is credited to that layer
    bwd = r.by_module(phase="backward")
    assert (bwd["Sequential.0"]["matrix_flops"], bwd["Sequential.2"]["matrix_flops"]) == (192, 96)


@pytest.mark.parametrize("kind", ["jacrev", "jacobian", "func_hessian", "functional_hessian"])
def test_jacobians_and_hessians_of_a_module(kind):
    m = _mlp()
    f = _functional(m)
    x = torch.randn(3, 4)

    def run(g):
        if kind == "jacrev":
            return torch.func.jacrev(g)(x)
        if kind == "jacobian":
            return torch.autograd.functional.jacobian(g, x)
        if kind == "func_hessian":
            return torch.func.hessian(lambda z: g(z).sum())(x)
        return torch.autograd.functional.hessian(lambda z: g(z).sum(), x)

    with roofline.measure(m) as r:
        out = run(m)
    torch.testing.assert_close(out, run(f))
    assert _matrix(r) == _fcm(run, f)
    if kind == "jacrev":
        # forward 288; vmap over the 6 outputs of the vector-Jacobian product, to the input only:
        # (18,2)@(2,8): 2*18*2*8 = 576 and (18,8)@(8,4): 2*18*8*4 = 1152
        assert _matrix(r) == 288 + 576 + 1152


# ---- recomputation of a plain function (non-reentrant checkpoint) ---------------------------------------------------


def _where(r, phase):
    """{(op, module path): calls} of the records of ``phase``."""
    out: dict = {}
    p = roofline._core.PHASES.index(phase)
    for rec in r.records[r.records["phase"] == p]:
        k = (r.op_names[rec["op"]], r.module_path(int(rec["module"])))
        out[k] = out.get(k, 0) + 1
    return out


class _Layer(torch.nn.Module):
    """A DenseNet layer's shape: a plain function (``cat`` then a module) checkpointed inside the layer's forward."""

    def __init__(self, reentrant=False, modules_inside=True):
        super().__init__()
        self.conv1 = torch.nn.Linear(8, 4)
        self.conv2 = torch.nn.Linear(4, 4)
        self.reentrant, self.modules_inside = reentrant, modules_inside

    def bottleneck(self, a, b):
        h = torch.cat([a, b], 1)
        return self.conv1(h) if self.modules_inside else h[:, :4].sin()

    def forward(self, a, b):
        h = torch.utils.checkpoint.checkpoint(self.bottleneck, a, b, use_reentrant=self.reentrant)
        return self.conv2(h)


@pytest.mark.parametrize("reentrant,modules_inside", [(False, True), (True, True), (False, False)])
def test_recomputed_function_ops_belong_to_the_callers_set(reentrant, modules_inside):
    torch.manual_seed(0)
    m = _Layer(reentrant, modules_inside)
    a, b = torch.randn(2, 4, requires_grad=True), torch.randn(2, 4, requires_grad=True)
    with roofline.measure(m) as r:
        m(a, b).sum().backward()
    rec = _where(r, "recompute")
    # the function's cat ran in _Layer's forward (not in conv1's): recomputed, it is still _Layer's
    assert rec.get(("aten.cat.default", "_Layer"), 0) == 1, rec
    assert not any(op == "aten.cat.default" and mod != "_Layer" for op, mod in rec)
    assert _where(r, "forward")[("aten.cat.default", "_Layer")] == 1
    if modules_inside:  # what runs again inside conv1 (before the early stop) is conv1's
        # (a reentrant checkpoint detaches its inputs first, in the caller's set)
        assert all(mod == "_Layer.conv1" for op, mod in rec if op not in ("aten.cat.default", "aten.detach.default"))


def test_densenet_memory_efficient_recomputed_cat():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = torchvision.models.DenseNet(growth_rate=4, block_config=(2,), num_init_features=8, bn_size=2,
                                    memory_efficient=True)
    with roofline.measure(m) as r:
        m(torch.randn(1, 3, 32, 32)).sum().backward()
    rec, fwd = _where(r, "recompute"), _where(r, "forward")
    layers = [f"DenseNet.features.denseblock1.denselayer{i}" for i in (1, 2)]
    # each layer's recomputed cat (its bn_function's first op) belongs to the layer, as its forward cat did
    assert {k: v for k, v in rec.items() if k[0] == "aten.cat.default"} == {("aten.cat.default", n): 1 for n in layers}
    assert all(fwd[("aten.cat.default", n)] == 1 for n in layers)
    # and the norm it recomputes next to its own module
    assert all(rec[("aten._native_batch_norm_legit.default", f"{n}.norm1")] == 1 for n in layers)


# ---- token layouts: checked against the calls, read outside the report, fake and meta masks, the schema -----------


class _Tok(torch.nn.Module):
    """A tiny language model's shape: token ids (B, S) -> embeddings -> a linear layer; takes an attention mask."""

    def __init__(self):
        super().__init__()
        self.emb, self.lin = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8)

    def forward(self, input_ids, attention_mask=None, cu_seq_lens_q=None):
        return self.lin(self.emb(input_ids))


_IDS = torch.zeros(2, 5, dtype=torch.long)
_MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


def _ops(r):
    return sorted(r.op_names[o] for o in r.records["op"])


def _bare_ops(m, *a, **k):
    """The ops of the call as a plain dispatch mode sees them (a second counter: torch's own mode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        m(*a, **k)
    return sorted(s for s in seen if s != "prim.device.default")


def test_attention_mask_detection_records_none_of_its_own_ops():
    m = _Tok()
    with roofline.measure(m) as r:
        m(_IDS, attention_mask=_MASK)
    # the layout was read: 3 + 5 real tokens of 2 x 5
    assert r.meta["tokens"] == {"batch": 2, "seq_len": 5, "lengths": [3, 5], "packed": False}
    # and the report holds the model's ops only (it held an aten.detach of the mask)
    assert _ops(r) == _bare_ops(m, _IDS, attention_mask=_MASK)
    assert "aten.detach.default" not in _ops(r)
    # an enclosing block or mode does not see the read either
    with roofline.measure() as outer:
        with roofline.measure(m) as inner:
            m(_IDS, attention_mask=_MASK)
    assert _ops(outer) == _ops(inner) == _ops(r)


def test_packed_batch_detection_records_none_of_its_own_ops():
    m = _Tok()
    ids, cu = torch.zeros(1, 7, dtype=torch.long), torch.tensor([0, 3, 7], dtype=torch.int32)
    with roofline.measure(m) as r:
        m(ids, cu_seq_lens_q=cu)
    assert r.meta["tokens"] == {"batch": 1, "seq_len": 7, "lengths": [3, 4], "packed": True}
    assert _ops(r) == _bare_ops(m, ids)


def test_a_mask_changed_in_place_in_the_block_is_read_as_it_was_passed():
    m = _Tok()
    mask = _MASK.clone()
    with roofline.measure(m) as r:
        m(_IDS, attention_mask=mask)
        mask.fill_(1)  # a reused buffer: the CPU mask was read when the model returned
    assert r.meta["tokens"]["lengths"] == [3, 5]


def test_fake_and_meta_masks_of_the_model_give_no_layout_and_say_why():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        m = _Tok()
        ids, mask = torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)
        with roofline.measure(m) as r:  # crashed: .numpy() on a fake tensor
            m(ids, attention_mask=mask)
    assert "tokens" not in r.meta and "fake tensor" in r.meta["tokens_unknown"]
    # (2*5, 8) @ (8, 8): 2*10*8*8 = 1280 matrix FLOPs, counted as without a mask
    assert _matrix(r) == 1280
    m = _Tok().to("meta")
    with roofline.measure(m) as r:
        m(torch.zeros(2, 5, dtype=torch.long, device="meta"), attention_mask=torch.ones(2, 5, device="meta"))
    assert "meta tensor" in r.meta["tokens_unknown"] and _matrix(r) == 1280
    assert roofline.load(r.to_json()).meta["tokens_unknown"] == r.meta["tokens_unknown"]
    with pytest.raises(ValueError, match="which tokens are real is unknown"):
        r.useful_work()


def test_meta_and_fake_tokens_arguments_are_refused_naming_tokens():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(ValueError, match=r"^tokens is a meta tensor"):
        roofline.measure(tokens=torch.ones(2, 5, device="meta"))
    with pytest.raises(ValueError, match=r"^tokens\['cu_seqlens'\] is a meta tensor"):
        roofline.measure(tokens={"cu_seqlens": torch.tensor([0, 3], device="meta")})
    with FakeTensorMode():
        fake = torch.ones(2, 5)
    with pytest.raises(ValueError, match=r"^tokens is a fake tensor"):
        roofline.measure(tokens=fake)
    # a real tensor mask is read (2 + 1 real of 2 x 3), also while FakeTensorMode is on
    real = torch.tensor([[1, 1, 0], [1, 0, 0]])
    with FakeTensorMode():
        m = roofline.measure(tokens=real)
    assert m._tokens["lengths"] == [2, 1]


def test_a_layout_that_matches_no_call_is_flagged_and_said():
    m = _Tok()
    with pytest.warns(RuntimeWarning, match=r"matches no call of the step"):
        with roofline.measure(m, tokens=torch.ones(3, 7)) as r:  # the step's batch is 2 x 5
            m(_IDS)
    assert r.meta["tokens"]["matched"] is False
    assert "matches no call" in str(r) and "tokens/s" not in str(r)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flagged layout is not warned about again
        assert r.useful_work()["matched"] is False
        assert roofline.load(r.to_json()).meta["tokens"]["matched"] is False
    # a layout given to useful_work is checked there too
    with roofline.measure(m) as r2:
        m(_IDS)
    with pytest.warns(RuntimeWarning, match="matches no call"):
        assert r2.useful_work(tokens={"lengths": [4], "seq_len": 9})["matched"] is False
    # neighbours that match: the step's own mask (2 x 5), and B x S = 10 rows with a (1, 10) packed layout
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with roofline.measure(m, tokens=_MASK) as r3:
            m(_IDS)
        u = r3.useful_work()
        assert u["matched"] and "matched" not in r3.meta["tokens"]
        # 2 of the 10 positions are padding: 2/10 of the per-token FLOPs (all of them here)
        assert u["padding_share"] == pytest.approx(0.2)
        assert r2.useful_work(tokens={"cu_seqlens": [0, 4, 10]})["matched"]


@pytest.mark.parametrize("tokens,field", [
    ({"cu_seqlens": [0, 0]}, "cu_seqlens"),
    ({"cu_seqlens": [0, 2**53 + 1]}, "seq_len"),
    ({"lengths": [3], "seq_len": 2**53 + 1}, "seq_len"),
    ({"lengths": [2**60], "seq_len": 2**60}, "seq_len"),
    ({"lengths": [10**400], "seq_len": 10**400}, "seq_len"),
    ({"cu_seqlens": [0, 10**400]}, "seq_len"),
    (10**400, "tokens"),
])
def test_out_of_range_layouts_are_refused_naming_tokens(tokens, field):
    with pytest.raises(ValueError, match=r"^tokens") as e:
        roofline.measure(tokens=tokens)
    assert field in str(e.value)
    r = _small_report()
    with pytest.raises(ValueError, match=r"^tokens"):
        r.useful_work(tokens=tokens)


def test_largest_layout_in_range_round_trips():
    r = _small_report()
    lay = roofline.measure(tokens={"lengths": [2**53], "seq_len": 2**53})._tokens
    r.meta["tokens"] = lay
    assert roofline.load(r.to_json()).meta["tokens"] == lay


def test_to_json_refuses_what_load_would_refuse():
    r = _small_report()
    saved = r.meta.get("tokens")
    try:
        r.meta["tokens"] = {"batch": 1, "seq_len": 0, "lengths": [0], "packed": True}  # set by hand
        with pytest.raises(ValueError, match=r"cannot be saved: meta\.tokens\.seq_len is 0"):
            r.to_json()
    finally:
        r.meta["tokens"] = saved


_SMALL = []


def _small_report():
    """One small measured step with a token mask (built once)."""
    if not _SMALL:
        m = _Tok()
        with roofline.measure(m) as r:
            m(_IDS, attention_mask=_MASK)
        _SMALL.append(r)
    return _SMALL[0]


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_INT = st.one_of(st.integers(-3, 12), st.integers(2**53 - 2, 2**53 + 2), st.integers(2**62, 2**65),
                 st.just(10**400))
_LAYOUTS = st.one_of(
    st.fixed_dictionaries({"cu_seqlens": st.lists(_INT, max_size=5)}),
    st.fixed_dictionaries({"lengths": st.lists(_INT, max_size=5), "seq_len": _INT}),
    st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=4), min_size=1, max_size=3),
)


@settings(max_examples=150, deadline=None, database=None)
@given(_LAYOUTS)
def test_any_accepted_layout_round_trips_through_to_json_and_load(tokens):
    """A layout measure accepts is written by to_json and loaded back as it was; one it refuses is a ValueError
    naming tokens (never another exception)."""
    r = _small_report()
    try:
        lay = roofline.measure(tokens=tokens)._tokens
    except ValueError as e:
        assert str(e).startswith("tokens")
        return
    saved = r.meta.get("tokens")
    try:
        r.meta["tokens"] = lay
        back = roofline.load(r.to_json())
    finally:
        r.meta["tokens"] = saved
    assert back.meta["tokens"] == lay
    # the figures of a loaded layout are finite
    u = back.useful_work()
    assert np.isfinite(u["padding_share"]) and u["real_tokens"] == sum(lay["lengths"])


# ---- a model compiled before the block, run under autocast ----------------------------------------------------------

# matrix FLOPs of the MLP below on a batch of 4: forward 2*4*16*32 + 2*4*32*8 = 4096 + 2048 = 6144; backward (the
# input needs no gradient): weight gradients 2*32*4*16 + 2*8*4*32 = 4096 + 2048 and the second layer's input
# gradient 2*4*8*32 = 2048: 8192
_AMP_FWD, _AMP_BWD = 6144, 8192


def _amp_step(f, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = f(x).float().sum()
    loss.backward()


@pytest.fixture(scope="module")
def amp_compiled():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    cm = torch.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on global module hooks
        _amp_step(cm, x)  # compiled here, before any block
    return m, cm, x


def _matrix_by(r):
    out: dict = {}
    for rec in r.records[r.records["matrix_flops"] > 0]:
        k = (r.dtype_names[int(rec["dtype"])], roofline._core.PHASES[rec["phase"]])
        out[k] = out.get(k, 0) + int(rec["matrix_flops"])
    return out


def test_compiled_before_the_block_under_autocast_is_recovered(amp_compiled):
    m, cm, x = amp_compiled
    with roofline.measure(m, timing=None) as r:  # was: 0 matrix FLOPs, incomplete, blaming an option
        _amp_step(cm, x)
    with roofline.measure(m, timing=None) as e:
        _amp_step(m, x)
    assert r.complete, r.incomplete
    assert r.compiled["recovered_graphs"] >= 1
    want = {("bfloat16", "forward"): _AMP_FWD, ("bfloat16", "backward"): _AMP_BWD}
    assert _matrix_by(e) == want  # the eager autocast step, by hand
    assert _matrix_by(r) == want


def test_a_recompilation_that_differs_names_what_was_tried():
    """A graph whose private compilation differs for another reason (here an Inductor setting changed after the
    user's compilation) is not recovered; the message says it was compiled with and without autocast, and what else
    can differ."""
    from torch._inductor import config as iconfig

    torch.manual_seed(0)
    m, x = torch.nn.Linear(16, 8), torch.randn(3, 16)  # a graph of its own (none filed for it yet)
    cm = torch.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _amp_step(cm, x)
    with iconfig.patch({"cpp.simdlen": 1}), pytest.warns(RuntimeWarning, match="NOT counted"):
        with roofline.measure(m, timing=None) as r:
            _amp_step(cm, x)
    assert not r.complete
    why = r.incomplete[0]
    assert "no autocast and cpu bfloat16" in why and "a compile option, a global setting" in why, why


# ---- blocks run in the middle of another block's entry or exit (signal handlers) -----------------------------------


@pytest.mark.parametrize("step", ["_hook_optimizer", "_unhook_optimizer", "_stop_compiled"])
def test_a_block_inside_another_blocks_entry_or_exit_is_refused_and_the_other_keeps_its_report(step, monkeypatch):
    """What a signal handler landing in the middle of a block's entry (``_hook_optimizer``) or exit (the release
    steps) does, made deterministic: the handler's block is refused without touching the other block's half-made
    state, and says so; the other block keeps its full report. (It raised IndexError there and lost its report.)"""
    from roofline.capture import _torch

    inner = []
    original = getattr(_torch.Session, step)

    def handler_block(self):
        if not inner:
            with pytest.warns(RuntimeWarning, match="being entered or left"):
                with roofline.measure(timing=None) as r:
                    torch.add(torch.ones(2), 1)
            inner.append(r)
        return original(self)

    m = _mlp()
    x = torch.randn(3, 4)
    with roofline.measure(m, timing=None) as alone:
        m(x)
    monkeypatch.setattr(_torch.Session, step, handler_block)
    with roofline.measure(m, timing=None) as r:
        m(x)
    monkeypatch.undo()
    assert len(inner) == 1 and len(inner[0].records) == 0 and not inner[0].complete
    assert "nothing in it was counted" in inner[0].incomplete[0]
    # the other block: its full report (2 products: 2*3*4*8 + 2*3*8*2 = 288 matrix FLOPs), plus the handler's add
    # where it ran while the other block's mode was on the stack
    assert _matrix(r) == _matrix(alone) == 288 and r.complete
    extra = [r.op_names[o] for o in r.records["op"]]
    assert len(extra) - len(alone.records) in (0, 1)
    # and the next block is an ordinary one
    with roofline.measure(m, timing=None) as again:
        m(x)
    assert _ops(again) == _ops(alone)


def test_signal_handler_blocks_stress_short():
    """bench/signal_blocks.py, 150 main blocks, each with a handler block landing at a random time: no report lost or
    wrong, no state left behind."""
    import importlib.util
    import io
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "signal_blocks.py")
    spec = importlib.util.spec_from_file_location("roofline_bench_signal_blocks", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = io.StringIO()
    res = mod.run(150, seed=1, out=out)
    assert (res["main_lost"], res["main_wrong"], res["handler_wrong"], res["no_signal"], res["leaks"]) == \
        (0, 0, 0, 0, []), out.getvalue()
    assert res["main_ok"] == 150 and res["handler_counted"] + res["handler_refused"] == 150
