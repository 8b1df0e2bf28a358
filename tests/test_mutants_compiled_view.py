"""The compiled-kernel views (roofline/_analysis/_compiled_view.py) on kernel rows written here: the defaults of a
kernel that lacks a field, the table's default length, its truncation boundaries and the order of untimed kernels."""

from __future__ import annotations

import math

from _graph import Graph
from roofline._analysis import _compiled_view as cv
from roofline.render import _kernels


def _report(kernels, **extra):
    g = Graph()
    g.call("aten.mm.default", "mm", [(1, 400)], [(2, 400)], matrix=2000, t=1e-6)
    r = g.report()
    r.meta["compiled"] = dict({"kernels": kernels, "graphs": 1, "graph_calls": 1, "graph_breaks": 0}, **extra)
    return r


def _kernel(name, **kw):
    k = {"name": name, "phase": "forward", "calls": 1, "vector_flops": 10, "bytes_read": 40, "bytes_written": 8}
    k.update(kw)
    return k


def _body(table):
    return table.splitlines()[1:-1]


def test_kernel_rows_missing_byte_counts_are_zero():
    # a kernel without a read (or write) count adds nothing for it: bytes = the other count alone
    no_read = {"name": "w", "phase": "forward", "calls": 1, "bytes_written": 24}
    no_write = {"name": "r", "phase": "forward", "calls": 1, "bytes_read": 56}
    a, b = cv.kernel_rows(_report([no_read, no_write]))
    assert a["bytes"] == 24
    assert b["bytes"] == 56


def test_fusion_missing_calls_and_counts_are_zero():
    # no recorded calls: the kernel never ran, so it moves no bytes (100 + 20 bytes per call x 0 calls)
    never = {"name": "never", "bytes_read": 100, "bytes_written": 20, "unfused_bytes": 7, "ops": ["aten.add.Tensor"]}
    f = cv.fusion(_report([never]))
    assert (f["compiled_bytes"], f["unfused_bytes"]) == (0, 0)
    # no unfused count: 0 per call, whatever the calls (3 here); no read count: 20 written bytes x 3 calls
    k = {"name": "k", "calls": 3, "bytes_written": 20, "ops": ["aten.add.Tensor"], "module": "m"}
    f = cv.fusion(_report([k]))
    assert f["unfused_bytes"] == 0
    assert f["compiled_bytes"] == 20 * 3
    assert f["by_module"]["m"] == {"unfused_bytes": 0, "compiled_bytes": 60, "saved_bytes": -60}


def test_table_shows_fifteen_kernels_by_default():
    kernels = [_kernel(f"k{i:02d}", bytes_read=100 + i) for i in range(16)]
    lines = _kernels.table(_report(kernels)).splitlines()
    # header, 15 kernels, the graph summary
    assert len(lines) == 1 + 15 + 1
    assert len(_kernels.table(_report(kernels[:14])).splitlines()) == 1 + 14 + 1
    assert len(_kernels.table(_report(kernels), top=None).splitlines()) == 1 + 16 + 1


def test_table_name_of_exactly_the_column_width_is_not_cut():
    # the column is as wide as the longest name (here 6 characters): that name is printed whole
    (line,) = _body(_kernels.table(_report([_kernel("abcdef")])))
    assert line.split()[0] == "abcdef"
    # 48 characters is the widest column: a 48-character name still fits, a 49-character one is cut to 45 + "..."
    (line,) = _body(_kernels.table(_report([_kernel("n" * 48)])))
    assert line.split()[0] == "n" * 48
    (line,) = _body(_kernels.table(_report([_kernel("n" * 49)])))
    assert line.split()[0] == "n" * 45 + "..."


def test_table_fused_ops_cut_past_seventy_characters():
    # one op whose name (less "aten.") is 70 characters: printed whole
    (line,) = _body(_kernels.table(_report([_kernel("k", ops=["aten." + "x" * 70])])))
    assert line.endswith("  " + "x" * 70)
    # 71 characters: cut to 67 and "..."
    (line,) = _body(_kernels.table(_report([_kernel("k", ops=["aten." + "y" * 71])])))
    assert line.endswith("  " + "y" * 67 + "...")
    # 69 characters: whole
    (line,) = _body(_kernels.table(_report([_kernel("k", ops=["z" * 69])])))
    assert line.endswith("  " + "z" * 69)


def test_table_untimed_kernels_after_timed_ones_even_at_zero_time():
    # a kernel timed at 0 s still comes before an untimed one, whatever their bytes (untimed: 10000 B, timed: 2 B)
    timed = _kernel("timed0", bytes_read=1, bytes_written=1, time=0.0)
    untimed = _kernel("untimed", bytes_read=9000, bytes_written=1000)
    names = [ln.split()[0] for ln in _body(_kernels.table(_report([untimed, timed])))]
    assert names == ["timed0", "untimed"]
    # a slow kernel (3 s) comes first, then a fast one (1 ms), then the untimed one
    slow = _kernel("slow", time=3.0)
    fast = _kernel("fast", time=1e-3)
    names = [ln.split()[0] for ln in _body(_kernels.table(_report([untimed, fast, slow])))]
    assert names == ["slow", "fast", "untimed"]
    assert math.isnan(cv.kernel_rows(_report([untimed]))[0]["time"])
