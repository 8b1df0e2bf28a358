"""Generator of ``roofline/_traces/_ops_table.py``, the operator facts trace analysis needs without torch:

* the argument types of every overload of the ops the cost model has formulas for (and of the ops some of whose
  overloads are ``CompositeImplicitAutograd`` and some not), so that a trace event's recorded argument types choose
  the overload;
* which overloads have a ``CompositeImplicitAutograd`` kernel: such an op never reaches a dispatch mode (its parts
  do), so a trace counts its children instead (``roofline._traces._ops.counted``);
* which of those also have a kernel of their own (CPU, CUDA): it runs where the composite is bypassed (in backward,
  ``aten::silu_backward``; ``aten::_fused_rms_norm`` on CUDA), and the trace then shows the op with no parts;
* which overloads have such a kernel only in Python (``py_impl``, registered by ``import torch``): a dispatch mode
  decomposes them (``roofline.measure``, as FlopCounterMode, calls ``func.decompose()``), while the profiler records
  the C++ kernel that runs without a mode (``aten::native_batch_norm``, ``aten::upsample_nearest2d``).

Run ``python -m roofline._traces._ops_gen`` with the torch whose traces are to be read, in a fresh interpreter (what
other packages register when imported, torchvision's ops say, is not torch's table); ``tests/test_trace_cost.py``
checks the table against the installed torch the same way.
"""

from __future__ import annotations

import os

from roofline._counting._formulas import OPS as PYTHON_FORMULAS
from roofline._counting._schemas import SCHEMAS
from roofline._util import _output

# Argument type (as torch's schema prints it) -> the one-letter code the table stores; "?" marks an optional one.
_CODES = {
    "Tensor": "T", "List[Tensor]": "L", "List[Optional[Tensor]]": "L?", "number": "S", "int": "i", "SymInt": "i",
    "float": "f", "bool": "b", "str": "s", "Device": "D", "Generator": "G", "Storage": "X", "List[int]": "I",
    "List[SymInt]": "I", "List[float]": "F", "List[bool]": "B", "List[number]": "A", "List[str]": "W",
}


def type_code(t: str) -> str:
    """The table's code of one argument type (``"Optional[Tensor]"`` -> ``"T?"``); ``"?"`` for a type that no trace
    records as anything but ``""``."""
    opt = t.startswith("Optional[") and t.endswith("]")
    base = t[len("Optional["):-1] if opt else t
    code = _CODES.get(base, "?")
    return code + ("?" if opt and not code.endswith("?") else "")


_BACKENDS = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def collect() -> dict:
    """From the installed torch: ``version``; ``types`` {"packet.overload": type codes}; ``names`` {"packet.overload":
    argument names} for the ops with a built-in Python formula (``roofline._counting._formulas.OPS``), whose schemas
    ``roofline._counting._schemas`` does not hold; the sorted overloads that are composite (``cia``), of those the ones
    with a kernel of their own (``kernel_cia``), and the ones composite in Python only (``py_cia``)."""
    import torch

    C = torch._C
    names = sorted(C._dispatch_get_all_op_names())
    cia, kernel_cia, py_cia, by_packet = [], [], [], {}
    for full in names:
        ns, _, rest = full.partition("::")
        packet, _, ov = rest.partition(".")
        key = f"{packet}.{ov or 'default'}" if ns == "aten" else f"{ns}::{packet}.{ov or 'default'}"
        is_cia = C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd")
        if is_cia:
            cia.append(key)
            if any(C._dispatch_has_kernel_for_dispatch_key(full, k) for k in _BACKENDS):
                kernel_cia.append(key)
        else:
            try:
                ovl = getattr(getattr(getattr(torch.ops, ns), packet), ov or "default")
            except (AttributeError, RuntimeError):
                ovl = None
            if ovl is not None and C.DispatchKey.CompositeImplicitAutograd in ovl.py_kernels:
                py_cia.append(key)
        by_packet.setdefault(key.rpartition(".")[0], []).append((key, full, is_cia))
    formula_packets = {k[len("aten::"):] if k.startswith("aten::") else k for k in PYTHON_FORMULAS}
    wanted = {k.rpartition(".")[0] for k in SCHEMAS} | formula_packets
    wanted |= {p for p, ovs in by_packet.items() if len({c for _, _, c in ovs}) > 1}
    types, names = {}, {}
    for p in sorted(wanted):
        for key, full, _ in by_packet.get(p, ()):
            ns, _, rest = full.partition("::")
            name, _, ov = rest.partition(".")
            sch = C._get_schema(f"{ns}::{name}", ov)
            types[key] = " ".join(type_code(str(a.type)) for a in sch.arguments)
            if p in formula_packets and key not in SCHEMAS:
                names[key] = " ".join(a.name for a in sch.arguments)
    return {"version": torch.__version__.split("+")[0], "types": types, "names": names, "cia": sorted(cia),
            "kernel_cia": sorted(kernel_cia), "py_cia": sorted(py_cia)}


def write(path=None) -> str:
    """Regenerate ``roofline/_traces/_ops_table.py`` from the installed torch; returns its path."""
    t = collect()
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ops_table.py")
    lines = ['"""Operator facts for reading traces without torch. Generated from torch '
             f'{t["version"]} by ``python -m roofline._traces._ops_gen``;',
             "do not edit. tests/test_trace_cost.py checks it against the installed torch.", "",
             "TYPES: overload (``name.overload``; other namespaces prefixed ``ns::``) -> its arguments' type codes, in",
             "schema order (T tensor, L tensor list, L? list of optional tensors, S scalar, i int, f float, b bool,",
             "s str, D device, G generator, I int list, F float list, B bool list, A scalar list, W str list, X storage,",
             "? a type no trace records; a trailing ? marks an optional argument). CIA: the overloads with a",
             "CompositeImplicitAutograd kernel; KERNEL_CIA: those of them with a kernel of their own; PY_CIA: the",
             "overloads with one in Python only (a dispatch mode decomposes them; the profiler records their C++",
             "kernel). NAMES: the argument names of the ops with a built-in Python formula (the other ops' are in",
             'roofline._counting._schemas)."""', "",
             f"TORCH_VERSION = {t['version']!r}", "", "TYPES = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(t["types"].items())]
    lines += ["}", "", "NAMES = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(t["names"].items())]
    lines += ["}", "", "CIA = frozenset({"]
    lines += [f"    {k!r}," for k in t["cia"]]
    lines += ["})", "", "KERNEL_CIA = frozenset({"]
    lines += [f"    {k!r}," for k in t["kernel_cia"]]
    lines += ["})", "", "PY_CIA = frozenset({"]
    lines += [f"    {k!r}," for k in t["py_cia"]]
    lines += ["})", ""]
    _output.write(path, "\n".join(lines), where="roofline._traces._ops_gen")
    return path


if __name__ == "__main__":  # pragma: no cover - the generator's command line
    print(write())
