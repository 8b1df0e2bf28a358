"""The network side of the roofline: which interconnect bandwidth a report's collectives are judged against, and
which records they are."""

from __future__ import annotations

import math

import numpy as np

from roofline import devices
from roofline.model import _collectives, _document


def link(meta: dict, ceilings, source: str):
    """``(bytes/s, note)``: the interconnect bandwidth collectives are judged against. A projection or a
    datasheet roofline uses the device's datasheet link; otherwise the bus bandwidth measured by
    :func:`roofline.distributed.measure_interconnect` before the block (meta.distributed.interconnect), else the
    datasheet link of the device, else NaN (and a note)."""
    spec = devices.lookup(ceilings.name) if ceilings is not None and getattr(ceilings, "name", None) else None
    datasheet = spec.interconnect_bandwidth if spec is not None else None
    dist_meta = meta.get("distributed")
    link_meta = dist_meta.get("interconnect") if isinstance(dist_meta, dict) else None
    measured = link_meta.get("busbw") if isinstance(link_meta, dict) else None
    if meta.get("projected_to") or source == "datasheet":
        if datasheet:
            return float(datasheet), ""
    elif isinstance(measured, (int, float)) and measured > 0:
        return float(measured), ""
    elif datasheet:
        return float(datasheet), "collectives judged against the datasheet interconnect bandwidth"
    return math.nan, ("no interconnect bandwidth for the collectives: call roofline.distributed."
                      "measure_interconnect() under the process group before measuring, or project to a device")


def network_view(meta: dict, ceilings, source: str, n_records: int):
    """For the classification: ``(record indices of the collectives, interconnect bytes/s, note, record indices
    of the asynchronous ones)``."""
    t = _document.collectives_table(meta, n_records)
    bw, note = link(meta, ceilings, source)
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
