"""The network side of the roofline: which interconnect bandwidth a report's collectives are judged against, and
which records they are."""

from __future__ import annotations

import numpy as np

from roofline._hardware import _roofs
from roofline._datamodel import _collectives, _document


def link(meta: dict, ceilings, source: str):
    """``(bytes/s, note)``: the interconnect bandwidth collectives are judged against
    (:func:`roofline._hardware._roofs.link`)."""
    f = _roofs.link(meta, ceilings, source)
    return f.value, f.note


def network_view(meta: dict, roofs, n_records: int):
    """For the classification: ``(record indices of the collectives, interconnect bytes/s, note, record indices
    of the asynchronous ones)``; the bandwidth is the roofs' interconnect."""
    t = _document.collectives_table(meta, n_records)
    bw, note = roofs.interconnect.value, roofs.interconnect.note
    launched = [r for r, a in zip(t["record"], t["async_op"]) if a]
    return np.asarray(t["record"], dtype=np.int64), bw, note, np.asarray(launched, dtype=np.int64)


def rescaled(meta: dict, gpus, n_records: int) -> dict:
    """A copy of ``meta`` whose collectives run over ``gpus`` ranks: bus bytes re-computed from the message bytes
    (for Report.project)."""
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValueError(f"project: gpus must be an int >= 1, got {gpus!r}")
    t = meta.get("collectives")
    out = dict(meta, projected_gpus=gpus)
    if t:
        _document.collectives_table(meta, n_records)
        t = dict(t)
        t["group_size"] = [gpus] * len(t["record"])
        t["bus_bytes"] = [int(round(m * _collectives.bus_factor(c, gpus)))
                          for c, m in zip(t["collective"], t["message_bytes"])]
        out["collectives"] = t
    return out
