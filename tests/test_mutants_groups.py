"""Tests that pin how the module tree is cut into one level (roofline/_analysis/_groups.py ``module_level``: the
default level, the accepted depths) and when a report counts as carrying shape signatures.

These tests pin behaviours that mutation testing found unpinned.

The hand-built reports (no torch) have these modules, each record's time in brackets:

    Net                 tree:  Net
      Net.a  [1 s]               Net.a        (1 + 5 = 6 s: first among Net's children, most time first)
        Net.a.x  [5 s]             Net.a.x
      Net.b  [2 s]               Net.b        (2 s)

and a one-module model whose only module, Net, has no children.
"""

import json

import numpy as np
import pytest

import roofline
from roofline._analysis import _groups
from roofline._analysis._rollup import OpInfo
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import Report

OPS = [OpInfo("aten.add.Tensor", "aten.add", "ewise"), OpInfo("aten.mul.Tensor", "aten.mul", "ewise")]
TREE = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.a"), ("Global", "Net", "Net.a", "Net.a.x"),
        ("Global", "Net", "Net.b")]


def ceilings():
    return roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                             peaks={("vector", "float32"): roofline.Ceiling(10.0)},
                             bandwidths={"DRAM": roofline.Ceiling(5.0)})


def report(modules, rows, signatures=None):
    """``rows``: (op, module set, seconds, sig) per record, run back to back."""
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    t = 0.0
    for i, (op, mod, secs, sig) in enumerate(rows):
        rec[i]["op"], rec[i]["module"], rec[i]["dtype"], rec[i]["sig"] = op, mod, DTYPE_CODES["float32"], sig
        rec[i]["vector_flops"], rec[i]["bytes_read"], rec[i]["bytes_written"] = 10, 8, 4
        rec[i]["t_start"], rec[i]["t_end"], rec[i]["seq"] = t, t + secs, i
        t += secs
    return Report(rec, OPS, modules, wall_time=t, ceilings=ceilings(), signatures=signatures)


def tree():
    return report(TREE, [(0, 2, 1.0, 0), (1, 3, 5.0, 0), (0, 4, 2.0, 0)])


def one_module():
    return report(TREE[:2], [(0, 1, 1.0, 0), (1, 1, 2.0, 0)])


def names(nodes):
    return [n.name for n in nodes]


# ---- module_level ---------------------------------------------------------------------------------------------------

def test_default_level_is_the_shallowest_with_more_than_one_node():
    # the root alone is skipped; its children are two nodes, so the descent stops there, even though the first of
    # them (Net.a) has children of its own
    assert names(_groups.module_level(tree())) == ["Net.a", "Net.b"]


def test_default_level_of_a_one_module_model_is_that_module():
    # a single root without children: nothing to descend into, the root is the level
    assert names(_groups.module_level(one_module())) == ["Net"]


def test_explicit_depths_from_one():
    r = tree()
    assert names(_groups.module_level(r, 1)) == ["Net"]  # depth 1 (the root) is valid
    assert names(_groups.module_level(r, 2)) == ["Net.a", "Net.b"]
    # deeper than Net.b reaches: Net.b, a leaf, stands in for its branch so each op is in one node
    assert names(_groups.module_level(r, 3)) == ["Net.a.x", "Net.b"]
    assert names(_groups.module_level(one_module(), 1)) == ["Net"]


def test_depth_below_one_or_not_an_int_is_refused():
    r = tree()
    for bad in (0, -1, True, 1.0, "2"):
        with pytest.raises(ValueError, match="depth must be an int >= 1 or None"):
            _groups.module_level(r, bad)


# ---- has_signatures -------------------------------------------------------------------------------------------------

def test_a_report_without_signatures_has_none():
    # every report's records have the `sig` field (zeros when nothing was recorded): the signature table decides
    assert "sig" in tree().records.dtype.names
    assert _groups.has_signatures(tree()) is False
    signed = report(TREE[:2], [(0, 1, 1.0, 0), (1, 1, 2.0, 1)], signatures=["f32[2]", "f32[2], f32[2]"])
    assert _groups.has_signatures(signed) is True


def test_chrome_trace_shows_shapes_only_when_signatures_were_recorded():
    # without a signature table the op slices carry no "shapes" (not a "?" per op)
    def op_args(r):
        events = json.loads(r.to_chrome_trace())["traceEvents"]
        return [e["args"] for e in events if e.get("cat") == "op"]

    plain = op_args(one_module())
    assert len(plain) == 2 and all("shapes" not in a for a in plain)
    signed = op_args(report(TREE[:2], [(0, 1, 1.0, 0), (1, 1, 2.0, 1)], signatures=["f32[2]", "f32[2], f32[2]"]))
    assert [a["shapes"] for a in signed] == ["f32[2]", "f32[2], f32[2]"]
