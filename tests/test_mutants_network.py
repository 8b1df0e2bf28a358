"""Tests that pin the network view's link choice and the rescaling of collectives to another rank count
(roofline/_analysis/_network.py): when a projection or a datasheet roofline overrides the measured bus bandwidth,
which measured bandwidths count, and which rank counts ``gpus`` accepts.

These tests pin behaviours that mutation testing found unpinned.

Everything runs on a hand-built two-record report (no torch): record 0 is an all-reduce of 400 message bytes
(400 bus bytes on two ranks), record 1 an add. The H100 SXM's datasheet link is 900 GB/s both ways, i.e.
450e9 B/s per direction; the "measured" bus bandwidths below are chosen to differ from it.
"""

import numpy as np
import pytest

import roofline
from roofline import devices
from roofline._analysis import _network
from roofline._analysis._rollup import OpInfo
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import Report

H100_LINK = 900e9 / 2  # NVLink 4, per direction
OPS = [OpInfo("c10d.allreduce_.default", "c10d.allreduce_", "collective"),
       OpInfo("aten.add.Tensor", "aten.add", "ewise")]
MODULES = [("Global",), ("Global", "Net")]


def h100():
    return roofline.Ceilings.from_datasheet(devices.get("H100 SXM"))


def collectives(names=("all_reduce",), message=(400,), bus=(400,)):
    n = len(names)
    return {"record": list(range(n)), "collective": list(names), "group_size": [2] * n,
            "message_bytes": list(message), "bus_bytes": list(bus), "async_op": [False] * n,
            "uncertain": [False] * n}


def report(busbw=None, ceilings_source=None, table=None):
    """The two-record report, its collective measured over a bus of ``busbw`` bytes/s (None: not measured)."""
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"], rec["module"], rec["dtype"] = [0, 1], [1, 1], DTYPE_CODES["float32"]
    rec["bytes_read"], rec["bytes_written"], rec["vector_flops"] = [400, 800], [400, 400], [0, 100]
    rec["t_start"], rec["t_end"] = [0.0, 1.0], [1.0, 2.0]
    meta = {"collectives": table or collectives()}
    if busbw is not None:
        meta["distributed"] = {"interconnect": {"busbw": busbw}}
    if ceilings_source is not None:
        meta["ceilings_source"] = ceilings_source
    return Report(rec, OPS, MODULES, None, meta, ceilings=h100())


def collective_link(r):
    """The bandwidth the report's collective (record 0) is judged against."""
    return float(r.classification()["link_bw"][0])


# ---- link: which bandwidth a collective is judged against ---------------------------------------------------------

def test_measured_bus_bandwidth_is_used_without_projection():
    # a "best" roofline of an unprojected run: the bus bandwidth measured before the block wins over the datasheet
    assert collective_link(report(busbw=100e9)) == 100e9


def test_any_positive_measured_bandwidth_counts_however_small():
    # the test is "measured > 0", not "> 1": a (slow) half a byte per second is still a measurement
    assert collective_link(report(busbw=0.5)) == 0.5
    assert _network.link({"distributed": {"interconnect": {"busbw": 1}}}, h100(), "best") == (1.0, "")


def test_a_zero_measured_bandwidth_falls_back_to_the_datasheet_link():
    # zero means nothing usable was measured: the device's datasheet link, with the note saying so
    assert collective_link(report(busbw=0)) == H100_LINK
    bw, note = _network.link({"distributed": {"interconnect": {"busbw": 0}}}, h100(), "best")
    assert bw == H100_LINK and "datasheet interconnect" in note


def test_projection_onto_ceilings_uses_the_datasheet_link_not_the_measured_one():
    # projecting onto a Ceilings keeps ceilings_source "best", yet a projected run is judged on the target's
    # datasheet link: the bandwidth measured on the original machine says nothing about the target
    p = report(busbw=100e9).project(h100())
    assert p.meta["ceilings_source"] == "best" and p.meta["projected_to"]
    assert collective_link(p) == H100_LINK
    t = p.records["t_end"][0] - p.records["t_start"][0]
    assert t == pytest.approx(400 / H100_LINK)  # 400 bus bytes over the per-direction NVLink bandwidth
    assert _network.link({"projected_to": "H100 SXM", "distributed": {"interconnect": {"busbw": 100e9}}},
                         h100(), "best") == (H100_LINK, "")


def test_datasheet_roofline_uses_the_datasheet_link_not_the_measured_one():
    # an unprojected run judged on datasheet figures: the link is the datasheet's too, not the measured bus
    assert collective_link(report(busbw=100e9, ceilings_source="datasheet")) == H100_LINK
    assert _network.link({"distributed": {"interconnect": {"busbw": 100e9}}}, h100(), "datasheet") == (H100_LINK, "")


# ---- rescaled: the collectives re-computed for `gpus` ranks --------------------------------------------------------

def test_project_onto_one_gpu_is_accepted():
    # gpus=1 is the smallest valid rank count: an all-reduce then moves nothing over the link (2 (n-1) / n = 0),
    # a broadcast still sends its message once (factor 1)
    r = report(table=collectives(("all_reduce", "broadcast"), (400, 800), (400, 800)))
    p = r.project("H100 SXM", gpus=1)
    t = p.meta["collectives"]
    assert t["group_size"] == [1, 1]
    assert t["bus_bytes"] == [0, 800]
    assert t["message_bytes"] == [400, 800]  # each rank's message stays as measured


def test_rescaled_refuses_fewer_than_one_rank_itself():
    # Report.project checks gpus first; rescaled keeps its own check for any other caller
    meta = {"collectives": collectives()}
    for bad in (0, -1):
        with pytest.raises(ValueError, match="gpus must be an int >= 1"):
            _network.rescaled(meta, bad, 2)
    for bad in (True, 2.0, "2"):
        with pytest.raises(ValueError, match="gpus must be an int >= 1"):
            _network.rescaled(meta, bad, 2)
    out = _network.rescaled(meta, 1, 2)
    assert out["projected_gpus"] == 1 and out["collectives"]["bus_bytes"] == [0]
    assert meta["collectives"]["bus_bytes"] == [400]  # a copy: the report's own table is left alone
