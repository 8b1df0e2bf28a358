"""Graphs compiled before a measure block: recovered by compiling them again, privately.

The compiled view (``roofline._compiled._view``) reads a graph's aten ops and kernels while Inductor compiles it
inside a block. A model compiled before the block (a warm-up step, the steps of a job before the one measured) ran
through none of that, and Inductor's ``CompiledFxGraph`` keeps neither the aten graph nor its scheduler: only the
generated code (``source_code``). What Dynamo keeps is enough to compile the graph again:

* the frame being run is on the Python stack below the graph's call: its code is one Dynamo generated
  (``torch._dynamo.convert_frame.output_codes``), and the compiled function it calls is a global of the frame
  (``__compiled_fn_*``); that function keeps the FX graph Dynamo captured (``named_parameters`` is bound to it:
  ``aot_module_simplified`` sets it), with each placeholder's fake example value and each node's module stack;
* the frame's cache entry (``torch._C._dynamo.eval_frame._debug_get_cache_entry_list`` of its original code)
  holds the backend it was compiled with (``torch.compile``'s Inductor wrapper and its mode and options).

:func:`recover` copies that FX graph and calls the same backend on it, with the block's compile hooks in place (so
the aten graphs and kernels are read as for a graph compiled inside a block), AOTAutograd's backward compiled at
once, and the FX graph and AOTAutograd caches off. Its inputs are fresh fake tensors made from the placeholders'
example values in a fake-tensor mode of its own; a graph with symbolic sizes (``dynamic=True``, or Dynamo's
automatic dynamic shapes after a recompilation) is compiled from Dynamo's own example values, in the fake-tensor mode
and shape environment of its compilation (which may gain the guards it already had; the guards Dynamo installed are
code of their own). Nothing of the user's compiled model changes: Dynamo's cache entries, guards and frame counters
are Dynamo's, and the private compilation does not go through Dynamo; the RNG state, the dispatch and function mode
stacks, the grad mode and the module hooks are put back as they were. What roofline learns rides on the user's
``CompiledFxGraph`` as attributes (``_roofline_graph``, as for a graph compiled inside a block).

The private compilation is the user's graph only if Inductor generates the same code for it: each graph it produces
is filed under its generated source (the ``# AOT ID`` comment, a process-wide counter, left out), and a compiled
graph of the user's is recovered when its source is filed. The comparison is the whole check: a graph whose
recompilation differs (an option roofline does not reproduce, a nondeterministic autotuning choice) is not
recovered, and the block says so. A backward graph is filed when its forward is recovered, since it is compiled with
it.

Not recovered, and named in the report (``Report.incomplete``): inputs that are not plain tensors (tensor
subclasses such as DTensor, opaque objects), a backward graph whose forward ran before every block (it is only found
through its forward), graphs not called from a frame Dynamo compiled (``torch._inductor.compile`` on an FX graph),
Inductor's ``freezing`` (it folds the real weights into the graph), and graphs whose recompilation generates other
code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading

import torch

_MAX_FILED = 512  # graphs filed by their generated source (a backward waits here for its call)
_FILED: dict = {}  # sha1 of the source without its AOT ID -> roofline._compiled._graph._Graph
_MAX_FRAMES = 200  # how far up the stack the Dynamo frame is looked for
_lock = threading.Lock()


class Unrecoverable(Exception):
    """Why a compiled graph cannot be recovered (the message is shown in the report)."""


_AOT_ID = re.compile(r"^# AOT ID: .*$", re.M)


# Inductor's comments naming the FX nodes a kernel came from: the names differ between Dynamo's graph and its copy
# (``linear`` / ``input_1``) while the code is the same
_NODE_NAMES = re.compile(r"^[ \t]*# (Topologically Sorted Source Nodes|Source Nodes|Original ATen): .*$", re.M)


def source_key(src: str | None) -> str | None:
    """The key a graph is filed under: its generated source without the ``# AOT ID`` comment (a counter) and the
    comments that name the FX nodes kernels came from (names, not code)."""
    if not isinstance(src, str) or not src:
        return None
    return hashlib.sha1(_NODE_NAMES.sub("", _AOT_ID.sub("", src, count=1)).encode()).hexdigest()


def _aot_kind(src: str) -> str | None:
    """``"forward"``, ``"backward"`` or ``"inference"``: the AOTAutograd graph kind its source names."""
    m = _AOT_ID.search(src or "")
    if m is None:
        return None
    k = re.search(r"_(forward|backward|inference)'", m.group(0))
    return k.group(1) if k else None


def filed(compiled):
    """The graph filed for a compiled graph's source, or None. The key is kept on the CompiledFxGraph (a dataclass
    without slots), so a graph's source is hashed once."""
    if "_roofline_source_key" not in compiled.__dict__:
        compiled._roofline_source_key = source_key(getattr(compiled, "source_code", None))
    key = compiled._roofline_source_key
    return _FILED.get(key) if key is not None else None


def file_graphs(outputs) -> None:
    """File the graphs a private compilation produced (``(CompiledFxGraph, _Graph)`` pairs), the latest last; the
    oldest go beyond :data:`_MAX_FILED` (a graph matched to the user's stays on the user's CompiledFxGraph)."""
    with _lock:
        for out, graph in outputs:
            key = source_key(getattr(out, "source_code", None))
            if key is None or graph is None:
                continue
            _FILED.pop(key, None)
            _FILED[key] = graph
        while len(_FILED) > _MAX_FILED:
            _FILED.pop(next(iter(_FILED)))


# ---- finding the Dynamo graph of the running frame --------------------------------------------------------------
def dynamo_frame(start):
    """The nearest frame at or above ``start`` running code Dynamo generated, or None."""
    try:
        from torch._dynamo.convert_frame import output_codes
    except ImportError:
        return None
    f, n = start, 0
    while f is not None and n < _MAX_FRAMES:
        if f.f_code in output_codes:
            return f
        f, n = f.f_back, n + 1
    return None


def _fx_graph_of(fn):
    """The FX graph Dynamo handed the backend, from the compiled function it installed (None if not found)."""
    for _ in range(6):
        if fn is None:
            return None
        bound = getattr(fn, "named_parameters", None)
        gm = getattr(bound, "__self__", None)
        gm = getattr(gm, "gm", gm)  # a GmWrapper (a graph whose inputs were flattened) holds the graph module
        if isinstance(gm, torch.fx.GraphModule):
            return gm
        fn = getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "__wrapped__", None)
    return None


def _backend(code):
    """The backend the cache entry running ``code`` (a code object Dynamo generated) was compiled with."""
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
        from torch._dynamo.utils import orig_code_map
    except ImportError:
        return None
    orig = orig_code_map.get(code)
    if orig is None:
        return None
    for entry in _debug_get_cache_entry_list(orig):
        if entry.code is code:
            return getattr(entry, "backend", None)
    return None


def frame_graphs(frame) -> list:
    """``(FX graph, backend)`` for each compiled function the Dynamo frame's code calls."""
    graphs = [_fx_graph_of(frame.f_globals.get(name)) for name in frame.f_code.co_names
              if name.startswith("__compiled_fn")]
    backend = _backend(frame.f_code)
    return [(gm, backend) for gm in graphs if gm is not None]


# ---- the private compilation ----------------------------------------------------------------------------------------
_GM_ATTRS = ("compile_subgraph_reason", "_param_name_to_source", "_source_to_user_stacks", "_backend_id")


def _copy(gm):
    """A copy of Dynamo's graph module that Inductor's passes can change: the graph's nodes copied (their meta
    shared), the attributes AOTAutograd reads from a Dynamo graph (which inputs are parameters, static) carried."""
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    new = torch.fx.GraphModule(gm, graph)
    new.meta = dict(getattr(gm, "meta", {}))
    for k in _GM_ATTRS:
        if k in gm.__dict__:
            setattr(new, k, gm.__dict__[k])
    for a, b in zip(gm.graph.find_nodes(op="placeholder"), graph.find_nodes(op="placeholder")):
        if hasattr(a, "_dynamo_source"):
            b._dynamo_source = a._dynamo_source
    return new


def _example_values(gm) -> tuple[list, bool]:
    """The example values of the graph's placeholders (Dynamo's fake tensors and size symbols), and whether any size
    is symbolic. Unrecoverable for an input that is not a plain strided fake tensor or an integer size."""
    from torch._subclasses.fake_tensor import FakeTensor

    values, symbolic = [], False
    for node in gm.graph.find_nodes(op="placeholder"):
        ev = node.meta.get("example_value")
        if isinstance(ev, torch.SymInt):
            symbolic = True
        elif type(ev) is not FakeTensor:  # a tensor subclass (DTensor, a quantized tensor), an opaque object
            raise Unrecoverable(f"its input {node.target} is a {type(ev).__name__}, not a plain tensor")
        elif ev.layout != torch.strided:
            raise Unrecoverable(f"its input {node.target} has layout {ev.layout}")
        elif any(not isinstance(d, int) for d in (*ev.shape, *ev.stride(), ev.storage_offset())):
            symbolic = True
        values.append(ev)
    return values, symbolic


def _fresh(values, mode) -> list:
    """Fresh fake tensors in ``mode`` like Dynamo's (shape, strides, dtype, device, requires_grad, parameter or
    not), for a graph of fixed sizes: nothing of Dynamo's fake-tensor mode is used."""
    out = []
    with mode:
        for ev in values:
            t = torch.empty_strided(tuple(ev.shape), tuple(ev.stride()), dtype=ev.dtype, device=ev.device)
            if ev.requires_grad:
                t.requires_grad_(True)
            if isinstance(ev, torch.nn.Parameter):
                t = torch.nn.Parameter(t, requires_grad=ev.requires_grad)
            out.append(t)
    return out


@contextlib.contextmanager
def _isolated(grad: bool):
    """What the private compilation runs under: Dynamo's compile lock, no dispatch or function mode of the caller's
    (the measure block's among them), the RNG state put back after it, the given grad mode."""
    from torch._dynamo.convert_frame import compile_lock
    from torch._dynamo.utils import clear_torch_function_mode_stack, preserve_rng_state, set_torch_function_mode_stack
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _disable_current_modes

    with compile_lock, _disable_current_modes(), preserve_rng_state(), torch._C._PreserveDispatchKeyGuard(), \
            torch.set_grad_enabled(grad):
        function_modes = _get_current_function_mode_stack()
        clear_torch_function_mode_stack()
        try:
            yield
        finally:
            set_torch_function_mode_stack(function_modes)


def autocast_guess(pairs) -> tuple:
    """``(device type, dtype)`` for each device type the graphs' inputs are on: the autocast a graph compiled
    before the block may have been traced under. Dynamo's graph does not say (the ambient autocast is a guard of its
    cache entry, not a node), and while the compiled graph runs AOTAutograd has autocast off (it was applied when the
    graph was traced); the dtype autocast casts to is still the one in force at the call."""
    devices = []
    for gm, _ in pairs:
        for node in gm.graph.find_nodes(op="placeholder"):
            ev = node.meta.get("example_value")
            if isinstance(ev, torch.Tensor) and ev.device.type not in devices and ev.device.type != "meta":
                devices.append(ev.device.type)
    out = []
    for d in devices:
        try:
            if torch.amp.is_autocast_available(d):
                out.append((d, torch.get_autocast_dtype(d)))
        except (RuntimeError, AttributeError):  # no autocast for this device type (or this torch)
            continue
    return tuple(out)


def compile_privately(gm, backend, grad: bool, sink: list, autocast=()):
    """Compile a copy of Dynamo's graph ``gm`` with ``backend`` (torch.compile's Inductor wrapper; plain
    ``compile_fx`` for any other), the backward at once, caches off, under ``autocast`` (``(device type, dtype)``
    pairs, :func:`autocast_guess`). The compile hooks append what Inductor produced to ``sink``
    (``(CompiledFxGraph, _Graph)`` pairs)."""
    from torch._functorch import config as fconfig
    from torch._guards import TracingContext, tracing
    from torch._inductor import config as iconfig
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    if bool(iconfig.freezing) or bool(getattr(backend, "config", {}).get("freezing")):
        raise Unrecoverable("Inductor's freezing folds the real weights into the graph")
    values, symbolic = _example_values(gm)
    with _isolated(grad):
        if symbolic:
            # sizes that are symbols of Dynamo's shape environment: the graph is compiled from Dynamo's own fake
            # values, in its fake-tensor mode (the shape environment of that finished compilation may gain the
            # guards it already had; the guards Dynamo installed are code of their own and do not change)
            from torch._guards import detect_fake_mode

            mode = detect_fake_mode(values)
            if mode is None or mode.shape_env is None:
                raise Unrecoverable("it has symbolic sizes whose shape environment is gone")
            inputs = values
        else:
            mode = FakeTensorMode()
            inputs = _fresh(values, mode)
        copy = _copy(gm)
        patches = {"force_non_lazy_backward_lowering": True, "enable_autograd_cache": False}
        patches = {k: v for k, v in patches.items() if hasattr(fconfig, k)}
        with tracing(TracingContext(mode)), fconfig.patch(patches), iconfig.patch(fx_graph_cache=False), \
                _collecting(sink), contextlib.ExitStack() as amp:
            for device, dtype in autocast:
                amp.enter_context(torch.autocast(device, dtype=dtype))
            if isinstance(backend, torch._TorchCompileInductorWrapper):
                backend(copy, inputs)
            else:
                compile_fx(copy, inputs)


_tls = threading.local()  # .sink: the list the compile hooks append (CompiledFxGraph, _Graph) to


@contextlib.contextmanager
def _collecting(sink):
    prev = getattr(_tls, "sink", None)
    _tls.sink = sink
    try:
        yield
    finally:
        _tls.sink = prev


def note_compiled(out, graph) -> None:
    """Called by the compile hook for each graph Inductor compiled while a block is open: kept when a private
    compilation is collecting."""
    sink = getattr(_tls, "sink", None)
    if sink is not None:
        sink.append((out, graph))


def recover(compiled, frame, hide_hooks):
    """The graph of ``compiled`` (a CompiledFxGraph compiled before the block, now called below ``frame``): found
    among those filed, else recompiled privately from the Dynamo frame running it. Raises Unrecoverable saying why
    not, whatever went wrong (the user's step goes on). ``hide_hooks()`` takes the block's global module hooks out of
    torch's tables and returns what puts them back (they would see the private trace's module calls)."""
    stage = ["recovering it"]  # what was being done, for the message
    try:
        return _recover(compiled, frame, hide_hooks, stage)
    except Unrecoverable:
        raise
    except Exception as e:  # noqa: BLE001 - the graph stays uncounted, and the report says why
        if os.environ.get("ROOFLINE_DEBUG"):
            raise
        raise Unrecoverable(f"{stage[0]} failed ({type(e).__name__}: {e})") from None


def _recover(compiled, frame, hide_hooks, stage):
    graph = filed(compiled)
    if graph is not None:
        return graph
    src = getattr(compiled, "source_code", None)
    if source_key(src) is None:
        raise Unrecoverable("Inductor kept no generated source for it")
    kind = _aot_kind(src)
    if kind == "backward":
        raise Unrecoverable("it is a backward graph whose forward graph ran before the block (a backward graph is "
                            "recovered with its forward)")
    found = dynamo_frame(frame)
    if found is None:
        raise Unrecoverable("it was not called from a frame Dynamo compiled")
    pairs = frame_graphs(found)
    if not pairs:
        raise Unrecoverable("the graph Dynamo captured for its frame is no longer referenced")
    # compiled again as it was compiled, which for a graph traced under autocast (torch.autocast around the call,
    # which Dynamo guards on but does not put in its graph) is known only by trying: without autocast, then under the
    # autocast of its inputs' devices. The generated code decides: a wrong guess matches nothing.
    tried = []
    restore = hide_hooks()
    try:
        for autocast in ((), autocast_guess(pairs)):
            if tried and not autocast:
                break
            tried.append(", ".join(f"{d} {str(t).replace('torch.', '')}" for d, t in autocast) or "no autocast")
            sink: list = []
            stage[0] = "its private compilation" + (f" under autocast ({tried[-1]})" if autocast else "")
            for gm, backend in pairs:
                compile_privately(gm, backend, kind == "forward", sink, autocast)
            stage[0] = "recovering it"
            file_graphs(sink)
            graph = filed(compiled)
            if graph is not None:
                return graph
    finally:
        restore()
    raise Unrecoverable(f"compiled again ({' and '.join(tried)}), Inductor generated different code for it: a "
                        "compile option, a global setting (autocast of another dtype, matmul precision) or an "
                        "autotuning choice roofline does not reproduce")
