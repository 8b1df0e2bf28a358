"""torch.compile'd models under measure: they stay compiled, their graphs are counted like the eager step, and the
kernels Inductor generated are listed with their buffers. CPU only (Inductor's C++ backend); the models are tiny so
that compilation stays short, and each compiled model is shared by the tests of this module."""

import re
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch._inductor")

import roofline  # noqa: E402
from roofline._compiled import _fx_paths, _graph, _hooks, _run  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

B, D_IN, D_H, D_OUT = 4, 16, 32, 8

if _hooks._torch_version() < _hooks.MIN_TORCH:
    pytest.skip("the compiled view needs a newer torch", allow_module_level=True)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(D_IN, D_H)
        self.ln = torch.nn.LayerNorm(D_H)
        self.fc2 = torch.nn.Linear(D_H, D_OUT)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x))))


class Breaking(MLP):
    """The same MLP with a graph break (a print) in the middle of forward."""

    def forward(self, x):
        h = self.fc1(x)
        print("graph break", end="\r")
        return self.fc2(torch.nn.functional.gelu(self.ln(h)))


def _eager_counts(model, step):
    with FlopCounterMode(display=False) as fc:
        step(model)
    return {m: {str(k): v for k, v in d.items()} for m, d in fc.get_flop_counts().items()}


def _compat(r):
    return {m: {str(k): v for k, v in d.items()} for m, d in r.flop_counter_compatible().items()}


def _train(model, x):
    model(x).sum().backward()


# matrix FLOPs of one training step, by hand: forward fc1 and fc2; backward: fc2's input and weight gradients and
# fc1's weight gradient (x does not require grad)
FWD_MATRIX = 2 * B * D_IN * D_H + 2 * B * D_H * D_OUT
BWD_MATRIX = 2 * B * D_OUT * D_H + 2 * D_OUT * B * D_H + 2 * D_H * B * D_IN


class _KernelSpy:
    """A second account of what the generated kernels read and write, taken while they run: every call of a
    generated C++ kernel or an extern kernel in the graphs' generated code is intercepted, and its tensor
    arguments' sizes are summed (a C++ kernel's pointer types in its signature, parsed from the source, say which
    arguments it reads (const), writes, or both (in_out))."""

    def __init__(self):
        self.kernels = {}  # name -> [bytes of each call]; ("extern", name) -> [bytes of each call]

    def __enter__(self):
        from torch._inductor.output_code import CompiledFxGraph

        self._cls = CompiledFxGraph
        self._prev = CompiledFxGraph.__call__
        spy = self

        def call(graph, inputs):
            g = graph.current_callable.__globals__ if hasattr(graph.current_callable, "__globals__") else None
            if g is None or "async_compile" not in g:
                g = _find_module_globals(graph)
            saved = {}
            sigs = dict(re.findall(r"(\w+) = async_compile\.cpp_pybinding\((\[[^\]]*\])", graph.source_code))
            for name, sig in sigs.items():
                kinds = [("in_out" if "in_out" in a else "in") if "const" in a or "in_out" in a else "out"
                         for a in _arg_names(graph.source_code, name)]
                saved[name] = g[name]
                g[name] = spy._wrap(name, g[name], kinds)
            ext = g.get("extern_kernels")
            if ext is not None:
                saved["extern_kernels"] = ext
                g["extern_kernels"] = _ExternSpy(ext, spy)
            for root in ("torch", "aten"):  # fallback kernels: torch.ops.<ns>.<op>.<overload>(...), aten.<op>...
                if root in g:
                    saved[root] = g[root]
                    g[root] = _TorchSpy(g[root], spy, root)
            try:
                return spy._prev(graph, inputs)
            finally:
                g.update(saved)

        call._roofline = True  # it delegates to roofline's hook: the hook is still in place
        CompiledFxGraph.__call__ = call
        return self

    def generated(self, kernels):
        """For each generated kernel name: (roofline's bytes of the buffers handed to it, every call of every call
        site, the spy's), sorted. What a kernel reads of a buffer can be less (``inputs``: a gather, a slice)."""
        mine: dict = {}
        for k in kernels:
            if not k["extern"]:
                handed = sum(k["input_buffers"].values()) + sum(k["outputs"].values())
                mine.setdefault(k["name"], []).extend([handed] * k["calls"])
        return {n: (sorted(v), sorted(self.kernels.get(n, []))) for n, v in mine.items()}

    def _wrap(self, name, fn, kinds):
        def run(*args):
            total = 0
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            assert len(tensors) == len(kinds), (name, len(tensors), kinds)
            for t, kind in zip(tensors, kinds):
                n = t.numel() * t.element_size()
                total += 2 * n if kind == "in_out" else n
            self.kernels.setdefault(name, []).append(total)
            return fn(*args)

        return run

    def __exit__(self, *exc):
        self._cls.__call__ = self._prev


def _arg_names(source, kernel):
    """The pointer parameters of a C++ kernel's signature, in order (``const float* in_ptr0``, ...)."""
    i = source.index(f"{kernel} = async_compile.cpp_pybinding")
    j = source.index('extern "C"', i)
    sig = source[source.index("(", j) + 1:source.index(")", j)]
    return [p.strip() for p in sig.split(",") if "*" in p]


def _tensor_bytes(args, kwargs, out=None):
    """Bytes of the tensors a call took and returned, each tensor (or tensor in a list) once at numel * itemsize: a
    returned tensor that was also an argument (an ``out=`` buffer) is not counted twice."""
    seen, total = set(), 0
    outs = out if isinstance(out, (list, tuple)) else [out]
    for a in [*args, *kwargs.values(), *outs]:
        for t in (a if isinstance(a, (list, tuple)) else [a]):
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * t.element_size()
    return total


class _TorchSpy:
    """Stands for ``torch`` or ``aten`` in a generated module: ``torch.ops.<ns>.<op>.<overload>(...)`` and
    ``aten.<op>.<overload>(...)`` calls (Inductor's fallback kernels) are recorded as extern kernel calls with the
    bytes of their tensor arguments and results."""

    def __init__(self, obj, spy, path="torch"):
        self._obj, self._spy, self._path = obj, spy, path

    def __getattr__(self, attr):
        v = getattr(self._obj, attr)
        path = f"{self._path}.{attr}"
        if isinstance(v, torch._ops.OpOverload):
            def run(*args, **kwargs):
                out = v(*args, **kwargs)
                self._spy.kernels.setdefault(("extern", path), []).append(_tensor_bytes(args, kwargs, out))
                return out

            return run
        if path == "torch.ops" or path.startswith(("torch.ops.", "aten.")):
            return _TorchSpy(v, self._spy, path)
        return v


class _ExternSpy:
    def __init__(self, ns, spy):
        self._ns, self._spy = ns, spy
        self.calls = []

    def __getattr__(self, attr):
        fn = getattr(self._ns, attr)

        def run(*args, **kwargs):
            out = fn(*args, **kwargs)  # mm(a, b, out=buf) writes an argument; convolution(...) returns a new tensor
            self._spy.kernels.setdefault(("extern", attr), []).append(_tensor_bytes(args, kwargs, out))
            return out

        return run


def _find_module_globals(graph):
    g = _run._module_globals(graph)
    assert g is not None, "the generated module of a compiled graph was not found"
    return g


@pytest.fixture(scope="module")
def trained():
    """One MLP, compiled; its first training step (the compilation) inside measure, then a second step in a second
    block with the kernel spy on, and the eager counts of the same step."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(B, D_IN)
    eager = _eager_counts(model, lambda m: _train(m, x))
    cmodel = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on global module hooks and torch.compile
        with roofline.measure(cmodel, timing="op", ceilings="datasheet") as first:
            _train(cmodel, x)
        with _KernelSpy() as spy, roofline.measure(cmodel, timing="op", ceilings="datasheet") as second:
            _train(cmodel, x)
    return dict(model=model, cmodel=cmodel, x=x, eager=eager, first=first, second=second, spy=spy)


def test_train_counts_equal_eager(trained):
    for r in (trained["first"], trained["second"]):
        c = r.compiled
        assert c is not None and c["eager_fallback"] is None and c["uncounted_graph_calls"] == 0
        assert c["graphs"] == 2 and c["graph_calls"] == 2  # one forward and one backward graph ran
        assert r.matrix_flops == FWD_MATRIX + BWD_MATRIX
        assert r.by_phase()["forward"]["matrix_flops"] == FWD_MATRIX
        assert r.by_phase()["backward"]["matrix_flops"] == BWD_MATRIX
        assert _compat(r) == trained["eager"]


def test_runs_compiled_kernels(trained):
    """The compiled graphs ran (their kernels were called), not the eager ops: no eager gelu or layer_norm op
    reached the block's dispatch mode."""
    spy = trained["spy"]
    assert any(isinstance(k, str) and k.startswith("cpp_fused") for k in spy.kernels)
    names = set(trained["second"].by_op())
    assert "aten.native_layer_norm.default" not in names and "aten.gelu.default" not in names
    assert "aten.var_mean.correction" in names  # the decomposed op of the compiled graph


def test_kernel_bytes_equal_buffers(trained):
    """Each generated kernel's bytes equal its buffers' sizes as the spy measured them while the kernel ran."""
    r, spy = trained["second"], trained["spy"]
    kernels = r.kernels
    assert kernels and all(k["bytes_known"] for k in kernels)
    generated = [k for k in kernels if not k["extern"]]
    assert generated and all(k["name"] in spy.kernels for k in generated)
    for name, (mine, seen) in spy.generated(kernels).items():
        assert mine == seen, name
    # extern kernels (the matmuls): the multiset of per-call bytes matches
    ext = sorted(k["bytes"] for k in kernels if k["extern"])
    seen = sorted(b for key, v in spy.kernels.items() if isinstance(key, tuple) for b in v)
    assert ext == seen
    # fused ops, FLOPs and times are there
    fused = next(k for k in generated if "aten.erf.default" in k["ops"] and k["phase"] == "forward")
    assert "aten.var_mean.correction" in fused["ops"] and fused["vector_flops"] > 0
    assert all(k["time"] > 0 for k in kernels)
    # fusion: the kernels move fewer bytes than the graphs' ops one by one
    f = r.fusion
    assert 0 < f["compiled_bytes"] < f["unfused_bytes"]
    assert f["compiled_bytes"] == sum(k["bytes"] * k["calls"] for k in kernels)


def test_kernel_table_and_exports(trained):
    r = trained["second"]
    text = r.table(by="kernel", top=None)
    for k in r.kernels:
        assert k["name"][:40] in text
    assert "2 compiled graphs" in text
    back = roofline.load(r.to_json())
    assert back.compiled["graphs"] == 2 and [k["name"] for k in back.kernels] == [k["name"] for k in r.kernels]
    assert back.matrix_flops == r.matrix_flops
    pd = pytest.importorskip("pandas")
    df = r.to_dataframe(by="kernel")
    assert isinstance(df, pd.DataFrame) and len(df) == len(r.kernels)
    assert int(df["bytes"].sum()) == sum(k["bytes"] for k in r.kernels)


def test_kernel_roofline_chart(trained, tmp_path):
    """``r.plot(by="kernel")`` puts one point per kernel with FLOPs at its intensity (its fused ops' FLOPs over its
    buffers' bytes, computed here from the buffers) and its achieved rate; the SVG chart has a tooltip per kernel."""
    pytest.importorskip("matplotlib")
    r = trained["second"]
    want = {}
    for k in r.kernels:
        flops, nbytes = k["matrix_flops"] + k["vector_flops"], sum(k["inputs"].values()) + sum(k["outputs"].values())
        if flops and nbytes:
            want[k["name"]] = (flops / nbytes, flops * k["calls"] / k["time"])
    assert want
    # each kernel's roofline time and bound from its fused ops' FLOPs, its buffers' bytes and the datasheet ceilings
    src = r.ceilings_source
    bw = r.ceilings.bandwidth("DRAM", source="best")  # a CPU has no datasheet bandwidth: ops use the measured one
    for k in r.kernels:
        assert k["dtype"] == "float32", k["name"]  # extern kernels too: the dtype their ceiling is looked up for
        flops, nbytes = k["matrix_flops"] + k["vector_flops"], sum(k["inputs"].values()) + sum(k["outputs"].values())
        if flops:
            peak = r.ceilings.peak("matrix" if k["matrix_flops"] else "vector", k["dtype"], source=src)
            assert k["t_min"] == pytest.approx(max(flops / peak, nbytes / bw), rel=1e-12), k["name"]
            assert k["bound"] == ("compute" if flops / peak >= nbytes / bw else "memory"), k["name"]
            assert k["efficiency"] == pytest.approx(k["t_min"] * k["calls"] / k["time"], rel=1e-12)
    fig = r.plot(by="kernel", path=tmp_path / "kernels.png")
    (pts,) = [c for c in fig.axes[0].collections if c.get_gid() == "ops"]
    got = sorted(map(tuple, pts.get_offsets().tolist()))
    assert [g for p in got for g in p] == pytest.approx([w for p in sorted(want.values()) for w in p], rel=1e-9)
    assert "compiled kernels" in fig.axes[0].get_title() and (tmp_path / "kernels.png").stat().st_size > 0
    assert "achieved" in fig.axes[0].get_ylabel()  # the kernels' own times, whether or not the ops were timed
    svg = r.roofline_chart(by="kernel").svg
    assert svg.count('class="rl-point"') == len(want)
    for name in want:
        assert name in svg
    with roofline.measure(MLP(), timing=None, ceilings="datasheet") as eager:
        MLP()(torch.randn(B, D_IN))
    with pytest.raises(ValueError, match="by='kernel' needs a report of a block that ran torch.compile"):
        eager.plot(by="kernel")
    with pytest.raises(ValueError, match="depth applies to by='module' only"):
        r.plot(by="kernel", depth=1)


class _Frozen(torch.nn.Module):
    """Convolutions with a folded batch norm, a ReLU and a residual add (oneDNN's fused post-ops under freezing), then
    a linear layer (MKL's packed GEMM)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.relu(self.conv2(y) + y)
        return self.fc(y.flatten(1))


def test_frozen_inference_counts_equal_eager():
    """``freezing=True`` (CPU inference): Inductor replaces the linear layer and the convolutions by MKL and oneDNN
    ops with constant, reordered weights; their matrix FLOPs are the eager ones."""
    torch.manual_seed(0)
    model = _Frozen().eval()
    x = torch.randn(2, 3, 6, 6)
    # conv1 and conv2: 2 * (2*8*6*6 outputs) * (3*3*3 | 8*3*3); fc: 2 * 2 * 10 * 288
    want = 2 * (2 * 8 * 36) * 27 + 2 * (2 * 8 * 36) * 72 + 2 * 2 * 10 * 288
    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        cm = torch.compile(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with roofline.measure(cm, timing=None) as r:
                cm(x)
    torch._dynamo.reset()
    names = {o for o in r.by_op()}
    assert names & {"mkl._mkl_linear.default", "mkldnn._linear_pointwise.default"}, names
    assert "mkldnn._convolution_pointwise.default" in names, names
    assert r.matrix_flops == want
    assert r.unknown_ops == {} and r.compiled["problems"] == [] and r.compiled["uncounted_graph_calls"] == 0


def test_max_autotune_mode():
    """``mode="max-autotune-no-cudagraphs"``: the same counts as eager and every kernel's bytes as the spy sees them
    (on CPU the GEMMs are autotuned among ATen and C++ templates when their weights are constant; here ATen's)."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(B, D_IN)
    eager = _eager_counts(model, lambda m: _train(m, x))
    torch._dynamo.reset()
    cm = torch.compile(model, mode="max-autotune-no-cudagraphs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with roofline.measure(cm, timing="op", ceilings="datasheet") as first:
            _train(cm, x)
        with _KernelSpy() as spy, roofline.measure(cm, timing="op", ceilings="datasheet") as r:
            _train(cm, x)
    torch._dynamo.reset()
    assert _compat(first) == eager and first.compiled["uncounted_graph_calls"] == 0
    generated = [k for k in r.kernels if not k["extern"]]
    assert generated and all(mine == seen for mine, seen in spy.generated(r.kernels).values())
    assert sorted(k["bytes"] for k in r.kernels if k["extern"]) == \
        sorted(b for key, v in spy.kernels.items() if isinstance(key, tuple) for b in v)


def test_graph_calls_that_are_not_operators_are_named():
    """An FX graph's op packets count as their default overload; a call that is no operator (not size arithmetic)
    is named, never dropped silently."""
    import operator

    import torch.fx as fx

    from roofline._compiled._graph import snapshot

    g = fx.Graph()
    a = g.placeholder("a")
    r = g.call_function(torch.ops.aten.relu, (a,))
    t = g.call_function(torch.ops.aten.max.dim, (r, 0))
    g.call_function(operator.getitem, (t, 0))
    s = g.call_function(torch.special.erf, (r,))
    g.output((s,))
    graph = snapshot(fx.GraphModule(torch.nn.Module(), g), backward=False)
    assert [op.func for op in graph.ops] == [torch.ops.aten.relu.default, torch.ops.aten.max.dim]
    assert graph.skipped == ["special_erf"]


def test_builtin_formula_ops_in_a_compiled_graph():
    """Ops with a built-in Python formula (a sort) inside a compiled graph are counted as in eager."""
    def f(x):
        return torch.sort(x * 2, dim=-1).values.sum()

    x = torch.randn(8, 64)
    with roofline.measure(timing=None) as eager:
        f(x)
    torch._dynamo.reset()
    cf = torch.compile(f)
    with roofline.measure(timing=None) as r:
        cf(x)
    torch._dynamo.reset()
    assert r.compiled["graph_calls"] == 1 and r.compiled["problems"] == []
    sort_e, sort_c = eager.by_op()["aten.sort.default"], r.by_op()["aten.sort.default"]
    assert sort_c["vector_flops"] == sort_e["vector_flops"] > 0


def test_inference_counts_equal_eager(trained):
    model, cmodel, x = trained["model"], trained["cmodel"], trained["x"]

    def infer(m):
        with torch.no_grad():
            m(x)

    eager = _eager_counts(model, infer)
    with roofline.measure(cmodel, timing=None) as r:
        infer(cmodel)
    assert r.compiled["graphs"] == 1 and r.compiled["eager_fallback"] is None
    assert r.matrix_flops == FWD_MATRIX and _compat(r) == eager


def test_graph_break_counted_completely():
    torch.manual_seed(0)
    model = Breaking()
    x = torch.randn(B, D_IN)
    eager = _eager_counts(model, lambda m: _train(m, x))
    cmodel = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with roofline.measure(cmodel, timing=None) as r:
            _train(cmodel, x)
    c = r.compiled
    assert c["graph_breaks"] >= 1
    assert c["graphs"] == 4  # two forward pieces, two backward pieces
    assert r.matrix_flops == FWD_MATRIX + BWD_MATRIX
    assert _compat(r) == eager


@pytest.mark.parametrize("internal", ["inner", "call"])
def test_patched_internal_warns_and_counts_eagerly(trained, monkeypatch, internal):
    """When an internal the compiled view relies on is gone, the compiled code runs eagerly under the block (its
    ops counted as eager ops) and a RuntimeWarning says so: never a silent fallback, never a wrong count."""
    import torch._inductor.compile_fx as cfx
    from torch._inductor.output_code import CompiledFxGraph

    if internal == "inner":
        monkeypatch.setattr(cfx, "_compile_fx_inner", _hooks._state["orig_inner"])
    else:
        monkeypatch.setattr(CompiledFxGraph, "__call__", _hooks._state["orig_call"])
    model, cmodel, x = trained["model"], trained["cmodel"], trained["x"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.warns(RuntimeWarning, match="EAGERLY"):
            with roofline.measure(cmodel, timing=None) as r:
                _train(cmodel, x)
    assert r.compiled["eager_fallback"]
    assert r.matrix_flops == FWD_MATRIX + BWD_MATRIX
    assert "aten.native_layer_norm.default" in r.by_op()  # eager ops


def test_module_paths():
    assert _fx_paths.module_path("L['self'].layers[0].attn") == ("self", "layers.0.attn")
    assert _fx_paths.module_path("L['self']._modules['fc1']") == ("self", "fc1")
    assert _fx_paths.module_path("L['model']") == ("model", "")
    assert _fx_paths.module_path("L['s'].h._modules['0'].mlp") == ("s", "h.0.mlp")
    assert _fx_paths.module_path("L['fn'].0") == ("fn", "0")
    assert _fx_paths.module_path("getattr(L['self'].layer1, '0').conv1") == ("self", "layer1.0.conv1")
    assert _fx_paths.module_path("getattr(getattr(L['self'].layer2, '1').downsample, '0')") == (
        "self", "layer2.1.downsample.0")


def test_dynamic_shapes_resolved_per_call():
    """dynamic=True: the graph's sizes are symbols; each call is counted with its own sizes, and the kernels'
    bytes follow them."""
    torch.manual_seed(0)
    model = MLP()
    cmodel = torch.compile(model, dynamic=True)
    reports = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for b in (3, 6):
            x = torch.randn(b, D_IN)
            with torch.no_grad(), roofline.measure(cmodel, timing=None) as r:
                cmodel(x)
            reports[b] = r
    for b, r in reports.items():
        assert r.compiled["uncounted_graph_calls"] == 0 and not r.compiled["problems"]
        assert r.matrix_flops == 2 * b * D_IN * D_H + 2 * b * D_H * D_OUT
        assert all(k["symbolic"] and k["bytes_known"] for k in r.kernels)
    # the first matmul's output buffer holds b x D_H floats
    first = {b: next(k for k in r.kernels if k["extern"]) for b, r in reports.items()}
    assert first[6]["bytes_written"] == 6 * D_H * 4 and first[3]["bytes_written"] == 3 * D_H * 4


def test_compiled_before_the_block_is_recovered():
    """A graph compiled outside any block (here of a compiled function) is compiled again privately in the block and
    counted (it was run uncounted, with a warning); tests/test_compiled_before.py has models and what cannot be
    recovered."""
    f = torch.compile(lambda t: torch.sin(t) * 2)
    x = torch.randn(8)
    f(x)  # compiled here, outside
    with roofline.measure(timing=None) as r:
        f(x)
    assert r.complete and r.compiled["uncounted_graph_calls"] == 0 and r.compiled["recovered_graphs"] == 1
    assert r.by_op()["aten.sin.default"]["calls"] == 1


def test_compiled_function_counted():
    """torch.compile applied to a function, compiled inside the block: counted like the eager call."""
    f = torch.compile(lambda a, b: torch.nn.functional.gelu(a @ b))
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with roofline.measure(timing=None) as r:
        f(a, b)
    assert r.compiled["graphs"] == 1 and r.compiled["uncounted_graph_calls"] == 0
    assert r.matrix_flops == 2 * 8 * 16 * 4
    assert r.by_op()["aten.mm.default"]["calls"] == 1


@pytest.mark.parametrize("given", ["model", "nothing"])
def test_compiled_training_step_function_fullgraph(given):
    """A training step written as a function and compiled with fullgraph=True (any graph break is an error): the
    block's module hooks are process-global and Dynamo traces them in every module call; they do nothing while it
    traces, so the function compiles whole. One forward and one backward graph, no break, the counts and (with the
    model given to measure) FlopCounterMode's structure of the eager step."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(B, D_IN)
    want = _eager_counts(model, lambda m: _train(m, x))

    def step(m, inp):
        return m(inp).sum()

    f = torch.compile(step, fullgraph=True)
    with roofline.measure(model if given == "model" else None) as r:
        f(model, x).backward()
    assert r.compiled["graphs"] == 2 and r.compiled["graph_breaks"] == 0
    assert r.matrix_flops == FWD_MATRIX + BWD_MATRIX
    if given == "model":
        assert _compat(r) == want
    torch._dynamo.reset()


def test_compiled_step_with_work_outside_the_model_credits_it_to_global():
    """A compiled step that multiplies the model's output by a matrix outside any module: in eager mode that product
    and its backward run outside the model (its backward before the model's output gradient exists), so
    FlopCounterMode credits them to Global only; the compiled view does too (the model is in the graph's module
    stacks here, and the tape's call of it says when it is active)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP()
    x, w = torch.randn(B, D_IN), torch.randn(D_OUT, 3, requires_grad=True)

    def step(m, inp):
        return (m(inp) @ w).sum()

    want = _eager_counts(model, lambda m: step(m, x).backward())
    assert want["Global"]["aten.mm"] > want.get("MLP", {}).get("aten.mm", 0)  # the product is outside the model
    f = torch.compile(step)
    with roofline.measure(model) as r:
        f(model, x).backward()
    assert r.compiled["graph_breaks"] == 0
    assert _compat(r) == want
    torch._dynamo.reset()


def test_compiled_step_compiles_once_for_many_blocks():
    """The block's module hooks are the same functions under the same ids in every block: Dynamo's guards on the
    global hook tables hold, and a compiled step function is compiled once for ten blocks (it was recompiled in each
    block, and after torch's recompile limit ran eagerly, uncounted as compiled)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(B, D_IN)

    def step(m, inp):
        return m(inp).sum()

    f = torch.compile(step)
    for _ in range(10):
        with roofline.measure(model) as r:
            f(model, x).backward()
        assert r.compiled is not None and r.compiled["graph_calls"] == 2 and r.compiled["uncounted_graph_calls"] == 0
        assert r.matrix_flops == FWD_MATRIX + BWD_MATRIX
    assert counters["frames"]["ok"] == 1
    # and the hooks are gone after the block: torch's global tables are as they were
    import torch.nn.modules.module as mm

    assert not mm._global_forward_pre_hooks and not mm._global_forward_hooks
    torch._dynamo.reset()


def test_exception_in_block_restores_torch(trained):
    """An exception inside the block leaves torch as it was: caches switched back on, no Dynamo hook left."""
    from torch._functorch import config as fconfig
    from torch._inductor import config as iconfig

    cmodel, x = trained["cmodel"], trained["x"]
    before = (iconfig.fx_graph_cache, fconfig.enable_autograd_cache, list(cmodel.dynamo_ctx.enter_exit_hooks))
    with pytest.raises(ZeroDivisionError), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with roofline.measure(cmodel, timing=None):
            cmodel(x)
            1 / 0
    assert (iconfig.fx_graph_cache, fconfig.enable_autograd_cache, list(cmodel.dynamo_ctx.enter_exit_hooks)) == before
    assert _hooks._ACTIVE == []
    assert torch._C._len_torch_dispatch_stack() == 0


def test_module_compile_in_place():
    """module.compile() (no OptimizedModule): the block's module hooks are hidden from Dynamo there too (no graph
    break at each submodule), and the counts equal eager."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(B, D_IN)

    def infer(m):
        with torch.no_grad():
            m(x)

    eager = _eager_counts(model, infer)
    model.compile()
    with roofline.measure(model, timing=None) as r:
        infer(model)
    assert r.compiled["graphs"] == 1 and r.compiled["graph_breaks"] == 0 and r.compiled["uncounted_graph_calls"] == 0
    assert r.matrix_flops == FWD_MATRIX and _compat(r) == eager


def test_devices_are_the_graphs(trained):
    """The graphs' ops are counted from meta/fake values, but the report's devices are the ones the step ran on."""
    assert trained["second"].meta["devices"] == ["cpu"]


class Residual(torch.nn.Module):
    """A residual block whose shortcut (``down``) shares its input with the main branch, followed by a module
    called twice: the shapes for which FlopCounterMode's backward rule and "the module of the forward op" differ."""

    def __init__(self):
        super().__init__()
        self.main1 = torch.nn.Linear(D_IN, D_H)
        self.main2 = torch.nn.Linear(D_H, D_OUT)
        self.down = torch.nn.Linear(D_IN, D_OUT)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(D_OUT, D_OUT)

    def forward(self, x):
        h = self.act(self.main2(self.act(self.main1(x)))) + self.down(x)
        return self.head(h)


def test_backward_modules_follow_the_eager_tracker_rule():
    """FlopCounterMode's tracker keeps ``down`` active from its output's gradient until its input's is complete,
    which happens only after the main branch's backward: the main branch's products are credited to ``down`` as
    well. The compiled view replays that rule (roofline/_compiled/_tracker_replay.py): the structure equals FlopCounterMode's on
    the eager step, module by module, and no problem is reported."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Residual()
    x = torch.randn(B, D_IN)
    want = _eager_counts(model, lambda m: _train(m, x))
    # the rule matters here: down's eager backward count includes main2's input and weight gradients
    down_own = 2 * B * D_OUT * D_IN  # down's weight gradient (x needs no gradient)
    assert sum(want["Residual.down"].values()) > 2 * B * D_IN * D_OUT + down_own
    compiled = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with roofline.measure(compiled) as r:
            _train(compiled, x)
    assert _compat(r) == want
    assert r.compiled["problems"] == []


def test_backward_without_forward_tape_says_so(monkeypatch):
    """When the forward graph gives no tape (a torch that stops recording sequence numbers), the backward's ops keep
    the module of the forward op they differentiate, and a warning says that modules sharing an input may differ
    from the eager step."""
    torch._dynamo.reset()
    monkeypatch.setattr(_graph, "_forward_tape", lambda gm: None)
    torch.manual_seed(0)
    model = Residual()
    x = torch.randn(B, D_IN)
    want = _eager_counts(model, lambda m: _train(m, x))
    compiled = torch.compile(model)
    with pytest.warns(RuntimeWarning, match="eager module tracker's rule"):
        with roofline.measure(compiled) as r:
            _train(compiled, x)
    got = _compat(r)
    assert got["Global"] == want["Global"]  # every op is still counted
    assert sum(got["Residual.down"].values()) < sum(want["Residual.down"].values())
    torch._dynamo.reset()


def test_forward_graph_metadata_the_tracker_replay_relies_on():
    """The torch internals the replay reads: AOTAutograd's forward graph nodes carry ``seq_nr`` and
    ``nn_module_stack``, its backward nodes the ``seq_nr`` of the forward node they differentiate, and the tracing
    context's ``fw_metadata.input_info`` says per input whether it requires grad and is a leaf."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._guards import TracingContext

    seen = {}

    def fw(gm, inputs):
        calls = [n for n in gm.graph.nodes if n.op == "call_function"]
        seen["fw_seq"] = all(isinstance(n.meta.get("seq_nr"), int) for n in calls)
        seen["fw_stack"] = all(n.meta.get("nn_module_stack") for n in calls if "addmm" in n.name)
        info = TracingContext.try_get().fw_metadata.input_info
        seen["info"] = [(i.requires_grad, i.is_leaf) for i in info]
        seen["n_ph"] = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
        seen["fw_seqs"] = {n.meta["seq_nr"] for n in calls}
        return gm

    def bw(gm, inputs):
        seqs = {n.meta.get("seq_nr") for n in gm.graph.nodes if n.op == "call_function" and "mm" in n.name}
        seen["bw_seqs"] = seqs
        return gm

    torch._dynamo.reset()
    model = MLP()
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=fw, bw_compiler=bw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _train(compiled, torch.randn(B, D_IN))
    assert seen["fw_seq"] and seen["fw_stack"]
    assert len(seen["info"]) == seen["n_ph"]
    # the parameters require grad and are leaves; the input x requires none
    assert sum(1 for rg, _ in seen["info"] if rg) == len(list(model.parameters()))
    assert all(leaf for rg, leaf in seen["info"] if rg)
    assert seen["bw_seqs"] and seen["bw_seqs"] <= seen["fw_seqs"]
    torch._dynamo.reset()


def test_gathers_read_the_rows_they_look_up():
    """A kernel handed a whole table reads the rows its indices select: two lookups from one (1000, 64) float32
    table by two index tensors of 32 each read 2 x 32 rows of 256 bytes, not the 256,000-byte table (nor one set of
    rows: Inductor numbers both gathers' index variables alike); the same lookup normalised in several passes reads
    its rows once."""
    torch._dynamo.reset()
    w = torch.randn(1000, 64)
    a, b = torch.randint(0, 1000, (32,)), torch.randint(0, 1000, (32,))
    two = torch.compile(lambda t, i, j: (t[i] + t[j]).sum(-1))
    norm = torch.compile(lambda t, i: torch.nn.functional.layer_norm(t[i], (64,)))
    with roofline.measure(timing=None) as r:
        two(w, a, b)
        norm(w, a)
    reads = [(k["input_buffers"], k["inputs"]) for k in r.kernels if not k["extern"]]
    table = 1000 * 64 * 4
    got = sorted(ins[name] for handed, ins in reads for name, v in handed.items() if v == table)
    assert got == [32 * 256, 2 * 32 * 256], reads
    torch._dynamo.reset()
