"""Backward work credited to the module whose forward caused it (each backward op linked to its forward through the
autograd node it runs in), FlopCounterMode's structure kept beside it, and activation checkpointing's recomputation
in a phase of its own: MFU over the model's FLOPs (each counted once), HFU over every FLOP executed.

Expected FLOPs are written as arithmetic here (2 * rows * inner * cols per matrix product) or come from
FlopCounterMode and from the same step measured without checkpointing."""

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402


def mm(m, k, n):
    """FLOPs of one (m x k) @ (k x n) product."""
    return 2 * m * k * n


def backward_matrix(r, suffix):
    """Backward matrix FLOPs of the one module whose name ends with ``suffix`` (by_module sums its submodules); 0
    for a module that ran no backward op (it is then in no module set at all: checked to exist)."""
    rows = {k: v for k, v in r.by_module(phase="backward").items() if k == suffix or k.endswith("." + suffix)}
    if not rows:
        known = {n for names in r.module_sets for n in names}
        assert any(n == suffix or n.endswith("." + suffix) for n in known), (suffix, "is no module of the report")
        return 0
    assert len(rows) == 1, (suffix, sorted(rows))
    return next(iter(rows.values()))["matrix_flops"]


def fcm_counts(model, step):
    with FlopCounterMode(display=False) as f:
        step()
    return f.get_flop_counts()


# ---- LoRA: two modules read one input ---------------------------------------------------------------------------
class LoRALinear(nn.Module):
    """``base(x) + B(A(drop(x)))``: the adapter and the identity dropout read the base layer's input."""

    def __init__(self, d, r):
        super().__init__()
        self.base = nn.Linear(d, d, bias=False)
        self.drop = nn.Identity()
        self.A = nn.Linear(d, r, bias=False)
        self.B = nn.Linear(r, d, bias=False)

    def forward(self, x):
        return self.base(x) + self.B(self.A(self.drop(x)))


def test_lora_adapter_gets_its_own_backward_and_the_identity_none():
    T, d, r = 32, 64, 8
    torch.manual_seed(0)
    model = nn.Sequential(*[LoRALinear(d, r) for _ in range(3)])
    x = torch.randn(T, d, requires_grad=True)

    def step():
        model(x).sum().backward()

    with roofline.measure(model, timing=None) as rep:
        step()
    for i in range(3):
        # grad of the input and of the weight: two products each
        assert backward_matrix(rep, f"{i}.A") == mm(T, r, d) + mm(d, T, r)
        assert backward_matrix(rep, f"{i}.B") == mm(T, d, r) + mm(r, T, d)
        assert backward_matrix(rep, f"{i}.base") == mm(T, d, d) + mm(d, T, d)
        assert backward_matrix(rep, f"{i}.drop") == 0
    assert rep.attribution["method"] == "autograd" and rep.attribution["unlinked_calls"] == 0
    assert rep.attribution["moved_calls"] > 0  # ModuleTracker's rule credits them elsewhere
    # FlopCounterMode's structure, where the identity and the adapter share the base layer's backward, is kept
    assert rep.flop_counter_compatible() == fcm_counts(model, step)
    # and survives a round trip through JSON
    back = roofline.load(rep.to_json())
    assert back.flop_counter_compatible() == rep.flop_counter_compatible()
    assert back.by_module(phase="backward") == rep.by_module(phase="backward")


def test_peft_lora_llama_adapters():
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    B, S, d, r = 2, 8, 32, 4
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=d, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32,
                                   use_cache=False)
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg)
    model = peft.get_peft_model(base, peft.LoraConfig(r=r, lora_alpha=8, lora_dropout=0.0,
                                                      target_modules=["q_proj", "v_proj"]))
    ids = torch.randint(0, 64, (B, S))
    T = B * S

    def step():
        model(input_ids=ids, labels=ids).loss.backward()

    with roofline.measure(model, timing=None) as rep:
        step()
    for layer in range(2):
        # the base model is frozen: the first layer's input needs no gradient; the second's does (it depends on
        # the first layer's adapters)
        needs_input_grad = layer == 1
        for proj in ("q_proj", "v_proj"):
            at = f"layers.{layer}.self_attn.{proj}"
            # the adapter's own products (its weight's gradient, and its input's where needed); the identity
            # dropout nothing
            assert backward_matrix(rep, f"{at}.lora_A.default") == mm(r, T, d) + needs_input_grad * mm(T, r, d)
            assert backward_matrix(rep, f"{at}.lora_B.default") == mm(d, T, r) + mm(T, d, r)
            assert backward_matrix(rep, f"{at}.lora_dropout.default") == 0
            # the frozen base layer: the gradient of its input, where needed
            assert backward_matrix(rep, f"{at}.base_layer") == needs_input_grad * mm(T, d, d)
    assert rep.attribution["unlinked_calls"] == 0
    assert rep.flop_counter_compatible() == fcm_counts(model, step)


# ---- shapes ModuleTracker already credits right stay right --------------------------------------------------------
class Residual(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.up = nn.Linear(d, h)
        self.act = nn.ReLU()
        self.down = nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


def test_residual_block_by_hand():
    T, d, h = 16, 32, 64
    torch.manual_seed(0)
    model = nn.Sequential(Residual(d, h), Residual(d, h))
    x = torch.randn(T, d, requires_grad=True)
    with roofline.measure(model, timing=None) as rep:
        model(x).sum().backward()
    for i in range(2):
        assert backward_matrix(rep, f"{i}.up") == mm(T, h, d) + mm(h, T, d)
        assert backward_matrix(rep, f"{i}.down") == mm(T, d, h) + mm(d, T, h)
        assert backward_matrix(rep, f"{i}.act") == 0
    assert rep.by_module(phase="backward")["Sequential"]["matrix_flops"] == 2 * (
        mm(T, h, d) + mm(h, T, d) + mm(T, d, h) + mm(d, T, h))


class TiedLM(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, ids):
        return self.head(torch.tanh(self.mix(self.embed(ids))))


def test_tied_embedding_by_hand():
    V, d, T = 50, 16, 12
    torch.manual_seed(0)
    model = TiedLM(V, d)
    ids = torch.randint(0, V, (T,))

    def step():
        model(ids).sum().backward()

    with roofline.measure(model, timing=None) as rep:
        step()
    assert backward_matrix(rep, "head") == mm(T, V, d) + mm(V, T, d)
    assert backward_matrix(rep, "mix") == mm(T, d, d) + mm(d, T, d)
    assert backward_matrix(rep, "embed") == 0  # a scatter-add of rows: no products
    assert rep.flop_counter_compatible() == fcm_counts(model, step)


# ---- custom functions, hooks, retain_graph, double backward, nodes from before the block ------------------------
class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, w):
        ctx.save_for_backward(a, w)
        return a @ w

    @staticmethod
    def backward(ctx, g):
        a, w = ctx.saved_tensors
        return g @ w.t(), a.t() @ g


class UsesFunction(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        return _Square.apply(x, self.w)


def test_custom_function_and_tensor_hook_backward_credited_to_their_module():
    T, d = 8, 16
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), UsesFunction(d))
    x = torch.randn(T, d, requires_grad=True)
    with roofline.measure(model, timing=None) as rep:
        h = model[0](x)
        h.register_hook(lambda g: g @ torch.eye(d))  # a product inside the backward of Sequential.0's output
        model[1](h).sum().backward()
    assert backward_matrix(rep, "1") == mm(T, d, d) + mm(d, T, d)  # the Function's two products
    assert rep.attribution["unlinked_calls"] == 0


def test_retain_graph_backward_twice_credited_twice():
    T, d = 8, 16
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d))
    x = torch.randn(T, d, requires_grad=True)
    with roofline.measure(model, timing=None) as rep:
        y = model(x).sum()
        y.backward(retain_graph=True)
        y.backward()
    for i in (0, 2):
        assert backward_matrix(rep, str(i)) == 2 * (mm(T, d, d) + mm(d, T, d))


def test_double_backward_and_nodes_from_before_the_block_say_they_are_not_linked():
    T, d = 8, 16
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d))
    x = torch.randn(T, d, requires_grad=True)
    def step():
        model(x).sum().backward(create_graph=True)
        x.grad.pow(2).sum().backward()  # runs nodes the first backward created: no forward module made them
        x.grad = None
        model.zero_grad(set_to_none=True)

    with roofline.measure(model, timing=None) as rep:
        step()
    a = rep.attribution
    assert a["unlinked_calls"] > 0 and a["unlinked_flops"] > 0 and a["unlinked_by_op"]
    assert "not linked" in str(rep)
    assert "not linked" in rep._repr_html_()
    assert rep.flop_counter_compatible() == fcm_counts(model, step)

    y = model(x).sum()  # the forward before the block
    with roofline.measure(model, timing=None) as late:
        y.backward()
    # every product of that backward ran in a node made before the block (only gradient accumulation, which
    # torch does outside any forward node, is credited as usual)
    assert late.attribution["unlinked_calls"] > 0
    assert late.attribution["unlinked_flops"] == late.by_phase()["backward"]["flops"] > 0


# ---- activation checkpointing: a recompute phase, MFU and HFU ----------------------------------------------------
class CheckpointedFunction(nn.Module):
    """A checkpointed plain function (no module inside it): its recomputation belongs to this module."""

    def __init__(self, d, reentrant):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d))
        self.reentrant = reentrant

    def forward(self, x):
        return checkpoint(lambda t: torch.relu(t @ self.w), x, use_reentrant=self.reentrant)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_function_recomputed_in_its_own_phase(reentrant):
    T, d = 8, 16
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), CheckpointedFunction(d, reentrant))
    x = torch.randn(T, d, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with roofline.measure(model, timing=None) as rep:
            model(x).sum().backward()
    ph = rep.by_phase()
    assert ph["recompute"]["matrix_flops"] == mm(T, d, d)  # the product, run again
    assert ph["forward"]["matrix_flops"] == 2 * mm(T, d, d)
    assert backward_matrix(rep, "1") == mm(T, d, d) + mm(d, T, d)
    assert backward_matrix(rep, "0") == mm(T, d, d) + mm(d, T, d)
    recomputed = rep.records[rep.records["phase"] == 3]
    assert {rep.module_sets[m][-1] for m in recomputed["module"].tolist()} == {"Sequential.1"}
    t = rep.totals()
    assert t["recompute_flops"] == ph["recompute"]["flops"]
    assert t["model_flops"] == t["flops"] - t["recompute_flops"]


_LLAMA = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=32, use_cache=False)


@pytest.fixture(scope="module")
def llama_runs():
    """A tiny Llama's training step without checkpointing and with Hugging Face's gradient checkpointing
    (reentrant and not), each measured by roofline and by FlopCounterMode."""
    transformers = pytest.importorskip("transformers")
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    out = {}
    for name, kwargs in (("plain", None), ("reentrant", {"use_reentrant": True}),
                         ("non_reentrant", {"use_reentrant": False})):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**_LLAMA))
        model.train()
        if kwargs is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

        def step():
            model(input_ids=ids, labels=ids).loss.backward()

        with roofline.measure(model) as rep:
            step()
        out[name] = (rep, fcm_counts(model, step))
    return out


@pytest.mark.parametrize("kind", ["reentrant", "non_reentrant"])
def test_gradient_checkpointing_mfu_counts_the_model_once_and_hfu_the_recomputation(llama_runs, kind):
    plain, plain_fcm = llama_runs["plain"]
    rep, fcm = llama_runs[kind]
    p, t = plain.totals(), rep.totals()
    # the model's FLOPs, each counted once, are the step's without checkpointing
    assert t["model_flops"] == p["flops"] == p["model_flops"]
    assert p["recompute_flops"] == 0 and math.isclose(p["mfu"], p["hfu"], rel_tol=1e-12)
    # the recomputed work is what FlopCounterMode counts more with checkpointing than without
    extra = plain_fcm["Global"]
    recomputed = rep.records[rep.records["phase"] == 3]
    assert int(recomputed["flop_counter_flops"].sum()) == sum(fcm["Global"].values()) - sum(extra.values()) > 0
    assert t["recompute_flops"] == t["flops"] - t["model_flops"] > 0
    # backward per module unchanged by checkpointing, forward as without it (counts; the call counts differ by the
    # detach calls checkpointing makes)
    def counts(rows):
        return {k: {f: v for f, v in row.items() if f != "calls"} for k, row in rows.items()}

    assert counts(rep.by_module(phase="backward")) == counts(plain.by_module(phase="backward"))
    assert counts(rep.by_module(phase="forward")) == counts(plain.by_module(phase="forward"))
    # MFU and HFU over the same wall time: their ratio is the ratio of the FLOPs at their peaks
    assert t["hfu"] > t["mfu"] > 0
    assert math.isclose(t["hfu"] / t["mfu"], t["flops"] / t["model_flops"], rel_tol=1e-9)  # one peak (matrix f32)
    text = str(rep)
    assert "HFU" in text and "recomputed" in text and "recompute" in text
    assert "HFU" not in str(plain)
    assert rep.flop_counter_compatible() == fcm


def test_reentrant_checkpointing_recomputes_every_layer_forward(llama_runs):
    """Reentrant checkpointing runs each decoder layer's forward again in full: the recompute phase holds exactly
    the layers' forward FLOPs of the step without checkpointing."""
    plain, _ = llama_runs["plain"]
    rep, _ = llama_runs["reentrant"]
    fwd = plain.by_module(phase="forward")
    layers = sum(v["flops"] for k, v in fwd.items() if k.endswith(("layers.0", "layers.1")))
    assert rep.by_phase()["recompute"]["flops"] == layers > 0
    rec = rep.by_module(phase="recompute")
    for i in (0, 1):
        name = next(k for k in rec if k.endswith(f"layers.{i}"))
        assert rec[name]["flops"] == next(v for k, v in fwd.items() if k.endswith(f"layers.{i}"))["flops"]


def test_selective_checkpointing_recomputes_only_what_the_policy_does_not_save():
    import functools

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    def save_products(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE

    T, d = 8, 16
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(d, d))
    x = torch.randn(T, d, requires_grad=True)

    def f(t):
        return torch.tanh(t @ w) @ w

    with roofline.measure(timing=None) as sac:
        checkpoint(f, x, use_reentrant=False,
                   context_fn=functools.partial(create_selective_checkpoint_contexts, save_products)).sum().backward()
    with roofline.measure(timing=None) as full:
        checkpoint(f, x, use_reentrant=False).sum().backward()
    # the products are saved: only the tanh runs again (one special op per element)
    assert sac.by_phase()["recompute"]["matrix_flops"] == 0
    assert sac.by_phase()["recompute"]["special_ops"] == T * d
    # without a policy the recomputation stops once the last saved tensor is back: the first product and the tanh
    assert full.by_phase()["recompute"]["matrix_flops"] == mm(T, d, d)
    for r in (sac, full):
        assert r.by_phase()["forward"]["matrix_flops"] == 2 * mm(T, d, d)
        assert r.by_phase()["backward"]["matrix_flops"] == 2 * (mm(T, d, d) + mm(d, T, d))


def test_training_steps_with_an_optimizer_stay_linked():
    """Forward ops after a backward that make no autograd node (the optimizer's, a loop's bookkeeping) do not
    break the link table: every step's backward is credited by autograd node."""
    T, d = 4, 8
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(T, d)
    with roofline.measure(model, timing=None) as rep:
        for _ in range(3):
            model(x).sum().backward()
            opt.step()
            torch.ones(3).add_(1)
            opt.zero_grad()
    assert rep.attribution["method"] == "autograd" and "note" not in rep.attribution
    assert rep.attribution["unlinked_calls"] == 0
    assert backward_matrix(rep, "0") == 3 * mm(d, T, d)  # the weight's gradient only: x needs none
    assert backward_matrix(rep, "2") == 3 * (mm(T, d, d) + mm(d, T, d))


def test_compiled_lora_backward_credited_like_the_eager_step():
    """A compiled graph's backward ops are credited to the module of the forward op each differentiates (the
    graph's module stacks), as the eager step's are; FlopCounterMode's structure is the eager tracker's."""
    T, d, r = 8, 16, 4
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(LoRALinear(d, r), LoRALinear(d, r))
    x = torch.randn(T, d, requires_grad=True)

    def step(m):
        m(x).sum().backward()

    with roofline.measure(model, timing=None) as eager:
        step(model)
    compiled = torch.compile(model)
    with roofline.measure(compiled, timing=None) as comp:
        step(compiled)
    for i in range(2):
        assert backward_matrix(comp, f"{i}.A") == mm(T, r, d) + mm(r, T, d) == backward_matrix(eager, f"{i}.A")
        # the identity runs no op in the graph: it is in no module set, and nothing is credited to it
        assert not any(k.endswith(f"{i}.drop") for k in comp.by_module(phase="backward"))
        assert backward_matrix(comp, f"{i}.base") == backward_matrix(eager, f"{i}.base")
    # FlopCounterMode's structure is the eager tracker's, but for modules that run no op, which a compiled graph
    # does not see (docs/compiled.md): the identity gets the base layer's backward there
    want = {k: v for k, v in fcm_counts(model, lambda: step(model)).items() if not k.endswith(".drop")}
    assert comp.flop_counter_compatible() == want
    torch._dynamo.reset()


@pytest.mark.parametrize("pass_as", ["positional", "keyword"])
def test_an_optimizer_closure_runs_in_the_forward_and_backward_phases(pass_as):
    """``optimizer.step(closure)`` (LBFGS, Lightning's automatic optimization): the closure's forward and backward
    are not the optimizer's work."""
    T, d = 4, 8
    torch.manual_seed(0)
    model = nn.Linear(d, d)
    x = torch.randn(T, d)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss

    with roofline.measure(model, timing=None) as rep:
        opt.step(closure) if pass_as == "positional" else opt.step(closure=closure)
    ph = rep.by_phase()
    assert ph["forward"]["matrix_flops"] == mm(T, d, d)
    assert ph["backward"]["matrix_flops"] == mm(d, T, d)  # the weight's gradient: x needs none
    assert ph["optimizer"]["matrix_flops"] == 0 and ph["optimizer"]["calls"] > 0


class _SharedAct(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * x


class _Layer(nn.Module):
    """A layer whose forward checkpoints its body (as transformers 5.25's layers do: the layer's own hooks run once,
    its submodules' again in the recomputation), calling a module instance shared by every layer."""

    def __init__(self, d, shared, ckpt):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.shared = [shared]  # not a child: a function module shared across layers, named on its own
        self.ckpt = ckpt

    def body(self, x):
        return self.shared[0](self.lin(x))

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=True) if self.ckpt else self.body(x)


@pytest.mark.parametrize("ckpt", [False, True])
def test_a_shared_module_recomputed_in_each_layer_keeps_each_layers_set(ckpt):
    T, d = 4, 8
    torch.manual_seed(0)
    shared = _SharedAct()
    model = nn.Sequential(*[_Layer(d, shared, ckpt) for _ in range(2)])
    x = torch.randn(T, d, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with roofline.measure(model, timing=None) as rep:
            model(x).sum().backward()
    bwd = rep.by_module(phase="backward")
    for i in ("0", "1"):
        row = next(v for k, v in bwd.items() if k == f"Sequential.{i}")
        assert row["matrix_flops"] == mm(T, d, d) + mm(d, T, d)
        # the shared module's backward (tanh' and the products' element-wise work) lands in both layers alike
        assert row["vector_flops"] == bwd["Sequential.0"]["vector_flops"]
    if ckpt:
        rec = rep.by_module(phase="recompute")
        assert rec["Sequential.0"] == rec["Sequential.1"] and rec["Sequential.0"]["matrix_flops"] == mm(T, d, d)


class _Inner(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.l1 = nn.Linear(d, d)
        self.l2 = nn.Linear(d, d)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class _Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.inner = _Inner(d)
        self.post = nn.Linear(d, d)

    def forward(self, x):
        return self.post(checkpoint(self.inner, x, use_reentrant=False))


def test_an_early_stopped_recomputation_leaves_no_module_behind():
    """Non-reentrant checkpointing stops recomputing inside l2 (its saved tensors are back after l1): l2's and the
    inner module's forward ends never come. The next block's recomputation is still its own."""
    T, d = 4, 8
    torch.manual_seed(0)
    model = nn.Sequential(_Block(d), _Block(d))
    x = torch.randn(T, d, requires_grad=True)
    with roofline.measure(model, timing=None) as rep:
        model(x).sum().backward()
    rec = rep.by_module(phase="recompute")
    assert rec["Sequential.0"]["matrix_flops"] == rec["Sequential.1"]["matrix_flops"] == mm(T, d, d)  # l1 again
    # no set mixes the two blocks (the stale one did: block 0's l1 in block 1's modules)
    assert not any({"Sequential.0", "Sequential.1"} <= set(m) for m in rep.module_sets)
    assert all(rec.get(f"Sequential.{i}.inner.l2", {}).get("matrix_flops", 0) == 0 for i in (0, 1))


def test_a_nested_checkpoint_inside_a_recomputation_is_recomputation():
    """The outer recomputation runs the inner checkpoint's forward, whose packing hooks are then on top."""
    T, d = 4, 16
    torch.manual_seed(0)
    inner = _Inner(d)
    x = torch.randn(T, d, requires_grad=True)
    with torch.utils.checkpoint.set_checkpoint_early_stop(False):
        with roofline.measure(inner, timing=None) as rep:
            checkpoint(lambda y: checkpoint(inner, y, use_reentrant=False), x, use_reentrant=False).sum().backward()
    ph = rep.by_phase()
    assert ph["forward"]["matrix_flops"] == 2 * mm(T, d, d)
    assert ph["backward"]["matrix_flops"] == 2 * (mm(T, d, d) + mm(d, T, d))
    assert ph["recompute"]["matrix_flops"] == 2 * 2 * mm(T, d, d)  # by the outer checkpoint, then by the inner
    assert rep.totals()["model_flops"] == ph["forward"]["flops"] + ph["backward"]["flops"]


def test_a_corrupt_attribution_section_is_refused_naming_the_field():
    import json

    T, d, r = 8, 16, 4
    torch.manual_seed(0)
    model = nn.Sequential(LoRALinear(d, r))
    x = torch.randn(T, d, requires_grad=True)
    with roofline.measure(model, timing=None) as rep:
        model(x).sum().backward()
    doc = json.loads(rep.to_json())
    assert doc["meta"]["attribution"]["flop_counter_rows"]  # the adapter's rows are moved
    for field, value, match in (
            ("unlinked_rows", [len(rep.records)], r"unlinked_rows\[0\].*beyond the"),
            ("flop_counter_modules", [len(rep.module_sets)] * len(doc["meta"]["attribution"]["flop_counter_rows"]),
             r"flop_counter_modules\[0\].*not a module set"),
            ("flop_counter_modules", [], r"flop_counter_modules.*holds 0 items"),
            ("unlinked_rows", [1, 1], r"unlinked_rows.*lists a record twice"),
            ("method", "guess", r"method")):
        bad = json.loads(json.dumps(doc))
        bad["meta"]["attribution"][field] = value
        with pytest.raises(ValueError, match=match):
            roofline.load(json.dumps(bad))
