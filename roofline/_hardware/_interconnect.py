"""The interconnect bandwidth measured in this process (:func:`roofline.distributed.measure_interconnect`), kept
per (backend, world size) so that the blocks measured afterwards judge their collectives against it."""

from __future__ import annotations

_MEASURED: dict = {}  # (backend, world_size) -> result of measure_interconnect in this process


def remember(backend: str, world_size: int, result: dict) -> None:
    _MEASURED[(backend, world_size)] = result


def measured_link(pg: dict):
    """The measurement for the process group described by ``pg`` (its ``backend`` and ``world_size``), or None."""
    return _MEASURED.get((pg["backend"], pg["world_size"]))
