"""The result of ``roofline.measure``: one record per op call, and roll-ups by op and by module."""

from __future__ import annotations

import math
import os

import numpy as np

from roofline._hardware import _devices as devices
from roofline._analysis import (_assumptions, _parameters, _cache_model, _compiled_view, _dataflow, _fusion_compiled, _groups, _hints,
                               _network, _padding, _rollup)
from roofline._analysis._classification import BOUNDS  # noqa: F401  (BOUNDS: documented as roofline.report.BOUNDS)
from roofline._analysis._classification import Classifier, classify as _classify
from roofline._hardware import _choose, _contention, _roofs
from roofline._hardware._ceilings_model import FIGURE_SOURCES, SOURCES, Ceilings
from roofline._io import _export
from roofline._datamodel import _tokens
from roofline._datamodel._records import ACCESS_DTYPE  # the dataflow rows' layout
from roofline._datamodel._records import OpInfo  # noqa: F401  (the op table's entries, built by roofline._capture._session)
from roofline._datamodel._records import (DTYPE_NAMES, RECORD_DTYPE,  # noqa: F401  (RECORD_DTYPE: the records' layout)
                                     DerivedCounts)
from roofline.render import _advice, _formats, _kernels, _matplotlib, _plotly, _render, _svg, _tables, _text, _trace
from roofline._util import _ints, _safejson
from roofline._util._warn import warn

SCHEMA_VERSION = _export.SCHEMA_VERSION


def _summed(field: str, doc: str) -> property:
    """A read-only property: the exact (Python int) sum of one uint64 column of the records."""

    def get(self) -> int:
        return _rollup.exact_sum(self.records[field])

    get.__name__ = field
    get.__doc__ = doc
    return property(get, doc=doc)


# ---- argument checks: every public method of Report and Comparison checks its arguments with these before any
# work, and names the method, the argument and what it accepts


def _alternatives(allowed) -> str:
    """``'a' or 'b'``, ``one of 'a', 'b' or 'c'``."""
    names = [repr(a) for a in allowed]
    if len(names) == 1:
        return names[0]
    return ("one of " if len(names) > 2 else "") + ", ".join(names[:-1]) + " or " + names[-1]


def _check_int(where: str, name: str, v, lo: int, none: bool = False):
    """``v`` as an int >= ``lo`` (None passes when ``none``), by the package's one rule
    (:func:`roofline._util._ints.count`)."""
    return _ints.count(v, name, where, lo, none=none)


def _check_choice(where: str, name: str, v, allowed, none: bool = False):
    """``v``, one of the strings ``allowed`` (or None when ``none``); ValueError naming them otherwise."""
    if (v is None and none) or (isinstance(v, str) and v in allowed):
        return v
    raise ValueError(f"{where}: {name} must be {_alternatives(tuple(allowed) + ((None,) if none else ()))}, "
                     f"got {v!r}")


def _check_grouping(where: str, by, depth, phase, allowed=("op", "module"), depth_lo: int = 1):
    """The ``by``, ``depth`` and ``phase`` of a roll-up: ``by`` one of ``allowed``, ``depth`` an int >= ``depth_lo``
    (0 in the roll-ups by module name: "Global" only) and only with ``by="module"``, ``phase`` one of the phases or
    None. Returns ``depth`` as an int (or None)."""
    _check_choice(where, "by", by, allowed)
    depth = _check_int(where, "depth", depth, depth_lo, none=True)
    if depth is not None and by != "module":
        raise ValueError(f"{where}: depth applies to by='module' only, not by={by!r}")
    _check_choice(where, "phase", phase, _rollup.PHASES, none=True)
    return depth


class BaseReport:
    """What every report of this package is: a :class:`Report` (one ``measure`` block), a
    :class:`roofline.SteadyReport` (the median of repeated steps) and a :class:`roofline.distributed.MergedReport`
    (the ranks of one job). Each one prints (``str``, :meth:`summary`), shows in a notebook (``_repr_html_``),
    writes a self-contained page (:meth:`to_html`), draws its roofline chart (:meth:`plot`), gives text tables
    (:meth:`table`), and saves itself (:meth:`to_dict`, :meth:`to_json`): :func:`roofline.load` gives back the class
    that saved it, with its fields.
    """

    _NAME = "Report"  # how messages name the class's methods

    def to_dict(self) -> dict:
        """A JSON-compatible dict of the report; :meth:`from_dict` (and :func:`roofline.load`) read it back."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: dict) -> "BaseReport":
        """The report :meth:`to_dict` gave, rebuilt and checked field by field (ValueError naming the first that is
        wrong)."""
        raise NotImplementedError

    def summary(self, top: int = 10) -> str:
        """The text ``print(report)`` shows, with the ``top`` rows of its tables."""
        raise NotImplementedError

    def table(self, *args, **kwargs) -> str:
        """A text table of the report (``by=`` says of what)."""
        raise NotImplementedError

    def plot(self, *args, **kwargs):
        """The roofline chart (matplotlib): a Figure, saved to ``path`` when given."""
        raise NotImplementedError

    def to_html(self, path=None, title: str | None = None, top: int = 15) -> str:
        """The report as a full, self-contained HTML page (the notebook view in a document titled ``title``),
        written to ``path`` when given (as :meth:`to_json` writes a file); returns the text."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        raise NotImplementedError

    def save(self, path, format: str | None = None) -> str:
        """Write the report to ``path`` in ``format``, or in the format its suffix names (the longest that
        matches): ``.json`` the report document (:meth:`to_json`, which :func:`roofline.load` reads back),
        ``.html`` the page (:meth:`to_html`), ``.csv`` one row per op call (``to_csv``), ``.trace.json`` the
        Chrome trace (``to_chrome_trace``), ``.svg`` the roofline chart (``roofline_chart``), ``.png`` / ``.pdf``
        the matplotlib chart (:meth:`plot`); ``format`` is one of those names ("json", "html", "csv",
        "chrome-trace", "svg", "png", "pdf") or of a format a module of ``roofline/render/`` registers
        (``roofline.render._formats.register``). Returns the format's name. ValueError for a suffix or name no
        format has; TypeError for a format this class of report cannot write (a merged report has no per-call
        rows)."""
        return _formats.save(self, path, format)

    def __str__(self):
        return self.summary()

    def to_json(self, path=None, indent: int | None = None) -> str:
        """Everything (records bit for bit, op and module tables, ceilings, metadata) as JSON; written to ``path``
        when given. :func:`roofline.load` reads it back as this class.

        ``path`` is a file name (str, ``os.PathLike`` or bytes; anything else, such as an int, is a TypeError
        before anything is written: ``to_json(2)`` is not an indent). A regular file is replaced atomically: the
        text goes to a temporary file in the same folder, which is fsync-ed and renamed over it, so a failed write
        (a full disk, Ctrl-C) leaves the old file as it was and no temporary file; the replaced file keeps its
        permission bits. A symbolic link is written through (its target is replaced, the link stays; a dangling
        link creates its target). A FIFO or device (``/dev/stdout``, ``/dev/null``) is written into directly. A
        folder is an IsADirectoryError. :meth:`to_csv`, :meth:`to_chrome_trace`, :meth:`plot` and the chart's
        ``save`` write their files the same way. ``indent``: None (one line) or an int >= 0."""
        where = f"{self._NAME}.to_json"
        indent = _check_int(where, "indent", indent, 0, none=True)
        _export.check_path(path, where)
        return _export.to_json(self.to_dict(), path, indent, where)


class Report(BaseReport, DerivedCounts):
    """Counts of one ``measure`` block.

    ``records`` is a NumPy structured array with one row per op call (fields: ``matrix_flops``, ``vector_flops``,
    ``special_ops``, ``bytes_read``, ``bytes_written``, ``flop_counter_flops`` (FlopCounterMode's count for the
    call; also readable as ``records["compat_flops"]``, its earlier name), ``t_start``, ``t_end``, ``op`` (index
    into :attr:`op_names`), ``module`` (index into :attr:`module_sets`), ``phase`` (0 forward, 1 backward, 2
    optimizer, 3 recompute), ``dtype`` (code, see :attr:`dtype_names`), ``status`` (0, or why the row's counts are missing),
    ``kind``, ``seq``, ``sig`` (index into :attr:`signatures`)).

    Bytes are compulsory traffic (each input read once, each output written once, no reuse across ops): a lower
    bound on memory traffic, not a measurement.

    Other attributes: ``module_sets`` (one tuple of module names per ``records["module"]`` value: every module that
    was active when the op ran, "Global" included), ``wall_time`` (seconds of the ``measure`` block, device
    synchronised at entry and exit; None when ``timing=None``), ``meta`` (timing mode, devices that ran ops,
    package version, ceilings source, ``projected_to`` for a projection; ``load``, the machine's load during the
    block, and ``contention``, the reasons it counts as measured under contention, empty when none: see
    docs/ceilings.md) and ``overhead`` (the per-op cost of the
    instrumentation, seconds: ``counting_per_op_s`` and, with ``timing="op"``, ``timing_per_op_s``).

    Captured per call: ``signatures`` (list of str, indexed by ``records["sig"]``: the dtypes and shapes of the
    call's tensor arguments in argument order, e.g. ``"f32[8,3,224,224], f32[64,3,7,7]"``, a tensor list in
    brackets; ``signatures[0]`` is ``""``, a call without tensor arguments) and ``accesses`` (the dataflow: a NumPy
    structured array of ``ACCESS_DTYPE``, fields ``record`` (row of ``records``), ``storage`` (id of a storage
    block: views of one storage share it; an id may be reused once its storage is freed), ``nbytes`` (bytes of the
    storage the call's views cover, as counted in ``bytes_read`` / ``bytes_written``) and ``write`` (0 read, 1
    written); one row per call, storage and direction, in call order; an op updating its input in place has a read
    and a write row). Both are empty in reports saved before they existed.

    A report is built by :func:`roofline.measure` (or :func:`roofline.load`, :meth:`project`); constructing one
    by hand is not part of the API.
    """

    # A saved report loads back as the class that saved it (SteadyReport, ...): each subclass registers under its
    # name, which to_dict writes as meta["report_class"] and from_dict looks up
    # per record, its thread's waits for a CPU before and after it, from a block measured for
    # step_time="ops_min" (roofline._capture._session.Session.op_waits_array); not saved
    op_waits = None

    _CLASSES: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Report._CLASSES.setdefault(cls.__name__, cls)

    def __init__(self, records, ops, module_sets, wall_time=None, meta=None, ceilings=None, overhead=None,
                 signatures=None, accesses=None):
        # records and tables; ceilings: what measure was given ("measured", "datasheet", a device name, a
        # Ceilings) or None, resolved on first use
        self._pending = False
        self._set(records, ops, module_sets, wall_time, meta, ceilings, overhead, signatures, accesses)

    def _set(self, records, ops, module_sets, wall_time, meta, ceilings, overhead, signatures=None, accesses=None):
        self.records = np.asarray(records, dtype=RECORD_DTYPE)
        # a list, or a callable giving it on first read (a measured block's, formatted after the block)
        self._signatures = signatures if callable(signatures) else list(signatures or [])
        self.accesses = np.asarray(accesses if accesses is not None else [], dtype=ACCESS_DTYPE)
        self._ops = list(ops)
        self.module_sets = [tuple(m) for m in module_sets]
        self.wall_time = wall_time
        self.meta = dict(meta or {})
        self.overhead = dict(overhead or {})
        self._roofs_spec = ceilings  # what measure was given; chosen into self._roofs on first use
        self._roofs = None
        self._classifier = Classifier()

    @classmethod
    def _pending_block(cls) -> "Report":
        """The empty report a ``measure`` block yields; :meth:`_complete` fills it when the block exits."""
        r = cls([], [], [])
        r._pending = True
        r._load_start = _contention.snapshot(False)  # the machine's load while the block runs: see _complete
        return r

    def _complete(self, records, ops, module_sets, *, wall_time, meta, ceilings, overhead, signatures=None,
                  accesses=None):
        """Fill a report made by :meth:`_pending_block` with the block's records (once)."""
        if not self._pending:
            raise RuntimeError("this report is not waiting for a measure block's records")
        self._pending = False
        meta = dict(meta or {})
        devices = set(meta.get("devices") or ())
        timed = meta.get("timing") is not None and not (devices and devices <= {"meta", "fake"})
        meta.update(_contention.block_meta(self._load_start, timed=timed))
        self._set(records, ops, module_sets, wall_time, meta, ceilings, overhead, signatures, accesses)

    # ---- tables ---------------------------------------------------------------------------------------------------
    @property
    def signatures(self) -> list[str]:
        """The call signatures, indexed by ``records["sig"]`` (see the class docstring)."""
        s = self._signatures
        if callable(s):
            s = self._signatures = list(s())
        return s

    def __getstate__(self):  # copied with its signatures as a list
        state = dict(self.__dict__)
        state["_signatures"] = self.signatures
        return state

    @property
    def op_names(self) -> list[str]:
        """Operator overload names, e.g. ``"aten.mm.default"``, indexed by ``records["op"]``."""
        return [o.name for o in self._ops]

    @property
    def op_kinds(self) -> list[str]:
        """The cost kind of each op (``"mm"``, ``"ewise"``, ``"fill"``..., ``"python"`` for a user formula,
        ``"unknown"`` without one), indexed by ``records["op"]``."""
        return [o.kind for o in self._ops]

    @property
    def dtype_names(self) -> dict[int, str]:
        """Dtype code -> name (``"float32"``, ``"bfloat16"``, ...; 0 is ``"unknown"``), for ``records["dtype"]``."""
        return dict(DTYPE_NAMES)

    def module_path(self, module_id: int) -> str:
        """The innermost module of a module set (the deepest name; "Global" outside any module). ``module_id``: a
        value of ``records["module"]``, an int in ``[0, len(module_sets))``."""
        module_id = _check_int("module_path", "module_id", module_id, 0)
        if module_id >= len(self.module_sets):
            raise ValueError(f"module_path: module_id must be below {len(self.module_sets)} (the report's module "
                             f"sets), got {module_id!r}")
        names = [m for m in self.module_sets[module_id] if m != "Global"] or ["Global"]
        return max(names, key=lambda n: (n.count("."), n))

    # ---- totals ---------------------------------------------------------------------------------------------------
    matrix_flops = _summed("matrix_flops", "True matrix FLOPs (products: mm family, convolutions, attention).")
    vector_flops = _summed("vector_flops", "Vector FLOPs (element-wise ops, norms, softmax, reductions, losses, optimizer updates, bias adds), exact.")
    special_ops = _summed("special_ops", "Transcendental / special-function evaluations (exp, log, sqrt, tanh, erf, random draws).")
    bytes_read = _summed("bytes_read", "Compulsory bytes read: every input once, at the size it occupies in memory.")
    bytes_written = _summed("bytes_written", "Compulsory bytes written: every output (or in-place argument) once.")

    @property
    def total_flops(self) -> int:
        """``matrix_flops + vector_flops`` (special-function evaluations are not FLOPs: see :attr:`special_ops`)."""
        return self.matrix_flops + self.vector_flops

    @property
    def unknown_ops(self) -> dict[str, int]:
        """Ops without a cost formula (name -> calls). Their bytes are counted, their FLOPs are not."""
        return _rollup.unknown_ops(self.records, self._ops)

    @property
    def errors(self) -> dict[str, tuple[int, str]]:
        """Op calls whose cost could not be evaluated (name -> (calls, reason)); their counts are 0."""
        return _rollup.errors(self.records, self._ops)

    # ---- roll-ups -------------------------------------------------------------------------------------------------
    def by_op(self, phase: str | None = None) -> dict[str, dict]:
        """Totals per operator overload, most FLOPs first: ``{name: {calls, flops, matrix_flops, vector_flops,
        special_ops, bytes_read, bytes_written, bytes, intensity}}``. ``phase``: "forward", "backward", "optimizer",
        "recompute" or None (all)."""
        _check_grouping("by_op", "op", None, phase)
        return _rollup.counts_by(self.records, self.op_names, self.module_sets, "op", phase=phase)

    def by_module(self, depth: int | None = None, phase: str | None = None) -> dict[str, dict]:
        """Totals per module, each including everything that ran inside it: its forward, its backward (each backward
        op credited to the module whose forward created its autograd node: :attr:`attribution`) and its recomputed
        forward. A container that is never called itself (a ``ModuleList``: ``Net.blocks`` above ``Net.blocks.0``)
        is a module here too, as in :meth:`table` and the charts. ``depth`` keeps modules at most that many levels
        deep (the root is 1; 0 keeps "Global" only).
        "Global" is the whole run. ``phase`` restricts to one phase ("forward", "backward", "optimizer",
        "recompute")."""
        depth = _check_grouping("by_module", "module", depth, phase, depth_lo=0)
        return _rollup.counts_by(self.records, self.op_names, self.module_sets, "module", depth, phase)

    def by_phase(self) -> dict[str, dict]:
        """Totals per phase that ran (``"forward"``, ``"backward"``, ``"optimizer"``, ``"recompute"``: forward ops
        run again inside a backward by activation checkpointing), each with the fields of
        :meth:`by_op`."""
        return _rollup.counts_by_phase(self.records)

    def flop_counter_compatible(self) -> dict:
        """The counts in exactly the structure of ``FlopCounterMode.get_flop_counts()``: ``{module name: {op packet:
        FLOPs}}`` with "Global", FlopCounterMode's module names and its (sometimes over-stated) formulas, so the two
        tools can be compared one to one. The true counts are in :attr:`matrix_flops`. A block given ``model`` names
        its modules from the model's root; where the step entered modules under it without the root's forward
        (``vae.encoder(x)``), the keys are the names FlopCounterMode gives them (``meta["attribution"]
        ["flop_counter_names"]``: ``"Encoder.fc"`` for ``"VAE.encoder.fc"``)."""
        sets = self.module_sets
        names = (self.meta.get("attribution") or {}).get("flop_counter_names")
        if names:
            sets = [tuple(dict.fromkeys(names.get(n, n) for n in s)) for s in sets]
        return _rollup.flop_counter_counts(self._flop_counter_records(), self._ops, sets)

    def _flop_counter_records(self):
        """The records with each row in the module set torch's ModuleTracker gives it (FlopCounterMode's
        attribution): the rows :attr:`attribution` credits elsewhere are put back."""
        a = self.meta.get("attribution") or {}
        rows = a.get("flop_counter_rows") or []
        if not rows:
            return self.records
        rec = self.records.copy()
        rec["module"][np.asarray(rows, dtype=np.int64)] = np.asarray(a["flop_counter_modules"], dtype=np.uint32)
        return rec

    def useful_work(self, tokens=None, causal: bool = False) -> dict:
        """How much of the block's work ran on padded token positions: ``executed_flops``, ``padding_flops``,
        ``useful_flops``, ``padding_share``, ``real_tokens``, ``positions`` (batch x sequence length),
        ``real_tokens_per_s`` (over the wall time), ``by_kind`` (per-token work, attention, other), ``by_op`` and
        ``ambiguous`` (see roofline/_analysis/_padding.py for how calls are told apart, from their shapes).
        ``tokens``: which positions are real, as :func:`roofline.measure` takes it (an attention mask ``(B, S)``,
        ``{"lengths": [...], "seq_len": S}``, ``{"cu_seqlens": [...]}`` for a packed batch); default: the layout the
        block was given or saw (``meta["tokens"]``); ValueError when there is none. ``causal``: the attention
        kernels computed only the causal half of their scores."""
        layout = _tokens.token_layout(tokens) if tokens is not None else self.meta.get("tokens")
        if layout is None:
            raise ValueError("useful_work: which tokens are real is unknown: pass tokens= (an attention mask, "
                             "{'lengths', 'seq_len'} or {'cu_seqlens'}) here or to roofline.measure")
        if not isinstance(causal, bool):
            raise TypeError(f"useful_work: causal must be a bool, got {type(causal).__name__}")
        return _padding.useful_work(self.records, self.op_names, self.signatures, layout, causal,
                                    self.wall_time)

    @property
    def attribution(self) -> dict:
        """How backward work is credited to modules. ``method``: ``"autograd"`` (each backward op to the module
        whose forward created the autograd node it runs in: the default answer of :meth:`by_module`, the tables,
        the HTML tree, hints and fusion opportunities), or ``"module_tracker"`` (torch's ModuleTracker rule: a module
        stays active in backward until its inputs' gradients are complete, so modules reading one input share each
        other's backward; reports saved before linking existed, or a torch without the hooks linking needs).
        ``moved_calls`` and ``moved_flops``: the calls (and their FLOPs) credited to another module set than
        ModuleTracker's. ``unlinked_calls`` and ``unlinked_flops``: backward calls that could not be linked
        (their node was created before the block, or inside a backward), credited as ModuleTracker credits them;
        ``unlinked_by_op``: their calls per op. :meth:`flop_counter_compatible` keeps ModuleTracker's structure."""
        a = self.meta.get("attribution")
        if a is None:
            return {"method": "module_tracker", "moved_calls": 0, "moved_flops": 0, "unlinked_calls": 0,
                    "unlinked_flops": 0, "unlinked_by_op": {}}
        flops = self.records["matrix_flops"] + self.records["vector_flops"]
        moved = np.asarray(a.get("flop_counter_rows") or [], dtype=np.int64)
        un = np.asarray(a.get("unlinked_rows") or [], dtype=np.int64)
        by_op: dict = {}
        for op in self.records["op"][un].tolist():
            name = self._ops[op].name
            by_op[name] = by_op.get(name, 0) + 1
        out = {"method": a.get("method", "autograd"), "moved_calls": int(len(moved)),
               "moved_flops": int(flops[moved].sum()), "unlinked_calls": int(len(un)),
               "unlinked_flops": int(flops[un].sum()), "unlinked_by_op": dict(sorted(by_op.items(), key=lambda kv:
                                                                                     (-kv[1], kv[0])))}
        if a.get("note"):
            out["note"] = a["note"]
        return out

    # ---- ceilings and classification -----------------------------------------------------------------------
    @property
    def ceilings(self):
        """The :class:`roofline.Ceilings` ops are judged against (resolved on first use), or None when the
        run has no device with ceilings (e.g. counted on meta: use :meth:`project`). When this run's CPU
        measurement was under contention, the stable yardstick stands in (the last idle measurement of this
        machine, else its theoretical peak): ``meta["ceilings_yardstick"]`` says which, and why."""
        return self.roofs.ceilings

    @property
    def roofs(self):
        """The figures this report's ops are judged against (:class:`roofline._hardware._roofs.Roofs`: peaks per
        unit and dtype, bandwidth per memory level and interconnect, their sources, the contention flags), chosen
        once, on first use, from what ``measure`` was given: choosing may measure the machine's ceilings. The
        classification and every chart read them."""
        if self._roofs is None:
            spec, self._roofs_spec = self._roofs_spec, None  # chosen once, failure or not
            self._roofs = _choose.roofs(spec, self.meta)
            if self._roofs.ceilings is not None:
                self._note_busy_ceilings()  # meta says what the records are judged against, however it was asked
        return self._roofs

    @property
    def ceilings_source(self) -> str:
        """Which figures of :attr:`ceilings` the roofline uses: "measured", "datasheet", or "best" (measured where
        present, else datasheet: for a :class:`roofline.Ceilings` passed to ``measure`` or ``project``)."""
        return self.roofs.source

    @property
    def parameters(self) -> dict | None:
        """The model's parameter counts when the report holds them (``meta["parameters"]``, made by
        ``roofline._analysis._parameters.count(model)``): ``total``, ``trainable``, ``frozen`` (elements), ``bytes``,
        ``by_dtype``, ``tied`` (the names of each parameter held by more than one module, counted once),
        ``uninitialized`` and ``modules`` (module name -> the same four figures for its subtree). None otherwise.
        ``print(r)``, the module table and the HTML module tree show them."""
        return _parameters.of_report(self)

    @property
    def timed(self) -> bool:
        """Whether ops were timed individually (``timing="op"``)."""
        return bool(len(self.records)) and bool(np.isfinite(self.records["t_start"]).any())

    def classification(self) -> dict:
        """Per-record roofline arithmetic (computed in C, see csrc/classify.h): a dict of NumPy arrays aligned with
        :attr:`records`: ``intensity`` (FLOP/byte), ``ridge`` (peak / bw), ``attainable`` (FLOP/s), ``t_min``
        (seconds on the roofline: ``max(flops / peak, bytes / bw)``), ``achieved_flops``, ``achieved_bytes``,
        ``efficiency`` (achieved / attainable = t_min / time), ``mfu`` (flops / (time x peak)), ``mbu`` (bytes /
        (time x bw)), ``bound`` (codes: 0 none, 1 memory, 2 compute, 3 bandwidth, 4 interconnect; names in
        ``roofline.report.BOUNDS``), ``flags`` (bits: 1 above the peak, 2 above the bandwidth, 4 untimed, 8 zero
        time, 16 no ceiling), and the ``peak`` (FLOP/s of the record's own unit and dtype), ``bw`` (DRAM bytes/s),
        ``flops`` (matrix + vector) and ``bytes`` each record is judged with. Rates are NaN for untimed records and
        where a ceiling is missing. Collectives (bound "interconnect", see docs/distributed.md) are judged by their
        bus bytes (in ``bytes``) against ``link_bw``, the interconnect bandwidth (NaN for the other records). A
        record is "matrix" when it has matrix FLOPs; all its FLOPs are then judged
        against the matrix peak of its dtype."""
        return self._classifier.classification(self.records, self.roofs, self.meta)

    # ---- grouped analysis ------------------------------------------------------------------------------------
    def analysis(self, by: str = "op", depth: int | None = None, phase: str | None = None) -> dict[str, dict]:
        """Roofline roll-up per op name (``by="op"``), per op and input shapes (``by="op_shape"``, keyed
        ``"aten.mm.default [f32[8,64], f32[64,16]]"``, as GEMM tables are read) or per module (``by="module"``,
        with ``depth``), most time first (roofline time when untimed): each row has calls, flops, bytes,
        intensity, t_min (seconds on the roofline), time (measured, NaN when untimed), achieved_flops, achieved_bytes, efficiency (t_min / time:
        the fraction of the attainable rate reached), mfu, mbu, bound ("compute", "memory", "bandwidth" for ops
        with no FLOPs, "none" for ops that move nothing, "mixed" when neither bound holds 80% of the group's
        roofline time, or "?" without ceilings), compute_share (share of roofline time in compute-bound calls) and
        above_ceiling (calls whose achieved rate exceeds its ceiling). A group's mfu is the time its calls' FLOPs
        would take at their own peaks over their measured time; its mbu is bytes / (measured time x DRAM
        bandwidth). ``depth`` (an int >= 0, as in :meth:`by_module`) applies to ``by="module"`` only; ``phase``:
        "forward", "backward", "optimizer", "recompute" or None (all)."""
        depth = _check_grouping("analysis", by, depth, phase, ("op", "op_shape", "module"), depth_lo=0)
        sigs = self.signatures if by == "op_shape" and _groups.has_signatures(self) else None
        return _rollup.roofline_by(self.records, self.op_names, self.module_sets, self.classification(), by, depth,
                                   phase, sigs)

    def totals(self) -> dict:
        """Whole-run figures, a dict with the keys of an :meth:`analysis` row over all records (``calls``,
        ``flops``, ``bytes``, ``intensity``, ``t_min``, ``compute_share``, ``bound``, ``above_ceiling``) plus
        ``wall_time``; when the block was timed, ``time`` is the wall time and the rates use it: ``achieved_flops``
        and ``achieved_bytes`` (per second of wall time), ``efficiency`` (t_min / wall time), MFU (the time each
        op's FLOPs would take at the peak of its own unit and dtype, summed, over the wall time) and MBU (bytes /
        (wall time x DRAM bandwidth)). The wall time includes Python and framework overhead between ops, so these
        are lower than the per-op figures of :meth:`analysis`."""
        return _rollup.roofline_totals(self.records, self.classification(), self.wall_time)

    # ---- dataflow, cache model, fusion, hints (roofline/_analysis/_dataflow.py, _cache_model.py, _hints.py) --------------
    def edges(self):
        """Producer -> consumer edges between op calls (a NumPy structured array: ``producer``, ``consumer`` record
        indices, ``storage``, ``nbytes`` read by the consumer, ``written`` by the producer), from
        :attr:`accesses` with last-writer semantics. ValueError when the report has no access table."""
        return _dataflow.edges(_dataflow.report_accesses(self), len(self.records))

    def cache_analysis(self, source: str | None = None) -> dict:
        """Cache-aware bytes and roofline time per record: an LRU model of the device's caches (capacities from
        the ceilings or sysfs) replayed over :attr:`accesses` (method and limits in docs/concepts.md). A dict:
        ``levels`` (e.g. ``["L1", "L2", "L3", "DRAM"]``), ``capacities`` and ``bandwidths`` per level, and arrays
        aligned with :attr:`records`: ``bytes_by_level`` (n x levels), one ``<level>_bytes`` column per level
        (``l2_bytes``, ``dram_bytes``, ...; they sum to the compulsory bytes), ``level`` (where the data comes
        from: the level whose transfers take longest), ``t_mem``, ``t_compute``, ``t_min`` (cache-aware roofline
        time), ``t_min_dram`` (the DRAM-only one), ``bound`` (codes as in :meth:`classification`) and
        ``above_level`` (timed calls faster than the roof of their level). ``source``: which ceilings figures
        (default: the report's). The default classification (DRAM only) is unchanged. ValueError without an
        access table or ceilings."""
        _check_choice("cache_analysis", "source", source, SOURCES, none=True)

        c = self.classification()
        roofs = self.roofs if source in (None, self.roofs.source) else _roofs.of(self.ceilings, source, self.meta)
        return _cache_model.analysis(self.records, _dataflow.report_accesses(self), c, roofs)

    def fusion_opportunities(self, min_ops: int = 2, compiled=None) -> list:
        """Chains of memory-bound calls (optionally headed by a matrix product or convolution) connected through
        intermediates nothing else reads, most time saved first. Each has ``records`` and ``ops`` (the calls, in
        order), ``modules``, ``kind`` ("epilogue" or "elementwise"), ``phase``, ``intermediates``, ``bytes`` (the
        members' compulsory bytes), ``saved_bytes`` (the intermediates' writes and reads a fused kernel avoids),
        ``t_before``, ``t_after`` and ``saved_s`` (roofline seconds; NaN without ceilings) and ``describe()``.
        ``min_ops``: the shortest chain reported (an int >= 2: a fusion joins two calls or more). ValueError
        without an access table.
        ``compiled``: the report of a ``torch.compile``'d run of the same model and step: each opportunity then
        says whether the compiler took it, ``compiled`` ("taken", "partly", "not taken", or "unknown" when its ops
        cannot be matched to one kernel each), with ``compiled_saved_bytes`` (the intermediates' bytes the
        compiled kernels keep on chip) and ``compiled_kernels`` (each member's kernel); see docs/compiled.md."""
        min_ops = _check_int("fusion_opportunities", "min_ops", min_ops, 2)
        if compiled is not None and not (hasattr(compiled, "meta") and hasattr(compiled, "records")):
            raise TypeError(f"fusion_opportunities: compiled must be a roofline Report or None, got "
                            f"{type(compiled).__name__}")

        c = self.classification() if self.ceilings is not None else None
        opps = _dataflow.fusion_opportunities(self.records, self._ops, self.module_path, c,
                                              _dataflow.report_accesses(self), min_ops)
        if compiled is not None:
            _fusion_compiled.mark(opps, self, compiled)
        return _advice.described(opps)

    def hints(self, min_share: float = 0.01) -> list:
        """What to change, ranked by estimated time saved at the roof. Each hint has ``kind`` ("sdpa",
        "matmul_precision", "small_gemm", "layout_copies", "cast_pingpong", "optimizer_fused",
        "optimizer_state_init", "dropout_mask", "op_overhead"), ``message``, ``saved_s``, ``saved_bytes``,
        ``evidence`` (the figures it rests on), ``records``, ``ops`` and ``modules``; ``str(hint)`` is one line.
        ``min_share``: leave out hints saving less than this share of the roofline time (of the bytes, without
        ceilings), a number in [0, 1]. Rules that need the dataflow are skipped for a report without an access table."""
        return _advice.written(_hints.hints(self, _dataflow.report_accesses(self), min_share))

    # ---- display ----------------------------------------------------------------------------------------------
    def table(self, by: str = "op", depth: int | None = None, top: int | None = 15, phase: str | None = None) -> str:
        """A text table of :meth:`analysis` (``top`` rows, None for all), with units and a legend. ``by="op"``,
        ``"op_shape"`` (one row per op and input shapes), or ``"module"``: the module tree depth first, children
        indented under their parent most time first, containers such as a ``ModuleList`` as rows of their own (so
        ``depth`` counts every level of the model), and the whole run as a first row only when ops ran outside
        every module; ``"kernel"``: the kernels ``torch.compile`` generated (see :attr:`kernels`). ``depth`` (an int
        >= 1) applies to ``by="module"`` only; ``phase``: "forward", "backward", "optimizer", "recompute" or None (all; not with
        ``by="kernel"``)."""
        depth = _check_grouping("table", by, depth, phase, ("op", "op_shape", "module", "kernel"))
        top = _check_int("table", "top", top, 1, none=True)
        if by == "kernel" and phase is not None:
            raise ValueError("table: phase does not apply to by='kernel' (a kernel's calls are not split by phase)")
        if by == "kernel":
            return _kernels.table(self, top)
        return _render.table(self, by, depth, top, phase)

    # ---- compiled models (torch.compile) ------------------------------------------------------------------------
    @property
    def compiled(self) -> dict | None:
        """What ``torch.compile`` ran in the block (None when nothing compiled ran): ``graphs`` (compiled forward
        and backward graphs), ``graph_calls``, ``graph_breaks`` (breaks Dynamo reported while compiling in the
        block), ``uncounted_graph_calls`` (graph calls that could not be counted: the report is then not
        :attr:`complete`), ``recovered_graphs`` (graphs compiled before the block, recompiled privately to be counted;
        ``recovery_time`` the seconds that took, left out of the block's time), ``eager_fallback`` (why compiled code
        ran eagerly, or None), ``kernels`` (see :attr:`kernels`). See docs/compiled.md."""
        return self.meta.get("compiled")

    @property
    def complete(self) -> bool:
        """False when work that ran in the block could not be counted (a ``torch.compile`` graph compiled before
        the block that could not be recovered): the totals are then lower bounds. :attr:`incomplete` says why;
        ``print(r)``, the notebook view and the JSON document say so too."""
        return not self.incomplete

    @property
    def incomplete(self) -> list[str]:
        """Why the counts miss work that ran, one line per reason (``meta["incomplete"]``); empty when complete."""
        reasons = [str(x) for x in self.meta.get("incomplete") or ()]
        c = self.meta.get("compiled") or {}
        if not reasons and c.get("uncounted_graph_calls"):  # a document saved before meta["incomplete"] existed
            reasons.append(f"{c['uncounted_graph_calls']} call(s) of torch.compile graphs not counted")
        return reasons

    @property
    def kernels(self) -> list[dict]:
        """One dict per kernel Inductor generated for the graphs that ran: ``name``, ``phase``, ``calls``,
        ``ops`` (the aten ops it fused), ``inputs`` / ``outputs`` (buffer -> bytes), ``bytes_read`` /
        ``bytes_written`` (their sums, per call), ``matrix_flops`` / ``vector_flops`` (of its ops, per call),
        ``unfused_bytes`` (its ops' compulsory bytes one by one), ``module``, ``time`` (host seconds over all
        calls with ``timing="op"``, else NaN) and the roofline figures ``flops``, ``bytes``, ``intensity``,
        ``t_min``, ``efficiency``."""
        return _compiled_view.kernel_rows(self)

    @property
    def fusion(self) -> dict:
        """Bytes the compiled graphs' aten ops would move one by one (``unfused_bytes``) against the bytes of
        the kernels that ran them (``compiled_bytes``), ``saved_bytes``, and the same ``by_module``."""
        return _compiled_view.fusion(self)

    def summary(self, top: int = 10) -> str:
        """The text ``print(r)`` shows: totals, phases, ceilings, achieved rates, MFU/MBU (against the wall time),
        unknown ops and errors, then the ``top`` ops by time (:meth:`table`, or by FLOPs without ceilings): an int
        >= 1, or None for all."""
        top = _check_int("summary", "top", top, 1, none=True)
        self.roofs
        self._note_busy_ceilings()
        return _text.report_text(self, top)

    def __str__(self):
        return self.summary()

    def __repr__(self):
        return _render.short(self)

    def _repr_html_(self):
        self.roofs
        self._note_busy_ceilings()
        return _render.to_html(self, ceilings_note=self.roofs.note)

    def to_html(self, path=None, title: str | None = None, top: int = 15) -> str:
        """The report as a full, self-contained HTML page (no script, no external file): the notebook view
        (``_repr_html_``: header facts, time by phase and by module, the roofline chart with a tooltip per point,
        the ``top`` ops, the collapsible module tree, the advice and a legend) in a document titled ``title``
        (default "roofline report"). The page the trainer callbacks save. Written to ``path`` when given (as
        :meth:`to_json` writes a file); returns the text. A report without per-op times (``timing="model"``) says
        so at its top and how to get them (``timing="op"``)."""
        _export.check_path(path, "Report.to_html")
        top = _check_int("Report.to_html", "top", top, 1)
        if title is not None and not isinstance(title, str):
            raise TypeError(f"Report.to_html: title must be a str or None, got {type(title).__name__}")
        self.roofs
        self._note_busy_ceilings()
        text = _render.page(self, title, ceilings_note=self.roofs.note, top=top)
        return _export.write(text, path, "Report.to_html")

    def _note_busy_ceilings(self):
        """``meta["ceilings_contention"]``: why the ceilings this report is judged against look measured under
        contention (their ``info["contention"]``), when they do; the summary's header says so."""
        roofs = self._roofs
        c = roofs.ceilings
        if roofs.contention:
            self.meta["ceilings_contention"] = list(roofs.contention)
        else:
            self.meta.pop("ceilings_contention", None)
        yard = dict(roofs.yardstick)
        if yard.get("kind") and not self.meta.get("projected_to"):
            # a stand-in for this run's measurement (or ceilings given as a file): which, and why
            self.meta["ceilings_yardstick"] = _jsonable_yardstick(yard)
        elif c is not None and not self.meta.get("projected_to"):
            # this run's measurement, a device's datasheet, or a Ceilings the caller gave
            self.meta["ceilings_yardstick"] = {"kind": roofs.source if roofs.source in FIGURE_SOURCES else "given"}

    # ---- export -------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-compatible dict of everything in the report (records as base64 of their raw bytes); inverse of
        :meth:`from_dict`. Resolves the ceilings first, so they are saved with the counts."""
        c = self.ceilings
        self._note_busy_ceilings()
        meta = self.meta
        if type(self) is not Report:  # loads back as this class (from_dict)
            meta = dict(meta, report_class=type(self).__name__)
        doc = _export.document(self.records, self._ops, self.module_sets, self.wall_time, meta,
                               self.overhead, c, self.roofs.source)
        doc.update(_export.capture_document(self.signatures, self.accesses))
        return doc

    def to_chrome_trace(self, path=None) -> str:
        """The run as a trace for Perfetto (ui.perfetto.dev) or chrome://tracing: phases, module runs and one slice
        per timed op call nested on one track, each op's FLOPs, bytes, intensity, bound, roofline time and % of
        roof in its args, and counter tracks of the achieved FLOP/s and bandwidth. JSON text (Trace Event Format),
        written to ``path`` when given (as :meth:`to_json` writes a file). Needs per-op times (``timing="op"``, or
        a projected report): ValueError otherwise."""
        return _trace.to_chrome_trace(self, path)

    @classmethod
    def from_dict(cls, d: dict) -> "Report":
        """Rebuild a report from :meth:`to_dict`. The whole document is checked against its schema version before
        anything is built: ValueError naming the first field that is wrong (another schema, a corrupt record block,
        a record whose op, module, phase, dtype or status is out of range, a field of the wrong type). A report
        saved by a subclass (a :class:`roofline.SteadyReport`) comes back as that class."""
        records, ops, module_sets, wall_time, meta, overhead, ceil, source = _export.read_document(d)
        signatures, accesses = _export.read_capture(d, records)
        meta["ceilings_source"] = source
        saved = Report._CLASSES.get(meta.pop("report_class", None)) if isinstance(meta.get("report_class"),
                                                                                   str) else None
        meta.pop("report_class", None)
        if saved is not None and issubclass(saved, cls):  # the class that saved it, if this process has it
            cls = saved
        r = cls(records, ops, module_sets, wall_time, meta, ceilings=ceil, overhead=overhead,
                signatures=signatures, accesses=accesses)
        r._loaded()
        return r

    def _loaded(self) -> None:
        """Called on a report :meth:`from_dict` rebuilt (as the class that saved it): a subclass restores here
        what it keeps outside ``meta``."""

    def to_dataframe(self, by: str = "op"):
        """A pandas DataFrame with one row per op call (needs pandas). Columns: ``op``, ``module`` (innermost),
        ``phase``, ``dtype`` (names), the counts ``matrix_flops``, ``vector_flops``, ``special_ops``, ``bytes_read``,
        ``bytes_written``, ``flop_counter_flops``, the measured ``time`` (seconds, NaN when untimed) and the
        classification ``intensity``, ``t_min``, ``achieved_flops``, ``achieved_bytes``, ``efficiency``, ``mfu``,
        ``mbu``, ``bound`` (a name). ``by="kernel"``: one row per compiled kernel (:attr:`kernels`); ``by``
        is "op" or "kernel"."""
        _check_choice("to_dataframe", "by", by, ("op", "kernel"))
        if by == "kernel":
            return _kernels.dataframe(self)
        return _tables.to_dataframe(_tables.columns(self))

    def to_csv(self, path=None) -> str:
        """One row per op call (the :meth:`to_dataframe` columns) as CSV (UTF-8); written to ``path`` when given
        (as :meth:`to_json` writes a file)."""
        _export.check_path(path, "Report.to_csv")
        return _tables.to_csv(_tables.columns(self), path)

    # ---- comparison and projection --------------------------------------------------------------------------
    def compare(self, other: "Report", by: str = "op", depth: int | None = None) -> "Comparison":
        """What changed from ``self`` (before) to ``other`` (after), op by op (``by="op"``) or module by module
        (``by="module"``, ``depth`` an int >= 0 or None, as in :meth:`by_module`): a :class:`Comparison`."""
        return Comparison(self, other, by, depth)

    def project(self, target, name: str | None = None, gpus: int | None = None) -> "Report":
        """This run's ops on another device: each op's time is estimated as ``max(FLOPs / peak of its unit and
        dtype, bytes / bandwidth)`` from ``target`` (a device name from :mod:`roofline.devices`, or a
        ``Ceilings``), and a report of the same shape is returned whose times are those estimates (its wall time
        is their sum: ops run back to back).

        The projected report's ``meta["assumed"]`` says what the projection takes from the counted run, and its
        summary prints it: ``attention`` (the kernel the counts are those of: the backend chosen with
        ``measure(..., attention=...)``, or what ran; ``"math"`` means the full score matrix), ``matrix_dtypes``
        (share of the matrix FLOPs per dtype: the target's peak for each dtype is used) and ``no_peak`` (``"op
        (dtype)"`` -> calls and what they were judged against, for ops whose dtype has no peak on the target;
        warned about when they hold 0.1% of the FLOPs or more).

        Collectives are timed as their bus bytes over the target's interconnect bandwidth; ``gpus``
        re-computes their bus bytes for that many ranks (the message bytes of each rank stay as
        measured); see docs/distributed.md. ``name`` (a str) labels a ``Ceilings`` target; ``gpus`` is an int
        >= 1 or None."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"project: name must be a str or None, got {type(name).__name__}")
        gpus = _check_int("project", "gpus", gpus, 1, none=True)

        if isinstance(target, str):
            ceil, label = Ceilings.from_datasheet(devices.get(target)), devices.get(target).name
        elif isinstance(target, Ceilings):
            ceil, label = target, name or target.name
        else:
            raise TypeError(f"project: target must be a device name or a Ceilings, got {type(target).__name__}")
        meta = dict(self.meta, projected_to=label, ceilings_source="datasheet" if isinstance(target, str) else "best")
        if "contention" in meta:  # a projection's times are not measured: it does not inherit the block's flag
            meta["contention"] = []
        meta.pop("ceilings_contention", None)  # nor the measured ceilings' flag: it is judged against `target`'s
        if gpus is not None:  # collectives over `gpus` ranks, on the target's interconnect
            meta = _network.rescaled(meta, gpus, len(self.records))
        roofs = _roofs.of(ceil, meta["ceilings_source"], meta)  # the projection's roofs, chosen here once
        t_min = _classify(self.records, roofs, meta=meta)[0]["t_min"]

        meta["assumed"] = _assumptions.describe(self, roofs)
        if meta["assumed"]["no_peak_flop_share"] >= 1e-3:  # always in the summary; warned when it weighs
            warn(f"roofline: {label} has no peak for the dtype of these ops: {meta['assumed']['no_peak']}")
        t = np.where(np.isnan(t_min), 0.0, t_min)
        starts, ends = _back_to_back(t)
        records = self.records.copy()
        records["t_start"] = starts
        records["t_end"] = ends
        wall_time = float(ends[-1]) if len(ends) else 0.0
        # the projected report is judged against the roofs chosen above
        return Report(records, self._ops, self.module_sets, wall_time, meta, ceilings=roofs,
                      signatures=self.signatures, accesses=self.accesses)

    # ---- plotting -------------------------------------------------------------------------------------------
    def plot(self, path=None, ax=None, by: str = "op", top: int = 8, depth: int | None = None, **kwargs):
        """Draw the roofline chart (matplotlib): see :func:`roofline.plot.plot_report`. ``by``: "op", "op_shape",
        "module" or "kernel"; ``top`` (points labelled) an int >= 0; ``depth`` an int >= 1, with ``by="module"``
        only."""
        depth = _check_grouping("plot", by, depth, None, ("op", "op_shape", "module", "kernel"))
        top = _check_int("plot", "top", top, 0)

        return _matplotlib.plot_report(self, path=path, ax=ax, by=by, top=top, depth=depth, **kwargs)

    def roofline_chart(self, by: str = "op", depth: int | None = None, top: int = 10, backend: str = "svg"):
        """The roofline chart as self-contained SVG for a notebook (no matplotlib, no JavaScript): hovering a
        point shows its op (or module), the modules it ran in, input shapes (when recorded), dtypes, FLOPs, bytes,
        time and % of roof. ``by``: "op", "op_shape", "module" (one level of the module tree, ``depth`` deep) or
        "kernel" (the kernels of compiled graphs).
        Returns a chart object that a notebook renders; its ``svg`` is the markup and ``save(path)`` writes an
        ``.svg`` or ``.html`` file. ``backend="plotly"`` returns a plotly Figure instead (zoom, pan, the same hover
        text; needs plotly). ``top`` (an int >= 0): the points labelled, most time first."""
        _check_choice("roofline_chart", "backend", backend, ("svg", "plotly"))
        depth = _check_grouping("roofline_chart", by, depth, None, ("op", "op_shape", "module", "kernel"))
        top = _check_int("roofline_chart", "top", top, 0)
        if backend == "plotly":
            return _plotly.roofline_plotly(self, by=by, depth=depth)
        if backend != "svg":
            raise ValueError(f"backend must be 'svg' or 'plotly', got {backend!r}")
        return _svg.Chart(_svg.roofline_svg(self, by=by, depth=depth, top=top))


def _jsonable_yardstick(yard: dict) -> dict:
    """The yardstick description kept in ``meta["ceilings_yardstick"]``: its kind and why, as strings and lists of
    strings (it is read back from documents)."""
    out = {"kind": str(yard.get("kind"))}
    for k in ("measured_at", "path", "by_version", "dram"):
        if isinstance(yard.get(k), str):
            out[k] = yard[k]
    for k in ("contention", "formula"):
        if isinstance(yard.get(k), list):
            out[k] = [str(x) for x in yard[k]]
    return out


def _back_to_back(t):
    """``(starts, ends)`` of intervals laid end to end whose durations ``ends - starts`` (what the classification
    takes) are never shorter than ``t``. A plain cumulative sum rounds: ``ends - starts`` can come out an ulp of
    the running total below ``t``, far above the classification's tolerance for a short op after a long run, which
    would show a projected op above its own roof. When that happens the ends are laid one by one, each moved up by
    an ulp where its duration came out short."""
    t = np.asarray(t, dtype=np.float64)
    ends = np.cumsum(t)
    starts = np.concatenate(([0.0], ends[:-1]))
    if not ((ends - starts) < t).any():
        return starts, ends
    out = []
    e = 0.0
    for ti in t.tolist():
        n = e + ti
        while n - e < ti:
            n = math.nextafter(n, math.inf)
        out.append(n)
        e = n
    ends = np.array(out)
    return np.concatenate(([0.0], ends[:-1])), ends



def load(path) -> "BaseReport":
    """Read a report written by ``to_json`` (:meth:`Report.to_json`, :meth:`roofline.SteadyReport.to_json`,
    :meth:`roofline.distributed.MergedReport.to_json`) and return it as the class that saved it, with its fields.

    ``path`` is a path or the JSON text itself, told apart without looking at the disk: a str or bytes that
    starts with ``{`` or ``[`` and ends with ``}`` or ``]`` (white space aside) is the text (a report's is a JSON
    object), any other str or bytes a file name: ``"{x}.json"`` and ``"[rank0].json"`` are file names (a file whose
    name is itself bracketed, ``{x}``, is read with ``pathlib.Path("{x}")``). An ``os.PathLike`` is always a path,
    a bytearray or memoryview always the text (UTF-8). A str or bytes that can be neither (over 4096 characters or
    holding a NUL, without the brackets) is a ValueError saying so; a missing file a FileNotFoundError; anything
    else a TypeError.

    The document is checked against its schema version before anything is built (see :meth:`Report.from_dict`):
    malformed JSON, nesting deeper than a report's, or any field of the wrong type or out of range raises
    ValueError naming it. Checking is linear in the size of the text, whatever it holds."""
    d = _safejson.loads(_document_text(path, "load"), "not a roofline report")
    fmt = d.get("format") if isinstance(d, dict) else None
    if isinstance(fmt, str) and fmt in _READERS:
        return _READERS[fmt](d)
    return Report.from_dict(d)


def _document_text(source, where: str):
    """The JSON text :func:`load` reads from ``source`` (see there): the text itself, or the bytes of the file."""
    if isinstance(source, (bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, os.PathLike):
        name = source
    elif isinstance(source, (str, bytes)):
        body = source.strip()
        brackets = ("{", "[", "}", "]") if isinstance(body, str) else (b"{", b"[", b"}", b"]")
        if body[:1] in brackets[:2] and body[-1:] in brackets[2:]:  # JSON text (a report's: an object)
            return source
        nul = "\0" if isinstance(source, str) else b"\0"
        if len(source) > 4096 or nul in source:
            raise ValueError(f"{where}: expected a path or a report's JSON text (a JSON object, from {{ to }}), got "
                             f"a {type(source).__name__} of {len(source)} characters that is neither: "
                             f"{source[:40]!r}...")
        name = source
    else:
        raise TypeError(f"{where}: expected a path or the JSON text of a report, got {type(source).__name__}")
    with open(name, "rb") as f:
        return f.read()


# Readers of the documents that are not one Report's (their ``format`` key names them): a merged report's, which
# roofline.distributed registers (a floor above this one)
_READERS: dict = {}


def register_reader(fmt: str, read) -> None:
    """Make :func:`load` read documents whose ``format`` is ``fmt`` with ``read(document)`` (once per format)."""
    if _READERS.get(fmt, read) is not read:
        raise ValueError(f"register_reader: documents of format {fmt!r} already have a reader")
    _READERS[fmt] = read


class Comparison:
    """Before/after of two reports, by op or by module (made by :meth:`Report.compare`).

    ``rows`` maps each op (or module) name to a pair ``(before, after)`` of :meth:`Report.analysis` rows (or of
    :meth:`Report.by_op` / :meth:`Report.by_module` rows with NaN times when a report has no ceilings); a side is
    None when the name is absent from that report. ``before``, ``after``: the two reports; ``by``: "op" or
    "module". ``str(comparison)`` is a table of the 25 largest changes.
    """

    FIELDS = ("flops", "bytes", "time", "t_min", "calls")

    def __init__(self, before: Report, after: Report, by: str = "op", depth: int | None = None):
        for side, r in (("before", before), ("after", after)):
            if not isinstance(r, Report):
                raise TypeError(f"compare: the {side} report must be a roofline Report, got {type(r).__name__}")
        depth = _check_grouping("compare", by, depth, None, depth_lo=0)
        a = _rows(before, by, depth)
        b = _rows(after, by, depth)
        self.by = by
        self.rows = {k: (a.get(k), b.get(k)) for k in list(a) + [k for k in b if k not in a]}
        self.before, self.after = before, after

    def delta(self, name: str, field: str = "flops") -> float:
        """``after - before`` of ``field`` ("flops", "bytes", "time", "t_min", "calls", ...) for one name (a missing
        side counts 0). KeyError when the name is in neither report; ValueError for a field no row has."""
        self._check_field("delta", field)
        x, y = self.rows[name]
        return (y or {}).get(field, 0.0) - (x or {}).get(field, 0.0)

    def changed(self, field: str = "flops") -> dict[str, tuple[float, float]]:
        """Names whose ``field`` differs: name -> (before, after) (0 when absent on one side). ValueError for a
        field no row has."""
        self._check_field("changed", field)
        out = {}
        for k, (x, y) in self.rows.items():
            vx, vy = (x or {}).get(field, 0.0), (y or {}).get(field, 0.0)
            if not (vx == vy or (isinstance(vx, float) and isinstance(vy, float) and math.isnan(vx) and math.isnan(vy))):
                out[k] = (vx, vy)
        return out

    def _check_field(self, where: str, field) -> None:
        fields = sorted({k for pair in self.rows.values() for row in pair if row for k in row})
        if not isinstance(field, str) or (fields and field not in fields):
            raise ValueError(f"Comparison.{where}: field must be one of the rows' fields ({', '.join(fields)}), "
                             f"got {field!r}")

    def __str__(self):
        return _render.comparison(self)


def _rows(report, by, depth):
    """One side of a comparison: :meth:`Report.analysis` rows, or the count roll-up with NaN times when the report
    has no ceilings."""
    if report.ceilings is not None:
        return report.analysis(by, depth)
    src = report.by_op() if by == "op" else report.by_module(depth)
    return {k: dict(v, time=math.nan, t_min=math.nan) for k, v in src.items()}
