"""Tests that pin the merge of per-rank reports (roofline/distributed.py) where mutation testing found it unpinned:
the collectives of one report summed per kind, the compute / communication split of each rank (roofline and
measured times, the exposed share, NaN when a collective has no ceiling and 0.0 when there is none), the merged
per-rank rows, totals, slowest rank and table, the checks that refuse a bad set of ranks, and the argument
checks and data flow of ``gather`` and ``measure_interconnect``.

Everything runs in this process on hand-built reports. ``gather`` and ``measure_interconnect`` run against a
stand-in for ``torch.distributed`` (class ``World`` below): this process plays one rank, the other ranks' payloads
are written out by the test, and the clock is scripted, so every figure is exact. The real multi-process runs are
in tests/test_distributed.py.

The H100 SXM datasheet ceilings judge every report: a collective's roofline time is its bus bytes over the NVLink
bandwidth per direction (450e9 B/s), an element-wise op's is its bytes over DRAM (3.35e12 B/s; its few FLOPs
take far less at the 67 TFLOP/s float32 vector peak).
"""

import dataclasses
import datetime
import json
import math
import types

import numpy as np
import pytest

import roofline
from roofline import devices
from roofline import distributed as rd
from roofline._analysis._rollup import OpInfo
from roofline._hardware import _interconnect
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import SCHEMA_VERSION, Report
from roofline._util._version import VERSION

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

NAN = float("nan")
LINK = 450e9   # H100 SXM NVLink, bytes/s per direction
DRAM = 3.35e12  # H100 SXM HBM3, bytes/s
H100 = roofline.Ceilings.from_datasheet(devices.get("H100 SXM"))
NO_LINK = dataclasses.replace(H100, name="some CPU")  # a device without a datasheet link: collectives unjudged

AR, BC, ADD = 0, 1, 2
OPS = [OpInfo("c10d.allreduce_.default", "c10d.allreduce_", "collective"),
       OpInfo("c10d.broadcast_.default", "c10d.broadcast_", "collective"),
       OpInfo("aten.add.Tensor", "aten.add", "ewise")]
KIND = {AR: "all_reduce", BC: "broadcast"}


def report(rows, colls=(), rank=None, world=None, backend="gloo", wall_time=None, ceilings=H100, meta=None):
    """A report of ``rows`` (op, bytes_read, bytes_written, vector_flops, matrix_flops, t_start, t_end); ``colls``
    maps a record to (message bytes, bus bytes, async_op) of its collective (group of 2 ranks)."""
    rec = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (op, br, bw, vf, mf, t0, t1) in enumerate(rows):
        rec[i]["op"], rec[i]["bytes_read"], rec[i]["bytes_written"] = op, br, bw
        rec[i]["vector_flops"], rec[i]["matrix_flops"], rec[i]["t_start"], rec[i]["t_end"] = vf, mf, t0, t1
    rec["dtype"] = DTYPE_CODES["float32"]
    m = dict(meta or {})
    if colls:
        recs = sorted(colls)
        m["collectives"] = {"record": recs, "collective": [KIND[rows[r][0]] for r in recs], "group_size": [2] * len(recs),
                            "message_bytes": [colls[r][0] for r in recs], "bus_bytes": [colls[r][1] for r in recs],
                            "async_op": [colls[r][2] for r in recs], "uncertain": [False] * len(recs)}
    if rank is not None:
        m["distributed"] = {"rank": rank, "world_size": world, "backend": backend}
    return Report(rec, OPS, [("Global",)], wall_time, m, ceilings=ceilings)


# rank 0: a synchronous all-reduce (0.5 s), an add (1 s), an asynchronous broadcast (its launch: 0.25 s), a second
# synchronous all-reduce (0.125 s) and an add with matrix FLOPs (0.0625 s); the records start away from zero so
# that a time is t_end - t_start, nothing else
ROWS0 = [(AR, 4000, 4000, 0, 0, 1.0, 1.5),
         (ADD, 800, 400, 100, 0, 2.0, 3.0),
         (BC, 9000, 0, 0, 0, 3.0, 3.25),
         (AR, 2000, 2000, 0, 0, 4.0, 4.125),
         (ADD, 3350, 0, 0, 1000, 5.0, 5.0625)]
COLLS0 = {0: (4000, 4000, False), 2: (9000, 9000, True), 3: (2000, 2000, False)}
# rank 1: one synchronous all-reduce of 3000 bytes (0.75 s) and one add (2 s)
ROWS1 = [(AR, 3000, 3000, 0, 0, 10.0, 10.75),
         (ADD, 6700, 3350, 50, 7, 11.0, 13.0)]
COLLS1 = {0: (3000, 3000, False)}


def rank0(**kw):
    return report(ROWS0, COLLS0, **kw)


def rank1(**kw):
    return report(ROWS1, COLLS1, **kw)


# ---- one report: collectives and communication -----------------------------------------------------------------

def test_collectives_rows_carry_time_and_link_roofline_time():
    rows = rd.collectives(rank0())
    assert [r["record"] for r in rows] == [0, 2, 3]
    assert [r["collective"] for r in rows] == ["all_reduce", "broadcast", "all_reduce"]
    assert [r["op"] for r in rows] == ["c10d.allreduce_.default", "c10d.broadcast_.default",
                                       "c10d.allreduce_.default"]
    assert [r["time"] for r in rows] == [0.5, 0.25, 0.125]
    assert [r["t_min"] for r in rows] == pytest.approx([4000 / LINK, 9000 / LINK, 2000 / LINK], rel=1e-12)
    assert [r["async_op"] for r in rows] == [False, True, False]


def test_collectives_of_a_report_without_ceilings_have_no_roofline_time():
    rows = rd.collectives(rank0(ceilings=None))
    assert [r["time"] for r in rows] == [0.5, 0.25, 0.125]
    assert all(math.isnan(r["t_min"]) for r in rows)


def test_collectives_of_a_report_without_any_is_empty():
    assert rd.collectives(report([(ADD, 8, 4, 1, 0, 0.0, 1.0)])) == []
    assert rd.communication(report([(ADD, 8, 4, 1, 0, 0.0, 1.0)])) == {}


def test_communication_sums_each_kind_most_bus_bytes_first():
    # all-reduce: 2 calls, 4000 + 2000 bytes, 0.5 + 0.125 s; broadcast: 1 call of 9000 bytes, 0.25 s. The
    # all-reduce comes first in the records, the broadcast first in the result (more bus bytes)
    c = rd.communication(rank0())
    assert list(c) == ["broadcast", "all_reduce"]
    assert {k: {f: v[f] for f in ("calls", "message_bytes", "bus_bytes", "time")} for k, v in c.items()} == {
        "broadcast": {"calls": 1, "message_bytes": 9000, "bus_bytes": 9000, "time": 0.25},
        "all_reduce": {"calls": 2, "message_bytes": 6000, "bus_bytes": 6000, "time": 0.625}}
    assert c["broadcast"]["t_min"] == pytest.approx(9000 / LINK, rel=1e-12)
    assert c["all_reduce"]["t_min"] == pytest.approx(6000 / LINK, rel=1e-12)


def test_communication_order_follows_bus_bytes_not_message_bytes():
    # a 4-rank all-reduce moves 1.5x its message on the bus: 1000 -> 1500 bus bytes beat a 1200-byte broadcast
    r = report([(BC, 1200, 0, 0, 0, 0.0, 1.0), (AR, 1000, 1000, 0, 0, 1.0, 2.0)],
               {0: (1200, 1200, False), 1: (1000, 1500, False)})
    assert list(rd.communication(r)) == ["all_reduce", "broadcast"]


# ---- one rank: compute vs communication --------------------------------------------------------------------------

def test_per_rank_split_roofline_and_measured_times():
    row = rd.MergedReport([rank0(rank=0, world=1)]).per_rank()[0]
    assert row["rank"] == 0 and row["calls"] == 5 and row["wall_time"] is None
    assert row["flops"] == 1100 and row["matrix_flops"] == 1000
    assert row["bytes"] == (4000 + 800 + 9000 + 2000 + 3350) + (4000 + 400 + 2000)
    assert (row["collectives"], row["message_bytes"], row["bus_bytes"]) == (3, 15000, 15000)
    t_comm = 15000 / LINK
    t_compute = (800 + 400 + 3350) / DRAM
    assert row["t_comm"] == pytest.approx(t_comm, rel=1e-12)
    assert row["t_compute"] == pytest.approx(t_compute, rel=1e-12)
    assert row["comm_share"] == pytest.approx(t_comm / (t_comm + t_compute), rel=1e-12)
    assert row["time_compute"] == 1.0 + 0.0625
    assert row["time_comm"] == 0.5 + 0.25 + 0.125
    # the host was held by the synchronous all-reduces only: the asynchronous broadcast's launch is not exposed
    assert row["time_comm_exposed"] == 0.5 + 0.125


def test_exposed_communication_counts_synchronous_calls_only():
    # async all-reduce (4 s launch), sync broadcast (2 s), async broadcast (1 s), an add (8 s)
    r = report([(AR, 8, 8, 0, 0, 1.0, 5.0), (BC, 8, 0, 0, 0, 5.0, 7.0), (BC, 8, 0, 0, 0, 7.0, 8.0),
                (ADD, 8, 8, 1, 0, 8.0, 16.0)],
               {0: (8, 8, True), 1: (8, 8, False), 2: (8, 8, True)})
    row = rd.MergedReport([r]).per_rank()[0]
    assert (row["time_comm"], row["time_comm_exposed"], row["time_compute"]) == (7.0, 2.0, 8.0)


def test_rank_without_collectives_has_zero_communication_time_not_nan():
    r = report([(ADD, 6700, 0, 10, 0, 3.0, 5.0)])
    row = rd.MergedReport([r]).per_rank()[0]
    assert row["t_comm"] == 0.0 and not math.isnan(row["t_comm"])
    assert row["t_compute"] == pytest.approx(6700 / DRAM, rel=1e-12)
    assert row["comm_share"] == 0.0
    assert (row["collectives"], row["message_bytes"], row["bus_bytes"]) == (0, 0, 0)
    assert (row["time_compute"], row["time_comm"], row["time_comm_exposed"]) == (2.0, 0.0, 0.0)


def test_collective_without_a_link_ceiling_makes_communication_time_unknown():
    # one collective has no roofline time (NaN): the sum of the others would understate it, so it is NaN
    row = rd.MergedReport([rank0(ceilings=NO_LINK)]).per_rank()[0]
    assert math.isnan(row["t_comm"]) and math.isnan(row["comm_share"])
    assert row["t_compute"] == pytest.approx((800 + 400 + 3350) / DRAM, rel=1e-12)
    assert row["time_comm"] == 0.875  # the measured times do not need a ceiling
    c = rd.communication(rank0(ceilings=NO_LINK))
    assert math.isnan(c["all_reduce"]["t_min"]) and c["all_reduce"]["time"] == 0.625


def test_report_without_ceilings_has_no_roofline_split():
    row = rd.MergedReport([rank0(ceilings=None)]).per_rank()[0]
    assert math.isnan(row["t_compute"]) and math.isnan(row["t_comm"]) and math.isnan(row["comm_share"])
    assert row["time_comm"] == 0.875 and row["time_compute"] == 1.0625


def test_untimed_report_has_no_measured_split():
    rows = [(op, br, bw, vf, mf, NAN, NAN) for op, br, bw, vf, mf, _, _ in ROWS0]
    row = rd.MergedReport([report(rows, COLLS0)]).per_rank()[0]
    assert all(math.isnan(row[k]) for k in ("time_compute", "time_comm", "time_comm_exposed"))
    assert row["t_comm"] == pytest.approx(15000 / LINK, rel=1e-12)


def test_comm_share_of_an_infinite_compute_time_is_unknown():
    # a DRAM bandwidth so small that the add's roofline time overflows: the share of a finite communication time in
    # an infinite total is not 0, it is unknown
    from roofline._hardware._ceilings import Ceiling

    tiny = dataclasses.replace(H100, bandwidths={"DRAM": Ceiling(measured=None, datasheet=5e-324, method="test")})
    row = rd.MergedReport([report([(AR, 400, 400, 0, 0, 0.0, 1.0), (ADD, 1000, 0, 0, 0, 1.0, 2.0)],
                                  {0: (400, 400, False)}, ceilings=tiny)]).per_rank()[0]
    assert row["t_compute"] == math.inf and row["t_comm"] == pytest.approx(400 / LINK, rel=1e-12)
    assert math.isnan(row["comm_share"])


def test_comm_share_of_long_roofline_times():
    # totals above one second still give a share: 2.25e12 bus bytes = 5 s on the link, 3.35e13 DRAM bytes = 10 s
    r = report([(AR, 2_250_000_000_000, 0, 0, 0, 0.0, 1.0), (ADD, 33_500_000_000_000, 0, 0, 0, 1.0, 2.0)],
               {0: (2_250_000_000_000, 2_250_000_000_000, False)})
    row = rd.MergedReport([r]).per_rank()[0]
    assert row["t_comm"] == pytest.approx(5.0, rel=1e-12) and row["t_compute"] == pytest.approx(10.0, rel=1e-12)
    assert row["comm_share"] == pytest.approx(5 / 15, rel=1e-12)


# ---- merged: ranks, totals, slowest rank -------------------------------------------------------------------------

def test_merge_orders_ranks_and_sums_totals():
    r0, r1 = rank0(rank=0, world=2, wall_time=3.0), rank1(rank=1, world=2, wall_time=4.0)
    m = rd.merge([r1, r0])
    assert m.rank_ids == [0, 1] and m.ranks == [r0, r1]
    assert m.world_size == 2 and m.backend == "gloo"
    assert [row["rank"] for row in m.per_rank()] == [0, 1]
    assert m.totals() == {
        "calls": 5 + 2, "matrix_flops": 1000 + 7, "vector_flops": 100 + 50, "special_ops": 0,
        "bytes_read": (4000 + 800 + 9000 + 2000 + 3350) + (3000 + 6700),
        "bytes_written": (4000 + 400 + 2000) + (3000 + 3350),
        "collectives": 3 + 1, "message_bytes": 15000 + 3000, "bus_bytes": 15000 + 3000,
        "flops": 1100 + 57, "bytes": 19150 + 6400 + 9700 + 6350, "ranks": 2}
    assert m.complete and m.incomplete == []
    assert m.slowest_rank() == 1  # 4 s of wall time


def test_totals_of_special_ops_are_summed():
    r0, r1 = rank0(rank=0, world=2), rank1(rank=1, world=2)
    r0.records["special_ops"][1] = 3
    r1.records["special_ops"][1] = 4
    assert rd.merge([r0, r1]).totals()["special_ops"] == 7


def test_ranks_are_sorted_by_their_own_ids_not_the_list_position():
    a, b = rank0(rank=3, world=4, backend="nccl"), rank1(rank=1, world=4, backend="nccl")
    m = rd.merge([a, b])
    assert m.rank_ids == [1, 3] and m.ranks == [b, a] and m.world_size == 4 and m.backend == "nccl"


def test_reports_without_ranks_take_their_position():
    m = rd.merge([rank1(), rank0()])
    assert m.rank_ids == [0, 1] and m.world_size is None and m.backend is None
    assert [row["calls"] for row in m.per_rank()] == [2, 5]


def test_backend_is_read_from_the_lowest_rank():
    m = rd.merge([rank1(rank=1, world=2, backend="nccl"), rank0(rank=0, world=2, backend="gloo")])
    assert m.backend == "gloo"


def test_slowest_rank_is_the_longest_wall_time_when_every_rank_was_timed():
    # rank 0 has the longer roofline time, rank 1 the longer wall time: the wall time decides
    m = rd.merge([rank0(rank=0, world=2, wall_time=1.0), rank1(rank=1, world=2, wall_time=2.0)])
    rows = m.per_rank()
    assert rows[0]["t_comm"] + rows[0]["t_compute"] > rows[1]["t_comm"] + rows[1]["t_compute"]
    assert m.slowest_rank() == 1


def test_slowest_rank_without_wall_times_is_the_longest_roofline_time():
    # compute / communication seconds per rank: (5, 0), (3, 3), (0.5, 6): sums 5, 6, 6.5 -> rank 2 (the
    # difference would pick rank 0, the product rank 1). 3.35e12 DRAM bytes take 1 s, 450e9 bus bytes 1 s
    def rank(r, compute, comm):
        rows = [(ADD, int(compute * DRAM), 0, 0, 0, 0.0, 1.0)]
        colls = {}
        if comm:
            rows.append((AR, 0, 0, 0, 0, 1.0, 2.0))
            colls = {1: (int(comm * LINK), int(comm * LINK), False)}
        return report(rows, colls, rank=r, world=3, wall_time=9.0 if r == 0 else None)

    m = rd.merge([rank(0, 5, 0), rank(1, 3, 3), rank(2, 0.5, 6)])
    assert [round(r["t_compute"], 9) for r in m.per_rank()] == [5, 3, 0.5]
    assert [round(r["t_comm"], 9) for r in m.per_rank()] == [0, 3, 6]
    assert m.slowest_rank() == 2  # rank 0's wall time alone does not count: rank 1 and 2 were not timed


def test_slowest_rank_reads_an_unknown_time_as_zero():
    # rank 1's communication has no ceiling (NaN): only its compute counts
    a = report([(ADD, int(2 * DRAM), 0, 0, 0, 0.0, 1.0)], rank=0, world=2)
    b = report([(ADD, int(1 * DRAM), 0, 0, 0, 0.0, 1.0), (AR, 0, 0, 0, 0, 1.0, 2.0)],
               {1: (int(5 * LINK), int(5 * LINK), False)}, rank=1, world=2, ceilings=NO_LINK)
    assert rd.merge([a, b]).slowest_rank() == 0


# ---- merged: checks of the set of ranks --------------------------------------------------------------------------

def test_merge_refuses_no_reports():
    with pytest.raises(ValueError, match="merge: no reports"):
        rd.merge([])
    with pytest.raises(ValueError, match="merge: no reports"):
        rd.MergedReport([])


def test_merge_refuses_what_is_not_a_list_of_reports():
    with pytest.raises(TypeError, match="expected a list of reports or paths"):
        rd.merge("rank0.json")
    with pytest.raises(TypeError, match="expected a list of reports or paths"):
        rd.merge(5)
    with pytest.raises(TypeError, match="expected a Report or a path, got int"):
        rd.merge([rank0(), 5])
    with pytest.raises(TypeError, match="report 1 is a str, not a roofline.Report"):
        rd.MergedReport([rank0(), "x"])


def test_merge_refuses_a_rank_outside_its_world_naming_the_field():
    with pytest.raises(ValueError, match=r"report 1 of 2: meta\.distributed"):
        rd.merge([rank0(rank=0, world=2), rank1(rank=2, world=2)])


def test_merge_refuses_a_version_that_is_not_a_string():
    with pytest.raises(ValueError, match=r"report 0 of 1: meta\.version"):
        rd.merge([rank0(meta={"version": 3})])


def test_merge_refuses_mixed_ranked_and_unranked_reports():
    with pytest.raises(ValueError, match="some reports have a rank and some do not"):
        rd.merge([rank0(rank=0, world=2), rank1()])


def test_merge_refuses_the_same_rank_twice():
    with pytest.raises(ValueError, match=r"two reports claim the same rank \(\[1, 1\]\)"):
        rd.merge([rank0(rank=1, world=2), rank1(rank=1, world=2)])


def test_merge_refuses_different_world_sizes():
    with pytest.raises(ValueError, match=r"different world sizes \(\['2', '4'\]\)"):
        rd.merge([rank0(rank=0, world=2), rank1(rank=1, world=4)])
    assert rd.merge([rank0(rank=0, world=4), rank1(rank=1, world=4)]).world_size == 4


def test_merge_refuses_different_versions():
    with pytest.raises(ValueError, match=r"different roofline versions \(\['0.1.0', '0.2.0'\]\)"):
        rd.merge([rank0(meta={"version": "0.1.0"}), rank1(meta={"version": "0.2.0"})])
    m = rd.merge([rank0(meta={"version": "0.1.0"}), rank1(meta={"version": "0.1.0"})])
    assert m.rank_ids == [0, 1]


def test_merge_reads_saved_reports_and_merged_documents(tmp_path):
    p0, p1 = tmp_path / "rank0.json", tmp_path / "rank1.json"
    rank0(rank=0, world=2).to_json(p0)
    rank1(rank=1, world=2).to_json(p1)
    m = rd.merge([str(p1), p0])
    assert m.rank_ids == [0, 1] and m.world_size == 2
    assert m.totals()["message_bytes"] == 18000 and m.totals()["calls"] == 7
    both = tmp_path / "merged.json"
    both.write_text(json.dumps(m.to_dict()))
    assert m.to_dict()["format"] == "roofline-merged"
    again = rd.merge([both])
    assert again.rank_ids == [0, 1] and again.totals() == m.totals()


def test_merge_refuses_a_merged_document_without_a_list_of_ranks(tmp_path):
    p = tmp_path / "merged.json"
    p.write_text(json.dumps({"format": "roofline-merged", "ranks": {"0": {}}}))
    with pytest.raises(ValueError, match="ranks must be a list of reports"):
        rd.merge([p])
    p.write_text(json.dumps({"format": "roofline-merged", "ranks": [{}]}))
    with pytest.raises(ValueError, match=r"ranks\[0\]"):
        rd.merge([p])


# ---- merged: the table ---------------------------------------------------------------------------------------------

def cells(line):
    return line.split()


def test_table_cells_are_scaled_exactly():
    # large counts so that a scale off by 0.1 (1e9 + 0.1, 1e6 + 0.1) moves a printed digit
    flops = 123_456_789_012_345_678
    read, written = 100_000_000_000_000, 23_456_789_000_000
    msg = 98_765_432_100_000
    big = report([(ADD, read, written, flops, 0, 0.0, 1.0), (AR, 0, 0, 0, 0, 1.0, 2.0)], {1: (msg, msg, False)},
                 rank=0, world=2, wall_time=1.5)
    small = report([(ADD, 8, 4, 1, 0, 0.0, 1.0)], rank=1, world=2, ceilings=None)
    m = rd.merge([big, small])
    lines = str(m).splitlines()
    assert lines[0] == "2 ranks, world size 2, backend gloo"
    assert cells(lines[1]) == ["rank", "wall", "s", "GFLOP", "mem", "MB", "colls", "msg", "MB", "bus", "MB",
                               "t_comp", "ms", "t_comm", "ms", "comm", "%"]
    # here the FLOPs bound the add: 1842.6 s at the 67 TFLOP/s float32 vector peak, against 36.9 s of DRAM bytes
    t_compute = max(flops / 67e12, (read + written) / DRAM)
    t_comm = msg / LINK
    assert cells(lines[2]) == ["0", "1.5000", "123456789.012", "123456789.00", "1", "98765432.100", "98765432.100",
                               f"{t_compute * 1e3:.3f}", f"{t_comm * 1e3:.3f}",
                               f"{100 * t_comm / (t_comm + t_compute):.1f}"]
    # no wall time, no ceilings: dashes, not "nan"; a count of 0 is still a number
    assert cells(lines[3]) == ["1", "-", "0.000", "0.00", "0", "0.000", "0.000", "-", "-", "-"]
    assert lines[4] == ("total: 123456789.012 GFLOP, 123456789.00 MB memory, 1 collectives, 98765432.100 MB messages, "
                        "98765432.100 MB bus")
    assert lines[5] == "slowest rank: 0"
    assert repr(m) == "<MergedReport: 2 ranks>"


def test_table_of_small_figures():
    # rank 0: 1100 FLOPs = 0.0000011 GFLOP, 25550 bytes; 2.5e-8 s of roofline time is 0.000 ms
    m = rd.merge([rank0(rank=0, world=1, wall_time=0.25)])
    lines = str(m).splitlines()
    assert lines[0] == "1 ranks, world size 1, backend gloo"
    assert cells(lines[2])[:7] == ["0", "0.2500", "0.000", "0.03", "3", "0.015", "0.015"]
    assert cells(lines[2])[7:9] == ["0.000", "0.000"]
    share = 100 * (15000 / LINK) / (15000 / LINK + 4550 / DRAM)
    assert cells(lines[2])[9] == f"{share:.1f}"


def test_table_head_without_distributed_meta():
    m = rd.merge([rank0(), rank1()])
    assert str(m).splitlines()[0] == "2 ranks"


def test_table_says_a_rank_is_incomplete():
    r1 = rank1(rank=1, world=2, meta={"incomplete": ["2 graph calls not counted"]})
    m = rd.merge([rank0(rank=0, world=2), r1])
    assert not m.complete and m.incomplete == ["rank 1: 2 graph calls not counted"]
    text = str(m)
    assert "[INCOMPLETE: a lower bound]" in text and "INCOMPLETE: rank 1: 2 graph calls not counted" in text
    assert repr(m) == "<MergedReport: 2 ranks, INCOMPLETE>"


# ---- gather and measure_interconnect, against a stand-in process group ------------------------------------------

class Work:
    def __init__(self, world, result=True):
        self.world, self.result = world, result

    def wait(self, timeout=None):
        self.world.waits.append(timeout)
        return self.result


class World:
    """torch.distributed as seen by rank ``rank`` of ``len(others)`` ranks: ``others[i]`` is the payload (bytes)
    rank i sends (ignored for ``rank`` itself, whose payload comes from the call). ``clock``: perf_counter's
    successive readings."""

    def __init__(self, monkeypatch, rank=0, others=(b"",), backend="gloo", world_size=None, clock=()):
        self.rank, self.others, self.backend = rank, list(others), backend
        self.n = world_size if world_size is not None else len(self.others)
        self.waits, self.calls, self.reduced, self.remembered, self.synced = [], [], [], [], []
        self.gather_dst, self.gather_list = None, "unset"
        self.clock = iter(clock)
        for name in ("is_available", "is_initialized"):
            monkeypatch.setattr(dist, name, lambda: True)
        monkeypatch.setattr(dist, "get_rank", lambda group=None: self.rank)
        monkeypatch.setattr(dist, "get_world_size", lambda group=None: self.n)
        monkeypatch.setattr(dist, "get_backend", lambda group=None: self.backend)
        monkeypatch.setattr(dist, "get_global_rank", lambda group, r: 100 + r)
        monkeypatch.setattr(dist, "all_gather", self.all_gather)
        monkeypatch.setattr(dist, "gather", self.gather)
        monkeypatch.setattr(dist, "all_reduce", self.all_reduce)
        monkeypatch.setattr(dist, "barrier", lambda group=None: self.calls.append("barrier"))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: self.synced.append(device))
        monkeypatch.setattr(rd, "time", types.SimpleNamespace(perf_counter=lambda: next(self.clock)))
        monkeypatch.setattr(_interconnect, "remember", lambda *a: self.remembered.append(a))

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        self.calls.append(("all_gather", tensor.device.type, [tuple(t.shape) for t in tensor_list]))
        for i, t in enumerate(tensor_list):
            t[0] = int(tensor[0]) if i == self.rank else len(self.others[i])
        return Work(self) if async_op else None

    def gather(self, tensor, gather_list=None, dst=None, group=None, async_op=False):
        self.calls.append(("gather", tensor.device.type))
        self.gather_dst, self.gather_list = dst, gather_list
        if gather_list is not None:
            for i, t in enumerate(gather_list):
                data = tensor if i == self.rank else torch.frombuffer(bytearray(self.others[i]), dtype=torch.uint8)
                t[: len(data)] = data
        return Work(self) if async_op else None

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        # one process: the sum and the maximum over "all ranks" are the tensor itself
        self.reduced.append((tensor.numel(), tensor.dtype, tensor.device.type, op))


def payload(report, rank, **extra):
    doc = {"format": "roofline-rank-report", "version": VERSION, "schema": SCHEMA_VERSION, "rank": rank}
    doc.update(extra)
    if report is not None:
        doc["report"] = report.to_dict()
    return json.dumps(doc).encode()


def test_gather_on_the_destination_merges_every_rank(monkeypatch):
    w = World(monkeypatch, rank=0, others=[b"", payload(rank1(rank=1, world=2), 1)])
    m = rd.gather(rank0(rank=0, world=2))
    assert isinstance(m, rd.MergedReport) and m.rank_ids == [0, 1]
    assert m.totals()["collectives"] == 4 and m.totals()["calls"] == 7
    # both collectives asynchronous, each waited for the default 120 s; on the CPU for gloo; one size per rank
    assert w.waits == [datetime.timedelta(seconds=120)] * 2
    assert w.calls == [("all_gather", "cpu", [(1,), (1,)]), ("gather", "cpu")]
    assert w.gather_dst == 0 and len(w.gather_list) == 2


def test_gather_off_the_destination_returns_none(monkeypatch):
    w = World(monkeypatch, rank=1, others=[payload(rank0(rank=0, world=2), 0), b""])
    assert rd.gather(rank1(rank=1, world=2), dst=0, timeout=7) is None
    assert w.gather_list is None and w.gather_dst == 0
    assert w.waits == [datetime.timedelta(seconds=7)] * 2


def test_gather_in_a_group_sends_to_the_global_rank_of_dst(monkeypatch):
    w = World(monkeypatch, rank=1, others=[payload(rank0(rank=0, world=2), 0), b""])
    assert rd.gather(rank1(rank=1, world=2), dst=0, group=object()) is None
    assert w.gather_dst == 100  # the stand-in's global rank of group rank 0
    w = World(monkeypatch, rank=1, others=[payload(rank0(rank=0, world=2), 0), b""])
    m = rd.gather(rank1(rank=1, world=2), dst=1, group=object())
    assert w.gather_dst == 101 and m.rank_ids == [0, 1]


def test_gather_carries_nan_in_a_report(monkeypatch):
    # JSON has no NaN: the payload is written with the usual NaN extension, which the reader accepts
    World(monkeypatch, rank=0, others=[b""])
    m = rd.gather(rank0(meta={"unmeasured": NAN}))
    assert math.isnan(m.ranks[0].meta["unmeasured"])


def test_gather_of_something_not_a_report_raises_after_the_collectives(monkeypatch):
    # the other ranks must not be left waiting: the error is raised once the payloads have been exchanged
    w = World(monkeypatch, rank=0, others=[b"", payload(rank1(rank=1, world=2), 1)])
    with pytest.raises(TypeError, match="gather: expected a roofline.Report, got str"):
        rd.gather("report")
    assert [c[0] for c in w.calls] == ["all_gather", "gather"]


def test_gather_names_a_rank_that_sent_an_error(monkeypatch):
    World(monkeypatch, rank=0, others=[b"", payload(None, 1, error="its measure block did not complete")])
    with pytest.raises(RuntimeError, match="gather: rank 1: its measure block did not complete"):
        rd.gather(rank0(rank=0, world=2))


def test_gather_checks_dst(monkeypatch):
    World(monkeypatch, rank=0, others=[b"", payload(rank1(rank=1, world=2), 1)])
    for bad in (-1, 2):  # a rank of the group
        with pytest.raises(ValueError, match=r"^gather: dst must be an int in \[0, 1\], got "):
            rd.gather(rank0(rank=0, world=2), dst=bad)
    for bad in (True, 1.0, None):
        with pytest.raises(TypeError, match=r"^gather: dst must be an int in \[0, 1\], got "):
            rd.gather(rank0(rank=0, world=2), dst=bad)
    assert rd.gather(rank0(rank=0, world=2), dst=1) is None


def test_gather_default_dst_is_rank_zero(monkeypatch):
    World(monkeypatch, rank=0, others=[b""])
    assert rd.gather(rank0()).rank_ids == [0]


@pytest.mark.parametrize("timeout", [0.5, 5, 10 ** 9, 1e9, 1e-9])
def test_gather_accepts_a_timeout_in_range(monkeypatch, timeout):
    w = World(monkeypatch, rank=0, others=[b""])
    assert rd.gather(rank0(), timeout=timeout).rank_ids == [0]
    assert w.waits == [datetime.timedelta(seconds=float(timeout))] * 2


@pytest.mark.parametrize("timeout", [0, 0.0, -1, -1.0, 10 ** 9 + 1, 1.5e9, 10 ** 400, math.inf, NAN])
def test_gather_refuses_a_timeout_out_of_range(timeout):
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds"):
        rd.gather(rank0(), timeout=timeout)


@pytest.mark.parametrize("timeout", [True, "5", None])
def test_gather_refuses_a_timeout_that_is_not_a_number(timeout):
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        rd.gather(rank0(), timeout=timeout)


def test_gather_needs_a_process_group(monkeypatch):
    monkeypatch.setattr(dist, "is_available", lambda: False)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="no torch.distributed process group"):
        rd.gather(rank0())
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    with pytest.raises(RuntimeError, match="no torch.distributed process group"):
        rd.gather(rank0())


def test_wait_results():
    w = types.SimpleNamespace(waits=[])
    assert rd._wait(Work(w, True), 3, "the reports", 3) is None
    assert rd._wait(Work(w, None), 3, "the reports", 3) is None  # some backends return nothing
    with pytest.raises(RuntimeError, match="the reports did not arrive from every rank within 3 s"):
        rd._wait(Work(w, False), 3, "the reports", 3)

    class Failing:
        def wait(self, timeout=None):
            raise RuntimeError("peer closed")

    with pytest.raises(RuntimeError, match="within 2.5 s .*: peer closed"):
        rd._wait(Failing(), 2.5, "the payload sizes", 2.5)


def test_payload_of_each_kind_of_argument():
    doc, err = rd._payload(None, 3)
    assert err is None and doc["error"] == "no report (None) was passed" and doc["rank"] == 3
    doc, err = rd._payload(5, 1)
    assert isinstance(err, TypeError) and doc["error"] == "gather: expected a roofline.Report, got int"
    doc, err = rd._payload(rank0(), 0)
    assert err is None and "error" not in doc and doc["format"] == "roofline-rank-report"
    assert Report.from_dict(doc["report"]).records.shape == (5,)


def docs(*reports, heads=None):
    out = []
    for i, r in enumerate(reports):
        d = {"format": "roofline-rank-report", "version": VERSION, "schema": SCHEMA_VERSION, "rank": i,
             "report": r.to_dict()}
        if heads is not None:
            d["version"], d["schema"] = heads[i]
        out.append(d)
    return out


def test_merge_payloads_of_matching_versions():
    m = rd._merge_payloads(docs(rank0(rank=0, world=2), rank1(rank=1, world=2)))
    assert m.rank_ids == [0, 1]
    # payloads without a version or schema (None) agree with each other
    d = docs(rank0(), rank1())
    for x in d:
        del x["version"], x["schema"]
    assert rd._merge_payloads(d).rank_ids == [0, 1]


def test_merge_payloads_refuses_different_versions():
    with pytest.raises(ValueError, match=r"different roofline versions \(version 1.0 schema 1: ranks \[0\]; "
                                         r"version 2.0 schema 1: ranks \[1\]\)"):
        rd._merge_payloads(docs(rank0(), rank1(), heads=[("1.0", 1), ("2.0", 1)]))


def test_merge_payloads_refuses_what_is_not_a_rank_report():
    good = docs(rank0())[0]
    with pytest.raises(ValueError, match="rank 1 sent something that is not a roofline rank report"):
        rd._merge_payloads([good, {"format": "roofline-merged", "report": good["report"]}])
    with pytest.raises(ValueError, match="rank 1 sent something that is not a roofline rank report"):
        rd._merge_payloads([good, [good]])
    with pytest.raises(ValueError, match="rank 1 sent a payload whose version or schema is not a str or an int"):
        rd._merge_payloads([good, dict(good, version=[1])])
    with pytest.raises(ValueError, match="the report of rank 1"):
        rd._merge_payloads([good, dict(good, report={"schema": 1})])


def test_merge_payloads_collects_every_error():
    d = docs(rank0(), rank1(), rank0())
    d[0]["error"], d[2]["error"] = "no report (None) was passed", "boom"
    with pytest.raises(RuntimeError, match=r"^gather: rank 0: no report \(None\) was passed; rank 2: boom$"):
        rd._merge_payloads(d)


def interconnect(monkeypatch, durations, world_size=4, **kw):
    """measure_interconnect on the stand-in: each timed all-reduce takes the next of ``durations`` seconds (the clock
    starts at 8 s; durations are powers of two, so every difference is exact)."""
    clock, t = [], 8.0
    for d in durations:
        clock += [t, t + d]
        t += 1.0
    w = World(monkeypatch, world_size=world_size, clock=clock)
    return w, rd.measure_interconnect(**kw)


def test_measure_interconnect_sweep_is_median_and_bus_bandwidth(monkeypatch):
    # 4 ranks: busbw = algbw x 2 x 3 / 4 = 1.5 algbw. Size 4096: 0.25, 0.0625, 0.125 s -> median 0.125 s;
    # size 12: 0.5, 0.5, 0.25 -> 0.5 s
    w, out = interconnect(monkeypatch, [0.25, 0.0625, 0.125, 0.5, 0.5, 0.25], sizes=(4096, 12), iters=3)
    assert out["sweep"] == [{"bytes": 4096, "time": 0.125, "algbw": 32768.0, "busbw": 49152.0},
                            {"bytes": 12, "time": 0.5, "algbw": 24.0, "busbw": 36.0}]
    assert out["busbw"] == 49152.0
    assert (out["backend"], out["world_size"], out["device"]) == ("gloo", 4, "cpu")
    assert "over 4 ranks (gloo), 3 timed runs per size" in out["method"]
    # per size: a warm-up and 3 timed all-reduces of size / 4 float32s, then the max of the 3 times (float64)
    f32, f64 = torch.float32, torch.float64
    mx = dist.ReduceOp.MAX
    assert w.reduced == [(1024, f32, "cpu", None)] * 4 + [(3, f64, "cpu", mx)] + [(3, f32, "cpu", None)] * 4 + \
        [(3, f64, "cpu", mx)]
    assert w.calls == ["barrier"] * 6 and w.synced == []
    assert w.remembered == [("gloo", 4, out)]


def test_measure_interconnect_default_runs_five_times_per_size(monkeypatch):
    w, out = interconnect(monkeypatch, [0.5] * 20)
    assert [s["bytes"] for s in out["sweep"]] == [1 << 12, 1 << 16, 1 << 20, 1 << 22]
    assert w.calls == ["barrier"] * 20
    assert [s["time"] for s in out["sweep"]] == [0.5] * 4


def test_measure_interconnect_in_a_group_is_not_remembered(monkeypatch):
    w, out = interconnect(monkeypatch, [0.5], sizes=[8], iters=1, group=object())
    assert out["sweep"] == [{"bytes": 8, "time": 0.5, "algbw": 16.0, "busbw": 24.0}]
    assert w.remembered == []


def test_measure_interconnect_zero_time_has_no_bandwidth(monkeypatch):
    # a timer too coarse to see the transfer: no bandwidth for that size, the best is taken from the others
    w, out = interconnect(monkeypatch, [0.25, 0.0], sizes=[8, 16], iters=1, world_size=2)
    assert out["sweep"][0] == {"bytes": 8, "time": 0.25, "algbw": 32.0, "busbw": 32.0}
    assert out["sweep"][1]["time"] == 0.0 and math.isnan(out["sweep"][1]["algbw"])
    assert math.isnan(out["sweep"][1]["busbw"]) and out["busbw"] == 32.0


@pytest.mark.parametrize("iters", [0, -1, True, 2.0, "3"])
def test_measure_interconnect_refuses_bad_iters(monkeypatch, iters):
    World(monkeypatch)
    exc = ValueError if type(iters) is int else TypeError  # the package's one int rule (roofline._util._ints)
    with pytest.raises(exc, match="iters must be an int >= 1"):
        rd.measure_interconnect(sizes=[4], iters=iters)


@pytest.mark.parametrize("sizes,exc,match", [
    ([], ValueError, "sizes must be byte counts"), ([0], ValueError, r"sizes\[0\] must be an int >= 4, got 0"),
    ([-4], ValueError, r"sizes\[0\] must be an int >= 4"), ([2], ValueError, r"sizes\[0\] must be an int >= 4"),
    ([3], ValueError, r"sizes\[0\] must be an int >= 4"), ([6], ValueError, "sizes must be byte counts, multiples of 4"),
    ([10], ValueError, "sizes must be byte counts, multiples of 4"), ([4.0], TypeError, r"sizes\[0\] must be an int"),
    ([True], TypeError, r"sizes\[0\] must be an int"), ([8, 5], ValueError, "sizes must be byte counts, multiples of 4"),
])
def test_measure_interconnect_refuses_bad_sizes(monkeypatch, sizes, exc, match):
    World(monkeypatch)
    with pytest.raises(exc, match=match):
        rd.measure_interconnect(sizes=sizes, iters=1)


def test_measure_interconnect_smallest_arguments(monkeypatch):
    # one run of the smallest message, a single float32; 8 bytes on one rank moves nothing on the bus
    w, out = interconnect(monkeypatch, [0.5, 0.5], sizes=[4, 8], iters=1, world_size=1)
    assert [(s["bytes"], s["algbw"], s["busbw"]) for s in out["sweep"]] == [(4, 8.0, 0.0), (8, 16.0, 0.0)]
    assert [r[0] for r in w.reduced] == [1, 1, 1, 2, 2, 1]


def test_measure_interconnect_needs_a_process_group(monkeypatch):
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    with pytest.raises(RuntimeError, match="roofline.measure_interconnect: no torch.distributed process group"):
        rd.measure_interconnect()
