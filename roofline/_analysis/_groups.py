"""The groups a report is read by: the module tree (every module that ran, and the containers above them), one level
of it, and ops or ops with their input shapes; each group with its roofline row. The text and HTML tables, the charts
and :meth:`roofline.Report.analysis` take their groups from here."""

from __future__ import annotations

from roofline._analysis import _rollup


class Node:
    """One module of the tree (or a container such as a ``ModuleList`` whose children ran but which was never
    called itself): its dotted ``name``, ``depth`` (the root module is 1), the ``row`` of
    :meth:`roofline.Report.analysis` over everything that ran inside it, and its ``children``, most time first."""

    __slots__ = ("name", "depth", "row", "mask", "children", "called")

    def __init__(self, name, depth, row, mask, called):
        self.name, self.depth, self.row, self.mask, self.called, self.children = name, depth, row, mask, called, []

    @property
    def label(self) -> str:
        return self.name.rsplit(".", 1)[-1] if self.depth > 1 else self.name

    def walk(self, max_depth=None):
        """The node and its descendants, depth first (children most time first)."""
        yield self
        if max_depth is None or self.depth < max_depth:
            for c in self.children:
                yield from c.walk(max_depth)


def module_tree(report, phase: str | None = None) -> tuple[list, dict]:
    """``(roots, whole)``: the module tree of a report and the whole-run row. Its nodes are the module groups of
    :func:`roofline._analysis._rollup.module_members` (every module that ran and every container above one: a
    ``ModuleList`` ``Net.blocks`` above ``Net.blocks.0``), each with the row :meth:`roofline.Report.analysis`
    gives it with ``by="module"``; a node's depth is the depth of its name. Children in
    :func:`roofline._analysis._rollup.sort_rows` order."""
    records = report.records
    c = report.classification()
    called = {n for ms in report.module_sets for n in ms}
    groups = _rollup.group_masks(records, report.op_names, report.module_sets, "module", phase=phase)
    rows = _rollup.sort_rows({n: (_rollup.roofline_row(records, m, c), m) for n, m in groups.items() if n != "Global"})
    nodes = {name: Node(name, name.count(".") + 1, row, mask, name in called) for name, (row, mask) in rows.items()}
    roots = []
    for name, node in nodes.items():  # most time first: each parent's children come out in that order too
        parent = nodes.get(name.rsplit(".", 1)[0]) if "." in name else None
        (parent.children if parent is not None else roots).append(node)
    whole = _rollup.roofline_row(records, _rollup.phase_mask(records, phase), c)
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
    (``by="op"``) or each op and input-shape signature (``by="op_shape"``), in
    :func:`roofline._analysis._rollup.sort_rows` order (the groups of :func:`roofline._analysis._rollup.group_masks`)."""
    if by not in ("op", "op_shape"):
        raise ValueError(f"by must be 'op' or 'op_shape', got {by!r}")
    records = report.records
    c = report.classification()
    sigs = report.signatures if has_signatures(report) else None
    groups = _rollup.group_masks(records, report.op_names, report.module_sets, by, phase=phase, signatures=sigs)
    return _rollup.sort_rows({n: (_rollup.roofline_row(records, m, c), m) for n, m in groups.items()})
