"""A model compiled before a measure block (warm-up steps, or a job measured at step N) is counted inside the block
as if it had been compiled there: its graphs are compiled again privately (roofline/_compiled/_recover.py, see
docs/compiled.md), the user's compiled frames untouched. A graph that cannot be recovered leaves the report marked
incomplete wherever it is read."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import Report  # noqa: E402
from roofline._compiled import _hooks  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

if _hooks._torch_version() < _hooks.MIN_TORCH:
    pytest.skip("the compiled view needs a newer torch", allow_module_level=True)

B, W, STAGES = 4, 16, 3  # the MLP: STAGES x (Linear W -> W, GELU) on a batch of B
D_MODEL, HEADS, FF, SEQ = 32, 4, 64, 8  # the TransformerEncoderLayer, on a batch of 2 sequences

# matrix FLOPs by hand. MLP forward: one (B x W) @ (W x W) product per stage; backward: a weight gradient per stage
# and an input gradient per stage but the first (the input needs none)
MLP_FWD = STAGES * 2 * B * W * W
MLP_BWD = (2 * STAGES - 1) * 2 * B * W * W


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(W, W) for _ in range(STAGES))
        self.act = torch.nn.GELU()

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return x


def _models():
    torch.manual_seed(0)
    # dropout 0 and train mode: the same ops eagerly and compiled, with and without grad (eval mode under no_grad
    # would take the fused fast path eagerly)
    tel = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0, batch_first=True)
    return {"mlp": (MLP(), torch.randn(B, W)), "tel": (tel, torch.randn(2, SEQ, D_MODEL))}


def _train(model, x):
    model(x).sum().backward()


def _infer(model, x):
    with torch.no_grad():
        model(x)


STEPS = {"train": _train, "infer": _infer}


def _strs(counts):
    return {m: {str(k): v for k, v in d.items()} for m, d in counts.items()}


def _frames():
    """What Dynamo compiled so far: its counters and the cache entries of every code object it has seen."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.convert_frame import input_codes
    from torch._dynamo.utils import counters

    entries = {}
    for ref in input_codes.seen:
        code = ref()
        if code is not None:
            entries[(code.co_filename, code.co_firstlineno, code.co_name)] = [
                id(e.code) for e in _debug_get_cache_entry_list(code)]
    return (counters["stats"]["unique_graphs"], counters["frames"]["total"], counters["frames"]["ok"],
            counters["stats"]["calls_captured"], entries)


@pytest.fixture(scope="module")
def runs():
    """Per model: the eager step measured by roofline and by FlopCounterMode; then the model compiled and run three
    times per step kind before any block; then each step measured once (the first block of each recompiles its
    graphs privately) and again (they are known by then)."""
    torch._dynamo.reset()
    out = {}
    for name, (model, x) in _models().items():
        eager, fcm = {}, {}
        for kind, step in STEPS.items():
            with roofline.measure(model, timing=None) as r:
                step(model, x)
            eager[kind] = r
            with FlopCounterMode(display=False) as fc:
                step(model, x)
            fcm[kind] = _strs(fc.get_flop_counts())
        compiled = torch.compile(model)
        for kind, step in STEPS.items():
            for _ in range(3):
                step(compiled, x)
        with torch.no_grad():
            y_before = compiled(x)
        frames_before = _frames()
        measured, again = {}, {}
        for kind, step in STEPS.items():
            with roofline.measure(compiled, timing="op" if kind == "infer" else "model") as r:
                step(compiled, x)
            measured[kind] = r
        for kind, step in STEPS.items():
            with roofline.measure(compiled, timing=None) as r:
                step(compiled, x)
            again[kind] = r
        frames_after = _frames()
        with torch.no_grad():
            y_after = compiled(x)
        out[name] = {"eager": eager, "fcm": fcm, "measured": measured, "again": again, "model": model,
                     "frames": (frames_before, frames_after), "outputs": (y_before, y_after)}
    return out


CASES = [(m, k) for m in ("mlp", "tel") for k in ("train", "infer")]


# The TransformerEncoderLayer's dropout modules run no op (p = 0 returns the input itself): the eager module tracker
# keeps such a module active from its output's gradient to the end of the backward, and a compiled graph has no
# trace of it (a limit of the compiled view, compiled inside the block or before it: docs/compiled.md)
NO_OP_MODULES = {"tel": {f"TransformerEncoderLayer.{m}" for m in ("dropout", "dropout1", "dropout2")}}


@pytest.mark.parametrize("name,kind", CASES)
def test_counts_equal_the_eager_step(runs, name, kind):
    """Matrix FLOPs and FlopCounterMode's structure of a model compiled before the block equal the eager step's
    (measured by roofline and by FlopCounterMode), in the block that recovers its graphs and in a later one; the
    report is complete. Before, the block counted 0 op calls."""
    run = runs[name]
    invisible = NO_OP_MODULES.get(name, set()) if kind == "train" else set()
    for r in (run["measured"][kind], run["again"][kind]):
        assert r.complete and r.incomplete == [] and r.compiled["uncounted_graph_calls"] == 0
        assert r.matrix_flops == run["eager"][kind].matrix_flops > 0
        got = _strs(r.flop_counter_compatible())
        eager = _strs(run["eager"][kind].flop_counter_compatible())
        assert eager == run["fcm"][kind]
        assert got == {m: d for m, d in eager.items() if m not in invisible}
    if name == "mlp":  # and the hand count
        assert run["measured"][kind].matrix_flops == MLP_FWD + (MLP_BWD if kind == "train" else 0)
    # the graphs were recompiled in the first block only (forward and backward in training)
    assert run["measured"][kind].compiled["recovered_graphs"] == (2 if kind == "train" else 1)
    assert run["again"][kind].compiled["recovered_graphs"] == 0


@pytest.mark.parametrize("name,kind", CASES)
def test_kernels_listed(runs, name, kind):
    """The kernels Inductor generated for the graphs compiled before the block are listed: each Linear layer's
    forward product is an extern kernel (addmm; mm for the attention's input projection, whose bias is added in a
    generated kernel), the attention a fallback kernel, and the GELU or the layer norms generated kernels; with
    timing="op" each kernel was timed."""
    r = runs[name]["measured"][kind]
    ks = r.kernels
    assert ks and all(k["calls"] == 1 for k in ks)
    fwd = [k for k in ks if k["phase"] == "forward"]
    linears = STAGES if name == "mlp" else 4  # the TEL: in_proj, out_proj, linear1, linear2
    assert sum(1 for k in fwd if k["name"].startswith(("extern_kernels.addmm[", "extern_kernels.mm["))) == linears
    fused = " ".join(k["name"] for k in fwd if not k["extern"])
    assert ("gelu" in fused) if name == "mlp" else ("layer_norm" in fused)
    if name == "tel":
        assert sum(1 for k in fwd if "scaled_dot_product" in k["name"] and k["extern"]) == 1
    if kind == "train":
        assert any(k["phase"] == "backward" for k in ks)
    else:
        assert all(k["time"] is not None and k["time"] > 0 for k in ks)


@pytest.mark.parametrize("name", ["mlp", "tel"])
def test_user_frames_untouched(runs, name):
    """Measuring leaves the user's compiled model as it was: no frame compiled again, no cache entry added or
    replaced, the same output."""
    before, after = runs[name]["frames"]
    assert before == after
    y0, y1 = runs[name]["outputs"]
    assert torch.equal(y0, y1)


def test_private_compilation_left_out_of_the_block_time(runs):
    """The block's clock stops while roofline recompiles: the first block's wall time is the step's, not the
    step's plus the compilation (a tiny MLP step takes about a millisecond, its compilation a fraction of a
    second)."""
    r = runs["mlp"]["measured"]["train"]
    assert r.compiled["recovery_time"] > 0 and r.wall_time < r.compiled["recovery_time"]


def test_dynamic_shapes_recovered():
    """A graph with symbolic sizes (dynamic=True) compiled before the block is recovered too, and counted with the
    sizes of the call in the block."""
    f = torch.compile(lambda a, b: torch.nn.functional.gelu(a @ b), dynamic=True)
    f(torch.randn(8, 16), torch.randn(16, 4))
    with roofline.measure(timing=None) as r:
        f(torch.randn(6, 16), torch.randn(16, 4))
    assert r.complete and r.compiled["recovered_graphs"] == 1
    assert r.matrix_flops == 2 * 6 * 16 * 4 and r.by_op()["aten.mm.default"]["calls"] == 1


@pytest.fixture(scope="module")
def unrecoverable():
    """A backward graph whose forward ran before the block: it is only found through its forward's frame (and this
    function's graphs were never recovered), so its call in the block cannot be counted."""
    f = torch.compile(lambda t: torch.cos(torch.sin(t) * 3).sum())
    x = torch.randn(8, requires_grad=True)
    for _ in range(2):
        f(x).backward()
    loss = f(x)
    with pytest.warns(RuntimeWarning, match="NOT counted.*incomplete"):
        with roofline.measure(timing=None) as r:
            loss.backward()
    return r


def test_unrecoverable_graph_marks_the_report(unrecoverable):
    r = unrecoverable
    assert not r.complete and r.compiled["uncounted_graph_calls"] == 1
    assert "a backward graph whose forward graph ran before the block" in r.incomplete[0]


def test_incomplete_in_print(unrecoverable):
    assert "INCOMPLETE: 1 call of a torch.compile graph compiled before the block not counted" in str(unrecoverable)


def test_incomplete_in_html(unrecoverable):
    assert ">INCOMPLETE</span>" in unrecoverable._repr_html_()


def test_incomplete_in_json(unrecoverable):
    back = Report.from_dict(json.loads(unrecoverable.to_json()))
    assert not back.complete and back.incomplete == unrecoverable.incomplete


def test_incomplete_from_an_older_document(unrecoverable):
    """A document saved before ``meta["incomplete"]`` existed, with uncounted graph calls, loads incomplete."""
    d = json.loads(unrecoverable.to_json())
    del d["meta"]["incomplete"]
    assert not Report.from_dict(d).complete


def test_source_key_ignores_node_names_and_the_aot_id_but_not_code():
    from roofline._compiled import _recover

    a = ("# AOT ID: ['0_inference']\nx = 1\n        # Topologically Sorted Source Nodes: [linear], Original ATen: "
         "[aten.addmm]\n#pragma omp parallel num_threads(2)\n")
    b = a.replace("0_inference", "7_inference").replace("[linear]", "[input_1]")
    assert _recover.source_key(a) == _recover.source_key(b)
    assert _recover.source_key(a) != _recover.source_key(a.replace("num_threads(2)", "num_threads(1)"))
    assert _recover.source_key(a) != _recover.source_key(a.replace("x = 1", "x = 2"))
