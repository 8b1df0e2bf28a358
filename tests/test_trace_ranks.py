"""A directory of rank traces (roofline/_traces/_ranks.py): per-rank summaries through an executor, the job's summary
(percentiles, outlier ranks), the per-rank reports and their merge. The traces are made here, small, with GPU
intervals placed by hand so that each rank's communication and exposed communication are known by arithmetic. The
1,000-rank directory is in bench/trace_load.py."""

from __future__ import annotations

import json
import math
import pickle
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from roofline.distributed import MergedReport
from roofline._traces import _load, _ranks
from roofline._traces._ranks import RankSet, RankSummary, load_ranks, summarize_rank, union_length

N = 16
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank_trace(rank: int, world: int = N) -> dict:
    """One step of one rank: an mm launching a GEMM kernel on [100, 300] us, and an all-reduce kernel on
    [280, 380 + 10 * rank] us. Communication time 100 + 10 * rank us; exposed (no other kernel running)
    380 + 10 * rank - 300 = 80 + 10 * rank us. The step lasts 1000 + 100 * rank us."""
    args = {"External id": 1, "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"],
            "Input Strides": [[32, 1], [16, 1]], "Concrete Inputs": ["", ""]}
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0,
         "dur": 1000 + 100 * rank},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": args},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
         "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm_f32", "pid": 0, "tid": 7, "ts": 100, "dur": 200,
         "args": {"correlation": 7, "External id": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": NCCL, "pid": 0, "tid": 20, "ts": 280, "dur": 100 + 10 * rank,
         "args": {"device": 0, "stream": 20}},
    ]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory):
    """16 rank traces named as tensorboard_trace_handler names them, the workers' names in an order unrelated to
    their ranks (the rank comes from distributedInfo)."""
    d = tmp_path_factory.mktemp("ranks")
    for rank in range(N):
        worker = f"host{(rank * 7) % N:02d}_{1000 + rank}"
        (d / f"{worker}.{1733300000000000000 + rank}.pt.trace.json").write_text(json.dumps(rank_trace(rank)))
    return d


@pytest.fixture(scope="module")
def rank_set(rank_dir):
    with ThreadPoolExecutor(2) as ex:
        return load_ranks(rank_dir, executor=ex)


def test_each_rank_summary_holds_its_communication_by_arithmetic(rank_set):
    assert [s.rank for s in rank_set.summaries] == list(range(N))
    for s in rank_set.summaries:
        r = s.rank
        assert s.error is None and s.world_size == N and s.backend == "nccl" and s.steps == 1
        assert s.comm_time == pytest.approx((100 + 10 * r) * 1e-6)        # the NCCL kernel's duration
        assert s.exposed_comm == pytest.approx((80 + 10 * r) * 1e-6)      # 380 + 10r - 300
        assert s.kernel_time == pytest.approx((280 + 10 * r) * 1e-6)      # union [100, 380 + 10r]
        assert s.exposed_comm_per_step == s.exposed_comm                  # one step
        assert s.flops == 2 * 64 * 32 * 16                                # the mm: 2*M*N*K
        assert s.device == "H100 SXM"
        assert s.worker.startswith("host")


def test_the_summary_is_percentiles_and_outliers_not_a_line_per_rank(rank_set):
    s = rank_set.summary()
    assert s["ranks"] == s["analysed"] == N and s["failed_count"] == 0 and s["world_size"] == N
    ex = s["metrics"]["exposed_comm_per_step"]
    # exposed comm 80 + 10r us for r = 0..15: min 80, max 230, mean 155; the median of 16 values is the mean of
    # the 8th and 9th (150 and 160) = 155; p90 by linear interpolation at 0.9 * 15 = 13.5: 210 + 0.5 * 10 = 215
    assert ex["p0"] == pytest.approx(80e-6) and ex["p100"] == pytest.approx(230e-6)
    assert ex["p50"] == pytest.approx(155e-6) and ex["mean"] == pytest.approx(155e-6)
    assert ex["p90"] == pytest.approx(215e-6)
    assert [r for r, _ in s["outliers"]["most_exposed_comm"]] == [15, 14, 13, 12, 11]
    assert s["outliers"]["most_exposed_comm"][0][1] == pytest.approx(230e-6)
    assert s["outliers"]["slowest_step"][0][0] == 15  # the step grows with the rank
    text = rank_set.table()
    assert len(text.splitlines()) < 20  # the same length for 16 ranks as for 1,000
    assert "most exposed comm/step: rank 15 0.230 ms" in text


def test_the_merged_view_is_the_existing_merge_with_ranks_from_the_traces(rank_set):
    m = rank_set.merged()
    assert isinstance(m, MergedReport)
    assert m.rank_ids == list(range(N)) and m.world_size == N and m.backend == "nccl"
    assert m.totals()["matrix_flops"] == N * 2 * 64 * 32 * 16
    r = rank_set.report(5)
    assert r.meta["distributed"] == {"rank": 5, "world_size": N, "backend": "nccl"}
    with pytest.raises(KeyError, match="no trace of rank 99"):
        rank_set.report(99)


def test_load_trace_of_a_directory_gives_the_rank_set(rank_dir):
    import roofline
    assert _load.directory_loader is _ranks._directory_loader
    rs = roofline.load_trace(rank_dir)
    assert isinstance(rs, RankSet) and len(rs) == N


def test_the_default_process_pool_gives_the_same_summaries(rank_dir, rank_set):
    rs = load_ranks(rank_dir, max_workers=2)
    assert [s.as_dict() for s in rs.summaries] == [s.as_dict() for s in rank_set.summaries]


class SubmitOnly:
    """An executor with submit alone (as some cluster executors are), running each call where it is submitted."""

    def __init__(self):
        self.calls = 0

    def submit(self, fn, *args):
        self.calls += 1
        f = Future()
        f.set_result(fn(*args))
        return f


def test_any_executor_with_submit_works_and_what_crosses_it_is_small(rank_dir):
    ex = SubmitOnly()
    rs = load_ranks(rank_dir, executor=ex)
    assert ex.calls == N and len(rs) == N
    blob = pickle.dumps(rs.summaries[0])
    assert len(blob) < 2000, len(blob)
    assert pickle.loads(blob) == rs.summaries[0]


def test_a_rank_that_cannot_be_read_or_analysed_is_reported_and_the_others_go_on(tmp_path):
    for rank in (0, 1, 3):
        (tmp_path / f"w{rank}.1.pt.trace.json").write_text(json.dumps(rank_trace(rank, world=4)))
    (tmp_path / "w2.1.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph": "X"')  # truncated, no rank
    (tmp_path / "broken.1.pt.trace.json.gz").write_bytes(b"\x1f\x8bnot gzip")

    def load(raw, *, device=None, steps=None):
        if raw.header.get("distributedInfo", {}).get("rank") == 3:
            for _ in raw.events():
                pass
            raise ValueError("cannot make this rank's report")
        return _load.load_one(raw, device=device, steps=steps)

    with pytest.warns(UserWarning, match="names no device"):  # the truncated trace lost its deviceProperties
        rs = load_ranks(tmp_path, executor=ThreadPoolExecutor(1), load=load)
    by = {s.path.rsplit("/", 1)[1]: s for s in rs.summaries}
    assert "not a valid gzip stream" in by["broken.1.pt.trace.json.gz"].error
    assert by["w3.1.pt.trace.json"].error == "ValueError: cannot make this rank's report"
    assert by["w3.1.pt.trace.json"].rank == 3  # the header was read before the failure
    w2 = by["w2.1.pt.trace.json"]
    assert w2.error is None and not w2.complete and any("truncated" in i for i in w2.issues)
    s = rs.summary()
    assert s["failed_count"] == 2 and s["incomplete_count"] >= 1
    assert any("1 of 4 ranks have no trace here: 2" in p for p in s["problems"]), s["problems"]
    assert "FAILED rank 3: ValueError: cannot make this rank's report" in rs.table()


def test_union_length_against_a_unit_grid():
    """The union of random integer intervals measured by marking a grid of unit cells (a second implementation)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = rng.integers(0, 100, 20)
        e = s + rng.integers(0, 30, 20)
        grid = np.zeros(200, bool)
        for a, b in zip(s, e):
            grid[a:b] = True
        assert union_length(s.astype(float), e.astype(float)) == grid.sum()
    assert union_length(np.array([]), np.array([])) == 0.0


def test_an_empty_directory_and_a_bad_summary_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no trace files"):
        load_ranks(tmp_path)

    class Wrong:
        def map(self, fn, paths):
            return [None for _ in paths]

    (tmp_path / "a.json").write_text(json.dumps(rank_trace(0, 1)))
    with pytest.raises(TypeError, match="not a RankSummary"):
        load_ranks(tmp_path, executor=Wrong())


def test_summaries_of_traces_without_ranks_take_their_order_by_name(tmp_path):
    for i in range(3):
        doc = rank_trace(i, 3)
        del doc["distributedInfo"]
        (tmp_path / f"t{i}.json").write_text(json.dumps(doc))
    rs = load_ranks(tmp_path, executor=ThreadPoolExecutor(1))
    assert [s.rank for s in rs.summaries] == [None] * 3 and rs.world_size is None
    assert rs.report(2).meta.get("distributed") is None
    assert rs.merged().rank_ids == [0, 1, 2]
    assert math.isfinite(rs.summary()["metrics"]["step_time"]["p50"])
    assert isinstance(summarize_rank(tmp_path / "t0.json"), RankSummary)
