"""Stand-ins used only while the trace reader (``_read``) or the op costing (``_ops``) is absent from the package:
a whole-file JSON reader and a cost of one recorded op through :func:`roofline.cost`. Each is replaced by its module
as soon as that module exists (``_load`` and ``_build`` import the real one first)."""

from __future__ import annotations

import ast
import gzip
import json
import os
from dataclasses import dataclass

from roofline.counting import _registry
from roofline.counting._spec import TensorSpec, cost


class TraceError(ValueError):
    """A trace file that cannot be read, naming the file and the problem."""


class RawTrace:
    """The header and events of one trace read whole."""

    def __init__(self, doc: dict, path: str):
        self._doc, self.path = doc, path
        self.header = {k: v for k, v in doc.items() if k != "traceEvents"}

    def events(self):
        ev = self._doc.get("traceEvents")
        if not isinstance(ev, list):
            raise TraceError(f"{self.path}: no traceEvents list")
        yield from ev


def open_trace(path) -> RawTrace:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, EOFError, ValueError) as e:
        raise TraceError(f"{path}: not a readable JSON trace ({e})") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: the top level is not an object")
    return RawTrace(doc, path)


_TYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
          "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8", "unsigned char": "uint8",
          "bool": "bool", "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
          "c10::complex<float>": "complex64", "c10::complex<double>": "complex128"}


@dataclass
class TraceOpCost:
    name: str
    kind: str
    matrix_flops: int = 0
    vector_flops: int = 0
    special_ops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    flop_counter_flops: int = 0
    dtype: str = "unknown"
    status: str = "ok"
    reason: str = ""


def _scalar(s):
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return {"true": True, "false": False}.get(str(s).lower(), None)


def cost_event(name: str, args: dict) -> TraceOpCost:
    entry = _registry.lookup(name)
    op = name.replace("::", ".") + ".default"
    if entry is None:
        return TraceOpCost(op, "unknown", status="unknown")
    dims = args.get("Input Dims")
    if dims is None:
        return TraceOpCost(op, entry.kind, status="no_shapes")
    types = args.get("Input type") or []
    strides = args.get("Input Strides") or []
    conc = args.get("Concrete Inputs") or []
    vals, dtype = [], None
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if t in _TYPES:
            st = strides[i] if i < len(strides) and strides[i] and len(strides[i]) == len(d) else None
            vals.append(TensorSpec(d, _TYPES[t], st))
            dtype = dtype or _TYPES[t]
        elif t == "TensorList":
            vals.append([TensorSpec(x, "float32") for x in d])
        elif t in ("Scalar", "ScalarList"):
            vals.append(_scalar(conc[i]) if i < len(conc) else None)
        else:
            vals.append(None)
    while vals and vals[-1] is None:
        vals.pop()
    try:
        c = cost(name, *vals, dtype=dtype or "float32")
    except Exception as e:  # noqa: BLE001 - a stand-in: any failure is an error status
        return TraceOpCost(op, entry.kind, status="error", reason=str(e)[:200])
    return TraceOpCost(op, entry.kind, c.matrix_flops, c.vector_flops, c.special_ops, c.bytes_read,
                       c.bytes_written, c.flop_counter_flops, c.dtype, "ok")


def has_formula(name: str) -> bool:
    return _registry.lookup(name) is not None
