"""Distributed training: collectives recorded with their bytes on the interconnect roofline, DTensor ops counted at
their local shards, rank-aware reports, gather and merge.

The multi-process tests start 2 and 4 CPU ranks with gloo (tests/_dist_worker.py, joined through a file store:
no port to pick, no torchrun) and read back what each rank saw; every run has a deadline, so nothing hangs.
Expected values come from the parameters (gradient and parameter bytes), from FlopCounterMode, and from
single-process runs of the same models on each rank's batch."""

import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import roofline  # noqa: E402
from roofline import distributed as rd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKER = pathlib.Path(__file__).resolve().parent / "_dist_worker.py"


def _launch(tmp, world, scenarios, deadline=100):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(tmp / "store"), str(rank), str(world), str(tmp),
                               ",".join(scenarios)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for rank in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=deadline)[0].decode(errors="replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the {world} ranks did not finish within {deadline} s")
    results = []
    for rank in range(world):
        path = tmp / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote no results:\n{logs[rank][-3000:]}"
        results.append(json.loads(path.read_text()))
    for rank, res in enumerate(results):
        for name, out in res.items():
            assert "error" not in out, f"rank {rank}, {name}:\n{out['error']}"
    return results


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return _launch(tmp_path_factory.mktemp("two"), 2, ["ddp_mlp", "ddp_resnet", "fsdp", "tp", "tp_first_call",
                                                       "api", "errors"])


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return _launch(tmp_path_factory.mktemp("four"), 4, ["ddp_mlp", "fsdp"])


def _by(out, collective):
    return [c for c in out["collectives"] if c["collective"] == collective]


def _no_collective_misjudged(out):
    assert not out["unknown"], out["unknown"]
    assert out["collective_bounds"] and set(out["collective_bounds"]) == {"interconnect"}
    # judged against the H100 SXM's NVLink (450 GB/s per direction), not its 3.35 TB/s DRAM
    assert set(out["collective_bw"]) == {450e9}
    assert out["dram_bw"] == [3.35e12]  # the DRAM column stays DRAM for every record
    assert "fake" not in out["devices"]
    assert out["analysis_bounds"] and set(out["analysis_bounds"].values()) == {"interconnect"}
    # totals: memory bytes are the records' own; the collectives' bus bytes are network bytes
    assert out["totals_bytes"] == out["bytes_read"] + out["bytes_written"]
    assert out["network_bytes"] == sum(c["bus_bytes"] for c in out["collectives"])


# ---- DDP ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["ddp_mlp", "ddp_resnet"])
def test_ddp_two_ranks(two, scenario):
    for rank, res in enumerate(two):
        out = res[scenario]
        assert out["distributed"]["rank"] == rank
        assert out["distributed"]["world_size"] == 2 and out["distributed"]["backend"] == "gloo"
        ar = _by(out, "all_reduce")
        # the reducer's bucketed all-reduce carries every gradient once
        assert sum(c["message_bytes"] for c in ar) == out["grad_bytes"]
        assert all(c["group_size"] == 2 and not c["uncertain"] for c in ar)
        assert all(c["op"] == "c10d.allreduce_.default" and c["phase"] == "backward" for c in ar)
        # 2(n-1)/n = 1 on two ranks
        assert sum(c["bus_bytes"] for c in ar) == out["grad_bytes"]
        # compute: exactly one rank's batch
        assert out["matrix_flops"] == out["ref_matrix_flops"] == out["ref_flop_counter"]
        _no_collective_misjudged(out)
    if scenario == "ddp_resnet":  # BatchNorm buffers are broadcast from rank 0 in the forward
        assert _by(two[0][scenario], "broadcast")


def test_ddp_four_ranks_bus_factor(four):
    for rank, res in enumerate(four):
        out = res["ddp_mlp"]
        ar = _by(out, "all_reduce")
        assert sum(c["message_bytes"] for c in ar) == out["grad_bytes"]
        assert all(c["group_size"] == 4 for c in ar)
        # 2(n-1)/n = 3/2 on four ranks
        assert sum(c["bus_bytes"] for c in ar) == out["grad_bytes"] * 3 // 2
        assert out["matrix_flops"] == out["ref_flop_counter"]
        _no_collective_misjudged(out)


# ---- FSDP2 -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("world", [2, 4])
def test_fsdp2(two, four, world):
    runs = two if world == 2 else four
    for res in runs:
        out = res["fsdp"]
        ag, rs = _by(out, "all_gather"), _by(out, "reduce_scatter")
        # every parameter is gathered for the forward and again for the backward (reshard_after_forward=True)
        assert sum(c["message_bytes"] for c in ag) == 2 * out["param_bytes"]
        assert sum(c["bus_bytes"] for c in ag) == 2 * out["param_bytes"] * (world - 1) // world
        # every gradient is reduce-scattered once
        assert sum(c["message_bytes"] for c in rs) == out["param_bytes"]
        # FSDP2's copies: the shards into the all-gather buffer (twice: forward and backward), the gathered
        # parameters out of it, the gradients into the reduce-scatter input (the sizes divide evenly: no padding)
        fc = out["fsdp_copies"]
        assert fc["fsdp.all_gather_copy_in.default"]["bytes_read"] == 2 * out["param_bytes"] // world
        assert fc["fsdp.all_gather_copy_in.default"]["bytes_written"] == 2 * out["param_bytes"] // world
        assert fc["fsdp.split_with_sizes_copy.default"]["bytes_written"] == 2 * out["param_bytes"]
        assert fc["fsdp.chunk_cat.default"]["bytes_read"] == fc["fsdp.chunk_cat.default"]["bytes_written"] \
            == out["param_bytes"]
        # each rank computes its own batch with the whole (gathered) layers
        assert out["matrix_flops"] == out["ref_matrix_flops"]
        # the optimizer updates the local shards: 1/n of the single-process work
        for k in ("vector_flops", "bytes_read", "bytes_written"):
            assert out["optimizer"][k] * world == out["ref_optimizer"][k], k
        _no_collective_misjudged(out)


# ---- tensor parallel --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["tp", "tp_first_call"])
def test_tensor_parallel_local_shards(two, scenario):
    for res in two:
        out = res[scenario]
        # column- then row-wise: each rank multiplies half of every weight
        assert out["matrix_flops"] * 2 == out["ref_flop_counter"]
        _no_collective_misjudged(out)
        ar = _by(out, "all_reduce")
        assert [c["op"] for c in ar] == ["_c10d_functional.all_reduce.default"]
        if scenario == "tp":  # the row-parallel output (4 x 16 float32) is summed over the ranks
            assert ar[0]["message_bytes"] == out["output_bytes"]
            # DTensor's propagation lock is wrapped only inside the block, and restored after an exception
            assert out["lock_wrapped_inside"] and out["lock_restored"] and out["restored_after_error"]
        assert ar[0]["group_size"] == 2 and ar[0]["bus_bytes"] == ar[0]["message_bytes"]
        assert _by(out, "wait")


def test_process_group_calls(two):
    """Each torch.distributed call on 4,000 bytes per rank, 2 ranks: the collective, its message bytes (the
    nccl-tests size) and bus bytes."""
    expect = [  # (collective, message bytes, bus bytes)
        ("all_reduce", 4000, 4000),          # the tensor; 2(n-1)/n = 1
        ("all_gather", 8000, 4000),          # the gathered output; (n-1)/n = 1/2
        ("reduce_scatter", 4000, 2000),      # the input
        ("all_to_all", 4000, 2000),          # the input
        ("broadcast", 4000, 4000),           # factor 1
        ("all_gather", 8000, 4000),          # the list form
        ("gather", 8000, 4000),              # every rank's input
    ]
    for rank, res in enumerate(two):
        got = [(c["collective"], c["message_bytes"], c["bus_bytes"]) for c in res["api"]["collectives"]]
        p2p = ("send", 4000, 4000) if rank == 0 else ("recv", 4000, 4000)
        assert got == expect + [p2p, ("barrier", 0, 0), ("all_reduce", 4000, 4000)], got
        assert all(c["group_size"] == 2 and not c["uncertain"] for c in res["api"]["collectives"])
        _no_collective_misjudged(res["api"])


# ---- gather and merge -------------------------------------------------------------------------------------------
_SUMMED = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "calls")


@pytest.mark.parametrize("scenario", ["ddp_mlp", "fsdp", "tp"])
def test_gather_totals_are_sums(two, scenario):
    merged = two[0][scenario]["merged_totals"]
    assert two[0][scenario]["merged_ranks"] == [0, 1]
    assert "merged_totals" not in two[1][scenario]  # gather returns None off rank 0
    for k in _SUMMED:
        assert merged[k] == sum(res[scenario][k] for res in two), k
    assert merged["bus_bytes"] == sum(c["bus_bytes"] for res in two for c in res[scenario]["collectives"])
    assert "slowest rank:" in two[0][scenario]["merged_table"]


def test_gather_four_ranks(four):
    merged = four[0]["fsdp"]["merged_totals"]
    assert four[0]["fsdp"]["merged_ranks"] == [0, 1, 2, 3]
    for k in _SUMMED:
        assert merged[k] == sum(res["fsdp"][k] for res in four), k


def test_merge_offline_and_cli(two, capsys, tmp_path):
    from roofline import cli

    paths = [res["ddp_mlp"]["saved"] for res in two]
    m = rd.merge(paths)
    assert m.rank_ids == [0, 1] and m.world_size == 2 and m.backend == "gloo"
    assert m.totals() == two[0]["ddp_mlp"]["merged_totals"]
    rows = m.per_rank()
    assert [r["collectives"] for r in rows] == [len(res["ddp_mlp"]["collectives"]) for res in two]
    assert all(r["t_comm"] > 0 and r["t_compute"] > 0 and 0 < r["comm_share"] < 1 for r in rows)
    assert m.slowest_rank() in (0, 1)
    assert cli.main(["merge", *reversed(paths)]) == 0
    text = capsys.readouterr().out
    assert "2 ranks, world size 2, backend gloo" in text and "slowest rank:" in text
    with pytest.raises(ValueError, match="same rank"):
        rd.merge([paths[0], paths[0]])
    out = tmp_path / "merged.json"
    assert cli.main(["merge", *paths, "-o", str(out)]) == 0
    assert rd.merge([out]).totals() == m.totals()  # the merged document reads back
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 1000)
    assert cli.main(["merge", str(bad)]) == 1
    assert "not a roofline report" in capsys.readouterr().err


def test_gather_errors_are_clear(two):
    r0, r1 = two[0]["errors"], two[1]["errors"]
    assert r0["raised"].startswith("RuntimeError") and "rank 1" in r0["raised"] and "did not complete" in r0["raised"]
    assert r1["raised"] is None
    assert r0["version"].startswith("ValueError") and "0.0.0+other" in r0["version"]
    assert r0["timeout"].startswith("RuntimeError") and "within 3 s" in r0["timeout"]
    assert r0["timeout_s"] < 30


def test_measured_interconnect(two):
    link = two[0]["interconnect"]
    assert link["backend"] == "gloo" and link["world_size"] == 2
    assert [s["bytes"] for s in link["sweep"]] == [4096, 65536]
    for s in link["sweep"]:  # busbw = algbw x 2(n-1)/n = algbw on two ranks
        assert s["busbw"] == pytest.approx(s["algbw"]) and s["algbw"] == pytest.approx(s["bytes"] / s["time"])
    assert link["busbw"] == max(s["busbw"] for s in link["sweep"])
    assert two[0]["ddp_mlp"]["distributed"]["interconnect"]["busbw"] == link["busbw"]


# ---- in one process --------------------------------------------------------------------------------------------
def test_bus_factors():
    assert rd.bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert rd.bus_factor("all_gather", 4) == rd.bus_factor("reduce_scatter", 4) == 3 / 4
    assert rd.bus_factor("all_to_all", 2) == 1 / 2
    assert rd.bus_factor("broadcast", 8) == rd.bus_factor("send", 2) == 1.0
    assert rd.bus_factor("barrier", 8) == 0.0
    with pytest.raises(ValueError, match=r"bus_factor: n must be an int >= 1, got 0"):  # n: the group size
        rd.bus_factor("all_reduce", 0)
    with pytest.raises(ValueError, match="unknown collective"):
        rd.bus_factor("allreduce", 2)


def test_gather_outside_a_process_group():
    with roofline.measure(ceilings="H100 SXM") as r:
        torch.ones(3) * 2
    assert "distributed" not in r.meta and "collectives" not in r.meta
    with pytest.raises(RuntimeError, match="init_process_group"):
        roofline.gather(r)
    with pytest.raises(RuntimeError, match="init_process_group"):
        rd.measure_interconnect()


def test_project_collectives_on_interconnect(two):
    r = roofline.load(two[0]["ddp_mlp"]["saved"])
    p2 = r.project("H100 SXM")
    p8 = r.project("H100 SXM", gpus=8)
    ar = [i for i, c in enumerate(r.meta["collectives"]["collective"]) if c == "all_reduce"]
    rec = [r.meta["collectives"]["record"][i] for i in ar]
    msg = [r.meta["collectives"]["message_bytes"][i] for i in ar]
    t2 = p2.records["t_end"][rec] - p2.records["t_start"][rec]
    t8 = p8.records["t_end"][rec] - p8.records["t_start"][rec]
    for m, a, b in zip(msg, t2, t8):  # bus bytes / 450 GB/s NVLink per direction
        assert a == pytest.approx(m * 1.0 / 450e9)
        assert b == pytest.approx(m * 2 * 7 / 8 / 450e9)
    # compute is projected on the peaks as before: same times outside the collectives
    others = [i for i in range(len(r.records)) if i not in set(r.meta["collectives"]["record"])]
    assert list(p2.records["t_end"][others] - p2.records["t_start"][others]) == pytest.approx(
        list(p8.records["t_end"][others] - p8.records["t_start"][others]))
    with pytest.raises(ValueError, match="gpus"):
        r.project("H100 SXM", gpus=0)


def test_datasheet_interconnect_has_a_source():
    from roofline import devices

    for name in ("H100 SXM", "A100 SXM 80GB", "B200", "V100 SXM2 16GB", "L40S"):
        spec = devices.get(name)
        assert spec.interconnect_bandwidth > 0 and spec.interconnect
        assert "bidirectional" in spec.source("interconnect_bandwidth")
    assert devices.get("H100 SXM").interconnect_bandwidth == 900e9 / 2  # NVLink 4: 900 GB/s both ways


def test_corrupt_collectives_table_is_refused(two):
    doc = json.loads(pathlib.Path(two[0]["ddp_mlp"]["saved"]).read_text())
    doc["meta"]["collectives"]["record"][0] = 10**6
    with pytest.raises(ValueError, match="meta.collectives.record refers to a record beyond"):
        roofline.Report.from_dict(doc)  # refused on load, not later
    doc["meta"]["collectives"]["record"][0] = 0
    doc["meta"]["collectives"]["bus_bytes"] = "x"
    with pytest.raises(ValueError, match="meta.collectives"):
        roofline.Report.from_dict(doc)
    # a report changed after loading is still checked where the table is used
    doc = json.loads(pathlib.Path(two[0]["ddp_mlp"]["saved"]).read_text())
    r = roofline.Report.from_dict(doc)
    r.meta["collectives"]["record"][0] = 10**6
    with pytest.raises(ValueError, match="meta.collectives.record"):
        r.classification()
    r.meta["collectives"]["bus_bytes"] = "x"
    with pytest.raises(ValueError, match="meta.collectives"):
        rd.collectives(r)


def test_no_link_bandwidth_is_flagged_not_dram():
    """A measured CPU report with a collective but no measured interconnect: the collective has no ceiling (NaN,
    a note), it is still 'interconnect', never judged against DRAM."""
    import numpy as np

    with roofline.measure(ceilings="H100 SXM") as r:
        torch.ones(3) * 2
    r.meta["collectives"] = {"record": [0], "collective": ["all_reduce"], "group_size": [2], "message_bytes": [12],
                             "bus_bytes": [12], "async_op": [False], "uncertain": [False]}
    from roofline._analysis._classification import classify

    c, notes = classify(r.records, r.ceilings, "measured", r.meta)  # measured: nothing measured, datasheet link
    assert roofline.report.BOUNDS[int(c["bound"][0])] == "interconnect" and c["link_bw"][0] == 450e9
    assert c["bw"][0] == 3.35e12 and c["t_min"][0] == pytest.approx(12 / 450e9)
    assert "DRAM 3.35 TB/s" in r.summary() or "DRAM 3350" in r.summary()
    assert any("datasheet interconnect" in n for n in notes)
    ceil = roofline.Ceilings.from_datasheet(roofline.devices.get("H100 SXM"))
    ceil = dataclasses.replace(ceil, name="some CPU")  # a device without a datasheet link
    c, notes = classify(r.records, ceil, "measured", r.meta)
    assert roofline.report.BOUNDS[int(c["bound"][0])] == "interconnect"
    assert math.isnan(c["link_bw"][0]) and np.isnan(c["t_min"][0])
    assert any("measure_interconnect" in n for n in notes)


def test_exposed_communication_is_the_blocking_time():
    """With timing="op": an asynchronous collective's time is its launch; the host is held by synchronous
    collectives and waits, which are the exposed communication."""
    with roofline.measure(ceilings="H100 SXM", timing="op") as r:
        a = torch.ones(100)
        a + 1
        a * 2
        a - 3
    r.meta["collectives"] = {"record": [0, 1], "collective": ["all_reduce", "wait"], "group_size": [2, 2],
                             "message_bytes": [400, 0], "bus_bytes": [400, 0], "async_op": [True, False],
                             "uncertain": [False, False]}
    t = r.records["t_end"] - r.records["t_start"]
    row = rd.MergedReport([r]).per_rank()[0]
    assert row["time_comm"] == pytest.approx(t[0] + t[1])
    assert row["time_comm_exposed"] == pytest.approx(t[1])
    assert row["time_compute"] == pytest.approx(t[2:].sum())
    c = r.classification()  # the launch time of the asynchronous one is not its transfer: untimed
    assert math.isnan(c["achieved_bytes"][0]) and c["t_min"][0] == pytest.approx(400 / 450e9)


def test_collective_rows_use_the_link_and_others_dram():
    with roofline.measure(ceilings="H100 SXM", timing="op") as r:
        a = torch.ones(100)
        a + 1
    r.meta["collectives"] = {"record": [0], "collective": ["all_reduce"], "group_size": [4], "message_bytes": [400],
                             "bus_bytes": [600], "async_op": [False], "uncertain": [False]}
    t = r.records["t_end"] - r.records["t_start"]
    rows = r.analysis()
    coll, add = rows["aten.ones.default"], rows["aten.add.Tensor"]
    assert coll["bound"] == "interconnect" and coll["bytes"] == 600 and coll["t_min"] == pytest.approx(600 / 450e9)
    assert coll["mbu"] == pytest.approx(600 / (t[0] * 450e9))   # bus bytes over the NVLink bandwidth
    assert add["mbu"] == pytest.approx(800 / (t[1] * 3.35e12))  # 2 x 400 bytes over the H100's DRAM
    tot = r.totals()
    assert tot["network_bytes"] == 600 and tot["bytes"] == 800


def test_a_torch_without_the_propagation_lock_warns_only_when_a_dtensor_is_met(monkeypatch):
    """Older torch releases have no ShardingPropagator._fake_mode_lock: blocks without DTensor say nothing; the first
    DTensor op of a block warns once."""
    import warnings

    from roofline._capture import _collectives

    prop = pytest.importorskip("torch.distributed.tensor._sharding_prop")
    if "_fake_mode_lock" in prop.ShardingPropagator.__dict__:
        monkeypatch.delattr(prop.ShardingPropagator, "_fake_mode_lock")  # as on the older releases
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with roofline.measure(timing=None) as r:
            torch.ones(3) * 2
    assert len(r.records) >= 1
    dtensor_like = type("DTensor", (), {"__module__": "torch.distributed.tensor._api"})
    assert _collectives.install() is None
    with pytest.warns(UserWarning, match="no _fake_mode_lock"):
        assert _collectives.defer([dtensor_like])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _collectives.defer([dtensor_like])  # once per block


def test_merged_report_carries_an_incomplete_rank():
    reports = []
    for rank in (0, 1):
        with roofline.measure(timing=None) as r:
            torch.ones(4) * 2
        r.meta["distributed"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
        reports.append(r)
    assert rd.merge(reports).complete
    reports[1].meta["incomplete"] = ["1 call of a torch.compile graph compiled before the block not counted"]
    m = rd.merge(reports)
    assert not m.complete and m.incomplete == ["rank 1: 1 call of a torch.compile graph compiled before the block "
                                               "not counted"]
    assert "INCOMPLETE: rank 1" in str(m) and "[INCOMPLETE: a lower bound]" in str(m) and "INCOMPLETE" in repr(m)
