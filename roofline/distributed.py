"""Distributed training: collectives on the interconnect roofline, per-rank reports and their merge.

Inside ``roofline.measure`` every collective that reaches the dispatcher is recorded with its message bytes, group
size and bus bytes (nccl-tests convention), and is judged against the interconnect bandwidth, not DRAM; DTensor ops
are counted at the local shards each rank computes (see ``roofline/_capture/_collectives.py`` and docs/distributed.md).

This module reads those records and brings the ranks together:

* :func:`communication` and :func:`collectives`: the collectives of one report;
* :func:`measure_interconnect`: an all-reduce bus-bandwidth sweep over the current process group (nccl-tests
  style), used as the measured interconnect ceiling of the reports measured afterwards in this process;
* :func:`gather`: every rank's report on one rank, over torch.distributed, as JSON (no pickle), with a timeout;
* :func:`merge` (and ``python -m roofline merge rank*.json``): the same offline, from saved reports;
* :class:`MergedReport`: the per-rank table, totals, the slowest rank, compute vs communication time per rank.

``import roofline.distributed`` needs only NumPy; torch is imported by the functions that talk to other ranks.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import time

import numpy as np

from roofline._analysis._classification import BOUND_INTERCONNECT
from roofline._hardware import _interconnect
from roofline._datamodel import _document
from roofline._datamodel._collectives import bus_factor  # noqa: F401  (public: roofline.distributed.bus_factor)
from roofline._datamodel._records import COUNTS, PHASES
from roofline._io import _export
from roofline.render import _merged as _merged_views
from roofline.report import SCHEMA_VERSION, BaseReport, Report, _check_int, register_reader
from roofline._util import _ints, _safejson, _warn
from roofline._util._version import VERSION

__all__ = ["MergedReport", "bus_factor", "collectives", "communication", "gather", "measure_interconnect", "merge"]

_PAYLOAD_FORMAT = "roofline-rank-report"
_COLUMNS = _document.COLLECTIVE_COLUMNS
# gather's timeout: finite, and within what a timedelta and the process group's millisecond timeouts hold
_MAX_TIMEOUT = 1e9


# ---- one report ------------------------------------------------------------------------------------------------
def collectives(report) -> list[dict]:
    """One dict per collective call of ``report``: ``record`` (row of ``report.records``), ``op`` (the op's name),
    ``collective`` ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
    "gather", "scatter", "send", "recv", "p2p", "barrier", "wait"), ``group_size``, ``message_bytes``,
    ``bus_bytes``, ``async_op`` (issued asynchronously: its measured time is the launch, not the transfer),
    ``uncertain`` (the group size could not be read from the call: the world size was assumed), ``phase``,
    ``time`` (measured seconds, NaN unless ``timing="op"``) and ``t_min`` (bus bytes / interconnect bandwidth)."""
    t = _document.collectives_table(report.meta, len(report.records))
    if not t["record"]:
        return []
    c = report.classification() if report.ceilings is not None else None

    rows = []
    for i, rec in enumerate(t["record"]):
        r = report.records[rec]
        row = {k: t[k][i] for k in _COLUMNS}
        row["op"] = report.op_names[int(r["op"])]
        row["phase"] = PHASES[int(r["phase"])]
        row["time"] = float(r["t_end"] - r["t_start"])
        row["t_min"] = float(c["t_min"][rec]) if c is not None else math.nan
        rows.append(row)
    return rows


def communication(report) -> dict:
    """The collectives of ``report`` per collective kind, most bus bytes first: ``{collective: {calls,
    message_bytes, bus_bytes, time, t_min}}`` (times summed; NaN when unknown)."""
    out: dict = {}
    for row in collectives(report):
        d = out.setdefault(row["collective"], {"calls": 0, "message_bytes": 0, "bus_bytes": 0, "time": 0.0,
                                               "t_min": 0.0})
        d["calls"] += 1
        d["message_bytes"] += row["message_bytes"]
        d["bus_bytes"] += row["bus_bytes"]
        d["time"] += row["time"]
        d["t_min"] += row["t_min"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["bus_bytes"]))


def _split(report) -> dict:
    """Compute vs communication of one report: roofline times (t_min) and measured times of each side."""
    t = _document.collectives_table(report.meta, len(report.records))
    net = np.zeros(len(report.records), bool)
    net[np.asarray(t["record"], dtype=np.int64)] = True
    out = {"message_bytes": sum(t["message_bytes"]), "bus_bytes": sum(t["bus_bytes"]),
           "collectives": len(t["record"])}
    if report.ceilings is not None:
        c = report.classification()
        tm = c["t_min"]
        out["t_compute"] = float(np.nansum(tm[~net]))
        out["t_comm"] = float(np.nansum(tm[net])) if net.any() and np.isfinite(tm[net]).all() else (
            0.0 if not net.any() else math.nan)
    else:
        out["t_compute"] = out["t_comm"] = math.nan
    times = report.records["t_end"] - report.records["t_start"]
    if np.isfinite(times).any():
        blocking = np.zeros(len(report.records), bool)  # synchronous collectives and waits: the host was held
        blocking[[r for r, a in zip(t["record"], t["async_op"]) if not a]] = True
        out["time_compute"] = float(np.nansum(times[~net]))
        out["time_comm"] = float(np.nansum(times[net]))
        out["time_comm_exposed"] = float(np.nansum(times[blocking]))
    else:
        out["time_compute"] = out["time_comm"] = out["time_comm_exposed"] = math.nan
    return out


# ---- measured interconnect ---------------------------------------------------------------------------------------
_DEFAULT_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 22)


def measure_interconnect(sizes=_DEFAULT_SIZES, iters: int = 5, group=None) -> dict:
    """Measure the all-reduce bus bandwidth of the current process group, nccl-tests style: for each message size
    (bytes, float32 elements), one warm-up and ``iters`` timed all-reduces between barriers; the time of a size is
    the median over iterations of the slowest rank; ``algbw = size / time``, ``busbw = algbw x 2(n-1)/n``.
    Every rank must call it (it is a collective). Returns ``{"busbw": best bytes/s, "sweep": [{"bytes", "time",
    "algbw", "busbw"}], "backend", "world_size", "device", "method"}`` and keeps it: reports measured afterwards in
    this process judge their collectives against ``busbw``. RuntimeError outside a process group."""
    import torch
    import torch.distributed as dist
    from torch.utils._python_dispatch import _disable_current_modes

    _require_group("measure_interconnect")
    iters = _ints.count(iters, "iters", "measure_interconnect", 1)
    sizes = [_ints.count(s, f"sizes[{i}]", "measure_interconnect", 4) for i, s in enumerate(sizes)]
    if not sizes or any(s % 4 for s in sizes):
        raise ValueError(f"measure_interconnect: sizes must be byte counts, multiples of 4 and >= 4, got {sizes!r}")
    backend = str(dist.get_backend(group))
    n = dist.get_world_size(group)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    sweep = []
    with _disable_current_modes():  # not counted by an enclosing measure block
        for size in sizes:
            x = torch.ones(size // 4, dtype=torch.float32, device=device)
            dist.all_reduce(x, group=group)
            ts = []
            for _ in range(iters):
                dist.barrier(group=group)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                dist.all_reduce(x, group=group)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                ts.append(time.perf_counter() - t0)
            t = torch.tensor(ts, dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)  # the slowest rank of each iteration
            med = float(t.cpu().median())
            algbw = size / med if med > 0 else math.nan
            sweep.append({"bytes": size, "time": med, "algbw": algbw, "busbw": algbw * 2 * (n - 1) / n})
    best = max((s["busbw"] for s in sweep if math.isfinite(s["busbw"])), default=math.nan)
    result = {"busbw": best, "sweep": sweep, "backend": backend, "world_size": n, "device": str(device),
              "method": f"all-reduce of float32 over {n} ranks ({backend}), {iters} timed runs per size, median of "
                        "the slowest rank; busbw = size / time x 2(n-1)/n (nccl-tests)"}
    if group is None:
        _interconnect.remember(backend, n, result)
    return result


# ---- gathering ----------------------------------------------------------------------------------------------------
def _require_group(what: str):
    try:
        import torch.distributed as dist
    except ImportError as e:  # pragma: no cover - torch without distributed
        raise RuntimeError(f"roofline.{what}: torch.distributed is not available in this torch build") from e
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"roofline.{what}: no torch.distributed process group: call "
                           "torch.distributed.init_process_group() first (saved reports merge offline with "
                           "roofline.distributed.merge or `python -m roofline merge rank*.json`)")
    return dist


def _payload(report, rank: int) -> tuple[dict, Exception | None]:

    head = {"format": _PAYLOAD_FORMAT, "version": VERSION, "schema": SCHEMA_VERSION, "rank": rank}
    if report is None:
        return dict(head, error="no report (None) was passed"), None
    if not isinstance(report, Report):
        err = TypeError(f"gather: expected a roofline.Report, got {type(report).__name__}")
        return dict(head, error=str(err)), err
    if report._pending:
        return dict(head, error="its measure block did not complete (an exception was raised inside it)"), None
    return dict(head, report=report.to_dict()), None


def gather(report, dst: int = 0, timeout: float = 120.0, group=None):
    """Collect every rank's report on rank ``dst`` (a collective: every rank of the group calls it). Returns a
    :class:`MergedReport` on ``dst`` and None elsewhere.

    The reports travel as JSON bytes (no pickle). ``timeout`` (seconds) bounds each of the two collectives (the
    sizes, then the payloads): a rank that never calls ``gather`` makes the others raise RuntimeError after it
    rather than hang (the process group may then be unusable, as after any failed collective). A rank whose
    ``measure`` block raised passes its report anyway (call ``gather`` in a ``finally``): ``dst`` then raises
    RuntimeError naming that rank. Reports of different roofline versions or schemas raise ValueError on ``dst``.
    RuntimeError outside a process group. ``timeout`` is checked first: a finite number of seconds in (0, 1e9]
    (ValueError otherwise, infinity included: the wait is bounded; TypeError for a non-number)."""
    import torch

    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise TypeError(f"gather: timeout must be a number of seconds, got {type(timeout).__name__}")
    seconds = float(timeout) if not isinstance(timeout, int) or abs(timeout) <= _MAX_TIMEOUT else math.inf
    if not (math.isfinite(seconds) and 0 < seconds <= _MAX_TIMEOUT):
        raise ValueError(f"gather: timeout must be a finite number of seconds in (0, {_MAX_TIMEOUT:g}], got "
                         f"{_document.show(timeout)}")
    dist = _require_group("gather")
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    dst = _ints.count(dst, "dst", "gather", 0, n - 1)  # a rank of the group
    payload, local_error = _payload(report, dist.get_rank())
    data = json.dumps(payload, separators=(",", ":"), allow_nan=True).encode()
    backend = str(dist.get_backend(group))
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    wait = datetime.timedelta(seconds=float(timeout))
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        size = torch.tensor([len(data)], dtype=torch.int64, device=device)
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(n)]
        _wait(dist.all_gather(sizes, size, group=group, async_op=True), wait, "the payload sizes", timeout)
        longest = int(max(int(s.item()) for s in sizes))
        buf = torch.zeros(longest, dtype=torch.uint8, device=device)
        buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
        bufs = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in range(n)] if rank == dst else None
        gdst = dist.get_global_rank(group, dst) if group is not None else dst
        _wait(dist.gather(buf, bufs, dst=gdst, group=group, async_op=True), wait, "the reports", timeout)
    if local_error is not None:
        raise local_error
    if rank != dst:
        return None

    docs = []
    for i, (b, s) in enumerate(zip(bufs, sizes)):
        raw = bytes(b[: int(s.item())].cpu().numpy())
        # a report document one level down: the nesting limit and the linear-time check of any document read
        docs.append(_safejson.loads(raw, f"gather: the payload of rank {i} is not a roofline rank report"))
    return _merge_payloads(docs)


def _wait(work, wait, what: str, timeout: float):
    try:
        ok = work.wait(timeout=wait)
    except RuntimeError as e:
        raise RuntimeError(f"roofline.gather: {what} did not arrive from every rank within {timeout:g} s (a rank "
                           f"did not call gather, or failed before it): {e}") from None
    if ok is False:
        raise RuntimeError(f"roofline.gather: {what} did not arrive from every rank within {timeout:g} s")


def _merge_payloads(docs: list) -> "MergedReport":
    errors, heads = [], []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or d.get("format") != _PAYLOAD_FORMAT:
            raise ValueError(f"gather: rank {i} sent something that is not a roofline rank report")
        head = (d.get("version"), d.get("schema"))
        if not all(x is None or isinstance(x, (str, int)) for x in head):
            raise ValueError(f"gather: rank {i} sent a payload whose version or schema is not a str or an int")
        heads.append(head)
        if "error" in d:
            errors.append(f"rank {d.get('rank', i)}: {d['error']}")
    if len(set(heads)) > 1:
        by = {}
        for i, h in enumerate(heads):
            by.setdefault(h, []).append(i)
        desc = "; ".join(f"version {v} schema {s}: ranks {r}" for (v, s), r in by.items())
        raise ValueError(f"gather: the ranks run different roofline versions ({desc}); install one version")
    if errors:
        raise RuntimeError("gather: " + "; ".join(errors))
    reports = []
    for i, d in enumerate(docs):
        try:
            reports.append(Report.from_dict(d.get("report")))
        except ValueError as e:
            raise ValueError(f"gather: the report of rank {i}: {e}") from None
    return MergedReport(reports)


def merge(reports) -> "MergedReport":
    """A :class:`MergedReport` of saved per-rank reports: ``reports`` is a list of Reports, paths of ``Report.to_json``
    files (or of a document written by ``MergedReport.to_dict`` / ``merge -o``), or both. ValueError when two
    reports claim the same rank, when their world sizes or roofline versions differ, or when a report has no rank
    (measured outside a process group: its position in the list is used as its rank only when no report of the list
    has one)."""
    if isinstance(reports, (str, bytes)) or not hasattr(reports, "__iter__"):
        raise TypeError("merge: expected a list of reports or paths")
    loaded = []
    for r in reports:
        if isinstance(r, Report):
            loaded.append(r)
            continue
        doc = _read_json(r)
        if isinstance(doc, dict) and doc.get("format") == _MERGED_FORMAT:  # MergedReport.to_json, `merge -o`
            loaded.extend(_rank_reports(doc, f"merge: {os.fsdecode(r)}"))
        else:
            try:
                loaded.append(Report.from_dict(doc))
            except ValueError as e:
                raise ValueError(f"merge: {r}: {e}") from None
    if not loaded:
        raise ValueError("merge: no reports")
    return MergedReport(loaded)


def _read_json(path):

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"merge: expected a Report or a path, got {type(path).__name__}")
    with open(path, "rb") as f:
        text = f.read()
    try:
        return _safejson.loads(text, "not a roofline report")
    except ValueError as e:
        raise ValueError(f"merge: {os.fsdecode(path)}: {e}") from None


_MERGED_FORMAT = "roofline-merged"


def _rank_reports(doc: dict, where: str) -> list:
    """The rank reports of a merged report's document, each checked (ValueError naming ``where`` and the rank)."""
    ranks = doc.get("ranks")
    if not isinstance(ranks, list):
        raise ValueError(f"{where}: ranks must be a list of reports, not {_document.kind(ranks)}")
    out = []
    for i, d in enumerate(ranks):
        try:
            out.append(Report.from_dict(d))
        except ValueError as e:
            raise ValueError(f"{where}: ranks[{i}]: {e}") from None
    return out


class MergedReport(BaseReport):
    """The reports of the ranks of one job, side by side (made by :func:`gather` or :func:`merge`): a report of
    the family of :class:`roofline.Report` (:class:`roofline.report.BaseReport`): it prints, plots, shows in a
    notebook, writes a page and saves itself, and :func:`roofline.load` reads it back as a MergedReport.

    ``ranks``: the reports in rank order; ``rank_ids``: their ranks; ``world_size`` and ``backend`` (None when
    the reports were measured outside a process group). ``str(merged)`` is the per-rank table and the totals, then
    the job's top ops. :meth:`job` is every rank's ops in one :class:`roofline.Report` (what :meth:`plot`,
    :meth:`table` with ``by`` other than "rank" and the HTML views show)."""

    _NAME = "MergedReport"

    def __init__(self, reports):
        reports = list(reports)
        if not reports:
            raise ValueError("merge: no reports")
        for i, r in enumerate(reports):
            if not isinstance(r, Report):
                raise TypeError(f"merge: report {i} is a {type(r).__name__}, not a roofline.Report")
            try:  # what the merge reads, as load checks it (a report's meta may have been changed since)
                _document.Opt(_document.DISTRIBUTED)(r.meta.get("distributed"), "meta.distributed")
                _document.Opt(_document.Str())(r.meta.get("version"), "meta.version")
            except _document.Invalid as e:
                raise ValueError(f"merge: report {i} of {len(reports)}: {e}") from None
        ids = [(r.meta.get("distributed") or {}).get("rank") for r in reports]
        if all(i is None for i in ids):
            ids = list(range(len(reports)))
        elif any(i is None for i in ids):
            raise ValueError("merge: some reports have a rank and some do not (measured outside a process group)")
        if len(set(ids)) != len(ids):
            raise ValueError(f"merge: two reports claim the same rank ({sorted(ids)})")
        worlds = {(r.meta.get("distributed") or {}).get("world_size") for r in reports}
        if len(worlds) > 1:
            raise ValueError(f"merge: the reports come from different world sizes ({sorted(map(str, worlds))})")
        versions = {r.meta.get("version") for r in reports}
        if len(versions) > 1:
            raise ValueError("merge: the reports were made by different roofline versions "
                             f"({sorted(map(str, versions))})")
        order = sorted(range(len(reports)), key=lambda i: ids[i])
        self.ranks = [reports[i] for i in order]
        self.rank_ids = [ids[i] for i in order]
        self.world_size = worlds.pop()
        self.backend = (self.ranks[0].meta.get("distributed") or {}).get("backend")
        self._job = None

    def per_rank(self) -> list[dict]:
        """One row per rank: ``rank``, ``wall_time``, ``calls``, ``flops``, ``matrix_flops``, ``bytes``
        (memory), ``collectives`` (calls), ``message_bytes``, ``bus_bytes``, ``t_compute`` and ``t_comm`` (roofline
        seconds of the compute ops and of the collectives; NaN without ceilings), ``comm_share`` (t_comm over
        their sum), and the measured ``time_compute`` / ``time_comm`` (``timing="op"`` only; an asynchronous
        collective's time is its launch: the transfer shows in the waits) and ``time_comm_exposed`` (the time the
        host was held by synchronous collectives and by waits; communication overlapped with compute is the rest,
        which the records cannot show)."""
        rows = []
        for rid, r in zip(self.rank_ids, self.ranks):
            row = {"rank": rid, "wall_time": r.wall_time, "calls": int(len(r.records)), "flops": r.total_flops,
                   "matrix_flops": r.matrix_flops, "bytes": r.bytes_read + r.bytes_written}
            row.update(_split(r))
            tot = row["t_compute"] + row["t_comm"]
            row["comm_share"] = row["t_comm"] / tot if tot and math.isfinite(tot) and tot > 0 else math.nan
            rows.append(row)
        return rows

    def totals(self) -> dict:
        """Sums over the ranks: ``calls``, ``matrix_flops``, ``vector_flops``, ``special_ops``, ``bytes_read``,
        ``bytes_written``, ``flops``, ``bytes``, ``collectives``, ``message_bytes``, ``bus_bytes`` (exact ints),
        plus ``ranks``."""
        out = {k: 0 for k in ("calls", *COUNTS, "collectives", "message_bytes", "bus_bytes")}
        for r in self.ranks:
            out["calls"] += int(len(r.records))
            for k in COUNTS:
                out[k] += getattr(r, k)
            t = _document.collectives_table(r.meta, len(r.records))
            out["collectives"] += len(t["record"])
            out["message_bytes"] += sum(t["message_bytes"])
            out["bus_bytes"] += sum(t["bus_bytes"])
        out["flops"] = out["matrix_flops"] + out["vector_flops"]
        out["bytes"] = out["bytes_read"] + out["bytes_written"]
        out["ranks"] = len(self.ranks)
        return out

    @property
    def incomplete(self) -> list[str]:
        """Why the ranks' counts miss work that ran (each rank's :attr:`roofline.Report.incomplete`, prefixed with
        its rank); empty when every rank is complete."""
        return [f"rank {rank}: {why}" for rank, r in zip(self.rank_ids, self.ranks) for why in r.incomplete]

    @property
    def complete(self) -> bool:
        """False when some rank's report is incomplete: the totals are then lower bounds."""
        return not self.incomplete

    def slowest_rank(self) -> int:
        """The rank with the longest wall time (when every rank was timed), else the longest roofline time
        (compute + communication)."""
        rows = self.per_rank()
        if all(r["wall_time"] is not None for r in rows):
            return max(rows, key=lambda r: r["wall_time"])["rank"]
        return max(rows, key=lambda r: np.nan_to_num(r["t_compute"]) + np.nan_to_num(r["t_comm"]))["rank"]

    # ---- the job's ops ---------------------------------------------------------------------------------------
    def job(self) -> Report:
        """Every rank's records in one :class:`roofline.Report` (rank by rank, in rank order): its roll-ups by op,
        by module and by phase sum the ranks (an op's calls, FLOPs, bytes and measured time over every rank), each
        collective is judged against the interconnect as on its rank. Its ``wall_time`` is None (the ranks ran at
        the same time: the job's wall time is a rank's, in :meth:`per_rank`), so its whole-run rates are NaN; the
        per-op figures (each op's time is its own) stand. Judged against the ceilings of the ranks; when the ranks
        carry different ceilings (each measured its own device), against the slowest rank's, with a warning.
        ``meta["merged"]`` says which: ``ranks`` and ``ceilings_of_rank``. Made once and kept."""
        if self._job is None:
            self._job = _job(self)
        return self._job

    def plot(self, path=None, ax=None, by: str = "op", top: int = 8, depth: int | None = None, rank=None, **kwargs):
        """The roofline chart (matplotlib) of the job's ops (:meth:`job`: an op's point sums its calls over every
        rank), or of one rank's report with ``rank`` (one of :attr:`rank_ids`); the arguments as in
        :meth:`roofline.Report.plot`."""
        return self._one(rank, "plot").plot(path=path, ax=ax, by=by, top=top, depth=depth, **kwargs)

    def table(self, by: str = "rank", depth: int | None = None, top: int | None = 15, phase: str | None = None,
              rank=None) -> str:
        """``by="rank"`` (the default): the per-rank table, the totals and the slowest rank, as text. Any other
        ``by`` ("op", "op_shape", "module", "kernel"): the table of :meth:`roofline.Report.table` of the job's ops
        (:meth:`job`), or of one rank's report with ``rank``; ``depth``, ``top`` and ``phase`` as there."""
        top = _check_int("MergedReport.table", "top", top, 1, none=True)
        if by == "rank" and rank is None:
            for name, v in (("depth", depth), ("phase", phase)):
                if v is not None:
                    raise ValueError(f"MergedReport.table: {name} does not apply to by='rank'")
            return _merged_views.table(self)
        return self._one(rank, "table").table(by=by, depth=depth, top=top, phase=phase)

    def summary(self, top: int = 10) -> str:
        """The per-rank table (:meth:`table`), then the job's ``top`` ops (an int >= 1, or None for all)."""
        top = _check_int("MergedReport.summary", "top", top, 1, none=True)
        text = self.table()
        job, note = self._job_or_note()
        return text + "\n\n" + (job.table(by="op", top=top) if job is not None else note)

    def _repr_html_(self) -> str:
        job, note = self._job_or_note()
        return _merged_views.to_html(self, job, note)

    def to_html(self, path=None, title: str | None = None, top: int = 15) -> str:
        """The merged report as a full, self-contained HTML page: the per-rank table, the totals and the slowest
        rank, then the job's ops (:meth:`job`) as :meth:`roofline.Report.to_html` shows a report's (``top`` ops).
        Written to ``path`` when given (as :meth:`to_json` writes a file); returns the text."""
        _export.check_path(path, "MergedReport.to_html")
        top = _check_int("MergedReport.to_html", "top", top, 1)
        if title is not None and not isinstance(title, str):
            raise TypeError(f"MergedReport.to_html: title must be a str or None, got {type(title).__name__}")
        job, note = self._job_or_note()
        return _export.write(_merged_views.page(self, job, title, note, top), path, "MergedReport.to_html")

    def _job_or_note(self):
        """(the job's report, "") or (None, why there is none to judge: no rank has ceilings)."""
        if all(r.ceilings is None for r in self.ranks):
            return None, "(no rank has ceilings: the job's ops are not judged; project a rank onto a device)"
        return self.job(), ""

    def _one(self, rank, where: str) -> Report:
        if rank is None:
            return self.job()
        if rank not in self.rank_ids or isinstance(rank, bool):
            raise ValueError(f"MergedReport.{where}: rank must be one of the ranks {self.rank_ids} or None, "
                             f"got {rank!r}")
        return self.ranks[self.rank_ids.index(rank)]

    # ---- saving ----------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """``{"format": "roofline-merged", "schema": ..., "ranks": [each report's to_dict()]}``;
        :func:`roofline.load` (and :func:`merge`) read it back."""
        return {"format": _MERGED_FORMAT, "schema": SCHEMA_VERSION, "ranks": [r.to_dict() for r in self.ranks]}

    @classmethod
    def from_dict(cls, d: dict) -> "MergedReport":
        """Rebuild a merged report from :meth:`to_dict`: each rank's report checked as :meth:`Report.from_dict`
        checks one (ValueError naming the rank and the field), then merged as :func:`merge` merges."""
        if not isinstance(d, dict) or d.get("format") != _MERGED_FORMAT:
            raise ValueError(f"not a merged roofline report (format {_MERGED_FORMAT!r} expected)")
        if d.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION or isinstance(d.get("schema"), bool):
            raise ValueError(f"not a merged roofline report of schema {SCHEMA_VERSION} (the document has schema "
                             f"{_document.show(d.get('schema'))})")
        return cls(_rank_reports(d, "merged report"))

    def __str__(self):
        return self.summary()

    def __repr__(self):
        return f"<MergedReport: {len(self.ranks)} ranks{', INCOMPLETE' if self.incomplete else ''}>"



def _job(merged: MergedReport) -> Report:
    """Every rank's records in one report (see :meth:`MergedReport.job`)."""
    ranks = merged.ranks
    ops, op_index, module_sets, signatures, parts = [], {}, [], [], []
    coll = {k: [] for k in _COLUMNS}
    offset = 0
    for r in ranks:
        rec = r.records.copy()
        ids = []
        for o in r._ops:
            key = (o.name, o.packet, o.kind)
            if key not in op_index:
                op_index[key] = len(ops)
                ops.append(o)
            ids.append(op_index[key])
        if len(rec):
            rec["op"] = np.asarray(ids, dtype=np.int64)[rec["op"].astype(np.intp)]
            rec["module"] += len(module_sets)
            rec["sig"] += len(signatures)
        module_sets += r.module_sets
        signatures += r.signatures or [""]
        t = _document.collectives_table(r.meta, len(r.records))
        for k in _COLUMNS:
            coll[k] += [v + offset for v in t[k]] if k == "record" else list(t[k])
        parts.append(rec)
        offset += len(rec)
    records = np.concatenate(parts)
    # the ceilings: the ranks', or the slowest rank's when they differ
    have = [(i, r.ceilings) for i, r in enumerate(ranks) if r.ceilings is not None]
    which = None
    if have:
        docs = {json.dumps(c.to_dict(), sort_keys=True) for _, c in have}
        which = have[0][0]
        if len(docs) > 1 or len(have) < len(ranks):
            slowest = merged.rank_ids.index(merged.slowest_rank())
            which = slowest if ranks[slowest].ceilings is not None else which
            _warn.warn(f"MergedReport: the ranks carry different ceilings (each measured its own device, or some "
                       f"have none): the job's ops are judged against those of rank {merged.rank_ids[which]}")
    first = ranks[0].meta
    timings = {r.meta.get("timing") for r in ranks}
    meta = {"timing": timings.pop() if len(timings) == 1 else None, "version": first.get("version"),
            "devices": sorted({d for r in ranks for d in r.meta.get("devices") or ()}),
            "incomplete": merged.incomplete,
            "merged": {"ranks": list(merged.rank_ids),
                       "ceilings_of_rank": None if which is None else merged.rank_ids[which]}}
    if coll["record"]:
        meta["collectives"] = coll
    ceil = ranks[which].ceilings if which is not None else None
    source = ranks[which].ceilings_source if which is not None else None
    if source is not None:
        meta["ceilings_source"] = source
    return Report(records, ops, module_sets, None, meta, ceilings=ceil, signatures=signatures)


register_reader(_MERGED_FORMAT, MergedReport.from_dict)
