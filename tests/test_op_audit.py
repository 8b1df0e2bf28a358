"""The overload audit (roofline/_counting/_audit.py): every aten and prims overload torch registers has a decision, the
generated table (roofline/_counting/_decisions.py) agrees with the code, and a decision is what measure() does.

A new torch release's new ops fail ``test_every_registered_overload_has_a_decision``: give each a formula or a decision
in ``_audit.HAND``, then regenerate the table (``python -m roofline._counting._audit``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline._counting import _audit, _decisions, _registry  # noqa: E402


@pytest.fixture(scope="module")
def audit():
    # Inductor's own prims are checked where Inductor is already imported (importing it takes seconds); the
    # generated table holds them either way
    return _audit.decide_all(inductor=False)


def test_every_registered_overload_has_a_decision(audit):
    _, undecided = audit
    assert not undecided, (f"{len(undecided)} registered overloads have no cost decision (add a formula, or a decision "
                           f"in roofline/_counting/_audit.py HAND, then python -m roofline._counting._audit): "
                           f"{undecided[:40]}")


def test_the_generated_table_matches_the_code(audit):
    decisions, _ = audit
    stale = {k: (v, _decisions.DECISIONS.get(k)) for k, v in decisions.items() if _decisions.DECISIONS.get(k) != v}
    assert not stale, (f"roofline/_counting/_decisions.py is out of date for {len(stale)} overloads (regenerate it: "
                       f"python -m roofline._counting._audit): {list(stale.items())[:10]}")


def test_the_zero_set_is_the_tables_views_and_metadata():
    from roofline._counting import _zero

    assert _zero.ZERO == {k for k, (cls, _, _) in _decisions.DECISIONS.items() if cls in _audit.ZERO_CLASSES}


def test_counts_by_class_cover_every_overload(audit):
    decisions, _ = audit
    n = _audit.counts(decisions)
    assert sum(n[c] for c in _audit.CLASSES) == len(decisions)
    assert set(decisions) <= set(_decisions.DECISIONS)
    # the audit covers at least the aten overload names torch 2.14 registers (3,113 in a bare process)
    assert sum(1 for k in decisions if k.startswith("aten::")) >= 3000
    # an unknown decision always says why
    assert all(d for cls, d, _ in decisions.values() if cls == "unknown")


def test_every_estimate_names_an_op_with_a_formula():
    """ESTIMATES lists formulas that are estimates: each name has a formula (a stale name would be a claim about
    nothing)."""
    from roofline._counting import _formulas

    missing = [n for n in _audit.ESTIMATES if _registry.table_lookup(n if "::" in n else f"aten::{n}") is None
               and _formulas.OPS.get(n if "::" in n else f"aten::{n}") is None]
    assert not missing


def test_a_view_decision_counts_zero_and_is_not_unknown():
    """aten::_indices of a sparse tensor is a view by its schema (no registry entry): measure counts it as 0 bytes
    and does not list it in unknown_ops; an unknown decision (a test op of torch's suite) stays in unknown_ops."""
    assert _decisions.DECISIONS["aten::_indices.default"][0] == "view"
    assert _registry.lookup("aten::_indices").kind == "zero"
    s = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2)).coalesce()
    with roofline.measure() as r:
        torch.ops.aten._indices.default(s)
    assert "aten._indices.default" not in r.unknown_ops
    assert r.bytes_read == 0 and r.bytes_written == 0
    assert _decisions.DECISIONS["aten::_test_warn_in_autograd.default"][0] == "unknown"
    assert _registry.lookup("aten::_test_warn_in_autograd") is None  # no formula: measure lists it as unknown
