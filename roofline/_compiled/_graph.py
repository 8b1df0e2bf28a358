"""The graph snapshot taken while Inductor compiles: the aten ops of a forward or backward FX graph, in execution
order, with the fake values of their arguments and results and their module paths; a backward graph's ops get the
modules the eager module tracker would hold active (replayed from the forward graph's tape, roofline/_compiled/
_tracker_replay.py). Symbolic sizes are bound per call (``_Graph.bind``, ``_Graph.ops_for``)."""

from __future__ import annotations

import operator
import os

import torch

from roofline._compiled import _tracker_replay
from roofline._compiled._fx_paths import node_modules


class _Op:
    """One aten op of a graph. ``modules``: the ``nn_module_stack`` chain of the op (of the forward op it
    differentiates, in a backward graph), (root, path) pairs outermost first; ``tracked``: for a backward op, the
    modules the eager module tracker would hold active while it runs (roofline/_compiled/_tracker_replay.py), or None."""

    __slots__ = ("name", "func", "args", "kwargs", "out", "modules", "tracked", "noread", "nowrite", "recomputed")

    def __init__(self, name, func, args, kwargs, out, modules, tracked=None, noread=(), nowrite=False,
                 recomputed=False):
        self.name, self.func, self.args, self.kwargs, self.out, self.modules = name, func, args, kwargs, out, modules
        self.tracked = tracked
        # compulsory bytes of an op that is part of the decomposition of one eager op (decomposition_io): the
        # positions among its tensor arguments (tensor_leaves order) that are not compulsory reads, and whether its
        # result stays inside the eager op (not a compulsory write)
        self.noread, self.nowrite = noread, nowrite
        self.recomputed = recomputed  # a forward op the backward graph runs again (AOTAutograd's partitioner)


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
                       conc(op.out), op.modules, op.tracked, op.noread, op.nowrite, op.recomputed)
                   for op in self.ops]
        except LookupError:
            return None
        self.concrete[key] = ops
        return ops


_graph_counter = [0]


# Forward tapes of the graphs compiled while measuring (roofline/_compiled/_tracker_replay.py), the latest last: a backward
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
        return _tracker_replay.forward_tape(gm, rg, leaf, len(out_info), n_mut)
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
                sim = _tracker_replay.replay(tape)
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


def _recomputed(gm) -> set:
    """Names of the nodes of a backward graph that its forward graph computed too: AOTAutograd's partitioner copies
    the nodes of one joint graph into both, names kept, and a forward node it chose to recompute rather than save is
    in both (empty when the forward's tape is not found)."""
    names = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    seqs = [n.meta.get("seq_nr") for n in gm.graph.nodes if n.op == "call_function"]
    seqs = [q for q in seqs if isinstance(q, int)]
    if not seqs:
        return set()
    for tape in reversed(_TAPES):
        if tape.seq_lo <= min(seqs) and max(seqs) <= tape.seq_hi:
            return {n for n in names if isinstance(tape.producer.get(n), int)}
    return set()


def tensor_leaves(x, out=None) -> list:
    """The leaves of an op's ``(args, kwargs)`` in order (tuples, lists and dict values walked), the same walk for the
    FX nodes of a graph and for the values they stand for."""
    out = [] if out is None else out
    if isinstance(x, (list, tuple)):
        for v in x:
            tensor_leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            tensor_leaves(v, out)
    else:
        out.append(x)
    return out


def decomposition_io(gm) -> dict:
    """The compulsory traffic of the eager ops a graph holds decomposed. AOTAutograd and Inductor hand Inductor the
    decompositions of many ops (``silu`` as ``neg``, ``exp``, ``add``, ``div``; ``native_layer_norm`` as ``var_mean``,
    ``rsqrt``, ``sub``, ``mul``, ``add``), each node naming the op it comes from (``meta["original_aten"]``). Eager,
    that op reads its inputs once and writes its outputs once; its parts' intermediates are not traffic of the step.
    ``{node name: (noread, nowrite)}`` for the nodes of such a decomposition (consecutive nodes from one op call: the
    same ``original_aten`` and ``seq_nr``): ``noread``, the positions (``tensor_leaves`` of the node's arguments) of
    the values made inside its decomposition, or read by an earlier part of it; ``nowrite``, whether its value is
    used only inside the decomposition (through views and ``getitem``), not by a later op or the graph's output."""
    import torch.fx as fx

    group: dict = {}  # node -> group number
    prev_key, g = None, -1
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            src = node.args[0] if node.args else None
            if isinstance(src, fx.Node) and src in group:
                group[node] = group[src]
            continue
        target = _op_target(node.target)
        orig = node.meta.get("original_aten")
        # (the graph's metadata may hold copies of the operators: compared by name)
        if target is None or not isinstance(orig, torch._ops.OpOverload) or str(orig) == str(target):
            prev_key = None
            continue
        key = (str(orig), node.meta.get("seq_nr"))
        if key != prev_key:
            g += 1
            prev_key = key
        group[node] = g
    if not group:
        return {}

    def passes_through(u):  # a user whose value is the node's data: a view, a getitem of its tuple
        if u.target is operator.getitem:
            return True
        t = _op_target(u.target)
        return isinstance(t, torch._ops.OpOverload) and t.is_view

    used_outside: dict = {}
    for node in reversed(list(gm.graph.nodes)):
        if node not in group:
            continue
        used_outside[node] = any(
            u.op != "call_function" or group.get(u) != group[node] or (passes_through(u) and used_outside.get(u, True))
            for u in node.users)
    out: dict = {}
    read_in: dict = {}  # group -> nodes from outside it already read by one of its parts
    for node, gi in group.items():
        if node.target is operator.getitem:
            continue
        seen = read_in.setdefault(gi, set())
        noread = []
        for i, a in enumerate(tensor_leaves((node.args, node.kwargs))):
            if not isinstance(a, fx.Node):
                continue
            if group.get(a) == gi or a in seen:
                noread.append(i)
            else:
                seen.add(a)
        out[node.name] = (tuple(noread), not used_outside[node])
    return out


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
    io = decomposition_io(gm)
    again = _recomputed(gm) if backward else set()
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
        noread, nowrite = io.get(node.name, ((), False))
        ops.append(_Op(node.name, target, tuple(args), dict(kwargs), out, node_modules(node),
                       tracked.get(node.meta.get("seq_nr")), noread, nowrite, node.name in again))
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
