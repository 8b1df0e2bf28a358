"""Compiled models under ``measure``: count what ``torch.compile`` runs, graph by graph and kernel by kernel.

A dispatch mode on the stack makes Dynamo skip every frame it would compile (the model then runs eagerly). A
measure block's mode therefore declares ``ignore_compile_internals()`` when the hooks below are in place, so that
Dynamo keeps compiling and running the compiled code, and the block counts each compiled graph itself:

* at compile time, ``torch._inductor.compile_fx._compile_fx_inner`` (called once per forward or backward graph
  Inductor compiles) is wrapped: the aten-level FX graph AOTAutograd hands to Inductor is read (each node's target,
  the fake tensors of ``node.meta["val"]`` for its arguments and result, its ``nn_module_stack``) before Inductor's
  own passes change it, and the kernels Inductor generates for it are recorded from its scheduler (the fused nodes
  of each kernel, the buffers they read and write);
* at run time, ``CompiledFxGraph.__call__`` is wrapped: while a measure block is active on the calling thread, the
  block's mode is taken off the stack for the call (the graph's extern calls are then not counted twice), and the
  graph's aten ops are recorded with the same C cost model as eager ops, with their module paths and phase.

A graph compiled before the block (none of the compile-time hooks saw it) is compiled again privately when it first
runs in a block (``roofline.compiled._recover``), the block's clock stopped meanwhile, and then counted like the
others. A graph the block cannot count (not recoverable, or a torch whose internals differ) is never run eagerly in
silence: the block warns, and the report is marked incomplete (``meta["incomplete"]``) and says why.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time

import numpy as np
import torch

from roofline.compiled import _fcm_tracker, _recover
from roofline.compiled._fx_paths import module_path, node_chain, node_modules
from roofline.model._records import BACKWARD, COUNTS, FORWARD, RECORD_DTYPE
from roofline.util import _warn

MIN_TORCH = (2, 6)  # the ignore_compile_internals protocol of dispatch modes
_FORWARD, _BACKWARD = 0, 1

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


# ---- the graph snapshot taken at compile time -------------------------------------------------------------------
class _Op:
    """One aten op of a graph. ``modules``: the ``nn_module_stack`` chain of the op (of the forward op it
    differentiates, in a backward graph), (root, path) pairs outermost first; ``tracked``: for a backward op, the
    modules the eager module tracker would hold active while it runs (roofline/compiled/_fcm_tracker.py), or None."""

    __slots__ = ("name", "func", "args", "kwargs", "out", "modules", "tracked")

    def __init__(self, name, func, args, kwargs, out, modules, tracked=None):
        self.name, self.func, self.args, self.kwargs, self.out, self.modules = name, func, args, kwargs, out, modules
        self.tracked = tracked


class _Graph:
    """One compiled forward or backward graph: its aten ops, whether it is a backward graph, its kernels."""

    __slots__ = ("ops", "backward", "kernels", "symbolic", "index", "placeholders", "concrete", "devices",
                 "static", "skipped", "untracked", "__weakref__")

    def __init__(self, ops, backward, kernels, symbolic, index, placeholders=()):
        self.ops, self.backward, self.kernels, self.symbolic, self.index = ops, backward, kernels, symbolic, index
        self.placeholders = list(placeholders)  # fake values of the graph's inputs (symbolic sizes bind from them)
        self.concrete: dict = {}  # bindings of the size symbols -> the ops with concrete (meta) values
        self.static = None  # what reports take from the graph alone (_kernel_static), computed once
        self.skipped: list = []  # calls of the graph that are not operators roofline can count (named in a warning)
        self.untracked = False  # a backward graph whose ops could not be given the eager tracker's modules

    def bind(self, inputs) -> dict | None:
        """Values of the graph's size symbols in one call, from its runtime inputs (None when one is not found)."""
        import sympy

        env = {}
        for ph, val in zip(self.placeholders, inputs):
            if isinstance(ph, torch.SymInt) and isinstance(val, int):
                e = ph.node.expr
                if isinstance(e, sympy.Symbol):
                    env[e] = val
            elif isinstance(ph, torch.Tensor) and isinstance(val, torch.Tensor):
                for s, v in zip(ph.shape, val.shape):
                    if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                        env[s.node.expr] = int(v)
        return env

    def ops_for(self, env):
        """The graph's ops with every symbolic size replaced by its value in ``env`` (meta tensors), cached per
        binding. None when a size stays symbolic."""
        key = tuple(sorted((str(k), v) for k, v in env.items()))
        hit = self.concrete.get(key)
        if hit is not None:
            return hit

        def num(x):
            if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                e = x.node.expr
                e = e.xreplace(env) if hasattr(e, "xreplace") else e
                if getattr(e, "free_symbols", None):
                    raise LookupError(str(e))
                return int(e) if isinstance(x, torch.SymInt) else (float(e) if isinstance(x, torch.SymFloat)
                                                                   else bool(e))
            return x

        def conc(v):
            if isinstance(v, torch.Tensor):
                if not _is_symbolic(v):
                    return v
                size = [num(d) for d in v.shape]
                try:
                    stride = [num(d) for d in v.stride()]
                except RuntimeError:
                    return torch.empty(size, dtype=v.dtype, device="meta")
                return torch.empty_strided(size, stride, dtype=v.dtype, device="meta")
            if isinstance(v, (list, tuple)):
                return type(v)(conc(x) for x in v)
            return num(v)

        try:
            ops = [_Op(op.name, op.func, tuple(conc(a) for a in op.args), {k: conc(a) for k, a in op.kwargs.items()},
                       conc(op.out), op.modules, op.tracked) for op in self.ops]
        except LookupError:
            return None
        self.concrete[key] = ops
        return ops


_graph_counter = [0]


# Forward tapes of the graphs compiled while measuring (roofline/compiled/_fcm_tracker.py), the latest last: a backward
# graph finds its forward by sequence number. Bounded: a backward is compiled soon after its forward.
_TAPES: list = []
_MAX_TAPES = 256


def _forward_tape(gm):
    """The forward tape of a forward graph being compiled, with AOTAutograd's metadata of its inputs and outputs
    when the tracing context has it; None when the graph has no sequence numbers (or the metadata is unreadable,
    which the backward's ops survive: they keep their forward op's module)."""
    try:
        from torch._guards import TracingContext

        ctx = TracingContext.try_get()
        fm = getattr(ctx, "fw_metadata", None) if ctx is not None else None
        info = getattr(fm, "input_info", None)
        n_ph = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
        out_info = getattr(fm, "output_info", None)
        if info is None or len(info) != n_ph or out_info is None:
            # the graph's inputs or outputs do not line up with AOTAutograd's metadata (effect tokens, tensor
            # subclasses): no tape rather than a guessed one; the backward's ops then keep their forward op's module
            # and a warning says so
            return None
        rg = [bool(getattr(i, "requires_grad", True)) for i in info]
        leaf = [bool(getattr(i, "is_leaf", True)) for i in info]
        n_mut = int(getattr(fm, "num_mutated_inp_runtime_indices", 0) or 0)
        return _fcm_tracker.forward_tape(gm, rg, leaf, len(out_info), n_mut)
    except Exception:  # noqa: BLE001 - see the docstring

        if os.environ.get("ROOFLINE_DEBUG"):
            raise
        return None


def _backward_tracked(gm) -> dict:
    """``{seq_nr: ((root, ""), (root, path), ...)}`` for a backward graph: the eager tracker's modules while the
    backward of each forward node runs, from its forward's tape; empty when there is none."""
    seqs = [n.meta.get("seq_nr") for n in gm.graph.nodes if n.op == "call_function"]
    seqs = [s for s in seqs if isinstance(s, int)]
    if not seqs:
        return {}
    for tape in reversed(_TAPES):
        if tape.seq_lo <= min(seqs) and max(seqs) <= tape.seq_hi:
            try:
                sim = _fcm_tracker.replay(tape)
            except Exception:  # noqa: BLE001 - the ops keep their forward op's module

                if os.environ.get("ROOFLINE_DEBUG"):
                    raise
                return {}
            # torch.compile(model): the model is the frame's `self`, in no node's module stack; the eager tracker
            # holds it active through the whole backward (its output's gradient arrives first, its input needs
            # none or arrives last). A compiled function that calls the model has the model in the stacks, and
            # its call in the tape, like any module.
            pairs = {pair for _pos, _kind, pair, _vals in tape.calls}
            root = ((tape.root, ""),) if tape.root is not None and (tape.root, "") not in pairs else ()
            return {s: root + tuple(sorted(mods)) for s, mods in sim.items()}
    return {}


def _is_symbolic(v) -> bool:
    if isinstance(v, torch.Tensor):
        try:
            return any(not isinstance(s, int) for s in v.shape) or any(not isinstance(s, int) for s in v.stride())
        except Exception:  # noqa: BLE001 - sparse and other layouts without strides
            return any(not isinstance(s, int) for s in v.shape)
    if isinstance(v, (list, tuple)):
        return any(_is_symbolic(x) for x in v)
    return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))


def snapshot(gm, backward: bool) -> _Graph:
    """The aten ops of an FX graph, in execution order, with the fake values of their arguments and results."""
    import torch.fx as fx

    ops = []
    symbolic = False

    devices = set()

    def plain(v):
        # a FakeTensor answers some queries in Python: the recorder reads a plain meta tensor of the same
        # layout faster (symbolic sizes stay as they are, bound per call)
        if isinstance(v, torch.Tensor):
            devices.add(str(v.device))
            if not _is_symbolic(v) and v.layout == torch.strided:
                return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
            if v.layout == torch._mkldnn:  # a weight reordered to oneDNN's blocked layout: its logical shape
                return torch.empty(v.shape, dtype=v.dtype, device="meta")
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(plain(x) for x in v)
        return v

    def val(a):
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            if v is None and a.op == "get_attr":  # a constant of a frozen graph (freezing): the tensor itself
                v = gm
                for part in str(a.target).split("."):
                    v = getattr(v, part, None)
            return plain(v)
        return a

    placeholders = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    tracked = _backward_tracked(gm) if backward else {}
    skipped = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        target = _op_target(node.target)
        if target is None:
            if not _is_bookkeeping(node.target):
                skipped.append(getattr(node.target, "__name__", None) or str(node.target))
            continue
        args = fx.node.map_aggregate(node.args, val)
        kwargs = fx.node.map_aggregate(node.kwargs, val)
        out = plain(node.meta.get("val"))
        symbolic = symbolic or _is_symbolic(out) or _is_symbolic(list(args))
        ops.append(_Op(node.name, target, tuple(args), dict(kwargs), out, node_modules(node),
                       tracked.get(node.meta.get("seq_nr"))))
    _graph_counter[0] += 1
    graph = _Graph(ops, backward, [], symbolic, _graph_counter[0], placeholders)
    graph.devices = devices - {"meta"}
    graph.skipped = skipped
    graph.untracked = backward and bool(ops) and not tracked
    return graph


def _op_target(target):
    """The operator an FX ``call_function`` node calls: an OpOverload or a higher-order op as they are; a packet
    (``torch.ops.mkl._mkl_linear``, as Inductor's freezing passes write them) resolved to its default overload, or
    to its only one; None for anything else."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return target
    if isinstance(target, torch._ops.OpOverloadPacket):
        names = list(target.overloads())
        name = "default" if "default" in names else (names[0] if len(names) == 1 else None)
        return getattr(target, name) if name is not None else None
    return None


def _is_bookkeeping(target) -> bool:
    """Calls in a graph that compute no tensor: ``operator.getitem`` of a tuple result, arithmetic on sizes
    (``operator``, ``math``, ``torch.sym_*``)."""
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", "") or ""
    return mod in ("_operator", "operator", "math") or name.startswith("sym_") or \
        mod.startswith("torch.fx.experimental.sym_node")


# ---- kernels, from Inductor's scheduler -----------------------------------------------------------------------
def _view_nbytes(size, stride, dtype):
    """Bytes of the elements a view covers: the product of its sizes, a dimension of stride 0 (a broadcast) once;
    a padded or strided layout's gaps are not touched. An int, or a ``_SymBytes`` under dynamic shapes."""
    from torch._inductor.virtualized import V

    n = 1
    for i, d in enumerate(size):
        st = stride[i] if stride is not None and i < len(stride) else 1
        if st != 0:
            n *= d
    n = V.graph.sizevars.simplify(n) if hasattr(V.graph.sizevars, "simplify") else n
    if getattr(n, "free_symbols", None):  # dynamic shapes: evaluated for each call (see _Graph.kernel_bytes)
        return _SymBytes(n * dtype.itemsize)
    return int(n) * dtype.itemsize


def _buf_nbytes(name) -> int | None:
    """Bytes of the elements of an Inductor buffer or graph input (a buffer that is a slice of another, as a
    ``cat`` writes them, is its slice), None when it has no size."""
    from torch._inductor.virtualized import V

    g = V.graph
    buf = g.try_get_buffer(name) if hasattr(g, "try_get_buffer") else None
    if buf is None:
        buf = g.graph_inputs.get(name) if hasattr(g, "graph_inputs") else None
    if buf is None:
        return None
    try:
        layout = buf.get_layout() if hasattr(buf, "get_layout") else buf.layout
        if hasattr(layout, "real_layout"):  # an in-place update: the bytes of the buffer it writes
            layout = layout.real_layout()
        size = getattr(layout, "size", None)
        if size is None:
            size = buf.get_size()
        return _view_nbytes(size, getattr(layout, "stride", None), buf.get_dtype())
    except Exception:  # noqa: BLE001 - a layout without a size: the buffer is left out and the kernel flagged

        if os.environ.get("ROOFLINE_DEBUG"):
            raise
        return None


def _extern_input_views(node) -> dict:
    """Bytes an extern kernel reads of each buffer: the views it takes as inputs (q, k and v as views of one
    projection's output read a third of it each), summed per buffer. Buffers it reads otherwise are absent."""
    out: dict = {}
    for inp in getattr(node, "inputs", None) or ():
        try:
            name = inp.get_name()
            b = _view_nbytes(inp.get_size(), inp.get_stride(), inp.get_dtype())
        except Exception:  # noqa: BLE001 - not a tensor input (or no layout): the buffer's own size is used
            continue
        prev = out.get(name)
        if prev is None:
            out[name] = b
        elif isinstance(prev, int) and isinstance(b, int):
            out[name] = prev + b
        else:  # symbolic: no sum of expressions kept; the buffer's own size is used
            out.pop(name)
    return out


def _multi_outputs(name) -> list[str]:
    """The buffers that hold the outputs of an extern kernel with several outputs (its MultiOutput nodes)."""
    from torch._inductor.virtualized import V

    out = []
    for b in getattr(V.graph, "buffers", ()):
        if type(b).__name__ == "MultiOutput" and getattr(b, "inputs", None):
            src = b.inputs[0]
            if getattr(src, "get_name", lambda: None)() == name:
                out.append(b.get_name())
    return out


class _SymBytes:
    """A buffer size that depends on the graph's size symbols (``dynamic=True``): a sympy expression in bytes."""

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    def value(self, env) -> int | None:
        e = self.expr.xreplace(env)
        return None if getattr(e, "free_symbols", None) else int(e)


def _bytes_of(v, env) -> int | None:
    return v.value(env or {}) if isinstance(v, _SymBytes) else v


def _origins(snodes) -> list[str]:
    """Names of the FX nodes (aten ops of the graph) a kernel computes, from Inductor's ``origins``."""
    names = []
    for sn in snodes:
        node = getattr(sn, "node", None)
        for o in sorted(getattr(node, "origins", ()) or (), key=lambda n: n.name):
            if o.op == "call_function" and o.name not in names:
                names.append(o.name)
    return names


def _index_sources(sn) -> frozenset:
    """The integer buffers a scheduler node loads directly, with their index expressions: where its gathers' indices
    come from."""
    from torch._inductor.dependencies import MemoryDep
    from torch._inductor.virtualized import V

    out = set()
    for d in sn.read_writes.reads:
        if isinstance(d, MemoryDep) and not d.is_indirect():
            try:
                dt = V.graph.get_dtype(d.name)
            except Exception:  # noqa: BLE001 - a buffer without a dtype is no index
                continue
            if not dt.is_floating_point and not dt.is_complex and dt != torch.bool:
                out.add((d.name, d.index))
    return frozenset(out)


def _read_nbytes(own, name, full):
    """Bytes a generated kernel reads of the buffer ``name`` (whose elements are ``full`` bytes): per distinct
    dependency of its nodes on it, the elements its index reaches (Inductor's ``MemoryDep.get_numel``: a slice reads
    its slice, a broadcast operand its own elements) or, for an indirect index (a gather: an embedding lookup), as many
    as the node's loops run; summed, and never more than the buffer. An embedding kernel handed a 50,257-row table
    reads the rows of its tokens, not the table. ``full`` when a dependency is of another kind."""
    import sympy
    from torch._inductor.dependencies import MemoryDep
    from torch._inductor.virtualized import V

    if full is None:
        return None
    total = 0
    seen = set()
    for sn in own:
        for dep in sn.read_writes.reads:
            if dep.name != name:
                continue
            if not isinstance(dep, MemoryDep):
                return full
            indirect = dep.is_indirect()
            # a dependency read by several nodes of the kernel (a layer norm's passes over its input) is read once.
            # Indirect variables are numbered per node (two gathers of one kernel from the same table both index
            # with `indirect0`), so a gather is told apart by the index buffers its node loads: the same rows when
            # they are the same (an embedding normalised in three passes), others otherwise; a gather whose index
            # is computed in the node counts per node
            src = _index_sources(sn) if indirect else None
            key = (dep.index, tuple(dep.var_names), tuple(dep.size), (src or id(sn)) if indirect else None)
            if key in seen:
                continue
            seen.add(key)
            if indirect:
                ranges = sn.get_ranges() if hasattr(sn, "get_ranges") else None
                if ranges is None:
                    return full
                n = sympy.Mul(*ranges[0], *ranges[1])
            else:
                n = dep.get_numel()
            total = total + n
    if not seen:
        return full
    nbytes = total * V.graph.get_dtype(name).itemsize
    limit = full.expr if isinstance(full, _SymBytes) else full
    value = sympy.Min(sympy.sympify(nbytes), sympy.sympify(limit))
    if getattr(value, "free_symbols", None):
        return _SymBytes(value)
    return int(value)


def _kernel_record(name, snodes, extern=False):
    """Inputs and outputs of one generated kernel: the buffers its nodes read that no node of the kernel wrote,
    and the buffers they wrote that something outside the kernel uses (the rest stay inside the kernel)."""
    from torch._inductor.virtualized import V

    snodes = list(snodes)
    own = set()
    for sn in snodes:
        own.update(sn.get_nodes() if hasattr(sn, "get_nodes") else [sn])
    reads, writes = {}, {}
    for sn in own:
        rw = sn.read_writes
        for dep in rw.writes:
            writes[dep.name] = None
        for dep in rw.reads:
            reads[dep.name] = None
    sched = V.graph.scheduler
    outputs = set(V.graph.get_output_names()) if hasattr(V.graph, "get_output_names") else set()
    removed = set(getattr(V.graph, "removed_buffers", ())) | set(getattr(V.graph, "inplaced_to_remove", ()))
    out_bufs = []
    for b in writes:
        users = getattr(sched.name_to_buf.get(b), "users", ()) if sched is not None else ()
        outside = any(getattr(u, "node", None) not in own for u in users)
        if extern or b in outputs or (outside and b not in removed):
            out_bufs.append(b)
    in_bufs = [b for b in reads if b not in writes]
    # a buffer mutated in place (read and written by the kernel, produced before it) is read as well
    in_bufs += [b for b in reads if b in writes and b in out_bufs and not any(
        b in (x.get_name() for x in getattr(sn, "get_outputs", lambda: [])()) for sn in own)]
    if extern:  # a kernel with several outputs writes them through MultiOutput buffers; one without writes none
        expanded = []
        for b in out_bufs:
            buf = V.graph.try_get_buffer(b) if hasattr(V.graph, "try_get_buffer") else None
            kind = type(getattr(buf, "layout", None)).__name__
            if kind == "MultiOutputLayout":
                expanded.extend(_multi_outputs(b))
            elif kind != "NoneLayout":
                expanded.append(b)
        out_bufs = expanded
        in_bufs = [b for b in in_bufs if b not in out_bufs]
    views = {}
    if extern:
        for sn in own:
            views.update(_extern_input_views(getattr(sn, "node", None)))
    handed = {b: _buf_nbytes(b) for b in in_bufs}
    if extern:
        sizes_in = {b: views.get(b, n) for b, n in handed.items()}
    else:
        sizes_in = {b: _read_nbytes(own, b, n) for b, n in handed.items()}
    sizes_out = {b: _buf_nbytes(b) for b in out_bufs}
    flops = 0
    for sn in own:
        try:
            f = sn.estimate_flops()
        except Exception:  # noqa: BLE001
            f = None
        flops += int(f or 0)
    return {"name": name, "extern": extern, "origins": _origins(own), "inputs": sizes_in,
            "input_buffers": handed, "outputs": sizes_out,
            "inductor_flops": flops, "dtype": _buf_dtype(out_bufs)}


def _buf_dtype(bufs) -> str | None:
    """The dtype of a kernel's first output buffer (the dtype its ceiling is looked up for), None if unknown."""
    from torch._inductor.virtualized import V

    try:
        return str(V.graph.get_dtype(bufs[0])).replace("torch.", "") if bufs else None
    except Exception:  # noqa: BLE001 - no dtype: the kernel is judged against the float32 ceilings, as before
        return None


def _args_buffers(args):
    """The buffers a generated kernel takes, as Inductor's KernelArgs lists them for its signature (the rule of
    ``KernelArgs.cpp_argdefs``): ``(reads, writes)``, names of outer buffers; a buffer updated in place is in both."""
    reads, writes = [], []
    seen_inplace = set()
    for inplaced in args.inplace_buffers.values():
        if type(inplaced).__name__ == "RemovedArg" or id(inplaced) in seen_inplace:
            continue
        seen_inplace.add(id(inplaced))
        outer = inplaced.other_names[-1]
        reads.append(outer)
        writes.append(outer)
    for outer in args.input_buffers:
        if outer not in args.inplace_buffers:
            reads.append(outer)
    for outer, inner in args.output_buffers.items():
        if outer in args.inplace_buffers or type(inner).__name__ == "RemovedArg":
            continue
        writes.append(outer)
    return reads, writes


def _kernel_from_args(name, args, snodes):
    reads, writes = _args_buffers(args)
    own = []
    for sn in snodes:
        own.extend(sn.get_nodes() if hasattr(sn, "get_nodes") else [sn])
    flops = 0
    for sn in own:
        try:
            flops += int(sn.estimate_flops() or 0)
        except Exception:  # noqa: BLE001 - Inductor's estimate is informative only
            pass
    handed = {b: _buf_nbytes(b) for b in reads}
    return {"name": name, "extern": False, "origins": _origins(own), "dtype": _buf_dtype(writes),
            "inputs": {b: _read_nbytes(own, b, n) for b, n in handed.items()}, "input_buffers": handed,
            "outputs": {b: _buf_nbytes(b) for b in writes}, "inductor_flops": flops}


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


# ---- hooks ------------------------------------------------------------------------------------------------------
def _wrap_inner(orig):
    def _compile_fx_inner(gm, example_inputs, *args, **kwargs):
        if not _ACTIVE:
            return orig(gm, example_inputs, *args, **kwargs)
        backward = bool(kwargs.get("is_backward", False))
        graph = snapshot(gm, backward)
        if not backward:
            tape = _forward_tape(gm)
            if tape is not None:
                _TAPES.append(tape)
                del _TAPES[:-_MAX_TAPES]
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


# ---- per-block collector ----------------------------------------------------------------------------------------
class Collector:
    """What one measure block learns about compiled code: graphs run, kernels, breaks, warnings."""

    def __init__(self, session):
        self.session = session
        self.graph_calls: dict[int, int] = {}   # graph index -> calls
        self.graphs: dict[int, _Graph] = {}
        self.kernel_calls: list = []            # (graph index, kernel index, t0, t1, phase, module id)
        self.uncounted = 0
        self.unrecovered: dict[str, int] = {}  # why a graph compiled before the block is not counted -> its calls
        self.recovered = 0  # graphs compiled before the block, recompiled privately in it (roofline.compiled._recover)
        self.recovery_time = 0.0  # seconds those private compilations took (left out of the block's clock)
        self.frames_before = None
        self.breaks = None  # graph breaks in the block, read when it is left (stop)
        self.problems: list[str] = []
        self._root_names: dict[str, str] = {}
        self._mid_cache: dict = {}
        self._kernel_sizes: dict = {}  # (graph, size binding) -> [(bytes read, bytes written, known)] per kernel
        self._plans: dict = {}  # (graph, its ops for the call's sizes, active modules) -> [entries, span, replayable]
        self.graph_time = 0.0
        self.entering = False
        self.eager_reason = None
        self.node_rows: dict = {}   # graph index -> [(FX node name, first record, end record)] of its first call
        self.call_rows: list = []   # (graph index, first record, end record) per graph call
        self.size_calls: dict = {}  # (graph, size binding) -> calls with those sizes
        self.last_env: dict = {}  # graph index -> size-symbol values of its last call
        self.ctx_hooks: list = []  # (a Dynamo context's enter_exit_hooks, the function added to it)

    def ready(self):
        """(True, None) when compiled graphs can be counted now, else (False, why)."""
        if not _state["installed"]:
            if self.entering and "torch._inductor.compile_fx" not in sys.modules:
                return False, "Inductor not imported yet"
            try:
                install()
            except CompiledViewUnavailable as e:
                return False, str(e)
        broken = hooks_in_place()
        if broken is not None:
            return False, broken
        return True, None

    def eager_fallback(self, reason):
        """Dynamo is about to run a frame eagerly under the block: say so (once per block)."""
        if self.eager_reason is None:
            self.eager_reason = reason
            _warn.warn(f"roofline: torch.compile'd code runs EAGERLY inside this measure block ({reason}); the "
                       "counts and times are those of the eager ops, not of the compiled kernels. The compiled "
                       f"view needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} with Inductor's internals as roofline "
                       "knows them (see docs/compiled.md).", RuntimeWarning)

    # --- naming: nn_module_stack paths -> the names the tracker gives modules ---
    def _name(self, root: str, path: str) -> str:
        """A module's name from its ``nn_module_stack`` path: below the measured model's name when ``measure``
        was given the model (the compiled module, or the model a compiled function takes), else below the name of
        the compiled frame's local (``model.fc1``)."""
        base = self._root_names.get(root)
        if base is None:
            model = self.session.model
            base = self.session.tracker.known.get(model, root) if model is not None else root
            self._root_names[root] = base
        return f"{base}.{path}" if path else base

    def _module_id(self, modules: tuple, parents: frozenset, implicit_root: bool = True) -> int:
        """The module-set id of an op with ``nn_module_stack`` chain ``modules`` run while the tracker's modules
        ``parents`` (``frozenset(tracker.c.parents)``) are active; the chain's root module is added unless
        ``implicit_root`` is False (a backward op's replayed set says itself whether the root is active)."""
        c = self.session.tracker.c
        key = (parents, modules, implicit_root)
        mid = self._mid_cache.get(key)
        if mid is not None:
            return mid
        names = {self._name(root, path) for root, path in modules}
        if modules and implicit_root:
            names.add(self._name(modules[0][0], ""))
        added = [n for n in names if n not in parents]
        for n in added:
            c.add(n)
        mid = c.module_id
        for n in added:
            c.discard(n)
        self._mid_cache[key] = mid
        return mid

    def recover(self, compiled):
        """The graph of a CompiledFxGraph compiled before the block (roofline.compiled._recover), or None. The
        block's clock stops while roofline compiles: its wall time and op times leave the private compilation out."""
        s = self.session
        why = compiled.__dict__.get("_roofline_unrecovered")
        if why is not None:  # tried before: only a graph filed since then (its forward recovered) can be found
            graph = _recover.filed(compiled)
        else:
            t0 = time.perf_counter()
            try:
                graph = _recover.recover(compiled, sys._getframe(2), lambda: _hide_hooks(s.tracker))
                self.recovered += 1
            except _recover.Unrecoverable as e:
                graph, why = None, str(e)
            finally:
                dt = time.perf_counter() - t0
                self.recovery_time += dt
                if s._t0 is not None:
                    s._t0 += dt
                s.t_base += dt
        if graph is None:
            compiled._roofline_unrecovered = why
            self.unrecovered[why] = self.unrecovered.get(why, 0) + 1
            return None
        compiled._roofline_graph = graph
        return graph

    def run_graph(self, compiled, orig, inputs):
        s = self.session
        graph = getattr(compiled, "_roofline_graph", None)
        if graph is None:
            graph = self.recover(compiled)
        env = graph.bind(inputs) if graph is not None and graph.symbolic else None  # before the call empties it
        above = _remove_mode(s.mode)  # the graph's own aten calls (extern kernels) are not counted twice
        try:
            kernels = graph.kernels if graph is not None and s.timing == "op" else None
            if kernels:
                out, times = _timed_call(compiled, orig, inputs, kernels)
            else:
                t0 = time.perf_counter()
                out = orig(compiled, inputs)
                times = None
                self.graph_time += time.perf_counter() - t0
        finally:
            _restore_mode(s.mode, above)
        if graph is None:
            self.uncounted += 1
            if self.uncounted == 1:
                why = compiled.__dict__.get("_roofline_unrecovered") or "unknown"
                _warn.warn("roofline: a torch.compile graph compiled before the block ran inside measure and "
                           f"could not be recovered ({why}): its ops are NOT counted and the report is marked "
                           "incomplete (r.complete is False). Make the first call of the compiled model (its "
                           "compilation) inside a measure block, or call torch._dynamo.reset() before it.", RuntimeWarning)
            return out
        try:
            self.count(graph, times, env)
        except Exception as e:  # noqa: BLE001 - the step's result stands; the graph is reported uncounted
            self.uncounted += 1
            self.problems.append(f"graph {graph.index} could not be counted ({type(e).__name__}: {e})")
        return out

    def count(self, graph: _Graph, times=None, env=None):
        s = self.session

        self.graphs[graph.index] = graph
        self.graph_calls[graph.index] = self.graph_calls.get(graph.index, 0) + 1
        ops = graph.ops
        if graph.symbolic:
            ops = graph.ops_for(env or {})
            if ops is None:
                self.uncounted += 1
                self.problems.append(f"graph {graph.index} has symbolic sizes that its inputs do not determine: "
                                     "its ops are not counted")
                return
        phase = s.phase if s.phase is not None else (BACKWARD if graph.backward else FORWARD)
        # a backward graph's ops are credited to the module of the forward op each differentiates, inside the
        # modules that were active when the compiled forward ran (its autograd node's forward set, linked as an
        # eager backward op's is); the eager tracker's set (replayed from the forward's tape) is kept for
        # FlopCounterMode's structure
        fwd_parents = None
        if graph.backward and s.phase is None:
            linked, _, _, unlinked = s.tracker.c.attribute()
            if not unlinked:
                fwd_parents = frozenset(s.tracker.c.sets[linked])
        rec = s.recorder
        first = graph.index not in self.node_rows
        rows = [] if first else None
        r_start = len(rec)
        # the plan of a call (each op's recorder index and module id) depends on the graph, the sizes and the
        # modules active around the call: built once, then each call is a loop of C calls
        parents = frozenset(s.tracker.c.parents)
        pkey = (graph.index, id(ops), parents, fwd_parents)
        plan = self._plans.get(pkey)
        if plan is None:
            if graph.skipped:
                names = sorted(set(graph.skipped))
                self.problems.append(f"graph {graph.index} calls {len(graph.skipped)} function(s) that are not "
                                     f"operators roofline can count ({', '.join(names[:5])}"
                                     f"{', ...' if len(names) > 5 else ''}): their work is missing from the counts")
            if graph.untracked:
                self.problems.append(f"graph {graph.index} (backward): its ops are credited to the module of the "
                                     "forward op each differentiates, not by the eager module tracker's rule (no "
                                     "forward graph with sequence numbers was found for it): r.by_module() and "
                                     "r.flop_counter_compatible() may differ from the eager step's for modules that "
                                     "share an input (a residual block's downsample)")
            before = set(s.devices)
            entries = []
            for op in ops:
                func = op.func
                idx = s.op_index.get(func)
                if idx is None:
                    idx = s.resolve(func, op.args)
                if idx == "decompose":  # an AOT graph holds ops as they ran: count each as itself
                    s.resolve(func, op.args, allow_decompose=False)
                    idx = s.op_index[func]
                if idx == "decline":
                    continue
                if op.tracked is None:
                    mid, fcm = self._module_id(op.modules, parents), None
                else:
                    fcm = self._module_id(op.tracked, parents, implicit_root=False)
                    mid = self._module_id(op.modules, fwd_parents if fwd_parents is not None else parents)
                    fcm = None if fcm == mid else fcm
                entries.append((idx, mid, op, fcm))
            # [entries, the records of the first call under this plan (start, end) or None, replayable]: when
            # every op is counted by the C model, the records of a call are a function of the plan alone (same
            # ops, fake-tensor arguments, modules), so later calls copy them in C (Recorder.replay) instead of
            # describing every argument again
            plan = self._plans[pkey] = [entries, None, all(e[0].__class__ is int for e in entries)]
            # the ops were resolved with the graph's meta or fake values: the devices are those the graph ran on
            s.devices.difference_update({"meta", "fake"} - before)
            s.devices.update(graph.devices)
        entries, span, replayable = plan
        note = s.tracker.c.note
        if span is not None:
            rec.replay(span[0], span[1], phase)
            for i, e in enumerate(entries):  # one record per entry (replayable: every op counted in C)
                if e[3] is not None:
                    note(r_start + i, e[3], False)
        else:
            record = rec.record
            for idx, mid, op, fcm in entries:
                r0 = len(rec)
                if idx.__class__ is int:
                    record(idx, mid, phase, op.args, op.kwargs or None, op.out)
                elif idx[0] == "hop":
                    rec.append(idx[1], mid, phase, 0, 0, 0, 0, 0, 0, 0)
                elif idx[0] == "builtin":  # a built-in Python formula (roofline/counting/_formulas.py)
                    s.record_builtin(idx, mid, phase, op.args, op.kwargs or {}, op.out)
                else:
                    s._record_python(idx[1], idx[2], op.args, op.kwargs, op.out, where=(mid, phase))
                if fcm is not None:
                    for row in range(r0, len(rec)):
                        note(row, fcm, False)
                if first:
                    rows.append((op.name, r0, len(rec)))
            if replayable:
                plan[1] = (r_start, len(rec))
        if first:
            self.node_rows[graph.index] = rows
        self.call_rows.append((graph.index, r_start, len(rec)))
        # the kernels' bytes in this call (sizes may be symbolic: evaluated once per binding)
        ekey = (graph.index, tuple(sorted((str(k), v) for k, v in env.items())) if env else None)
        sizes = self._kernel_sizes.get(ekey)
        if sizes is None:
            sizes = []
            for k in graph.kernels:
                r = w = 0
                known = True
                for j, side in ((0, "inputs"), (1, "outputs")):
                    for v in k.get(side, {}).values():
                        b = _bytes_of(v, env)
                        if b is None:
                            known = False
                        elif j == 0:
                            r += b
                        else:
                            w += b
                sizes.append((r, w, known))
            self._kernel_sizes[ekey] = sizes
        gi = graph.index
        self.size_calls[ekey] = self.size_calls.get(ekey, 0) + 1  # the bytes are added up in summary()
        self.last_env[gi] = env
        if times is not None:
            for k, (t0, t1) in times.items():
                self.kernel_calls.append((graph.index, k, t0 - s.t_base, t1 - s.t_base, phase))
        else:
            self.kernel_calls.append((graph.index, None, float("nan"), float("nan"), phase))

    def summary(self, frames_breaks) -> dict:
        """The compiled part of the report (JSON-compatible): graphs, breaks, and one entry per generated kernel
        with the aten ops it fused, its input and output buffers (bytes), the FLOPs of its ops (roofline's cost
        model), and its measured host time (``timing="op"``; None otherwise)."""

        recs = np.frombuffer(self.session.recorder.records_bytes(), dtype=RECORD_DTYPE)
        kernels = []
        unknown = []
        calls = self.graph_calls
        kernel_bytes: dict = {}  # (graph, kernel) -> [bytes read, bytes written, all known] over all calls
        for ekey, n in self.size_calls.items():
            for ki, (r, w, known) in enumerate(self._kernel_sizes[ekey]):
                tot = kernel_bytes.setdefault((ekey[0], ki), [0, 0, True])
                tot[0] += n * r
                tot[1] += n * w
                tot[2] = tot[2] and known
        for gi, graph in sorted(self.graphs.items()):
            per_node = _per_node_counts(recs, self.node_rows.get(gi, ()))
            st = graph.static
            if st is None:
                st = graph.static = _kernel_static(graph)
            # module names depend on the names the block gives the graph's roots
            names_key = tuple(self._name(r, "") for r in st["roots"])
            kmods = st["modules"].get(names_key)
            if kmods is None:
                kmods = st["modules"][names_key] = [self._kernel_module(paths, roots)
                                                    for _, _, paths, roots in st["kernels"]]
            for ki, k in enumerate(graph.kernels):
                k = dict(k)
                origins, ops, _, _ = st["kernels"][ki]
                k["origins"] = list(origins)
                counts = [per_node.get(n, (0, 0, 0, 0, 0)) for n in origins]
                k["ops"] = list(ops)
                k["matrix_flops"] = sum(c[0] for c in counts)
                k["vector_flops"] = sum(c[1] for c in counts)
                k["special_ops"] = sum(c[2] for c in counts)
                k["unfused_bytes"] = sum(c[3] + c[4] for c in counts)
                env = self.last_env.get(gi)
                ins = {b: _bytes_of(v, env) for b, v in k.get("inputs", {}).items()}
                outs = {b: _bytes_of(v, env) for b, v in k.get("outputs", {}).items()}
                k["inputs"], k["outputs"] = ins, outs  # per call, with the sizes of the graph's last call
                k["input_buffers"] = {b: _bytes_of(v, env) for b, v in k.get("input_buffers", {}).items()}
                tot = kernel_bytes.get((gi, ki), [0, 0, True])
                known = all(v is not None for v in (*ins.values(), *outs.values())) and "error" not in k and tot[2]
                n = max(calls.get(gi, 0), 1)
                # per call: the mean over the calls (the same every call unless sizes are dynamic)
                k["bytes_read"], k["bytes_written"] = tot[0] // n, tot[1] // n
                k["bytes_read_total"], k["bytes_written_total"] = tot[0], tot[1]
                k["symbolic"] = graph.symbolic
                k["bytes_known"] = known
                if not known:
                    unknown.append(f"{k.get('name')} ({k.get('error', 'a buffer without a size')})")
                k["module"] = kmods[ki]
                k.update(graph=gi, index=ki, calls=calls.get(gi, 0),
                         phase="backward" if graph.backward else "forward")
                kernels.append(k)
        times: dict = {}
        for gi, ki, t0, t1, _ in self.kernel_calls:
            if ki is not None:
                times[(gi, ki)] = times.get((gi, ki), 0.0) + (t1 - t0)
        for k in kernels:
            k["time"] = times.get((k["graph"], k["index"]))
        if unknown:
            self.problems.append(f"{len(unknown)} kernels have buffers of unknown size; their bytes are left out "
                                 f"(bytes_known=False): {', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}")
        aten_bytes = 0
        for _, r0, r1 in self.call_rows:
            part = recs[r0:r1]
            aten_bytes += int(part["bytes_read"].sum()) + int(part["bytes_written"].sum())
        return {"graphs": len(self.graphs), "eager_fallback": self.eager_reason,
                "graph_calls": sum(calls.values()), "uncounted_graph_calls": self.uncounted,
                "recovered_graphs": self.recovered, "recovery_time": self.recovery_time,
                "incomplete": self.incomplete(),
                "graph_breaks": frames_breaks, "aten_bytes": aten_bytes,
                "graph_list": [{"graph": gi, "phase": "backward" if g.backward else "forward", "calls": calls[gi],
                                "ops": len(g.ops), "kernels": len(g.kernels)} for gi, g in sorted(self.graphs.items())],
                "kernels": kernels, "problems": list(dict.fromkeys(self.problems))}

    def incomplete(self) -> list[str]:
        """Why the block's counts miss work of compiled graphs: one line per reason (empty when every compiled graph
        call was counted). The report keeps them in ``meta["incomplete"]``."""
        out = [f"{n} call{'s' if n != 1 else ''} of a torch.compile graph compiled before the block not counted: "
               f"{why}" for why, n in self.unrecovered.items()]
        other = self.uncounted - sum(self.unrecovered.values())
        if other > 0:
            out.append(f"{other} call{'s' if other != 1 else ''} of torch.compile graphs not counted (see "
                       "r.compiled['problems'])")
        return out

    def _kernel_module(self, paths, roots) -> str:
        """The module a kernel belongs to: the innermost module common to all the ops it fused ("Global" when
        they span the model's top level). ``paths``: the ops' ``nn_module_stack`` chains ((root, path) pairs);
        ``roots``: their roots."""
        paths = [tuple(self._name(r, p) for r, p in chain) for chain in paths]
        if not paths:
            return "Global"
        common = paths[0]
        for p in paths[1:]:
            i = 0
            while i < min(len(common), len(p)) and common[i] == p[i]:
                i += 1
            common = common[:i]
        if common:
            return common[-1]
        return self._name(roots[0], "") if roots else "Global"


def _extern_packet(python_kernel_name):
    """The op an extern kernel calls, from the name the generated code calls it by: ``extern_kernels.mm`` -> ``mm``,
    ``torch.ops.aten.convolution_backward.default`` -> ``convolution_backward`` (any namespace); None for other
    names."""
    if not isinstance(python_kernel_name, str):
        return None
    parts = python_kernel_name.split(".")
    if parts[0] == "extern_kernels" and len(parts) == 2:
        return parts[1]
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:  # torch.ops.<namespace>.<op>.<overload>
        return parts[3]
    if parts[0] == "aten" and len(parts) >= 2:
        return parts[1]
    return None


def _kernel_static(graph) -> dict:
    """What a report takes from a graph alone, once per graph: per kernel, the ops it computes, their names, their
    module chains; the roots of the graph's module paths; a cache of kernel module names per naming of those roots.

    Inductor's ``origins`` name more than a kernel computes: an extern kernel's include the ops that produced its
    inputs, and a generated kernel fused after an extern kernel can name the extern's op. So an extern kernel first
    claims the op it calls (the same aten op; of several in its origins, the latest in the graph: the earlier ones
    produced its inputs); a generated kernel computes every other op of its origins (an op two generated kernels
    both name is computed by both: Inductor recomputes cheap ops rather than storing them, and both kernels do the
    work); an extern kernel also gets the ops of its origins no generated kernel computes."""
    op_of = {op.name: str(op.func) for op in graph.ops}
    mod_of = {op.name: op.modules for op in graph.ops}
    order = {op.name: i for i, op in enumerate(graph.ops)}
    own: dict = {}
    for ki, k in enumerate(graph.kernels):
        packet = _extern_packet(k.get("python_kernel_name")) if k.get("extern") else None
        if packet is None:
            continue
        mine = [n for n in k.get("origins", ()) if n in op_of and n not in own
                and op_of[n].split(".")[1:2] == [packet]]
        if mine:
            own[max(mine, key=order.__getitem__)] = ki
    computed: set = set()
    for k in graph.kernels:
        if not k.get("extern"):
            computed.update(n for n in k.get("origins", ()) if n in op_of and n not in own)
    claimed: set = set()
    kernels = []
    for ki, k in enumerate(graph.kernels):
        if k.get("extern"):
            origins = []
            for n in k.get("origins", ()):
                if n in op_of and (own.get(n) == ki or (n not in own and n not in computed and n not in claimed)):
                    origins.append(n)
                    claimed.add(n)
        else:
            origins = [n for n in k.get("origins", ()) if n in op_of and n not in own]
        origins = tuple(origins)
        paths = tuple(mod_of[n] for n in origins)
        roots = tuple(mod_of[n][0][0] for n in origins if mod_of[n])
        kernels.append((origins, tuple(sorted({op_of[n] for n in origins})), paths, roots))
    roots = sorted({r for chain in mod_of.values() for r, _ in chain})
    return {"kernels": kernels, "roots": roots, "modules": {}}


_FIELDS = COUNTS


def _per_node_counts(recs, node_rows) -> dict:
    """FX node name -> its five counts, from the records of the graph's first call (one reduction per field)."""
    if not node_rows:
        return {}
    names = [n for n, _, _ in node_rows]
    starts = np.array([r0 for _, r0, _ in node_rows], dtype=np.int64)
    ends = np.array([r1 for _, _, r1 in node_rows], dtype=np.int64)
    lo, hi = int(starts.min()), int(ends.max())
    part = recs[lo:hi]
    cols = []
    for f in _FIELDS:  # differences of running sums modulo 2**64: exact for a node of one record
        c = np.concatenate((np.zeros(1, np.uint64), np.cumsum(part[f], dtype=np.uint64)))
        cols.append(c[ends - lo] - c[starts - lo])
    out = dict(zip(names, zip(*(c.tolist() for c in cols))))
    for n, r0, r1 in node_rows:
        if r1 - r0 > 1:  # several records (rare): summed exactly as Python ints
            out[n] = tuple(sum(int(v) for v in recs[f][r0:r1]) for f in _FIELDS)
    return out


def _remove_mode(mode):
    """Take ``mode`` off the dispatch-mode stack (with the modes above it, which are pushed back at once).
    Returns what :func:`_restore_mode` needs; None when the mode is not on the stack."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode, _push_mode

    stack = _get_current_dispatch_mode_stack()
    if mode not in stack:
        return None
    above = []
    while True:
        m = _pop_mode()
        if m is mode:
            break
        above.append(m)
    for m in reversed(above):
        _push_mode(m)
    return above


def _restore_mode(mode, above):
    from torch.utils._python_dispatch import _pop_mode, _push_mode

    if above is None:
        return
    popped = [_pop_mode() for _ in above]
    _push_mode(mode)
    for m in reversed(popped):
        _push_mode(m)


def _timed_call(compiled, orig, inputs, kernels):
    """Run a compiled graph with each generated kernel timed on the host clock: the kernel functions in the
    generated module's globals are wrapped for the call and put back after it."""
    g = _module_globals(compiled)
    times: dict = {}
    if g is None:
        return orig(compiled, inputs), times
    saved = {}
    now = time.perf_counter

    def note(ki, t0, t1):
        prev = times.get(ki)
        times[ki] = (t0, t1) if prev is None else (prev[0], prev[1] + (t1 - t0))

    # extern kernels by the dotted name the generated code calls them by ("extern_kernels.mm", or a fallback op
    # "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"): the global the name starts from is
    # replaced, for the call, by a stand-in that times calls of exactly those names
    externs: dict = {}
    for ki, k in enumerate(kernels):
        if k.get("extern") and isinstance(k.get("python_kernel_name"), str):
            externs.setdefault(k["python_kernel_name"], []).append(ki)
    counter: dict = {}
    for root in {n.split(".", 1)[0] for n in externs}:
        obj = g.get(root)
        if obj is not None:
            saved[root] = obj
            g[root] = _TimedPath(obj, root, externs, note, counter)
    # generated kernels by name: the n-th call of a name is its n-th call site (``instance``)
    generated: dict = {}
    for ki, k in enumerate(kernels):
        if not k.get("extern"):
            generated.setdefault(k.get("name", ""), []).append(ki)
    for name, slots in generated.items():
        fn = g.get(name)
        if fn is None:
            continue

        def timed(*a, _fn=fn, _slots=slots, _name=name, **kw):
            i = counter.get(_name, 0)
            counter[_name] = i + 1
            t0 = now()
            r = _fn(*a, **kw)
            note(_slots[min(i, len(_slots) - 1)], t0, now())
            return r

        saved[name] = fn
        g[name] = timed
    try:
        out = orig(compiled, inputs)
    finally:
        g.update(saved)
    return out, times


class _TimedPath:
    """Stands for a global of a generated module (``extern_kernels``, ``torch``) during a timed call: attribute
    chains leading to an extern kernel's dotted name are followed, the kernel itself is timed (the n-th call of a
    name is the n-th extern kernel of that name Inductor generated code for), anything else is the real object."""

    __slots__ = ("_obj", "_path", "_slots", "_note", "_counter")

    def __init__(self, obj, path, slots, note, counter):
        self._obj, self._path, self._slots, self._note, self._counter = obj, path, slots, note, counter

    def __getattr__(self, attr):
        v = getattr(self._obj, attr)
        path = f"{self._path}.{attr}"
        slots = self._slots.get(path)
        if slots and callable(v):
            counter, note = self._counter, self._note

            def timed(*a, **kw):
                i = counter.get(path, 0)
                counter[path] = i + 1
                t0 = time.perf_counter()
                r = v(*a, **kw)
                if i < len(slots):
                    note(slots[i], t0, time.perf_counter())
                return r

            return timed
        prefix = path + "."
        if any(k.startswith(prefix) for k in self._slots):
            return _TimedPath(v, path, self._slots, self._note, self._counter)
        return v


def _module_globals(compiled):
    fn = getattr(compiled, "current_callable", None)
    for _ in range(4):
        g = getattr(fn, "__globals__", None)
        if g is not None and "call" in g and g.get("call") is not None:
            return g
        fn = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if fn is None:
            break
    return None


def _dynamo_counters():
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return counters


def prepare() -> None:
    """Called before a measure block is entered, outside the block lock: installs the hooks when Inductor is already
    imported (as :meth:`Collector.ready` would when the block's mode is entered), so that the block's entry under the
    lock only checks them. What cannot be installed is reported where the block asks (``ready``)."""
    if not _state["installed"] and _state["error"] is None and "torch._inductor.compile_fx" in sys.modules:
        try:
            install()
        except CompiledViewUnavailable:
            pass


def start(session) -> "Collector":
    """Called when a measure block is entered, under the block lock, before its mode is pushed. The hooks are
    installed before that (:func:`prepare`, when Inductor is already imported) or when Dynamo first asks the mode;
    this gives the block's mode the
    ``ignore_compile_internals`` answer Dynamo asks for: True while the hooks are in place (Dynamo keeps compiling
    and running compiled code; the block counts the graphs), False otherwise (Dynamo then runs the frame eagerly,
    the block counts the eager ops, and a warning says why)."""
    coll = Collector(session)
    session.compiled = coll  # known to the block before anything global changes: the block's release stops it
    coll.entering = True
    mode = session.mode

    def ignore_compile_internals():
        ok, reason = coll.ready()
        if not ok and not coll.entering:
            coll.eager_fallback(reason)
        return ok

    mode.ignore_compile_internals = ignore_compile_internals  # an instance attribute: Dynamo asks the instance
    coll.frames_before = _break_count(_dynamo_counters())
    if not _ACTIVE:  # the first open block turns the caches off, the last one to stop puts them back
        _disable_caches(_CONFIG_SAVED)
    _ACTIVE.append(coll)
    _name_compiled_root(session)
    _hide_hooks_in_compiled(session, coll)
    return coll


def _hide_hooks_in_compiled(session, coll):
    """The block's module hooks are process-global: Dynamo would trace them in every module call of a compiled
    forward (a graph break at each, and guards that differ from a bare run's). While a compiled module of the
    measured model runs, they are taken out of torch's global hook tables (the compiled graphs carry their module
    paths themselves) and put back after it."""
    model = session.model
    if model is None:
        return
    from torch._dynamo.eval_frame import OptimizedModule

    tracker = session.tracker

    def enter():
        if _collector_here() is not coll:
            return _noop
        return _hide_hooks(tracker)

    # the model's modules were named at entry: `known` holds them (a dict walk, not a module-tree walk per block);
    # the OptimizedModule check is made once per module type, and most modules have no compiled _call_impl
    if isinstance(model, OptimizedModule):
        compiled = [model]
    else:
        wrapped = {t for t in {type(m) for m in tracker.known} if issubclass(t, OptimizedModule)}
        compiled = [m for m in tracker.known if type(m) in wrapped or m.__dict__.get("_compiled_call_impl") is not None]
    for m in compiled:
        if isinstance(m, OptimizedModule):  # torch.compile(module)
            ctxs = [getattr(m, "dynamo_ctx", None)]
        else:  # module.compile(): the Dynamo context is in the closure of the compiled _call_impl
            fn = m.__dict__["_compiled_call_impl"]
            ctxs = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()
                    if hasattr(c.cell_contents, "enter_exit_hooks")]
        for ctx in ctxs:
            hooks = getattr(ctx, "enter_exit_hooks", None)
            if isinstance(hooks, list):
                coll.ctx_hooks.append((hooks, enter))  # recorded first: stop() removes it wherever this stops
                hooks.append(enter)


def _noop():
    return None


def _hide_hooks(tracker):
    """Take the block's module hooks out of torch's global hook tables; returns what puts them back."""
    saved = []
    for h in tracker._handles:
        d = h.hooks_dict_ref()
        if d is not None and h.id in d:
            saved.append((d, h.id, d.pop(h.id)))

    def restore():
        for d, k, fn in saved:
            d[k] = fn

    return restore


_CONFIG_SAVED: list = []  # (module, key, value before the blocks) of the settings _disable_caches changed


def _disable_caches(saved):
    """Inside a block, graphs are compiled for real: a graph served whole from AOTAutograd's or Inductor's cache
    never reaches the hooks (its ops and kernels would be unknown). The generated code is the same. Each setting's
    value is appended to ``saved`` before it is changed (one entry per setting)."""
    for modname, key in (("torch._functorch.config", "enable_autograd_cache"),
                         ("torch._inductor.config", "fx_graph_cache")):
        mod = sys.modules.get(modname)
        if mod is None:
            try:
                mod = __import__(modname, fromlist=["_"])
            except ImportError:
                continue
        if hasattr(mod, key) and not any(m is mod and k == key for m, k, _ in saved):
            saved.append((mod, key, getattr(mod, key)))
            setattr(mod, key, False)


def _restore_config(saved):
    """Put back what :func:`_disable_caches` saved, emptying ``saved`` (an entry leaves once its value is back)."""
    while saved:
        mod, key, value = saved[-1]
        setattr(mod, key, value)
        saved.pop()


def _name_compiled_root(session):
    """``measure(torch.compile(model))``: name the modules from the model inside, as in eager."""
    model = session.model
    inner = getattr(model, "_orig_mod", None)
    if inner is None or not isinstance(inner, torch.nn.Module):
        return
    tr = session.tracker
    name = type(inner).__name__
    tr.known[model] = name
    tr.known[inner] = name
    tr.seen.add(model)
    tr.name(inner)


def _break_count(counters) -> int:
    if counters is None:
        return 0
    return int(sum(counters.get("graph_break", {}).values()))


def stop(session, coll) -> None:
    """Called when a measure block is left, under the block lock (roofline._core.Block): the collector and its
    Dynamo context hooks out, the compile settings back once no block is left, the graph-break count read. Cheap and
    idempotent; the block's summary is built afterwards, outside the lock (:func:`summary`)."""
    if coll is None:
        return
    try:
        _ACTIVE.remove(coll)
    except ValueError:
        pass
    if not _ACTIVE:
        _restore_config(_CONFIG_SAVED)
    for hooks, fn in coll.ctx_hooks:
        try:
            hooks.remove(fn)
        except ValueError:
            pass
    coll.ctx_hooks.clear()
    if coll.breaks is None:
        coll.breaks = _break_count(_dynamo_counters()) - (coll.frames_before or 0)


def summary(coll) -> dict | None:
    """The compiled view of a block that has been left (:func:`stop`): None when no compiled code ran in it (its
    report is an eager one). Warns about what it could not count (at the user's line: roofline.util._warn)."""
    if coll is None or (not coll.graphs and not coll.uncounted and coll.eager_reason is None):
        return None
    breaks = coll.breaks or 0
    try:
        out = coll.summary(breaks)
    except Exception as e:  # noqa: BLE001 - the counts are in the records; only the kernel view is lost
        _warn.warn(f"roofline: the compiled-kernel view could not be built ({type(e).__name__}: {e}); the "
                   "op counts are unaffected", RuntimeWarning)
        out = {"graphs": len(coll.graphs), "graph_calls": sum(coll.graph_calls.values()), "kernels": [],
               "uncounted_graph_calls": coll.uncounted, "eager_fallback": coll.eager_reason,
               "graph_breaks": breaks, "problems": [f"kernel view failed: {e}"], "incomplete": coll.incomplete()}
    if coll.problems:
        _warn.warn("roofline: " + "; ".join(dict.fromkeys(coll.problems)), RuntimeWarning)
    return out
