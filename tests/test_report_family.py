"""One family of reports: Report, SteadyReport and MergedReport save themselves and load back as the class that
saved them, with their fields; a merged report plots, writes HTML and round-trips JSON."""

import json
import pathlib
import statistics
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
import roofline.distributed as rd  # noqa: E402
from roofline.report import BaseReport  # noqa: E402


def _rank(i: int) -> roofline.Report:
    """Rank ``i`` of a made-up two-rank job: an (8, 16) @ (16, 4 + i) product and a relu of its result."""
    a, b = torch.ones(8, 16), torch.ones(16, 4 + i)
    with roofline.measure(ceilings="H100 SXM", timing="op") as r:
        (a @ b).relu()
    r.meta["distributed"] = {"rank": i, "world_size": 2, "backend": "gloo"}
    return r


@pytest.fixture(scope="module")
def ranks():
    return [_rank(0), _rank(1)]


@pytest.fixture(scope="module")
def merged(ranks):
    return rd.MergedReport(list(reversed(ranks)))  # put in rank order by the merge


def test_every_report_is_of_the_family(ranks, merged):
    assert isinstance(ranks[0], BaseReport) and isinstance(merged, BaseReport)
    assert issubclass(roofline.SteadyReport, BaseReport)


def test_a_report_round_trips(ranks, tmp_path):
    r = ranks[0]
    back = roofline.load(r.to_json())
    assert type(back) is roofline.Report
    assert back.matrix_flops == 2 * 8 * 16 * 4  # the product: 2*M*N*K
    assert back.vector_flops == 8 * 4  # relu: one per output element
    assert np.array_equal(back.records, r.records) and back.op_names == r.op_names
    path = tmp_path / "r.json"
    r.to_json(path)
    for source in (path, str(path), bytes(path)):
        assert type(roofline.load(source)) is roofline.Report


def test_a_steady_report_round_trips_with_its_spread(tmp_path):
    model, x = torch.nn.Linear(4, 3), torch.ones(2, 4)
    r = roofline.profile(lambda: model(x), model, warmup=1, repeat=3, timing="op", ceilings="H100 SXM")
    r.to_json(tmp_path / "s.json")
    back = roofline.load(tmp_path / "s.json")
    assert type(back) is roofline.SteadyReport
    # the spread, computed here from the three measured steps (all ran the same ops)
    walls = [s.wall_time for s in r.repeats]
    want_wall = {"min": min(walls), "median": statistics.median(walls), "max": max(walls), "values": walls}
    assert back.spread["wall_time"] == want_wall
    per_op = {}
    for s in r.repeats:
        d = s.records["t_end"] - s.records["t_start"]
        for name in set(s.op_names):
            per_op.setdefault(name, []).append(sum(float(t) for t, op in zip(d, s.records["op"])
                                                   if s.op_names[op] == name))
    want_ops = {n: {"min": min(v), "median": statistics.median(v), "max": max(v)} for n, v in per_op.items()}
    assert set(back.spread["ops"]) == {"aten.addmm.default", "aten.t.default"}
    for n, want in want_ops.items():
        assert back.spread["ops"][n] == pytest.approx(want, rel=1e-12), n
    assert back.meta["steady"]["repeat"] == 3 and back.meta["steady"]["warmup"] == 1
    assert back.steady_line() == r.steady_line()
    assert back.repeats == []  # the per-step reports are not saved


def test_a_profiler_cycle_round_trips_with_its_steps():
    model, x = torch.nn.Linear(4, 3), torch.ones(2, 4)
    p = roofline.profiler(model, schedule=roofline.schedule(wait=1, warmup=1, active=2), ceilings="H100 SXM")
    with p:
        for _ in range(4):
            model(x)
            p.step()
    back = roofline.load(p.reports[0].to_json())
    assert type(back) is roofline.SteadyReport
    assert back.steps == [2, 3] and back.cycle == 0  # step 0 waits, step 1 warms up, steps 2 and 3 are active


def test_a_merged_report_round_trips(merged, ranks, tmp_path):
    assert merged.rank_ids == [0, 1]
    back = roofline.load(merged.to_json())
    assert type(back) is rd.MergedReport
    assert back.rank_ids == [0, 1] and back.world_size == 2 and back.backend == "gloo"
    assert [np.array_equal(a.records, b.records) for a, b in zip(back.ranks, ranks)] == [True, True]
    t = back.totals()
    assert t["matrix_flops"] == 2 * 8 * 16 * 4 + 2 * 8 * 16 * 5  # rank 0: K=16, N=4; rank 1: N=5
    assert t["vector_flops"] == 8 * 4 + 8 * 5 and t["ranks"] == 2
    merged.to_json(tmp_path / "m.json", indent=1)
    assert type(roofline.load(tmp_path / "m.json")) is rd.MergedReport
    assert rd.merge([tmp_path / "m.json"]).rank_ids == [0, 1]  # merge reads the same document
    doc = merged.to_dict()
    doc["ranks"][1]["n_records"] = "x"
    with pytest.raises(ValueError, match=r"ranks\[1\]: corrupt roofline report: n_records"):
        roofline.load(json.dumps(doc))
    with pytest.raises(ValueError, match="schema 1"):
        roofline.load(json.dumps(dict(merged.to_dict(), schema=2)))


def test_the_job_of_a_merged_report_sums_the_ranks(merged):
    job = merged.job()
    mm = job.by_op()["aten.mm.default"]
    assert mm["calls"] == 2 and mm["matrix_flops"] == 1024 + 1280  # 2*8*16*4 and 2*8*16*5
    assert job.wall_time is None and merged.job() is job
    assert "aten.mm.default" in merged.table(by="op")
    assert "aten.mm.default" in merged.table(by="op", rank=1)
    assert "slowest rank:" in merged.table() and "slowest rank:" in str(merged)
    with pytest.raises(ValueError, match="rank must be one of the ranks"):
        merged.table(by="op", rank=7)


def test_a_merged_report_plots_and_writes_html(merged, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    png = tmp_path / "m.png"
    fig = merged.plot(path=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = [line.get_gid() for line in fig.axes[0].get_lines()]
    assert "roof:matrix/float32" in labels  # the job's float32 product against the H100's float32 roof
    assert merged.plot(rank=0) is not None
    page = tmp_path / "m.html"
    text = merged.to_html(page, title="job")
    assert page.read_text() == text
    assert text.startswith("<!DOCTYPE html>") and "<title>job</title>" in text
    assert "2 ranks, world size 2, backend gloo" in text and "aten.mm.default" in text and "<svg" in text
    assert "<table" in merged._repr_html_()


def test_load_tells_a_path_from_text_without_the_disk(ranks, tmp_path, monkeypatch):
    text = ranks[0].to_json()
    monkeypatch.chdir(tmp_path)
    pathlib.Path("{x}.json").write_text(text)
    assert roofline.load("{x}.json").matrix_flops == 1024  # a name that starts with { is still a name
    assert roofline.load("  " + text + "\n").matrix_flops == 1024
    assert roofline.load(bytearray(text.encode())).matrix_flops == 1024
    with pytest.raises(FileNotFoundError):
        roofline.load("[missing].json")
    with pytest.raises(ValueError, match="a JSON object is needed"):
        roofline.load("[1, 2]")  # bracketed: JSON text
    with pytest.raises(ValueError, match="neither"):
        roofline.load("x" * 5000)
    with pytest.raises(TypeError, match="load: expected a path or the JSON text"):
        roofline.load(3)


def test_a_merged_report_warns_when_the_ranks_are_judged_differently(ranks):
    other = ranks[1].project("A100 SXM 80GB")
    other.meta["distributed"] = ranks[1].meta["distributed"]
    m = rd.MergedReport([ranks[0], other])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        job = m.job()
    assert any("different ceilings" in str(x.message) for x in w)
    assert job.meta["merged"]["ceilings_of_rank"] == m.slowest_rank()
