"""The pieces of the recovery of graphs compiled before a measure block that run without compiling anything: the
key a graph's generated source is filed under, the filing (latest last, oldest dropped past the limit), the search
for Dynamo's frame up the stack, the FX graph behind a compiled function, the example values a recompilation
takes, the autocast guess, the collecting of what a private compilation produced, and the reasons a graph is not
recovered. (The recompilation itself is tests/test_compiled_before.py's.)"""

import hashlib
import sys
import types

import pytest
import torch
import torch._dynamo.convert_frame  # noqa: F401  (imported once here: the tests below look it up)
import torch._inductor.compile_fx  # noqa: F401

from roofline._compiled import _recover


def _sha(text):
    return hashlib.sha1(text.encode()).hexdigest()


SRC = ("# AOT ID: ['0_forward']\n"
       "import torch\n"
       "    # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.mm]\n"
       "  # Source Nodes: [x]\n"
       "def call(args):\n"
       "    pass\n")


def test_the_source_key_leaves_out_the_aot_id_and_the_node_names():
    # the first AOT ID line and every node-name comment line emptied; the rest hashed as it is
    want = _sha("\nimport torch\n\n\ndef call(args):\n    pass\n")
    assert _recover.source_key(SRC) == want
    # only the first AOT ID is the counter: a second one is code
    two = "# AOT ID: ['0_forward']\n# AOT ID: ['1_forward']\nx\n"
    assert _recover.source_key(two) == _sha("\n# AOT ID: ['1_forward']\nx\n")
    # a source without any of them is hashed whole
    assert _recover.source_key("x = 1\n") == _sha("x = 1\n")
    for nothing in (None, "", b"x", 3):
        assert _recover.source_key(nothing) is None


def test_the_aot_kind():
    assert _recover._aot_kind(SRC) == "forward"
    assert _recover._aot_kind("# AOT ID: ['3_backward']\n") == "backward"
    assert _recover._aot_kind("# AOT ID: ['2_inference']\n") == "inference"
    assert _recover._aot_kind("# AOT ID: ['2']\n") is None
    assert _recover._aot_kind("no id") is None
    assert _recover._aot_kind(None) is None


class _Compiled:
    def __init__(self, src):
        self.source_code = src


def test_filing_keeps_the_latest_and_drops_the_oldest(monkeypatch):
    monkeypatch.setattr(_recover, "_FILED", {})
    monkeypatch.setattr(_recover, "_MAX_FILED", 3)
    a, b, c, d = (_Compiled(f"# AOT ID: ['{i}_forward']\nkernel {k}\n") for i, k in enumerate("abcd"))
    _recover.file_graphs([(a, "A"), (b, "B"), (_Compiled(None), "none"), (c, None)])
    assert _recover.filed(a) == "A" and _recover.filed(b) == "B" and _recover.filed(c) is None
    # a graph filed again moves to the end; past 3, the oldest (b) goes
    _recover.file_graphs([(a, "A2"), (c, "C"), (d, "D")])
    assert list(_recover._FILED.values()) == ["A2", "C", "D"]
    assert _recover.filed(b) is None and _recover.filed(a) == "A2"
    # the same generated code under another AOT ID finds the same graph
    assert _recover.filed(_Compiled("# AOT ID: ['9_forward']\nkernel d\n")) == "D"
    # exactly at the limit nothing is dropped
    monkeypatch.setattr(_recover, "_FILED", {})
    _recover.file_graphs([(a, 1), (b, 2), (c, 3)])
    assert len(_recover._FILED) == 3


def test_a_graphs_key_is_computed_once(monkeypatch):
    monkeypatch.setattr(_recover, "_FILED", {})
    g = _Compiled("kernel")
    assert _recover.filed(g) is None
    key = g._roofline_source_key
    assert key == _sha("kernel")
    g.source_code = "other"  # the key stays the one of the first look
    _recover._FILED[key] = "G"
    assert _recover.filed(g) == "G"
    assert _recover.filed(_Compiled(None)) is None


class _Codes:
    def __init__(self, *codes):
        self.ids = {id(c) for c in codes}

    def __contains__(self, code):
        return id(code) in self.ids


def _nested(depth, fn):
    """``fn(frame)``, the frame ``depth`` (>= 2) frames below the caller of ``_nested``: depth - 1 frames of
    ``down``, then ``_nested``'s own."""
    def down(k):
        if k == 0:
            return fn(sys._getframe())
        return down(k - 1)
    return down(depth - 2)


def test_the_dynamo_frame_is_looked_for_200_frames_up(monkeypatch):
    import torch._dynamo.convert_frame as cf

    def outer(depth):
        return _nested(depth, _recover.dynamo_frame)

    monkeypatch.setattr(cf, "output_codes", _Codes(outer.__code__))
    # outer's frame is `depth` frames above the start: found up to 199 (frames 0 .. 199 are looked at), not at 200
    assert _recover.dynamo_frame(sys._getframe()) is None
    assert outer(2).f_code is outer.__code__
    assert outer(199).f_code is outer.__code__
    assert outer(200) is None
    # the start itself counts
    monkeypatch.setattr(cf, "output_codes", _Codes(sys._getframe().f_code))
    assert _recover.dynamo_frame(sys._getframe()) is sys._getframe()


def test_the_fx_graph_behind_a_compiled_function():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    fn = types.SimpleNamespace(named_parameters=gm.named_parameters)
    assert _recover._fx_graph_of(fn) is gm
    wrapper = types.SimpleNamespace(gm=gm)
    wrapper.named = None
    fn = types.SimpleNamespace(named_parameters=types.SimpleNamespace(__self__=wrapper))
    assert _recover._fx_graph_of(fn) is gm
    # five wrappers deep (the sixth look) is found, six deep is not
    inner = types.SimpleNamespace(named_parameters=gm.named_parameters)
    f = inner
    for i in range(5):
        f = types.SimpleNamespace(__wrapped__=f) if i % 2 else types.SimpleNamespace(_torchdynamo_orig_callable=f)
    assert _recover._fx_graph_of(f) is gm
    assert _recover._fx_graph_of(types.SimpleNamespace(__wrapped__=f)) is None
    assert _recover._fx_graph_of(None) is None
    assert _recover._fx_graph_of(types.SimpleNamespace()) is None


def _graph_with(*values):
    g = torch.fx.Graph()
    for i, v in enumerate(values):
        g.placeholder(f"x{i}").meta["example_value"] = v
    g.output(None)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_example_values_of_fixed_and_symbolic_sizes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode()
    with mode:
        a = torch.empty(2, 3)
    values, symbolic = _recover._example_values(_graph_with(a, a))
    assert values == [a, a] and symbolic is False
    smode = FakeTensorMode(shape_env=ShapeEnv())
    s = smode.from_tensor(torch.empty(4, 3), symbolic_context=None)
    n = smode.shape_env.create_unbacked_symint()
    assert _recover._example_values(_graph_with(a, n))[1] is True
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    s = smode.from_tensor(torch.empty(4, 3), symbolic_context=ctx, source=ConstantSource("x"))
    assert _recover._example_values(_graph_with(a, s))[1] is True
    with pytest.raises(_recover.Unrecoverable, match=r"its input x1 is a Tensor, not a plain tensor"):
        _recover._example_values(_graph_with(a, torch.empty(1)))
    with pytest.raises(_recover.Unrecoverable, match=r"its input x0 is a int, not a plain tensor"):
        _recover._example_values(_graph_with(3))
    with mode:
        sp = torch.empty(2, 2).to_sparse()
    with pytest.raises(_recover.Unrecoverable, match=r"its input x0 has layout torch.sparse_coo"):
        _recover._example_values(_graph_with(sp))


def test_fresh_fake_tensors_copy_shape_strides_grad_and_parameters():
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        t = torch.empty_strided((2, 3), (1, 2))
        p = torch.nn.Parameter(torch.empty(3))
        g = torch.empty(4).requires_grad_(True)
        f = torch.nn.Parameter(torch.empty(2), requires_grad=False)
    new = FakeTensorMode()
    out = _recover._fresh([t, p, g, f], new)
    assert [tuple(x.shape) for x in out] == [(2, 3), (3,), (4,), (2,)]
    assert out[0].stride() == (1, 2)
    assert [x.requires_grad for x in out] == [False, True, True, False]
    assert [isinstance(x, torch.nn.Parameter) for x in out] == [False, True, False, True]
    assert all(x.fake_mode is new for x in out)


def test_the_autocast_guess_covers_each_device_type_once():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(2)
    m = torch.empty(2, device="meta")
    gm = _graph_with(a, a, m, 3)
    # cpu once; meta tensors and non-tensors say nothing
    assert _recover.autocast_guess([(gm, None), (gm, None)]) == (("cpu", torch.get_autocast_dtype("cpu")),)
    assert _recover.autocast_guess([(_graph_with(m), None)]) == ()
    assert _recover.autocast_guess([]) == ()


def test_what_a_private_compilation_produces_is_collected_in_nested_sinks():
    _recover.note_compiled("ignored", None)  # no sink: nothing to do
    outer, inner = [], []
    with _recover._collecting(outer):
        _recover.note_compiled("a", 1)
        with _recover._collecting(inner):
            _recover.note_compiled("b", 2)
        _recover.note_compiled("c", 3)
    _recover.note_compiled("d", 4)
    assert outer == [("a", 1), ("c", 3)] and inner == [("b", 2)]


def test_the_reasons_a_graph_is_not_recovered(monkeypatch):
    monkeypatch.setattr(_recover, "_FILED", {})
    hooks = []

    def hide():
        hooks.append("hidden")
        return lambda: hooks.append("restored")

    with pytest.raises(_recover.Unrecoverable, match=r"^Inductor kept no generated source for it$"):
        _recover.recover(_Compiled(None), sys._getframe(), hide)
    with pytest.raises(_recover.Unrecoverable, match=r"^it is a backward graph whose forward graph ran before the "
                                                     r"block"):
        _recover.recover(_Compiled("# AOT ID: ['1_backward']\nx\n"), sys._getframe(), hide)
    with pytest.raises(_recover.Unrecoverable, match=r"^it was not called from a frame Dynamo compiled$"):
        _recover.recover(_Compiled("# AOT ID: ['1_forward']\nx\n"), sys._getframe(), hide)
    assert hooks == []
    # a filed graph is returned at once
    g = _Compiled("# AOT ID: ['1_forward']\nx\n")
    _recover.file_graphs([(g, "graph")])
    assert _recover.recover(_Compiled("# AOT ID: ['7_forward']\nx\n"), None, hide) == "graph"


def test_an_unexpected_error_names_the_stage_unless_debugging(monkeypatch):
    def boom(compiled, frame, hide, stage):
        stage[0] = "its private compilation"
        raise KeyError("k")

    monkeypatch.setattr(_recover, "_recover", boom)
    monkeypatch.delenv("ROOFLINE_DEBUG", raising=False)
    with pytest.raises(_recover.Unrecoverable, match=r"^its private compilation failed \(KeyError: 'k'\)$"):
        _recover.recover(None, None, None)
    monkeypatch.setenv("ROOFLINE_DEBUG", "1")
    with pytest.raises(KeyError):
        _recover.recover(None, None, None)
    monkeypatch.setattr(_recover, "_recover", lambda *a: (_ for _ in ()).throw(_recover.Unrecoverable("why")))
    with pytest.raises(_recover.Unrecoverable, match="^why$"):
        _recover.recover(None, None, None)


def test_freezing_is_refused_before_anything_is_compiled(monkeypatch):
    from torch._inductor import config as iconfig

    with iconfig.patch(freezing=True):
        with pytest.raises(_recover.Unrecoverable, match="freezing folds the real weights"):
            _recover.compile_privately(None, None, False, [])
    backend = types.SimpleNamespace(config={"freezing": True})
    with pytest.raises(_recover.Unrecoverable, match="freezing folds the real weights"):
        _recover.compile_privately(None, backend, False, [])
