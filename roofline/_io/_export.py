"""A report as data: the JSON document (:meth:`roofline.Report.to_dict`, read back by :func:`roofline.load`),
and one row per op call as CSV or a pandas DataFrame.

The document holds everything needed to rebuild the report: the records bit for bit (base64 of their raw bytes,
laid out as ``RECORD_DTYPE``), the op and module tables, times, metadata and the ceilings. :func:`read_document`
checks a document field by field against its schema version before anything is built from it: the record block
and tables here, the metadata and the ceilings against the document schema of :mod:`roofline._datamodel._document`.

Record fields are stored by position, not by name: a field renamed in ``RECORD_DTYPE`` (``compat_flops`` became
``flop_counter_flops``) leaves the document format unchanged, and documents written before the rename load as
they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

import numpy as np

from roofline import _core
from roofline._counting._registry import KIND_NAMES
from roofline._hardware._ceilings_model import SOURCES, Ceilings
from roofline._datamodel import _document
from roofline._datamodel._records import ACCESS_DTYPE, DTYPE_NAMES, PHASES, RECORD_DTYPE, OpInfo, records_from_bytes
from roofline._util import _output

SCHEMA_VERSION = 1



# ---- writing -----------------------------------------------------------------------------------------------------
def document(records, ops, module_sets, wall_time, meta, overhead, ceilings, source) -> dict:
    """The JSON-compatible document of a report (schema :data:`SCHEMA_VERSION`). Its ``meta`` is checked against
    the schema :func:`read_document` loads it with (:mod:`roofline._datamodel._document`): a report whose meta would
    not load back (a section set by hand, out of its range) is a ValueError naming the field here, not a file that
    :func:`roofline.load` refuses later."""
    try:
        _document.meta(meta, int(len(records)))
    except _document.Invalid as e:
        raise ValueError(f"this report cannot be saved: {e}; roofline.load would refuse it") from None
    return {
        "schema": SCHEMA_VERSION,
        "records": base64.b64encode(records.tobytes()).decode("ascii"),
        "n_records": int(len(records)),
        "ops": [{"name": o.name, "packet": o.packet, "kind": o.kind} for o in ops],
        "module_sets": [list(m) for m in module_sets],
        "wall_time": wall_time,
        "meta": meta,
        "overhead": overhead,
        "ceilings": None if ceilings is None else ceilings.to_dict(),
        "ceilings_source": source,
    }


def write(text: str, path, where: str, newline=None, hint: str = "") -> str:
    """Write ``text`` to ``path`` when one is given (:func:`roofline._util._output.write`: atomically, through a
    symbolic link, into a FIFO or device; TypeError naming ``where`` for a non-path); return the text."""
    if path is not None:
        _output.write(path, text, where=where, hint=hint, newline=newline)
    return text


def check_path(path, where: str) -> None:
    """TypeError naming ``where`` (e.g. ``"Report.to_csv"``) unless ``path`` is None or a file name: called
    before anything is built or serialised (an int given to a ``to_json`` gets a hint: ``to_json(2)`` looks like an
    indent)."""
    if path is not None:
        _output.check_path(path, where, _hint(path, where))


def _hint(path, where: str) -> str:
    if where.endswith("to_json") and isinstance(path, int) and not isinstance(path, bool):
        return f" (for indented text: indent={path})"
    return ""


def to_json(doc: dict, path=None, indent: int | None = None, where: str = "Report.to_json") -> str:
    """The document as JSON text (NaN allowed), written to ``path`` when given."""
    check_path(path, where)  # before the document is serialised
    return write(json.dumps(doc, indent=indent, allow_nan=True), path, where, hint=_hint(path, where))


# ---- reading a report back: the schema, checked field by field ------------------------------------------------
_OP_KINDS = None  # the kind names a report's op table may hold (built on first use)


def _bad(field: str, problem: str):
    raise ValueError(f"corrupt roofline report: {field} {problem}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type(v) -> str:
    return "null" if v is None else type(v).__name__


def _list_of_str(v, field: str) -> list[str]:
    if not isinstance(v, list):
        _bad(field, f"must be a list of str, not {_type(v)}")
    for i, x in enumerate(v):
        if not isinstance(x, str):
            _bad(f"{field}[{i}]", f"must be a str, not {_type(x)}")
    return v


def _time(v, field: str):
    """A duration in seconds (finite, in [0, _document.MAX_SECONDS]) or null."""
    if v is None:
        return None
    try:
        return _document.Seconds(v, field)
    except _document.Invalid as e:
        _bad(e.field, f"{e.problem} (seconds)")


def _check_meta(meta: dict, n_records: int) -> dict:
    """``meta`` checked against its schema (roofline._datamodel._document.META: every section measure, profile, project and
    the distributed and compiled views write, typed and ranged, and the collectives table against the records),
    so that a damaged document is a ValueError here rather than an exception when printed, rendered, projected,
    merged or exported."""
    try:
        return _document.meta(meta, n_records)
    except _document.Invalid as e:
        _bad(e.field, e.problem)


def read_document(d):
    """The parts of a report document, each checked: ``(records, ops, module_sets, wall_time, meta, overhead,
    ceilings, ceilings_source)``; ValueError naming the first wrong field."""
    global _OP_KINDS
    if not isinstance(d, dict):
        raise ValueError(f"not a roofline report (schema {SCHEMA_VERSION} expected): a JSON object is needed, not "
                         f"{_type(d)}")
    schema = d.get("schema")
    if not (_is_int(schema) and schema == SCHEMA_VERSION):
        raise ValueError(f"not a roofline report (schema {SCHEMA_VERSION} expected, the document has "
                         f"schema {_document.show(schema)})")
    for key in ("records", "n_records", "ops", "module_sets"):
        if key not in d:
            _bad(key, "is missing")
    # op and module tables
    if _OP_KINDS is None:
        _OP_KINDS = frozenset(KIND_NAMES.values()) | {"python", "unknown", "collective"}  # collective: distributed.py
    if not isinstance(d["ops"], list):
        _bad("ops", f"must be a list, not {_type(d['ops'])}")
    ops = []
    for i, o in enumerate(d["ops"]):
        if not isinstance(o, dict):
            _bad(f"ops[{i}]", f"must be an object, not {_type(o)}")
        for k in ("name", "packet", "kind"):
            if not isinstance(o.get(k), str):
                _bad(f"ops[{i}].{k}", f"must be a str, not {_type(o.get(k))}")
        if o["kind"] not in _OP_KINDS:
            _bad(f"ops[{i}].kind",
                 f"is {_document.show(o['kind'])}, not a cost kind ({', '.join(sorted(_OP_KINDS))})")
        ops.append(OpInfo(o["name"], o["packet"], o["kind"]))
    if not isinstance(d["module_sets"], list):
        _bad("module_sets", f"must be a list, not {_type(d['module_sets'])}")
    module_sets = [tuple(_list_of_str(m, f"module_sets[{i}]")) for i, m in enumerate(d["module_sets"])]
    # the record block
    if not isinstance(d["records"], str):
        _bad("records", f"must be a base64 str, not {_type(d['records'])}")
    try:
        raw = base64.b64decode(d["records"], validate=True)
    except (binascii.Error, ValueError) as e:
        _bad("records", f"is not base64 ({e})")
    n = d["n_records"]
    records = records_from_bytes(raw, n) if _is_int(n) and n >= 0 else None
    if records is None:  # the current layout, or the one saved before records had `sig`
        if len(raw) % RECORD_DTYPE.itemsize:
            _bad("records", f"is truncated ({len(raw)} bytes, not a multiple of the {RECORD_DTYPE.itemsize}-byte "
                 "record)")
        _bad("n_records", f"is {_document.show(n)}: the record count does not match the "
             f"{len(raw) // RECORD_DTYPE.itemsize} records in the block")
    _check_records(records, len(ops), len(module_sets))
    # scalars and small objects
    wall_time = _time(d.get("wall_time"), "wall_time")
    meta = d.get("meta")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        _bad("meta", f"must be an object, not {_type(meta)}")
    meta = _check_meta(meta, len(records))
    for i, m in enumerate((meta.get("attribution") or {}).get("flop_counter_modules") or []):
        if m >= len(module_sets):
            _bad(f"meta.attribution.flop_counter_modules[{i}]", f"is {m}, not a module set (0 to {len(module_sets) - 1})")
    overhead = d.get("overhead")
    if overhead is None:
        overhead = {}
    if not isinstance(overhead, dict):
        _bad("overhead", f"must be an object, not {_type(overhead)}")
    for k, v in overhead.items():
        _time(v, _document.key("overhead", k))
        if v is None:
            _bad(_document.key("overhead", k), "must be a number of seconds, not null")
    source = d.get("ceilings_source", "measured")
    if source not in SOURCES:
        _bad("ceilings_source", f"is {_document.show(source)}, not one of {SOURCES}")
    ceil = None
    if d.get("ceilings") is not None:
        try:
            ceil = Ceilings.from_dict(d["ceilings"])
        except ValueError as e:
            _bad("ceilings", f"are malformed: {e}")
    return records, ops, module_sets, wall_time, meta, dict(overhead), ceil, source


def capture_document(signatures, accesses) -> dict:
    """The document keys of a report's capture: ``signatures`` (list of str) and ``accesses`` (base64 of the
    ``ACCESS_DTYPE`` rows) with ``n_accesses``."""
    return {"signatures": list(signatures), "accesses": base64.b64encode(accesses.tobytes()).decode("ascii"),
            "n_accesses": int(len(accesses))}


def read_capture(d, records):
    """``(signatures, accesses)`` of a document, checked against its records; both empty in documents written
    before they existed. ValueError naming the first wrong field."""
    signatures = _list_of_str(d.get("signatures", []), "signatures")
    if len(records) and signatures:
        bad = np.flatnonzero(records["sig"] >= len(signatures))
        if len(bad):
            i = int(bad[0])
            _bad(f"records[{i}].sig", f"is {records['sig'][i]}, but the report lists {len(signatures)} signatures")
    elif len(records) and records["sig"].any():
        i = int(np.flatnonzero(records["sig"])[0])
        _bad(f"records[{i}].sig", f"is {records['sig'][i]}, but the report lists no signatures")
    text = d.get("accesses", "")
    if not isinstance(text, str):
        _bad("accesses", f"must be a base64 str, not {_type(text)}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        _bad("accesses", f"is not base64 ({e})")
    n = d.get("n_accesses", 0)
    if not _is_int(n) or n < 0 or len(raw) != n * ACCESS_DTYPE.itemsize:
        _bad("n_accesses", f"is {n!r}: the block holds {len(raw)} bytes of {ACCESS_DTYPE.itemsize}-byte rows")
    accesses = np.frombuffer(raw, dtype=ACCESS_DTYPE).copy()
    if n:
        bad = np.flatnonzero((accesses["record"] >= len(records)) | (accesses["write"] > 1))
        if len(bad):
            i = int(bad[0])
            _bad(f"accesses[{i}]", f"is {accesses[i]!r}: its record is not one of the {len(records)} records or "
                 "its write flag is not 0 or 1")
    return signatures, accesses


def _check_records(records, n_ops: int, n_module_sets: int):
    """Every record's references and codes are in range (the roll-ups index tables with them)."""
    if not len(records):
        return

    def first(mask, field, problem):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            _bad(f"records[{i}].{field}", problem(records[field][i]))

    first(records["op"] >= n_ops, "op", lambda v: f"is {v}, but the report lists {n_ops} ops")
    first(records["module"] >= n_module_sets, "module",
          lambda v: f"is {v}, but the report lists {n_module_sets} module sets")
    first(records["phase"] >= len(PHASES), "phase",
          lambda v: f"is {v}, not a phase (" + ", ".join(f"{i} {p}" for i, p in enumerate(PHASES)) + ")")
    first(~np.isin(records["dtype"], list(DTYPE_NAMES)), "dtype", lambda v: f"is {v}, not a dtype code")
    statuses = np.unique(records["status"]).tolist()
    unknown = _core.status_str(-1)  # the text of every code outside the status table
    bad = [st for st in statuses if _core.status_str(st) == unknown]
    first(np.isin(records["status"], bad), "status", lambda v: f"is {v}, not a status code")
    t0, t1 = records["t_start"], records["t_end"]
    first(np.isinf(t0), "t_start", lambda v: f"is {v}, not a time")
    first(np.isinf(t1), "t_end", lambda v: f"is {v}, not a time")
    # clock readings in seconds: beyond about 32 years their nanoseconds (a trace's unit) overflow 63 bits
    first(np.abs(t0) > _document.MAX_SECONDS, "t_start",
          lambda v: f"is {v}, not a clock reading in seconds (at most {_document.MAX_SECONDS:g} in magnitude)")
    first(np.abs(t1) > _document.MAX_SECONDS, "t_end",
          lambda v: f"is {v}, not a clock reading in seconds (at most {_document.MAX_SECONDS:g} in magnitude)")
    first(np.isnan(t0) != np.isnan(t1), "t_end", lambda v: "and t_start must both be times or both be NaN")
    with np.errstate(invalid="ignore"):
        first(t1 < t0, "t_end", lambda v: f"is {v}, before the record's t_start")
