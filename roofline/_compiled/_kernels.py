"""The kernels Inductor generates for a graph, read from its scheduler while it compiles: the buffers each kernel
reads and writes and their bytes (symbolic under dynamic shapes: ``_SymBytes``, evaluated per call), the FX nodes it
computes (``origins``); and, once per graph, which of the graph's ops each kernel computes (``_kernel_static``)."""

from __future__ import annotations

import os

import torch


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
