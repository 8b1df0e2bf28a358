"""Where each record of a report sits on its roofline.

:func:`classify` gives each record the peak of its own unit and dtype and the DRAM bandwidth, both read from the
report's roofs (:class:`roofline._hardware._roofs.Roofs`, chosen once by the report: nothing here chooses or
measures ceilings), and runs the roofline arithmetic in C (``_core.classify``, csrc/classify.h);
:class:`Classifier` keeps one report's result.
"""

from __future__ import annotations


import numpy as np

from roofline import _core
from roofline._analysis import _network
from roofline._hardware import _roofs
from roofline._hardware._roofs import FLOAT_DTYPES  # noqa: F401  (the dtypes judged against their own peak)
from roofline._datamodel._records import BOUND_INTERCONNECT, BOUNDS, DTYPE_NAMES  # noqa: F401  (BOUNDS: the bound names)


def as_roofs(roofs, source: str | None = None, meta: dict | None = None) -> _roofs.Roofs:
    """``roofs`` as they are, or the roofs of a Ceilings (or None) with figures of ``source``."""
    if isinstance(roofs, _roofs.Roofs):
        return roofs
    return _roofs.of(roofs, source or "best", meta)


def peaks(records, roofs, source: str | None = None):
    """Per record ``(peak FLOP/s of the record's own unit and dtype, DRAM bandwidth, notes)``: NaN where unknown
    (every record when there are no ceilings); ``notes`` says which figures were substituted or are missing.
    ``roofs``: the report's roofs (or a Ceilings, or None, with ``source``)."""
    roofs = as_roofs(roofs, source)
    n = len(records)
    if roofs.ceilings is None:
        return np.full(n, np.nan), np.full(n, np.nan), []
    unit = (records["matrix_flops"] > 0).astype(np.int64)  # 1 matrix, 0 vector
    key = unit * 256 + records["dtype"].astype(np.int64)
    peak = np.full(n, np.nan)
    notes = set()
    for k in np.unique(key).tolist():
        f = roofs.judged_peak("matrix" if k // 256 else "vector", DTYPE_NAMES.get(k % 256, "unknown"))
        notes.update(x for x in f.note.split("\n") if x)
        peak[key == k] = f.value
    dram = roofs.bandwidth("DRAM")
    if dram.note:
        notes.add(dram.note)
    return peak, np.full(n, dram.value), sorted(notes)


def classify(records, roofs, source: str | None = None, meta: dict | None = None):
    """``(arrays, notes)``: the classification of :meth:`roofline.Report.classification` for ``records`` against
    ``roofs`` (or a Ceilings with figures of ``source``), and the :func:`peaks` notes. The collectives listed in
    ``meta["collectives"]`` are judged by their bus bytes against the interconnect bandwidth (bound
    "interconnect")."""
    roofs = as_roofs(roofs, source, meta)
    peak, bw, notes = peaks(records, roofs)
    flops = records["matrix_flops"].astype(np.float64) + records["vector_flops"].astype(np.float64)
    nbytes = records["bytes_read"].astype(np.float64) + records["bytes_written"].astype(np.float64)
    comm = None
    t = records["t_end"] - records["t_start"]
    if meta and meta.get("collectives"):
        comm, link, link_note, launched = _network.network_view(meta, roofs, len(records))
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
    """One report's per-record classification against its roofs, computed once; ``peak_notes``: which peaks were
    substituted or are missing."""

    __slots__ = ("peak_notes", "_result")

    def __init__(self):
        self.peak_notes: list[str] = []
        self._result = None

    def classification(self, records, roofs, meta: dict) -> dict:
        """The per-record arrays of :func:`classify` (computed on the first call)."""
        if self._result is None:
            self._result, self.peak_notes = classify(records, roofs, meta=meta)
        return self._result
