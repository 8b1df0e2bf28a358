"""The hooks the compiled view puts into Inductor, once per process (:func:`install`): the compile entry point
(snapshot each graph, collect its kernels from the scheduler), the scheduler's kernel definitions, and the call of a
compiled graph (counted by the collector of the measure block active on the calling thread). Each hook does nothing
but call the original while no block with a collector is open (``_ACTIVE``)."""

from __future__ import annotations

import re
import threading

import torch

from roofline._compiled import _graph, _recover
from roofline._compiled._kernels import _kernel_from_args, _kernel_record


MIN_TORCH = (2, 6)  # the ignore_compile_internals protocol of dispatch modes


_lock = threading.Lock()
_state = {"installed": False, "error": None, "orig_inner": None, "orig_call": None, "orig_define": {},
          "orig_extern": None}
_ACTIVE: list = []  # sessions with a compiled-view collector, innermost last
_tls = threading.local()  # .kernels: list the scheduler hooks append to while a graph is being compiled


class CompiledViewUnavailable(RuntimeError):
    """The torch in use lacks an internal the compiled view relies on."""


def _torch_version() -> tuple:
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _wrap_define_kernel(orig, triton):
    def define_kernel(self, src_code, nodes, kernel_args=None, *rest, **kwargs):
        name = orig(self, src_code, nodes, kernel_args, *rest, **kwargs)
        sink = getattr(_tls, "kernels", None)
        # Inductor emits identical source once and calls it again for every node group it fits (the bottleneck
        # blocks of a ResNet stage share their batch norm + ReLU kernel): each call site is a kernel of its own,
        # with its own buffers and ops; ``instance`` numbers the call sites of one name in the order they run
        if sink is not None:
            try:
                if triton:  # SIMDScheduling.define_kernel(src_code, node_schedule, kernel)
                    args, snodes = kernel_args.args, [n for n in nodes if hasattr(n, "read_writes")]
                else:       # CppScheduling.define_kernel(src_code, nodes, kernel_args=None)
                    args = kernel_args if kernel_args is not None else self.kernel_group.args
                    snodes = [n for n in nodes if hasattr(n, "read_writes")]
                rec = _kernel_from_args(name, args, snodes)
            except Exception as e:  # noqa: BLE001 - the kernel view is incomplete, never silently
                rec = {"name": name, "error": f"{type(e).__name__}: {e}"}
            rec["instance"] = sum(1 for k in sink if k.get("name") == name and not k.get("extern"))
            sink.append(rec)
        return name

    define_kernel._roofline = True
    return define_kernel


def _wrap_extern(orig):
    def codegen_extern_call(self, scheduler_node):
        out = orig(self, scheduler_node)
        sink = getattr(_tls, "kernels", None)
        node = getattr(scheduler_node, "node", None)
        if sink is not None and type(node).__name__ != "MultiOutput":  # MultiOutput: picks an output, no kernel
            kname = getattr(node, "python_kernel_name", None) or type(node).__name__
            try:
                rec = _kernel_record(f"{kname}[{scheduler_node.get_name()}]", [scheduler_node], extern=True)
                rec["python_kernel_name"] = kname
                sink.append(rec)
            except Exception as e:  # noqa: BLE001
                sink.append({"name": kname, "error": f"{type(e).__name__}: {e}"})
        return out

    codegen_extern_call._roofline = True
    return codegen_extern_call


def _wrap_inner(orig):
    def _compile_fx_inner(gm, example_inputs, *args, **kwargs):
        if not _ACTIVE:
            return orig(gm, example_inputs, *args, **kwargs)
        backward = bool(kwargs.get("is_backward", False))
        graph = _graph.snapshot(gm, backward)
        if not backward:
            tape = _graph._forward_tape(gm)
            if tape is not None:
                _graph._TAPES.append(tape)
                del _graph._TAPES[:-_graph._MAX_TAPES]
        from torch._inductor import config

        prev = getattr(_tls, "kernels", None)
        _tls.kernels = graph.kernels
        try:
            # the kernels are read from the scheduler: a compilation served from the FX graph cache has none
            with config.patch(fx_graph_cache=False):
                out = orig(gm, example_inputs, *args, **kwargs)
        finally:
            _tls.kernels = prev
        try:
            out._roofline_graph = graph  # CompiledFxGraph is an unhashable dataclass: the graph rides on it
        except AttributeError:  # a plain function (a graph without calls): nothing to count
            pass
        _recover.note_compiled(out, graph)  # a private compilation of a graph compiled before the block files it
        return out

    _compile_fx_inner._roofline = True
    return _compile_fx_inner


def _wrap_call(orig):
    def __call__(self, inputs):
        if not _ACTIVE:
            return orig(self, inputs)
        coll = _collector_here()
        if coll is None:
            return orig(self, inputs)
        return coll.run_graph(self, orig, inputs)

    __call__._roofline = True
    return __call__


def install():
    """Put the hooks in place (once per process). Raises CompiledViewUnavailable naming what is missing."""
    with _lock:
        if _state["installed"]:
            return
        if _state["error"] is not None:
            raise CompiledViewUnavailable(_state["error"])
        try:
            if _torch_version() < MIN_TORCH:
                raise CompiledViewUnavailable(f"needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (this is "
                                              f"{torch.__version__})")
            from torch.utils._python_dispatch import TorchDispatchMode

            if not hasattr(TorchDispatchMode, "ignore_compile_internals"):
                raise CompiledViewUnavailable("TorchDispatchMode.ignore_compile_internals is missing")
            try:
                import torch._inductor.compile_fx as cfx
                from torch._inductor.output_code import CompiledFxGraph
                from torch._inductor.scheduler import Scheduler
            except ImportError as e:
                raise CompiledViewUnavailable(f"cannot import Inductor internals ({e})") from None
            inner = getattr(cfx, "_compile_fx_inner", None)
            call = CompiledFxGraph.__dict__.get("__call__")
            extern = Scheduler.__dict__.get("codegen_extern_call")
            missing = [n for n, v in (("torch._inductor.compile_fx._compile_fx_inner", inner),
                                      ("CompiledFxGraph.__call__", call),
                                      ("Scheduler.codegen_extern_call", extern)) if not callable(v)]
            if missing:
                raise CompiledViewUnavailable(f"missing Inductor internals: {', '.join(missing)}")
            defines = []
            for modname, clsname in (("torch._inductor.codegen.cpp", "CppScheduling"),
                                     ("torch._inductor.codegen.simd", "SIMDScheduling")):
                try:
                    mod = __import__(modname, fromlist=[clsname])
                    cls = getattr(mod, clsname)
                except (ImportError, AttributeError):
                    continue
                if callable(cls.__dict__.get("define_kernel")):
                    defines.append(cls)
            if not defines:
                raise CompiledViewUnavailable("no Inductor scheduling class with define_kernel")
        except CompiledViewUnavailable as e:
            _state["error"] = str(e)
            raise
        _state["orig_inner"], _state["orig_call"], _state["orig_extern"] = inner, call, extern
        cfx._compile_fx_inner = _wrap_inner(inner)
        CompiledFxGraph.__call__ = _wrap_call(call)
        Scheduler.codegen_extern_call = _wrap_extern(extern)
        for cls in defines:
            _state["orig_define"][cls] = cls.__dict__["define_kernel"]
            cls.define_kernel = _wrap_define_kernel(cls.__dict__["define_kernel"], cls.__name__ != "CppScheduling")
        _state["installed"] = True


def hooks_in_place() -> str | None:
    """None when every hook is still in place, else what is missing (something replaced it after install)."""
    if not _state["installed"]:
        return "not installed"
    import torch._inductor.compile_fx as cfx
    from torch._inductor.output_code import CompiledFxGraph

    if not getattr(cfx._compile_fx_inner, "_roofline", False):
        return "torch._inductor.compile_fx._compile_fx_inner was replaced"
    if not getattr(CompiledFxGraph.__dict__.get("__call__"), "_roofline", False):
        return "CompiledFxGraph.__call__ was replaced"
    return None


def _collector_here():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    stack = _get_current_dispatch_mode_stack()
    for coll in reversed(_ACTIVE):
        if coll.session.mode in stack:
            return coll
    return None
