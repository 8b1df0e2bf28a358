"""The event model of one Kineto trace: the op tree of each CPU thread, the GPU kernels linked to the op that
launched them, the profiler steps, and the devices.

What a trace holds and how it is read here:

- ``cpu_op`` events (``ph: "X"``) are the ops of each thread (aten ops, ``record_param_comms``, the autograd
  engine's ``autograd::engine::evaluate_function: XBackward0`` events); ``user_annotation`` events are the
  ``record_function`` ranges (``ProfilerStep#N``, ``Optimizer.step#AdamW.step``, user ranges); ``python_function``
  events named ``nn.Module: Class_N`` are the module calls (recorded with ``with_modules``/``with_stack``; the other
  Python frames are skipped as they are read). On each thread (``pid``, ``tid``) these nest by time into a tree.
- ``cuda_runtime`` / ``cuda_driver`` events (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cudaMemcpyAsync``,
  ``hipLaunchKernel``, ...) are the host side of GPU work; each carries ``args["correlation"]``, the id its GPU
  activity carries too. The op a kernel belongs to is the innermost tree node enclosing its launch in time on the
  launching thread.
- ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events are the GPU activities, with their measured durations. A
  kernel whose ``correlation`` matches no launch is linked through its ``ac2g`` flow (``ph: "f"`` at the kernel,
  ``"s"`` at the launch, sharing an ``id``), or else through ``args["External id"]`` (the id of the op the
  profiler saw enclosing the launch); a kernel none of the three links is kept, unlinked (never dropped).

Times are microseconds as the trace writes them (floats with nanosecond fractions) until the report is built.
"""

from __future__ import annotations

import bisect
import math
import re

# Kineto categories (lower-cased as they are compared)
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver"})
_OP, _ANNOT, _MODULE = 0, 1, 2
KIND_NAMES = ("op", "annotation", "module")

STEP = re.compile(r"ProfilerStep#(\d+)\Z")
OPTIMIZER_STEP = "Optimizer.step#"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
_MODULE_PREFIX = "nn.Module: "
COMMS = "record_param_comms"  # a collective's sizes (kept whole)
# the arguments of a cpu_op event its cost depends on (the rest of an op's args is not kept)
COST_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


class Node:
    """One range of a CPU thread: an op, an annotation or a module call. ``kernels``: the GPU activities launched
    directly inside it (not inside a child); ``direct`` / ``subtree``: their summed durations and those of its whole
    subtree (microseconds), set by :func:`attribute`."""

    __slots__ = ("name", "ts", "end", "kind", "args", "parent", "children", "thread", "kernels", "direct",
                 "subtree", "record", "index", "external", "seq")

    def __init__(self, name, ts, end, kind, args, thread, index, external=None, seq=None):
        self.name, self.ts, self.end, self.kind, self.args = name, ts, end, kind, args
        self.thread, self.index = thread, index
        self.external, self.seq = external, seq  # args["External id"] and args["Sequence number"]
        self.parent = None
        self.children: list = []
        self.kernels: list = []
        self.direct = self.subtree = 0.0
        self.record = -1

    def ancestors(self):
        """The enclosing nodes, innermost first."""
        p = self.parent
        while p is not None:
            yield p
            p = p.parent

    def __repr__(self):
        return f"Node({KIND_NAMES[self.kind]} {self.name!r} @{self.ts})"


class Kernel:
    """One GPU activity: ``cat`` ("kernel", "gpu_memcpy" or "gpu_memset"), ``ts`` and ``dur`` (microseconds),
    ``correlation``, ``device``, ``stream``, ``where`` (the event's pid and tid, which its flow event shares),
    ``launch`` (the node enclosing its launch, or None) and ``linked_by``
    (how the link was made: "correlation", "flow", "external id" or "" when unlinked)."""

    __slots__ = ("name", "cat", "ts", "dur", "correlation", "external", "device", "stream", "launch", "launch_ts",
                 "linked_by", "where", "early")

    def __init__(self, name, cat, ts, dur, correlation, external, device, stream):
        self.name, self.cat, self.ts, self.dur = name, cat, ts, dur
        self.correlation, self.external, self.device, self.stream = correlation, external, device, stream
        self.where = None
        self.early = False  # launched before the trace's first recorded launch: part of no recorded step
        self.launch = None
        self.launch_ts = None
        self.linked_by = ""


class TraceModel:
    """Everything a report is built from, read in one pass over the events.

    ``header`` (the trace's top-level keys but ``traceEvents``), ``nodes`` (every op, annotation and module node, in
    the order of a depth-first walk of each thread's tree, threads in order of their first event), ``roots`` (the
    top nodes per thread), ``kernels`` (every GPU activity, in time order), ``steps`` (``[(number, node)]`` of the
    ``ProfilerStep#N`` annotations, in time order), ``has_shapes`` (some op recorded ``Input Dims``),
    ``has_modules`` (some ``nn.Module`` events), ``problems`` (what could not be linked or read, as sentences)."""

    def __init__(self, header, nodes, roots, kernels, steps, has_shapes, has_modules, problems, path="",
                 complete=True):
        self.header, self.nodes, self.roots, self.kernels = header, nodes, roots, kernels
        self.complete = complete  # False when the reader could not read the whole file (problems says why)
        self.steps, self.has_shapes, self.has_modules, self.problems = steps, has_shapes, has_modules, problems
        self.path = path

    @property
    def device_properties(self) -> list:
        """``deviceProperties`` of the header (a list of dicts with ``id`` and ``name``), [] when absent."""
        props = self.header.get("deviceProperties")
        return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []

    def tree(self) -> tuple[list, list, list]:
        """The nodes as :func:`roofline._traces._ops.counted` reads them: each one's name, its parent's index (-1 for
        a root) and its ``args`` (what its cost depends on; None for a module call)."""
        nodes = self.nodes
        return ([n.name for n in nodes], [n.parent.index if n.parent is not None else -1 for n in nodes],
                [n.args for n in nodes])

    def device_name(self, index) -> str | None:
        """The name ``deviceProperties`` gives device ``index``, or None."""
        for p in self.device_properties:
            if p.get("id") == index and isinstance(p.get("name"), str):
                return p["name"]
        return None


def _num(v, default=None):
    """``v`` when it is a finite number (the reader reads ``1e400`` as inf and ``NaN`` as nan), else ``default``."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else default


def _is_module_event(name: str) -> bool:
    return name.startswith(_MODULE_PREFIX)


def build(raw, path: str = "", progress=None) -> TraceModel:
    """Read the events of ``raw`` (a reader's ``RawTrace``: ``.events()`` and ``.header``) into a
    :class:`TraceModel`: one pass over the events, then the per-thread trees, then the kernel links. ``progress``
    (a callable taking a status line, or None) hears how much of the file has been read, every 16384 events, and
    when the trees and links are being built."""
    per_thread: dict = {}     # thread key -> [(ts, -dur, order, kind, name, args, end)]
    launches: dict = {}       # correlation -> (thread key, ts)
    flows_s: dict = {}        # flow id -> (thread key, ts) of the launch side
    flows_f: dict = {}        # (pid, tid, ts) -> flow id at the GPU side
    kernels: list = []
    interned: dict = {}
    order = 0
    has_shapes = False
    problems: list = []
    bad = 0
    seen = 0
    for e in raw.events():
        seen += 1
        if progress is not None and not seen & 16383:
            _report_read(progress, raw, seen)
        if not isinstance(e, dict):
            bad += 1
            continue
        ph = e.get("ph")
        cat = e.get("cat")
        cat = cat.lower() if isinstance(cat, str) else ""
        if ph == "X":
            ts, dur = _num(e.get("ts")), _num(e.get("dur"), 0.0)
            name = e.get("name")
            if ts is None or not isinstance(name, str) or dur < 0:
                bad += 1
                continue
            args = e.get("args")
            args = args if isinstance(args, dict) else {}
            if cat in _GPU_CATS:
                k = Kernel(name, cat, ts, dur, args.get("correlation"), args.get("External id"),
                           args.get("device", e.get("pid")), args.get("stream", e.get("tid")))
                k.where = (e.get("pid"), e.get("tid"))
                kernels.append(k)
                continue
            key = (e.get("pid"), e.get("tid"))
            ext = seq = None
            if cat == "cpu_op":
                kind = _OP
                if not has_shapes and args.get("Input Dims"):
                    has_shapes = True
                ext, seq = args.get("External id"), args.get("Sequence number")
                if name != COMMS:  # keep what the cost depends on, one dict per distinct value (layers repeat)
                    ikey = (name, repr([args.get(a) for a in COST_ARGS]))
                    shared = interned.get(ikey)
                    if shared is None:
                        shared = interned[ikey] = {a: args[a] for a in COST_ARGS if a in args}
                    args = shared
            elif cat == "user_annotation":
                kind = _ANNOT
            elif cat == "python_function":
                if not _is_module_event(name):
                    continue
                kind = _MODULE
                args = None
            elif cat in _RUNTIME_CATS:
                corr = args.get("correlation")
                if corr is not None:
                    launches.setdefault(corr, (key, ts))
                continue
            else:
                continue
            per_thread.setdefault(key, []).append((ts, -dur, order, kind, name, args, ext, seq))
            order += 1
        elif ph in ("s", "f") and cat == "ac2g":
            fid, ts = e.get("id"), _num(e.get("ts"))
            if fid is None or ts is None:
                continue
            if ph == "s":
                flows_s.setdefault(fid, ((e.get("pid"), e.get("tid")), ts))
            else:
                flows_f[(e.get("pid"), e.get("tid"), ts)] = fid
    if bad:
        problems.append(f"{bad} events without a name, a time or a valid duration were skipped")
    header = raw.header if isinstance(getattr(raw, "header", None), dict) else {}
    if getattr(raw, "complete", True) is False:  # the reader stopped early or skipped what it could not read
        issues = [str(x) for x in (getattr(raw, "issues", None) or ())] or ["the file is incomplete"]
        problems[:0] = [f"the trace file is incomplete: {'; '.join(issues)}"]

    if progress is not None:
        progress(f"{seen} events read; nesting the ops and linking the kernels")
    nodes, roots, steps, has_modules = _trees(per_thread)
    per_thread.clear()
    _link(kernels, nodes, launches, flows_s, flows_f, problems)
    kernels.sort(key=lambda k: (k.ts, k.dur))
    attribute(nodes, kernels)
    return TraceModel(header, nodes, roots, kernels, steps, has_shapes, has_modules, problems, path,
                      getattr(raw, "complete", True) is not False)


def _report_read(progress, raw, events: int) -> None:
    """A status line for ``progress``: the events read, and the share of the file (MB read of MB; KB below 64 MB)
    when the reader says where it is (``position`` and ``nbytes``)."""
    at, size = getattr(raw, "position", None), getattr(raw, "nbytes", None)
    if isinstance(at, int) and isinstance(size, int) and size > 0:
        shift, unit = (20, "MB") if size >= 64 << 20 else (10, "KB")
        progress(f"{events} events, {unit} read ({at >> shift}/{max(size >> shift, 1)})")
    else:
        progress(f"{events} events read")


def _trees(per_thread):
    """Nest each thread's ranges by time. A range starting before the enclosing one ends is its child (a child
    that overruns its parent's end by the trace's rounding stays a child; one starting at or after it does not)."""
    nodes: list = []
    roots: dict = {}
    steps: list = []
    has_modules = False
    for key in list(per_thread):  # each thread's items freed once its nodes are made
        items = per_thread.pop(key)
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        stack: list = []
        thread_roots = roots.setdefault(key, [])
        for ts, negdur, _, kind, name, args, ext, seq in items:
            end = ts - negdur
            while stack and stack[-1].end <= ts:
                stack.pop()
            n = Node(name, ts, end, kind, args, key, len(nodes), ext, seq)
            if stack:
                n.parent = stack[-1]
                stack[-1].children.append(n)
            else:
                thread_roots.append(n)
            nodes.append(n)
            stack.append(n)
            if kind == _MODULE:
                has_modules = True
            else:  # a record_function range: user_annotation, or cpu_op in traces of older torch
                m = STEP.match(name)
                if m:
                    steps.append((int(m.group(1)), n))
    # nodes in depth-first order per thread (the sort above already gives it: parents before children, in time)
    steps.sort(key=lambda s: s[1].ts)
    return nodes, roots, steps, has_modules


def _innermost(thread_nodes_starts, thread_nodes, ts):
    """The innermost node of one thread whose range holds ``ts`` (binary search over the depth-first order)."""
    i = bisect.bisect_right(thread_nodes_starts, ts) - 1
    if i < 0:
        return None
    # the last node starting at or before ts; if it ended before ts, only one of its ancestors can still hold it
    n = thread_nodes[i]
    while n is not None and n.end < ts:
        n = n.parent
    return n


def _link(kernels, nodes, launches, flows_s, flows_f, problems):
    """Give each kernel the node enclosing its launch: by ``correlation`` (the runtime event with the same id), else
    by its ``ac2g`` flow, else by ``External id`` (the op with that id)."""
    by_thread: dict = {}
    for n in nodes:
        by_thread.setdefault(n.thread, []).append(n)
    starts = {k: [n.ts for n in v] for k, v in by_thread.items()}
    by_external = None
    for k in kernels:
        where = None
        if k.correlation is not None and k.correlation in launches:
            where, k.linked_by = launches[k.correlation], "correlation"
        else:
            fid = flows_f.get((*k.where, k.ts))
            if fid is not None and fid in flows_s:
                where, k.linked_by = flows_s[fid], "flow"
        if where is not None:
            key, ts = where
            k.launch_ts = ts
            if key in by_thread:
                k.launch = _innermost(starts[key], by_thread[key], ts)
            continue
        if k.external is not None:
            if by_external is None:
                by_external = {}
                for n in nodes:
                    if n.kind == _OP and n.external is not None:
                        by_external.setdefault(n.external, n)
            n = by_external.get(k.external)
            if n is not None:
                k.launch, k.launch_ts, k.linked_by = n, n.ts, "external id"
    # a kernel whose correlation id is below every recorded launch's was launched before the trace's CPU side
    # began (queued work of an earlier step, still running when the profiler started): it belongs to no step
    first = min((c for c in launches if isinstance(c, int)), default=None)
    early = 0
    for k in kernels:
        if not k.linked_by and first is not None and isinstance(k.correlation, int) and k.correlation < first:
            k.early = True
            early += 1
    if early:
        problems.append(f"{early} GPU activities were launched before the trace's first recorded launch (work "
                        "queued before the profiler started): listed as launched before the trace, in no step")
    unlinked = sum(1 for k in kernels if not k.linked_by and not k.early)
    if unlinked:
        problems.append(f"{unlinked} GPU activities carry no correlation, flow or external id that links them to "
                        "a launch: kept as unattributed time")


def attribute(nodes, kernels):
    """Each node's ``kernels`` (launched directly inside it), ``direct`` and ``subtree`` kernel time."""
    for k in kernels:
        if k.launch is not None:
            k.launch.kernels.append(k)
            k.launch.direct += k.dur
    for n in reversed(nodes):  # children after parents in depth-first order: sum bottom up
        n.subtree += n.direct
        if n.parent is not None:
            n.parent.subtree += n.subtree


def phase_of(node) -> str:
    """"backward" inside an autograd engine's ``evaluate_function`` event, "optimizer" inside an
    ``Optimizer.step#`` annotation, "forward" otherwise."""
    for a in (node, *node.ancestors()):
        if a.name.startswith(BACKWARD_PREFIX):
            return "backward"
        if a.kind != _MODULE and a.name.startswith(OPTIMIZER_STEP):
            return "optimizer"
    return "forward"


def module_chain(node) -> list:
    """The ``nn.Module`` calls enclosing ``node``, outermost first, as the trace names them (``"Linear_3"``)."""
    out = [a.name[len(_MODULE_PREFIX):] for a in node.ancestors() if a.kind == _MODULE]
    out.reverse()
    return out
