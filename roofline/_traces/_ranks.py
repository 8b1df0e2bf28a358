"""A directory of rank traces (one Kineto trace per rank, as ``torch.profiler.tensorboard_trace_handler`` writes them:
``<worker>.<timestamp>.pt.trace.json[.gz]``) as per-rank summaries, one summary of the job that reads the same for 8
ranks as for 1,000 (percentiles and the outlier ranks, not a line per rank), and the per-rank reports and their merge
(:class:`roofline.distributed.MergedReport`) on demand.

Each rank is analysed by :func:`summarize_rank` through a ``concurrent.futures.Executor``: a local process pool by
default, or any object with ``map`` (or ``submit``), such as a Dask or Ray executor for a cluster. What crosses the
process boundary is the path going out and a :class:`RankSummary` coming back: a few numbers and strings, never the
events or the report. A rank whose trace cannot be read gives a summary with ``error`` set; the others go on.

The rank of a trace is its ``distributedInfo.rank`` (written by the profiler when a process group exists); traces
without one take their position in name order. Nothing here imports torch.
"""

from __future__ import annotations

import math
import os
import re
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from roofline.distributed import MergedReport
from roofline._traces import _load, _read
from roofline._util import _ints

__all__ = ["RankSummary", "RankSet", "load_ranks", "rank_files", "summarize_rank"]

# tensorboard_trace_handler: f"{worker_name}.{time.time_ns()}.pt.trace.json" (+ ".gz" with use_gzip=True)
_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.(?P<stamp>\d+)\.pt\.trace\.json(?:\.gz)?$")
_TRACE_NAME = re.compile(r"\.json(?:\.gz)?$")
_COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_PERCENTILES = (0, 50, 90, 99, 100)
_OUTLIERS = 5


def rank_files(directory) -> list[str]:
    """The trace files of ``directory`` (``*.json`` and ``*.json.gz``; not its subdirectories), in name order.
    NotADirectoryError / FileNotFoundError as from ``os.scandir``; ValueError when it holds no trace."""
    directory = os.fspath(directory)
    with os.scandir(directory) as it:
        names = sorted(e.name for e in it if e.is_file() and _TRACE_NAME.search(e.name))
    if not names:
        raise ValueError(f"{directory}: no trace files (*.json or *.json.gz) in this directory")
    return [os.path.join(directory, n) for n in names]


@dataclass(frozen=True)
class RankSummary:
    """What one rank's trace says, in a few numbers (what an executor sends back; picklable, about a kilobyte).

    ``path``; ``rank`` / ``world_size`` / ``backend`` from the trace's ``distributedInfo`` (None without it);
    ``worker`` (the tensorboard_trace_handler worker name, else the file name); ``device``; ``steps`` (ProfilerStep
    annotations in the trace); ``step_time`` (seconds: the report's wall time, the median step unless ``steps``
    chose otherwise); ``kernel_time`` (GPU kernels, memcpy and memset of the whole trace, seconds); ``comm_time``
    (of it, communication kernels: NCCL/RCCL); ``exposed_comm`` (communication time during which no other kernel ran
    on that device: the part that lengthened the step); ``comm_time_per_step`` / ``exposed_comm_per_step`` (those
    over the trace's steps, on average; the whole trace when it has no steps); ``flops``, ``bytes``, ``mfu`` of the
    report (NaN without a device in the datasheet table); ``attributed_share`` (kernel time in ops with FLOPs and
    bytes); ``complete`` and ``issues`` (the report's reasons it is incomplete, and what the reader skipped); ``error``
    (why the trace could not be analysed at all; the numbers are then NaN)."""
    path: str
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    worker: str = ""
    device: str | None = None
    steps: int = 0
    step_time: float = math.nan
    kernel_time: float = math.nan
    comm_time: float = math.nan
    exposed_comm: float = math.nan
    comm_time_per_step: float = math.nan
    exposed_comm_per_step: float = math.nan
    flops: float = math.nan
    bytes: float = math.nan
    mfu: float = math.nan
    attributed_share: float = math.nan
    complete: bool = False
    issues: tuple = ()
    error: str | None = None

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class _Tee:
    """A reader's RawTrace as load_one sees it, keeping on the way what the summary needs that the report does not
    hold: the GPU intervals (for the exposed communication) and the ProfilerStep annotations."""

    def __init__(self, raw):
        self.raw = raw
        self.path = raw.path
        self.gpu: list = []  # (device, start us, end us, is communication)
        self.steps = 0

    @property
    def header(self):
        return self.raw.header

    @property
    def complete(self):
        return self.raw.complete

    @property
    def position(self):
        return self.raw.position

    @property
    def nbytes(self):
        return self.raw.nbytes

    @property
    def issues(self):
        return self.raw.issues

    def close(self):
        self.raw.close()

    def events(self):
        add = self.gpu.append
        for batch in self.raw.event_batches():
            for e in batch:
                if type(e) is not dict:
                    continue
                cat = e.get("cat")
                if cat in _GPU_CATS and e.get("ph") == "X":
                    ts, dur = e.get("ts"), e.get("dur")
                    if _finite(ts) and _finite(dur) and dur >= 0:
                        name = e.get("name")
                        add((str(e.get("pid")), float(ts), float(ts) + float(dur),
                             cat == "kernel" and isinstance(name, str) and bool(_COMM_KERNEL.search(name))))
                elif cat == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
                    self.steps += 1
            yield from batch


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def union_length(start, end) -> float:
    """The length of the union of the intervals [start[i], end[i]] (NumPy arrays)."""
    if len(start) == 0:
        return 0.0
    o = np.argsort(start, kind="stable")
    s, e = np.asarray(start, float)[o], np.asarray(end, float)[o]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    seg_end = np.maximum.reduceat(e, first)
    return float(np.sum(seg_end - s[first]))


def exposed_communication(gpu) -> tuple[float, float, float]:
    """``(kernel_time, comm_time, exposed_comm)`` in the unit of the intervals: ``gpu`` is a list of (device, start,
    end, is_comm). Per device: the busy time, the communication kernels' busy time, and the part of it when no
    other kernel ran (union of all minus union of the others); summed over devices."""
    by: dict = {}
    for dev, s, e, comm in gpu:
        by.setdefault(dev, []).append((s, e, comm))
    busy = comm_t = exposed = 0.0
    for rows in by.values():
        a = np.array(rows, dtype=float)
        s, e, c = a[:, 0], a[:, 1], a[:, 2] > 0
        everything = union_length(s, e)
        busy += everything
        comm_t += union_length(s[c], e[c])
        exposed += everything - union_length(s[~c], e[~c])
    return busy, comm_t, exposed


def summarize_rank(path, *, device=None, steps=None, load=None) -> RankSummary:
    """The :class:`RankSummary` of one rank's trace (what the executor runs). ``load(raw, device=, steps=)`` makes
    the report from the reader's RawTrace (default: ``roofline._traces._load.load_one``). An unreadable trace gives
    a summary with ``error`` set rather than an exception, so that one bad rank does not stop a thousand."""
    path = os.fspath(path)
    name = os.path.basename(path)
    m = _HANDLER_NAME.match(name)
    worker = m.group("worker") if m else name
    load = _load.load_one if load is None else load
    try:
        raw = _read.open_trace(path)
    except (OSError, ValueError) as e:
        return RankSummary(path, worker=worker, error=f"{type(e).__name__}: {e}")
    tee = _Tee(raw)
    try:
        report = load(tee, device=device, steps=steps)
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as e:
        return _with_header(RankSummary(path, worker=worker, error=f"{type(e).__name__}: {e}"), raw.header)
    finally:
        raw.close()
    if isinstance(report, list):  # steps listed: the first one's report stands for the rank
        report = report[0]
    busy, comm, exposed = exposed_communication(tee.gpu)
    per = max(tee.steps, 1)
    if report.ceilings is not None:
        tot = report.totals()
        mfu, flops, nbytes = float(tot["mfu"]), float(tot["flops"]), float(tot["bytes"])
    else:  # no device of the datasheet table: counts without rates
        mfu, flops, nbytes = math.nan, float(report.total_flops), float(report.bytes_read + report.bytes_written)
    trace = report.meta.get("trace") or {}
    issues = tuple(report.incomplete)  # the reader's issues among them when it could not read the whole file
    return _with_header(RankSummary(
        path, worker=worker, device=trace.get("device"), steps=tee.steps,
        step_time=float(report.wall_time) if report.wall_time is not None else math.nan,
        kernel_time=busy * 1e-6, comm_time=comm * 1e-6, exposed_comm=exposed * 1e-6,
        comm_time_per_step=comm * 1e-6 / per, exposed_comm_per_step=exposed * 1e-6 / per,
        flops=flops, bytes=nbytes, mfu=mfu, attributed_share=float(trace.get("attributed_share", math.nan)),
        complete=not issues and raw.complete, issues=issues), raw.header)


def _with_header(s: RankSummary, header: dict) -> RankSummary:
    info = header.get("distributedInfo") if isinstance(header, dict) else None
    if not isinstance(info, dict):
        return s
    rank, world, backend = info.get("rank"), info.get("world_size"), info.get("backend")
    ok = (isinstance(rank, int) and isinstance(world, int) and not isinstance(rank, bool) and 0 <= rank < world)
    kw = dict(s.as_dict())
    kw.update(rank=rank if ok else None, world_size=world if ok else None,
              backend=backend if isinstance(backend, str) else None)
    if not ok:
        kw["issues"] = tuple(s.issues) + (f"distributedInfo holds no valid rank and world size: {info!r}"[:300],)
        kw["complete"] = False
    return RankSummary(**kw)


def _run(executor, fn, paths, progress=None):
    """``fn`` of each path on ``executor`` (in order), ``progress`` told of each one done."""
    if executor is None:  # here, one after the other
        results = (fn(p) for p in paths)
    elif hasattr(executor, "map"):
        results = executor.map(fn, paths)
    else:
        results = (f.result() for f in [executor.submit(fn, p) for p in paths])
    out = []
    for s in results:
        out.append(s)
        if progress is not None:
            progress(f"ranks read ({len(out)}/{len(paths)})")
    return out


class _Summarize:
    """summarize_rank with its options bound, picklable (a process pool sends it to each worker)."""

    def __init__(self, device, steps, load):
        self.device, self.steps, self.load = device, steps, load

    def __call__(self, path):
        return summarize_rank(path, device=self.device, steps=self.steps, load=self.load)


def load_ranks(source, *, device=None, steps=None, executor: Executor | None = None, max_workers: int | None = None,
               load=None, progress=None) -> "RankSet":
    """Summarise the rank traces of ``source`` (a directory, or a list of trace paths) in parallel: a
    :class:`RankSet`. ``executor``: where each rank runs (anything with ``map`` or ``submit``: a
    ``concurrent.futures`` executor, a Dask or Ray one); by default a local process pool of ``max_workers``
    (the CPU count) that is shut down afterwards. ``device`` and ``steps`` as in :func:`roofline.load_trace`;
    ``load`` replaces the report maker (see :func:`summarize_rank`). ``progress``: None or a callable told
    ``"ranks read (i/n)"`` as each rank's summary arrives (in rank order; :func:`roofline.load_trace` of a directory
    passes a progress bar)."""
    if progress is not None and not callable(progress):
        raise TypeError(f"load_ranks: progress must be a callable taking a str, or None, got "
                        f"{type(progress).__name__}")
    if isinstance(source, (str, bytes, os.PathLike)):
        paths = rank_files(source)
        where = os.fspath(source)
    else:
        paths = [os.fspath(p) for p in source]
        if not paths:
            raise ValueError("load_ranks: no trace paths")
        where = None
    max_workers = _ints.count(max_workers, "max_workers", "load_ranks", 1, none=True)
    fn = _Summarize(device, steps, load)
    if executor is None:
        workers = max_workers or min(os.cpu_count() or 1, len(paths))
        if workers <= 1 or len(paths) == 1:
            summaries = _run(None, fn, paths, progress)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                summaries = _run(pool, fn, paths, progress)
    else:
        summaries = _run(executor, fn, paths, progress)
    for s in summaries:
        if not isinstance(s, RankSummary):
            raise TypeError(f"load_ranks: the executor returned a {type(s).__name__}, not a RankSummary")
    return RankSet(summaries, directory=where, device=device, steps=steps)


class RankSet:
    """The ranks of one job: ``summaries`` (one :class:`RankSummary` per trace, in rank order), :meth:`summary`
    (percentiles and outliers), :meth:`table` (that as text; also ``str()``), :meth:`report` (one rank's full report,
    read again from its trace), :meth:`merged` (every rank's report in a MergedReport: memory grows with the ranks)."""

    def __init__(self, summaries, directory=None, device=None, steps=None):
        self.directory, self.device, self.steps = directory, device, steps
        self.problems: list[str] = []
        ranked = [s for s in summaries if s.rank is not None]
        if ranked and len(ranked) < len(summaries):
            self.problems.append(f"{len(summaries) - len(ranked)} trace(s) have no distributedInfo rank: they are "
                                 "listed after the ranked ones, by name")
        seen: dict = {}
        for s in ranked:
            seen.setdefault(s.rank, []).append(s.path)
        dup = {r: p for r, p in seen.items() if len(p) > 1}
        if dup:
            r, p = next(iter(sorted(dup.items())))
            self.problems.append(f"{len(dup)} rank(s) appear in several traces (rank {r}: "
                                 f"{', '.join(os.path.basename(x) for x in p)})")
        worlds = {s.world_size for s in ranked}
        if len(worlds) > 1:
            self.problems.append(f"the traces name different world sizes ({sorted(worlds)})")
        self.world_size = max(worlds) if worlds else None
        if self.world_size is not None:
            missing = sorted(set(range(self.world_size)) - set(seen))
            if missing:
                self.problems.append(f"{len(missing)} of {self.world_size} ranks have no trace here: "
                                     f"{_ranges(missing)}")
        self.summaries = (sorted(ranked, key=lambda s: (s.rank, s.path))
                          + sorted((s for s in summaries if s.rank is None), key=lambda s: s.path))

    def __len__(self):
        return len(self.summaries)

    def rank_id(self, s: RankSummary):
        """The rank of a summary: its distributedInfo rank, else its position."""
        return s.rank if s.rank is not None else self.summaries.index(s)

    def summary(self) -> dict:
        """``{"ranks", "world_size", "analysed", "failed" (rank -> error, the first few), "failed_count",
        "incomplete_count", "problems", "metrics": {metric: {"p0", "p50", "p90", "p99", "p100", "mean"}},
        "outliers": {"slowest_step", "most_exposed_comm", "lowest_mfu": [(rank, value), ...]},
        "spread": slowest step / median step}``. Metrics: ``step_time``, ``exposed_comm_per_step``,
        ``comm_time_per_step``, ``mfu``, ``attributed_share`` over the ranks analysed (NaN ignored)."""
        ok = [s for s in self.summaries if s.error is None]
        failed = [s for s in self.summaries if s.error is not None]
        out = {"ranks": len(self.summaries), "world_size": self.world_size, "analysed": len(ok),
               "failed_count": len(failed),
               "failed": {self._label(s): s.error for s in failed[:_OUTLIERS]},
               "incomplete_count": sum(1 for s in ok if not s.complete),
               "problems": list(self.problems), "metrics": {}, "outliers": {}}
        for m in ("step_time", "exposed_comm_per_step", "comm_time_per_step", "mfu", "attributed_share"):
            v = np.array([getattr(s, m) for s in ok], float)
            v = v[np.isfinite(v)]
            if v.size:
                q = np.percentile(v, _PERCENTILES)
                out["metrics"][m] = dict({f"p{p}": float(x) for p, x in zip(_PERCENTILES, q)}, mean=float(v.mean()),
                                         n=int(v.size))
        out["outliers"]["slowest_step"] = self._top(ok, "step_time", largest=True)
        out["outliers"]["most_exposed_comm"] = self._top(ok, "exposed_comm_per_step", largest=True)
        out["outliers"]["lowest_mfu"] = self._top(ok, "mfu", largest=False)
        st = out["metrics"].get("step_time")
        out["spread"] = st["p100"] / st["p50"] if st and st["p50"] > 0 else math.nan
        return out

    def _label(self, s):
        return s.rank if s.rank is not None else os.path.basename(s.path)

    def _top(self, ok, metric, largest):
        rows = [(self._label(s), getattr(s, metric)) for s in ok if math.isfinite(getattr(s, metric))]
        rows.sort(key=lambda r: -r[1] if largest else r[1])
        return rows[:_OUTLIERS]

    def table(self) -> str:
        """The summary as text: a line per metric (percentiles), the outlier ranks, what failed."""
        s = self.summary()
        head = f"{s['ranks']} rank traces" + (f" (world size {s['world_size']})" if s["world_size"] else "")
        if self.directory:
            head += f" in {self.directory}"
        lines = [head, f"analysed {s['analysed']}, failed {s['failed_count']}, incomplete {s['incomplete_count']}"]
        units = {"step_time": ("step time", 1e-3, "ms"), "exposed_comm_per_step": ("exposed comm/step", 1e-3, "ms"),
                 "comm_time_per_step": ("comm/step", 1e-3, "ms"), "mfu": ("MFU", 0.01, "%"),
                 "attributed_share": ("time in counted ops", 0.01, "%")}
        lines.append(f"{'':22}" + "".join(f"{k:>10}" for k in ("min", "p50", "p90", "p99", "max", "mean")))
        for m, (label, scale, unit) in units.items():
            q = s["metrics"].get(m)
            if q is None:
                lines.append(f"{label + ' (' + unit + ')':22}{'-':>10}")
                continue
            vals = [q["p0"], q["p50"], q["p90"], q["p99"], q["p100"], q["mean"]]
            lines.append(f"{label + ' (' + unit + ')':22}" + "".join(f"{v / scale:>10.3f}" for v in vals))
        if s["metrics"].get("step_time"):
            lines.append(f"slowest step / median step: {s['spread']:.3f}")
        for key, label, scale, unit in (("slowest_step", "slowest step", 1e-3, "ms"),
                                        ("most_exposed_comm", "most exposed comm/step", 1e-3, "ms"),
                                        ("lowest_mfu", "lowest MFU", 0.01, "%")):
            rows = s["outliers"][key]
            if rows:
                lines.append(f"{label}: " + ", ".join(f"{_who(r)} {v / scale:.3f} {unit}" for r, v in rows))
        for r, err in s["failed"].items():
            lines.append(f"FAILED {_who(r)}: {err}")
        if s["failed_count"] > len(s["failed"]):
            lines.append(f"... and {s['failed_count'] - len(s['failed'])} more failed")
        lines.extend(f"NOTE: {p}" for p in s["problems"])
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"<RankSet: {len(self.summaries)} ranks>"

    # ---- full reports, on demand -----------------------------------------------------------------------------
    def report(self, rank):
        """The full report of ``rank`` (its distributedInfo rank, or its position when the traces have none), read
        again from its trace, with ``meta["distributed"]`` from the trace's distributedInfo."""
        for i, s in enumerate(self.summaries):
            if (s.rank if s.rank is not None else i) == rank:
                return _report_of(s, self.device, self.steps)
        raise KeyError(f"no trace of rank {rank}")

    def merged(self) -> MergedReport:
        """Every analysed rank's report in a :class:`roofline.distributed.MergedReport` (reports read one by one, all
        held: for a thousand ranks prefer :meth:`summary`)."""
        reports = [_report_of(s, self.device, self.steps) for s in self.summaries if s.error is None]
        if not reports:
            raise ValueError("merged: no rank trace could be analysed")
        return MergedReport(reports)


def _report_of(s: RankSummary, device, steps):
    if s.error is not None:
        raise ValueError(f"{s.path}: {s.error}")
    r = _load.load_one(s.path, device=device, steps=steps)
    if isinstance(r, list):
        r = r[0]
    if s.rank is not None and not r.meta.get("distributed"):
        r.meta["distributed"] = {"rank": s.rank, "world_size": s.world_size, "backend": s.backend or "unknown"}
    return r


def _who(label) -> str:
    return f"rank {label}" if isinstance(label, int) else str(label)


def _ranges(nums) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8" (the first 20 ranges)."""
    out, i = [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(out[:20]) + (f", ... ({len(out) - 20} more ranges)" if len(out) > 20 else "")


def _directory_loader(path, *, device=None, steps=None, progress=None) -> RankSet:
    return load_ranks(path, device=device, steps=steps, progress=progress)


_load.directory_loader = _directory_loader
