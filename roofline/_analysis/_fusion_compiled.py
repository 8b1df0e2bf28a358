"""Which fusion opportunities of an eager run the compiler took, from a compiled run of the same model.

An opportunity (roofline._analysis._dataflow) is a chain of eager calls joined by intermediates; the compiled report lists
the kernels Inductor generated, each with the aten ops it fused and the module common to them. Each member of the
chain is assigned the kernel that computes it: a kernel of the same phase, in the member's module or one of its
ancestors ("Global": the model's top level), whose name (Inductor names a generated kernel after the original aten
ops it fuses, ``cpp_fused_add_native_layer_norm_1``; an extern kernel after its call, ``extern_kernels.addmm``) or
fused ops name the member's op. When the compiled run has exactly one such kernel, or as many as the eager run
has calls of that op in that module and phase (then matched in order), the member gets it; otherwise it gets none
("unknown"). An intermediate between two members is kept on chip when both members have the same kernel.

Pure Python over the two reports; no torch."""

from __future__ import annotations

import re

from roofline._analysis._dataflow import active
from roofline._datamodel._records import PHASES
from roofline._util._format import op_base


def _kernel_names(k: dict) -> set:
    """The op names a kernel says it computes (see the module docstring)."""
    name = str(k.get("name", ""))
    ops = {op_base(o) for o in k.get("ops", ())}
    names = set()
    if k.get("extern"):
        names |= ops
        m = re.match(r"(?:extern_kernels\.|aten\.|torch\.ops\.aten\.)?([A-Za-z_]\w*)", name.split("[")[0])
        if m:
            names.add(m.group(1).rstrip("_"))
        return names
    m = re.search(r"fused_(.*)_\d+$", name)
    if m:
        # the fused part of the name, matched as whole tokens below. Its ops are the decomposed ones (a GELU's
        # add and mul): they would match calls the kernel did not fuse, so they count only when the name may
        # have been shortened (Inductor names at most 10 original ops)
        names.add("_" + m.group(1) + "_")
        if m.group(1).count("_") >= 9:
            names |= ops
    else:
        names |= ops
    return names


def _names_op(names: set, short: str) -> bool:
    if short in names:
        return True
    return any(n.startswith("_") and f"_{short}_" in n for n in names)


def _under(module: str, kernel_module: str, root: str) -> bool:
    """Whether a call in ``module`` can be in a kernel whose ops have ``kernel_module`` in common."""
    if kernel_module in ("Global", root) or module == kernel_module:
        return True
    return module.startswith(kernel_module + ".")


def mark(opportunities: list, eager, compiled) -> list:
    """Set ``compiled`` ("taken", "partly", "not taken" or "unknown") and ``compiled_saved_bytes`` (the bytes of
    the intermediates the compiled kernels keep on chip; None when unknown) on each opportunity of ``eager``.
    TypeError / ValueError when ``compiled`` is not a report of a compiled run."""
    if not hasattr(compiled, "meta") or not hasattr(compiled, "records"):
        raise TypeError(f"compiled must be a roofline Report, got {type(compiled).__name__}")
    if not (compiled.meta.get("compiled") or {}).get("kernels"):
        raise ValueError("compiled: this report has no compiled kernels (measure a torch.compile'd model, with "
                         "its first call inside the block)")
    kernels = compiled.meta["compiled"]["kernels"]
    knames = [_kernel_names(k) for k in kernels]
    roots = {m.split(".")[0] for k in kernels for m in [str(k.get("module", ""))] if m and m != "Global"}
    recs = eager.records
    names = eager.op_names

    act = active(recs)
    op_col, mod_col, ph_col = recs["op"].tolist(), recs["module"].tolist(), recs["phase"].tolist()
    mod_cache: dict = {}

    def mod(i):
        m = mod_col[i]
        if m not in mod_cache:
            mod_cache[m] = eager.module_path(m)
        return mod_cache[m]

    def key(i):
        ph = PHASES[ph_col[i]] if ph_col[i] < len(PHASES) else "?"
        return op_base(names[op_col[i]]), mod(i), ph

    rank: dict = {}  # (op, module, phase) -> eager calls, in order
    wanted = {key(i) for f in opportunities for i in f.records}
    for i in range(len(recs)):
        if act[i]:
            kk = key(i)
            if kk in wanted:
                rank.setdefault(kk, []).append(i)
    cands: dict = {}
    for kk in wanted:
        short, module, ph = kk
        root = module.split(".")[0]
        cands[kk] = [ki for ki, k in enumerate(kernels)
                     if k.get("phase") == ph and _names_op(knames[ki], short)
                     and _under(module, str(k.get("module", "Global")), root if root in roots else "Global")]

    def kernel_of(i):
        kk = key(i)
        c = cands.get(kk, [])
        if len(c) == 1:
            return c[0]
        calls = rank.get(kk, [])
        if c and len(c) == len(calls):
            return c[calls.index(i)]
        return None

    for f in opportunities:
        where = {i: kernel_of(i) for i in f.records}
        taken = missed = unknown = 0
        saved = 0
        for p, q, nbytes in f.edges:
            kp, kq = where.get(p), where.get(q)
            if kp is None or kq is None:
                unknown += 1
            elif kp == kq:
                taken += 1
                saved += nbytes
            else:
                missed += 1
        if unknown:
            f.compiled, f.compiled_saved_bytes = "unknown", None
        else:
            f.compiled = "taken" if not missed else ("partly" if taken else "not taken")
            f.compiled_saved_bytes = saved
        f.compiled_kernels = [None if where[i] is None else str(kernels[where[i]].get("name")) for i in f.records]
    return opportunities
