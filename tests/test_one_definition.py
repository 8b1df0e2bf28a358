"""Concepts with one definition: MBU of a step (the report's totals and roofline.llm), the colours of the views
(the HTML report, the SVG chart, the matplotlib chart), durations in print(r) and the hints."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import llm  # noqa: E402
from roofline.render import _style  # noqa: E402
from roofline._util import _format  # noqa: E402

H100_DRAM = 3.35e12  # bytes/s, docs/devices.md


def _with_a_collective():
    """A measured step of two ops whose first is taken as an all-reduce (its bus bytes cross the interconnect)."""
    with roofline.measure(ceilings="H100 SXM", timing="op") as r:
        a = torch.ones(100)
        a + 1
    r.meta["collectives"] = {"record": [0], "collective": ["all_reduce"], "group_size": [4], "message_bytes": [400],
                             "bus_bytes": [600], "async_op": [False], "uncertain": [False]}
    return r


def test_mbu_of_a_step_is_the_reports_and_leaves_the_network_bytes_out():
    r = _with_a_collective()
    seconds = 1e-6
    step = llm.step_utilization(r, seconds)
    # the add reads 100 float32 and writes 100: 800 bytes of DRAM; the all-reduce's 600 bus bytes are network
    assert step["bytes"] == 800 and step["network_bytes"] == 600
    assert step["mbu"] == pytest.approx(800 / (seconds * H100_DRAM))
    # the report's totals over the same time give the same figures
    tot = r.totals()
    assert step["mbu"] == pytest.approx(tot["mbu"] * tot["time"] / seconds)
    assert llm.step_utilization(r, tot["time"])["mbu"] == pytest.approx(tot["mbu"])
    assert llm.step_utilization(r, tot["time"])["mfu"] == pytest.approx(tot["mfu"], nan_ok=True)


def test_the_html_and_the_charts_take_their_bound_colours_from_one_table(monkeypatch):
    """Change a bound's colour in the one table: the HTML report, the SVG chart and the matplotlib chart all follow."""
    lin = torch.nn.Linear(256, 256)
    x = torch.randn(512, 256)
    with roofline.measure(lin, ceilings="H100 SXM", timing=None) as r:
        torch.relu(lin(x))
    bounds = {row["bound"] for row in r.analysis().values()}
    assert {"compute", "memory"} <= bounds  # the product is compute-bound on an H100, the relu memory-bound
    mine = {"compute": "#123456", "memory": "#abcdef"}
    for b, c in mine.items():
        monkeypatch.setitem(_style.BOUND_COLORS, b, c)
    svg = r.roofline_chart().svg
    html = r._repr_html_()
    for c in mine.values():
        assert f'fill="{c}"' in svg and c in html
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    fig = r.plot()
    faces = {tuple(round(float(v), 3) for v in c) for ax in fig.axes for coll in ax.collections
             for c in coll.get_facecolors()[:, :3]}
    want = {tuple(round(int(c[i:i + 2], 16) / 255, 3) for i in (1, 3, 5)) for c in mine.values()}
    assert want <= faces


def test_one_duration_format_in_the_summary_and_the_hints():
    """print(r) and the hints write a duration the same way: 0.0012 s is "1.2 ms" in both, never "1.200 ms"."""
    assert _format.dur(0.0012) == "1.2 ms"
    assert _format.dur(5e-6) == "5.00 us"  # below 10 us: two decimals
    assert _format.dur(2.5) == "2.50 s"
    from roofline._analysis import _dataflow, _hints

    assert not hasattr(_hints, "secs") and not hasattr(_dataflow, "secs")


class _Blocks(torch.nn.Module):
    """A ModuleList that is never called itself: ``blocks`` is a container of the modules that ran."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)])
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_one_module_grouping_in_the_roll_ups_the_table_and_the_chart():
    model = _Blocks()
    x = torch.ones(3, 8)
    with roofline.measure(model, ceilings="H100 SXM", timing=None) as r:
        model(x)
    # three addmm calls: 2*3*8*8, 2*3*8*4, 2*3*4*2 matrix FLOPs
    one, two, head = 2 * 3 * 8 * 8, 2 * 3 * 8 * 4, 2 * 3 * 4 * 2
    mods = r.by_module()
    assert mods["_Blocks.blocks.0"]["matrix_flops"] == one and mods["_Blocks.blocks.1"]["matrix_flops"] == two
    # the container is a group of its own: everything that ran inside it
    assert mods["_Blocks.blocks"]["matrix_flops"] == one + two
    assert mods["_Blocks"]["matrix_flops"] == one + two + head == mods["Global"]["matrix_flops"]
    assert set(r.by_module(depth=2)) == {"Global", "_Blocks", "_Blocks.blocks", "_Blocks.head"}
    # analysis(by="module") has the same groups, and the text table shows exactly its rows, container included
    rows = r.analysis("module")
    assert set(rows) == set(mods)
    table = r.table(by="module", top=None).splitlines()
    shown = {ln.split()[0] for ln in table[1:]}
    assert shown == set(rows) - {"Global"}
    assert rows["_Blocks.blocks"]["flops"] == mods["_Blocks.blocks"]["flops"] > one + two  # + the bias adds
    # the chart's module points are the same groups, with the same rows
    from roofline._analysis import _groups

    level = {n.name: n for n in _groups.module_level(r, 2)}
    assert set(level) == {"_Blocks.blocks", "_Blocks.head"}
    for name, node in level.items():
        assert node.row == rows[name]
        assert int(r.records["matrix_flops"][node.mask].sum()) == mods[name]["matrix_flops"]
