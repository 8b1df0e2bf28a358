"""Which ceilings a report is judged against, and where each of its records sits on that roofline.

:func:`resolve_ceilings` turns what ``measure`` was given (``"measured"``, ``"datasheet"``, a device name or a
:class:`roofline.Ceilings`) into ceilings (importing torch only for a CUDA device's name); :func:`classify` gives
each record the peak of its own unit and dtype and the DRAM bandwidth and runs the roofline arithmetic in C
(``_core.classify``, csrc/classify.h); :class:`Classifier` does both once per report and keeps the result.
"""

from __future__ import annotations

import math
import os

import numpy as np

from roofline import _core, devices
from roofline.analysis import _network
from roofline.hardware import _ceilings as _ceil
from roofline.hardware._ceilings import CeilingNotAvailable
from roofline.util._warn import warn
from roofline.model._records import BOUND_INTERCONNECT, BOUNDS, DTYPE_NAMES  # noqa: F401  (BOUNDS: the bound names)

# collectives: judged against the interconnect bandwidth (roofline/distributed.py), never DRAM
# dtypes judged against their own peak; other (integer, bool) work is judged against the fp32 vector rate
FLOAT_DTYPES = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                "float8_e5m2fnuz", "complex64", "complex128", "complex32"}


def resolve_ceilings(spec, meta: dict):
    """``(ceilings or None, source, note)`` for a report whose ``meta`` names the devices its ops ran on.

    ``spec``: ``"measured"`` (the figures of the device the ops ran on: when a CPU's measurement in this run is
    under contention, the stable yardstick instead, :func:`roofline.hardware._ceilings.stable`: the last idle
    measurement of this machine, else its theoretical peak), ``"datasheet"`` (a GPU's datasheet; a CPU's measured
    figures), ``"theoretical"`` (a CPU's theoretical peak from its cores, clock and SIMD width; a GPU's datasheet),
    the path of saved ceilings (``python -m roofline ceilings --save PATH``, ``Ceilings.to_json``), a device name
    from :mod:`roofline.devices` (its datasheet), or a Ceilings (used as given, with ``meta["ceilings_source"]``,
    default "best"). None of a device's own for meta or fake tensors (``note`` says why). ``source`` is which
    figures of the ceilings the roofline uses ("measured" when there are none); the ceilings' ``info["yardstick"]``
    says what a stand-in is. TypeError for anything else."""
    if isinstance(spec, _ceil.Ceilings):
        return spec, meta.get("ceilings_source", "best"), ""
    devs = meta.get("devices") or []
    device = next((d for d in devs if d.startswith("cuda")), "cpu" if "cpu" in devs else None)
    if "meta" in devs or "fake" in devs:
        device = None  # counted without running: only a projection has ceilings
    if spec in _ceil.YARDSTICKS:
        if device is None:
            return None, "measured", (f"ops ran on {', '.join(devs) or 'no device'}: no ceilings to judge them "
                                      "against; use r.project('<device>')")
        if spec in ("datasheet", "theoretical") and device.startswith("cuda"):
            import torch

            name = torch.cuda.get_device_name(torch.device(device))
            ds = devices.lookup(name)
            if ds is None:
                warn(f"roofline: no datasheet entry for {name!r}; using measured ceilings")
            else:
                return _ceil.Ceilings.from_datasheet(ds, device=device), "datasheet", ""
        if spec == "theoretical":
            try:
                return _ceil.theoretical(), "best", ""
            except CeilingNotAvailable as e:
                return None, "measured", f"no theoretical ceilings: {e}"
        try:
            measured = _ceil.ceilings(device)
        except Exception as e:  # a GPU without NVRTC, say: say so, and keep the counts usable
            return None, "measured", f"ceilings of {device} unavailable: {e}"
        if spec == "measured" and device == "cpu" and measured.info.get("busy"):
            try:
                stand_in = _ceil.stable(measured)
            except CeilingNotAvailable:
                stand_in = measured  # no clock to compute a peak from: the contended figures, flagged
            return stand_in, "best" if stand_in.info.get("yardstick", {}).get("kind") == "theoretical" else \
                "measured", ""
        return measured, ("measured" if spec == "measured" else "datasheet"), ""
    if isinstance(spec, str) and (spec.endswith(".json") or os.sep in spec or os.path.isfile(spec)):
        if device is None:
            return None, "measured", (f"ops ran on {', '.join(devs) or 'no device'}: no ceilings to judge them "
                                      "against; use r.project('<device>')")
        saved = _ceil.load_file(spec)
        if saved is None:
            return None, "measured", f"the saved ceilings {spec} could not be read"
        saved.info["yardstick"] = {"kind": "file", "path": spec, "measured_at": saved.timestamp}
        return saved, "best", ""
    if isinstance(spec, str):
        return _ceil.Ceilings.from_datasheet(devices.get(spec)), "datasheet", ""
    raise TypeError(f"ceilings must be 'measured', 'datasheet', 'theoretical', the path of saved ceilings, a device "
                    f"name or a Ceilings, got {spec!r}")


def check_spec(spec) -> None:
    """Check a ``ceilings=`` argument before a block runs: "measured", "datasheet", "theoretical", a Ceilings, the
    path of an existing saved-ceilings file, or a datasheet device name (KeyError with close matches); TypeError
    for anything else."""
    if isinstance(spec, _ceil.Ceilings) or spec in _ceil.YARDSTICKS:
        return
    if not isinstance(spec, str):
        raise TypeError(f"ceilings must be 'measured', 'datasheet', 'theoretical', the path of saved ceilings, a "
                        f"device name or a Ceilings, got {type(spec).__name__}")
    if spec.endswith(".json") or os.sep in spec or os.path.isfile(spec):
        if not os.path.isfile(spec):
            raise FileNotFoundError(f"ceilings: no saved ceilings file {spec!r}")
        return
    devices.get(spec)


def peaks(records, ceilings, source: str):
    """Per record ``(peak FLOP/s of the record's own unit and dtype, DRAM bandwidth, notes)``: NaN where unknown
    (every record when ``ceilings`` is None); ``notes`` says which figures were substituted or are missing."""
    n = len(records)
    if ceilings is None:
        return np.full(n, np.nan), np.full(n, np.nan), []

    unit = (records["matrix_flops"] > 0).astype(np.int64)  # 1 matrix, 0 vector
    key = unit * 256 + records["dtype"].astype(np.int64)
    peak = np.full(n, np.nan)
    notes = []
    for k in np.unique(key).tolist():
        u, dt = ("matrix" if k // 256 else "vector"), DTYPE_NAMES.get(k % 256, "unknown")
        int_note = ""
        if u == "matrix" and dt in ("int8", "uint8"):
            # integer matrix products (_int_mm, quantized linears) have their own peak where one was measured or
            # is on the datasheet (VNNI / AMX / tensor cores); else the fp32 rate, and the note says so
            try:
                ceilings.resolve_peak("matrix", "int8", source)
                dt = "int8"
            except (CeilingNotAvailable, ValueError):
                int_note = f"no {source} int8 matrix peak: {dt} matrix products judged against the float32 rate"
                dt = "float32"
        elif dt not in FLOAT_DTYPES:
            dt = "float32"  # integer / bool element-wise work: judged against the fp32 vector rate
        try:
            choice = ceilings.resolve_peak(u, dt, source)
            value = choice.value
            for note in (choice.note, int_note):
                if note:
                    notes.append(note)
        except (CeilingNotAvailable, ValueError) as e:  # e.g. complex or fp8 variants with no ceiling
            value = math.nan
            notes.append(str(e))
        peak[key == k] = value
    bw, note = dram_bandwidth(ceilings, source)
    if note:
        notes.append(note)
    return peak, np.full(n, bw), sorted(set(notes))


def dram_bandwidth(ceilings, source: str) -> tuple[float, str]:
    """``(bytes/s, note)``: the DRAM bandwidth of ``source``; a CPU has no datasheet bandwidth, so the measured one
    then, saying so; NaN with the reason when there is none."""
    try:
        return ceilings.bandwidth("DRAM", source), ""
    except CeilingNotAvailable as e:
        try:
            return ceilings.bandwidth("DRAM", "best"), f"no {source} DRAM bandwidth: using the measured one"
        except CeilingNotAvailable:
            return math.nan, str(e)


def classify(records, ceilings, source: str, meta: dict | None = None):
    """``(arrays, notes)``: the classification of :meth:`roofline.Report.classification` for ``records`` against
    ``ceilings`` (figures of ``source``), and the :func:`peaks` notes. The collectives listed in
    ``meta["collectives"]`` are judged by their bus bytes against the interconnect bandwidth (bound
    "interconnect")."""
    peak, bw, notes = peaks(records, ceilings, source)
    flops = records["matrix_flops"].astype(np.float64) + records["vector_flops"].astype(np.float64)
    nbytes = records["bytes_read"].astype(np.float64) + records["bytes_written"].astype(np.float64)
    comm = None
    t = records["t_end"] - records["t_start"]
    if meta and meta.get("collectives"):
        comm, link, link_note, launched = _network.network_view(meta, ceilings, source, len(records))
        t = t.copy()
        t[launched] = np.nan  # an asynchronous collective's time is its launch, not its transfer
        nbytes[comm] = np.asarray(meta["collectives"]["bus_bytes"], dtype=np.float64)
        judged = bw.copy()
        judged[comm] = link
        if link_note:
            notes = sorted(set(notes) | {link_note})
    else:
        judged = bw
    res = _core.classify(flops, nbytes, t, peak, judged)
    link_bw = np.full(len(records), np.nan)
    if comm is not None:
        res["bound"][comm] = BOUND_INTERCONNECT
        link_bw[comm] = link
    # bw: DRAM for every record; link_bw: the interconnect bandwidth a collective is judged against (NaN elsewhere)
    res["peak"], res["bw"], res["link_bw"], res["flops"], res["bytes"] = peak, bw, link_bw, flops, nbytes
    return res, notes


class Classifier:
    """The ceilings of one report, resolved on first use, and its per-record classification, computed once.

    ``ceilings`` (None until resolved, or when there are none), ``source`` (which of their figures are used),
    ``note`` (why there are none), ``peak_notes`` (which peaks were substituted or are missing)."""

    __slots__ = ("_spec", "ceilings", "source", "note", "peak_notes", "_result")

    def __init__(self, spec):
        self._spec = spec          # what measure was given; None once resolved
        self.ceilings = None
        self.source = "measured"
        self.note = ""
        self.peak_notes: list[str] = []
        self._result = None

    def resolve(self, meta: dict):
        """The ceilings (resolved with the report's ``meta`` the first time), or None."""
        if self.ceilings is None and self._spec is not None:
            spec, self._spec = self._spec, None  # resolved once, failure or not
            self.ceilings, self.source, self.note = resolve_ceilings(spec, meta)
        return self.ceilings

    def classification(self, records, meta: dict) -> dict:
        """The per-record arrays of :func:`classify` (computed on the first call)."""
        if self._result is None:
            ceilings = self.resolve(meta)
            self._result, self.peak_notes = classify(records, ceilings, self.source, meta)
        return self._result
