"""``roofline.load_trace``: a PyTorch profiler (Kineto) trace as a :class:`roofline.Report`."""

from __future__ import annotations

import os
import tempfile

from roofline._hardware import _devices as devices
from roofline._hardware._ceilings_model import Ceilings
from roofline.report import Report
from roofline._traces import _build, _events, _read
from roofline._util import _progress, _warn


# The reader of a directory of rank traces, ``f(path, *, device, steps)``: installed by roofline._traces._ranks when it
# is imported (it builds on load_one, so this module cannot import it).
directory_loader = None


def _resolve_device(model, device):
    """``(DeviceSpec or None, note)``: ``device`` (a name of the datasheet table) when given, else the trace's
    ``deviceProperties`` name of the device its kernels ran on."""
    if device is not None:
        if not isinstance(device, str):
            raise TypeError(f"load_trace: device must be a device name (str) or None, got {type(device).__name__}")
        return devices.get(device), f"{device!r} given"
    ids = [d["id"] for d in _build._devices(model)]
    names = [n for n in (model.device_name(i) for i in ids) if n]
    if not names:
        names = [p.get("name") for p in model.device_properties if isinstance(p.get("name"), str)]
    if not names:
        kind = "GPU" if model.kernels else "CPU"
        return None, (f"the trace names no device (no deviceProperties); {kind} time without ceilings: pass "
                      "device='<name>'")
    found = {n: devices.lookup(n) for n in dict.fromkeys(names)}
    known = {n: s for n, s in found.items() if s is not None}
    if not known:
        return None, (f"no datasheet entry for {', '.join(repr(n) for n in found)}: pass device='<name>' "
                      f"(python -m roofline devices lists them)")
    specs = {s.name for s in known.values()}
    name, spec = next(iter(known.items()))
    note = f"{name!r} from deviceProperties"
    if len(specs) > 1:
        note += f"; the trace also names {', '.join(sorted(specs - {spec.name}))}, judged against {spec.name} too"
    return spec, note


def load_one(raw_or_path, *, device=None, steps=None, progress=None):
    """The report of one trace file: ``raw_or_path`` a path (``.json`` or ``.json.gz``) or an open ``RawTrace``
    of the reader. ``device`` and ``steps`` as in :func:`load_trace`; ``progress``: None or a callable taking
    status lines (:func:`load_trace` gives it a bar). A list of reports when ``steps`` lists steps, else one
    report."""
    if isinstance(raw_or_path, (str, bytes, os.PathLike)):
        path = os.fspath(raw_or_path)
        path = path.decode() if isinstance(path, bytes) else path
        raw = _read.open_trace(path)
        try:
            model = _events.build(raw, path, progress)
        finally:
            close = getattr(raw, "close", None)
            if close is not None:
                close()
    else:
        raw = raw_or_path
        path = str(getattr(raw, "path", "") or "")
        model = _events.build(raw, path, progress)
    chosen, how = _build.choose_steps(model, steps)
    spec, note = _resolve_device(model, device)
    if spec is None:
        _warn.warn(f"roofline: {note}")
    calls = _build.Calls(model)
    out = []
    for i, step in enumerate(chosen):
        if progress is not None:
            progress(f"building the report{'s' if len(chosen) > 1 else ''} ({i}/{len(chosen)})")
        ceil = Ceilings.from_datasheet(spec) if spec is not None else None
        out.append(_build.build_report(calls, step, how, spec, note, ceil, os.path.basename(path), Report))
    if not model.has_shapes and calls.nodes:
        _warn.warn(f"roofline: {os.path.basename(path) or 'the trace'} was recorded without shapes "
                   "(record_shapes=False): no FLOPs or bytes, only the time breakdown")
    listed = isinstance(steps, (list, tuple, range))
    return out if listed else out[0]


def load_trace(source, *, device=None, steps=None, progress=None):
    """A PyTorch profiler trace as a :class:`roofline.Report`: every recorded op with its FLOPs and bytes (from
    its recorded shapes, dtypes and arguments) and its measured GPU time (the kernels it launched), on the
    roofline of the device that recorded it. See docs/traces.md.

    ``source``: a Kineto JSON trace (``.json`` or ``.json.gz``, as ``torch.profiler`` with
    ``tensorboard_trace_handler`` or ``export_chrome_trace`` writes it), a ``torch.profiler.profile`` that has
    stopped (its trace is exported to a temporary file and read), or a directory of rank traces (then a
    ``RankSet``: per-rank summaries, percentiles and outlier ranks, each rank's report and their merge on demand;
    ``roofline/_traces/_ranks.py``). ``device``: a device name of the datasheet
    table (``"H100 SXM"``, ``"MI300X"``) to judge the ops against, instead of the trace's ``deviceProperties``.
    ``steps``: None or ``"median"`` (the ``ProfilerStep`` of median duration, or the whole trace when it has
    none), ``"all"`` (every step in one report), a step number, or a list of step numbers (a list of reports,
    one per step).

    ``r.meta["trace"]`` says what the trace held and where its GPU time went: ``device``, ``devices``,
    ``kernel_time`` (seconds of GPU activity in the report's steps), ``attributed_time`` (of it, in ops with FLOPs
    and bytes), ``collective_time``, ``unknown_op_time`` (ops without a formula: ``r.unknown_ops``),
    ``uncounted_op_time`` (ops whose arguments the cost model could not use: ``r.errors``), ``zero_cost_op_time``,
    ``unattributed_time`` and ``unattributed`` (GPU work no op launched, by kernel name: calls, seconds),
    ``step``, ``steps``, ``step_choice``, ``shapes``, ``modules`` and ``problems``.

    ``progress``: a callable that receives short status lines while the trace is read (how much of the file, then
    the reports; for a directory, the ranks done); without it, a progress bar is drawn on stderr when stderr is a
    terminal or a notebook (``ROOFLINE_PROGRESS=0`` turns it off), and nothing is printed otherwise."""
    if progress is not None and not callable(progress):
        raise TypeError(f"load_trace: progress must be a callable taking a str, or None, got "
                        f"{type(progress).__name__}")
    if hasattr(source, "export_chrome_trace") and not isinstance(source, (str, bytes, os.PathLike)):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            source.export_chrome_trace(path)
            return _with_bar(load_one, path, "the profiler's trace", progress, device=device, steps=steps)
    if not isinstance(source, (str, bytes, os.PathLike)):
        raise TypeError(f"load_trace: source must be a path or a stopped torch.profiler.profile, got "
                        f"{type(source).__name__}")
    path = os.fspath(source)
    if os.path.isdir(path):
        if directory_loader is None:
            raise ValueError(f"load_trace: {path} is a directory, and no reader of rank directories is installed: "
                             "pass one trace file")
        return _with_bar(directory_loader, path, f"the rank traces of {os.path.basename(os.path.normpath(path))}",
                         progress, device=device, steps=steps)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_trace: no such file: {path}")
    return _with_bar(load_one, path, os.path.basename(path), progress, device=device, steps=steps)


def _with_bar(load, path, what, progress, **kwargs):
    """``load(path, progress=..., **kwargs)`` with ``progress``, or with a bar (``roofline._util._progress``) drawn
    while it runs where stderr is a terminal or a notebook."""
    if progress is not None:
        return load(path, progress=progress, **kwargs)
    bar = _progress.auto(f"reading {what}")
    if bar is None:
        return load(path, progress=None, **kwargs)
    try:
        out = load(path, progress=bar, **kwargs)
    except BaseException:
        bar.close("stopped")
        raise
    bar.close()
    return out
