"""The collectives' vocabulary: the collectives a report names, the columns of its collectives table
(``meta["collectives"]``), and nccl-tests' bus-bandwidth factor of each. The dispatch mode's table of c10d ops
(roofline/_capture/_collectives.py), the document schema and the interconnect classification all use these."""

from __future__ import annotations

from roofline._util import _ints

# collective -> its bus-bandwidth factor over n ranks (nccl-tests' convention: bus bytes = message bytes x factor)
_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "p2p": lambda n: 1.0,
    "barrier": lambda n: 0.0,
    "wait": lambda n: 0.0,
}
KINDS = tuple(_FACTORS)
COLUMNS = ("record", "collective", "group_size", "message_bytes", "bus_bytes", "async_op", "uncertain")


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``collective`` over ``n`` ranks: ``2(n-1)/n`` for "all_reduce",
    ``(n-1)/n`` for "all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", 1 for "broadcast",
    "reduce", "send", "recv", "p2p", 0 for "barrier" and "wait". Bus bytes = message bytes x factor."""
    n = _ints.count(n, "n", "bus_factor", 1)  # the group size
    if collective not in _FACTORS:
        raise ValueError(f"bus_factor: unknown collective {collective!r}")
    return _FACTORS[collective](n)
