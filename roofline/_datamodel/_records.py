"""The record layout shared with the C recorder (csrc/record.h) and the scalar-type table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline import _core

# The five counts of an op call, in record order: every list of them in the package is this one (the record
# layout, roll-ups, merges, the steady repeats' agreement, the monitor, user formulas' keys, compiled kernels)
COUNTS = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written")
# ... and FlopCounterMode's count for the call, beside them in a record
COUNTS_AND_FLOP_COUNTER = COUNTS + ("flop_counter_flops",)

# One row per op call. Mirrors rl_record in csrc/record.h field for field (checked below at import).
# flop_counter_flops is FlopCounterMode's count for the call (rl_record.compat_flops); its earlier name,
# "compat_flops", is kept as the field's title, so records["compat_flops"] still reads it. `sig` indexes the
# report's signature table; `reserved` is zero (it keeps the record a multiple of 8 bytes with no gap, so that the
# raw bytes of a copy are those of the original).
RECORD_DTYPE = np.dtype([
    *[(name, "<u8") for name in COUNTS],
    (("compat_flops", "flop_counter_flops"), "<u8"),
    ("t_start", "<f8"),
    ("t_end", "<f8"),
    ("op", "<u4"),
    ("module", "<u4"),
    ("phase", "u1"),
    ("dtype", "u1"),
    ("status", "u1"),
    ("kind", "u1"),
    ("seq", "<u4"),
    ("sig", "<u4"),
    ("reserved", "<u4"),
])


def _check_layout(dtype, fields, what: str):
    """``dtype`` against the C struct's fields (``_core.RECORD_FIELDS`` / ``ACCESS_FIELDS``: name, offset, size,
    kind), field by field: ImportError on any difference (a build of the extension that does not match this code)."""
    for name, offset, size, kind in fields:
        if name not in dtype.fields:
            raise ImportError(f"roofline._core {what} field {name!r} is not in the NumPy layout")
        ft, off = dtype.fields[name][:2]
        if (off, ft.itemsize, ft.kind) != (offset, size, kind):
            raise ImportError(f"roofline._core {what} field {name!r}: offset {offset}, {size} bytes, kind {kind!r} "
                              f"in C; offset {off}, {ft.itemsize} bytes, kind {ft.kind!r} in NumPy")
    if len(fields) != len(dtype.names):
        raise ImportError(f"roofline._core {what} has {len(fields)} fields, the NumPy layout {len(dtype.names)}")


_check_layout(RECORD_DTYPE, _core.RECORD_FIELDS, "record")

# Records saved before `sig` existed: the same fields without the last two, 80 bytes (read by records_from_bytes).
RECORD_DTYPE_V1 = np.dtype(RECORD_DTYPE.descr[:-2])
if RECORD_DTYPE.itemsize != _core.RECORD_SIZE:  # pragma: no cover - a build/layout mismatch
    raise ImportError(f"roofline._core record size {_core.RECORD_SIZE} != RECORD_DTYPE {RECORD_DTYPE.itemsize}")

# Dataflow rows (Report.accesses): one per (op call, storage block it read or wrote, direction).
ACCESS_DTYPE = np.dtype([("record", "<u4"), ("storage", "<u8"), ("nbytes", "<u8"), ("write", "u1")])
# rl_access in csrc/record.h, as the recorder hands the rows over (aligned; converted to ACCESS_DTYPE).
ACCESS_RAW_DTYPE = np.dtype({"names": ["storage", "nbytes", "record", "write"], "formats": ["<u8", "<u8", "<u4", "u1"],
                             "offsets": [0, 8, 16, 20], "itemsize": 24})
if ACCESS_RAW_DTYPE.itemsize != _core.ACCESS_SIZE:  # pragma: no cover - a build/layout mismatch
    raise ImportError(f"roofline._core access size {_core.ACCESS_SIZE} != ACCESS_RAW_DTYPE {ACCESS_RAW_DTYPE.itemsize}")
_check_layout(ACCESS_RAW_DTYPE, _core.ACCESS_FIELDS, "access row")


def records_from_bytes(raw: bytes, n: int):
    """``n`` records from their raw bytes: the current layout, or the 80-byte layout written before ``sig`` existed
    (then ``sig`` is 0). None when ``raw`` holds neither ``n`` records of one layout nor the other."""
    if len(raw) == n * RECORD_DTYPE.itemsize:
        return np.frombuffer(raw, dtype=RECORD_DTYPE).copy()
    if len(raw) == n * RECORD_DTYPE_V1.itemsize:
        old = np.frombuffer(raw, dtype=RECORD_DTYPE_V1)
        rec = np.zeros(n, dtype=RECORD_DTYPE)
        for name in RECORD_DTYPE_V1.names:
            rec[name] = old[name]
        return rec
    return None


def accesses_from_raw(raw: bytes):
    """The recorder's dataflow rows (``Recorder.accesses_bytes()``) as an ``ACCESS_DTYPE`` array."""
    src = np.frombuffer(raw, dtype=ACCESS_RAW_DTYPE)
    out = np.empty(len(src), dtype=ACCESS_DTYPE)
    for name in ACCESS_DTYPE.names:
        out[name] = src[name]
    return out


# The phases by code (csrc/record.h, RL_PHASES): a record's "phase" field indexes this tuple.
PHASES: tuple = _core.PHASES
FORWARD, BACKWARD, OPTIMIZER, RECOMPUTE = (PHASES.index(p) for p in ("forward", "backward", "optimizer", "recompute"))

DTYPE_CODES: dict[str, int] = {}
DTYPE_NAMES: dict[int, str] = {0: "unknown"}
ITEMSIZE: dict[str, int] = {}
for _code, _name, _size in _core.dtype_table():
    DTYPE_CODES[_name] = _code
    DTYPE_NAMES[_code] = _name
    ITEMSIZE[_name] = _size

# records["dtype"] and records["phase"] are one byte each: every code the recorder can be given must fit.
if any(not 0 <= c <= 0xFF for c in DTYPE_NAMES) or len(PHASES) > 0x100:  # pragma: no cover - a build mismatch
    raise ImportError(f"roofline._core dtype codes {sorted(DTYPE_NAMES)} do not fit the record's dtype field")

# Accepted spellings of dtype names (numpy and short forms) -> canonical name.
DTYPE_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16", "fp16": "float16",
    "fp32": "float32", "fp64": "float64", "long": "int64", "int": "int32", "short": "int16", "fp8": "float8_e4m3fn",
    "cfloat": "complex64", "cdouble": "complex128", "chalf": "complex32",
}


def canonical_dtype(name) -> str:
    """Canonical dtype name for a string, a torch.dtype or a numpy dtype; ValueError naming the input otherwise."""
    if name is None:
        raise ValueError("dtype must be given (a name such as 'float32', a torch.dtype or a numpy dtype), not None")
    s = str(name)
    if s.startswith("torch."):
        s = s[len("torch."):]
    s = DTYPE_ALIASES.get(s, s)
    if s not in DTYPE_CODES:
        try:
            s = np.dtype(name).name
        except TypeError:
            pass
    s = {"bool_": "bool"}.get(s, s)
    if s not in DTYPE_CODES:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_CODES))}")
    return s


class DerivedCounts:
    """``bytes`` and ``intensity`` of anything that has the five counts (a :class:`roofline.Cost`, a report)."""

    __slots__ = ()

    @property
    def bytes(self) -> int:
        """Compulsory bytes moved: ``bytes_read + bytes_written``."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: (matrix + vector FLOPs) per byte of compulsory traffic, in FLOP/byte (inf when FLOPs
        move no bytes, 0 when nothing was counted)."""
        return intensity(self.matrix_flops + self.vector_flops, self.bytes)


def intensity(flops: int, nbytes: int) -> float:
    """Arithmetic intensity ``flops / nbytes`` in FLOP per byte: inf when FLOPs move no bytes, 0 when nothing was
    counted."""
    if nbytes == 0:
        return float("inf") if flops else 0.0
    return flops / nbytes


# the bound codes of a classification (csrc/classify.c's, and the interconnect, judged in Python)
BOUND_INTERCONNECT = _core.BOUND_INTERCONNECT
BOUNDS = {_core.BOUND_NONE: "none", _core.BOUND_MEMORY: "memory", _core.BOUND_COMPUTE: "compute",
          _core.BOUND_BANDWIDTH: "bandwidth", BOUND_INTERCONNECT: "interconnect"}


@dataclass
class OpInfo:
    """One distinct operator (overload) seen in a run."""

    name: str            # "aten.mm.default"
    packet: str          # "aten.mm"
    kind: str            # cost kind name, "python" for a user formula, "unknown" without a formula
    packet_obj: object = None  # the OpOverloadPacket (FlopCounterMode's key), when torch is loaded

    def key(self):
        """FlopCounterMode's key for this op: the OpOverloadPacket when torch can resolve it, else the name."""
        if self.packet_obj is None:
            try:
                import torch

                ns, name = self.packet.split(".", 1)
                self.packet_obj = getattr(getattr(torch.ops, ns), name)
            except (ImportError, AttributeError, ValueError):
                return self.packet
        return self.packet_obj
