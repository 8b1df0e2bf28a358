"""The groups a report is read by: the module tree (every module that ran, and the containers above them), one level
of it, and ops or ops with their input shapes; each group with its roofline row. The text and HTML tables, the charts
and :meth:`roofline.Report.analysis` take their groups from here."""

from __future__ import annotations

import math

import numpy as np

from roofline.analysis import _rollup


class Node:
    """One module of the tree (or a container such as a ``ModuleList`` whose children ran but which was never
    called itself): its dotted ``name``, ``depth`` (the root module is 1), the ``row`` of
    :meth:`roofline.Report.analysis` over everything that ran inside it, and its ``children``, most time first."""

    __slots__ = ("name", "depth", "row", "children", "called")

    def __init__(self, name, depth, row, called):
        self.name, self.depth, self.row, self.called, self.children = name, depth, row, called, []

    @property
    def label(self) -> str:
        return self.name.rsplit(".", 1)[-1] if self.depth > 1 else self.name

    def walk(self, max_depth=None):
        """The node and its descendants, depth first (children most time first)."""
        yield self
        if max_depth is None or self.depth < max_depth:
            for c in self.children:
                yield from c.walk(max_depth)


def _time_key(row) -> float:
    t = row["time"] if math.isfinite(row["time"]) else row["t_min"]
    return t if math.isfinite(t) else 0.0


def module_tree(report, phase: str | None = None) -> tuple[list, dict]:
    """``(roots, whole)``: the module tree of a report and the whole-run row. Each module that ran is a node;
    a dotted prefix of a module name that never ran itself (``Net.blocks`` above ``Net.blocks.0`` when
    ``blocks`` is a ``ModuleList``) is a container node whose row covers its children, so the depth of a node is
    the depth of its name and every level of the model is there. Children are ordered most time first (roofline
    time when untimed)."""
    records = report.records
    c = report.classification()
    sel = _rollup.phase_mask(records, phase)
    called = {n for ms in report.module_sets for n in ms if n != "Global"}
    # module-set id -> every node (module or container) it lies in
    members: dict[str, list[int]] = {}
    for mid, ms in enumerate(report.module_sets):
        inside = set()
        for n in ms:
            if n == "Global":
                continue
            parts = n.split(".")
            inside.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        for n in inside:
            members.setdefault(n, []).append(mid)
    nodes = {}
    for name, mids in members.items():
        mask = sel & np.isin(records["module"], mids)
        if mask.any():
            nodes[name] = Node(name, name.count(".") + 1, _rollup.roofline_row(records, mask, c), name in called)
    roots = []
    for name in sorted(nodes, key=lambda n: n.count(".")):
        node = nodes[name]
        parent = nodes.get(name.rsplit(".", 1)[0]) if "." in name else None
        (parent.children if parent is not None else roots).append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: (-_time_key(n.row), -n.row["flops"], n.name))
    roots.sort(key=lambda n: (-_time_key(n.row), -n.row["flops"], n.name))
    whole = _rollup.roofline_row(records, sel, c)
    return roots, whole


def module_level(report, depth: int | None = None, phase: str | None = None) -> list:
    """The modules of one level of the tree: the nodes ``depth`` deep, and the modules shallower than that which
    have no children (so each op inside the model is in at most one of them). ``depth=None``: the shallowest
    level with more than one node (the root's children, usually)."""
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
        raise ValueError(f"depth must be an int >= 1 or None, got {depth!r}")
    roots, _ = module_tree(report, phase)
    if depth is None:
        depth = 1
        level = roots
        while len(level) == 1 and level[0].children:
            level = level[0].children
            depth += 1
    out = []
    for root in roots:
        out += [n for n in root.walk(depth) if n.depth == depth or (n.depth < depth and not n.children)]
    return out


def has_signatures(report) -> bool:
    """Whether the report's records carry shape signatures (``records["sig"]`` into ``report.signatures``)."""
    return bool(getattr(report, "signatures", None)) and "sig" in (report.records.dtype.names or ())


def op_groups(report, by: str = "op", phase: str | None = None) -> dict:
    """``{name: (row, mask)}``: the :meth:`roofline.Report.analysis` row and record mask of each op
    (``by="op"``) or each op and input-shape signature (``by="op_shape"``, named ``"aten.mm.default
    [f32[8,64], f32[64,16]]"``), most time first."""
    records = report.records
    c = report.classification()
    sel = _rollup.phase_mask(records, phase)
    names = report.op_names
    groups = {}
    if by == "op":
        for i in np.unique(records["op"][sel]).tolist():
            groups[names[i]] = sel & (records["op"] == i)
    elif by == "op_shape":
        if not has_signatures(report):
            raise ValueError("by='op_shape' needs shape signatures: this report's records have none (recorded by an "
                             "earlier version?)")
        sigs = report.signatures
        key = records["op"].astype(np.uint64) << np.uint64(32) | records["sig"].astype(np.uint64)
        for k in np.unique(key[sel]).tolist():
            op, sig = k >> 32, k & 0xFFFFFFFF
            text = sigs[sig] if sig < len(sigs) else "?"
            groups[f"{names[op]} [{text}]" if text else names[op]] = sel & (key == k)
    else:
        raise ValueError(f"by must be 'op' or 'op_shape', got {by!r}")
    rows = {n: (_rollup.roofline_row(records, m, c), m) for n, m in groups.items()}
    return dict(sorted(rows.items(), key=lambda kv: (-_time_key(kv[1][0]), -kv[1][0]["flops"], kv[0])))
