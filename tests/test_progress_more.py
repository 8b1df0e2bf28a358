"""Progress on long work beyond the ceilings measurement (tests/test_yardstick.py has that one): the bar helper's
``track`` and ``above``, the coverage and OpInfo sweeps (bench/coverage.py, bench/opinfo.py, their model runs
replaced by stand-ins), and trace loading (``roofline.load_trace`` of a file and of a directory of rank traces).
On a stream that says it is a terminal the bar is drawn; on one that does not, nothing is."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys

import pytest

from roofline._traces import _load, _ranks
from roofline._util import _progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch):
    monkeypatch.delenv("ROOFLINE_PROGRESS", raising=False)


def _frames(text: str) -> list[str]:
    return [f for f in text.split("\r") if f.strip()]


# ---- the helper -------------------------------------------------------------------------------------------------
def test_track_draws_on_a_terminal_and_nothing_elsewhere():
    tty = _Tty()
    assert list(_progress.track(["a", "b", "c", "d"], "sweep", stream=tty)) == ["a", "b", "c", "d"]
    frames = _frames(tty.getvalue())
    # 24 cells: each item is announced with the items done before it, 0/4 .. 3/4 (0, 6, 12, 18 cells), then done
    assert [f.split("]")[0] for f in frames[:4]] == ["sweep [" + "#" * k + "." * (24 - k) for k in (0, 6, 12, 18)]
    assert frames[2].startswith("sweep [" + "#" * 12 + "." * 12 + "] 2/4 c, ")
    assert frames[-1].startswith("sweep [" + "#" * 24 + "] done in ") and frames[-1].endswith("\n")
    pipe = io.StringIO()
    assert list(_progress.track(range(3), "sweep", stream=pipe)) == [0, 1, 2]
    assert pipe.getvalue() == ""


def test_track_closes_the_bar_when_stopped_early():
    tty = _Tty()
    for x in _progress.track([1, 2, 3], "sweep", stream=tty):
        if x == 2:
            break
    assert _frames(tty.getvalue())[-1].startswith("sweep [" + "#" * 24 + "] stopped in ")


def test_lines_printed_above_the_bar_are_never_drawn_over():
    tty = _Tty()
    bar = _progress.Bar("sweep", tty)
    bar("model a (1/2)")
    bar.above("result of a", stream=tty)
    text = tty.getvalue()
    # the bar's line cleared (carriage return, blanks over its width, carriage return), the result on its own line,
    # then the bar drawn again with the same status
    first = text.split("\r")[1]
    assert "\r" + " " * len(first) + "\rresult of a\n\rsweep [" + "#" * 12 + "." * 12 + "] 1/2 model a, " in text


# ---- the sweeps -------------------------------------------------------------------------------------------------
def _bench(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", os.path.join(ROOT, "bench", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def coverage():
    return _bench("coverage")


@pytest.fixture(scope="module")
def opinfo():
    return _bench("opinfo")


def _coverage_sweep(coverage, monkeypatch, stderr):
    entries = [("tv", "m1"), ("tv", "m2"), ("timm", "m3")]
    monkeypatch.setattr(coverage, "select", lambda only: entries)
    monkeypatch.setattr(coverage, "versions", lambda: "versions")
    monkeypatch.setattr(coverage, "run_model", lambda fam, name, timeout: {"family": fam, "name": name,
                                                                              "failed": "stand-in", "covered": True})
    monkeypatch.setattr(coverage, "summary", lambda results: f"{len(results)} results")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert coverage.main(["--only", "tv"]) == 0
    return out.getvalue(), stderr.getvalue()


def test_the_coverage_sweep_shows_a_bar_on_a_terminal(coverage, monkeypatch):
    out, err = _coverage_sweep(coverage, monkeypatch, _Tty())
    frames = _frames(err)
    assert frames[0].startswith("coverage sweep, 3 models [" + "." * 24 + "] 0/3 tv/m1, ")
    assert any(f.startswith("coverage sweep, 3 models [" + "#" * 16 + "." * 8 + "] 2/3 timm/m3, ") for f in frames)
    assert frames[-1].startswith("coverage sweep, 3 models [" + "#" * 24 + "] 3 models in ")
    # the result lines go to stdout as before, one per model
    assert [ln.split()[0] for ln in out.splitlines() if "FAILED" in ln] == ["tv/m1", "tv/m2", "timm/m3"]


def test_the_coverage_sweep_draws_nothing_in_a_log(coverage, monkeypatch):
    out, err = _coverage_sweep(coverage, monkeypatch, io.StringIO())
    assert err == ""
    assert "\r" not in out and len([ln for ln in out.splitlines() if "FAILED" in ln]) == 3


def _opinfo_sweep(opinfo, monkeypatch, stderr):
    monkeypatch.setattr(opinfo, "op_database", lambda: {"abs": None, "add": None})
    monkeypatch.setattr(opinfo, "_worker", lambda t: (t[0], {"runs": 1, "seconds": 0.1, "unknown": [], "errors": {},
                                                            "raised": [], "fcm": [], "matrix": False}))
    monkeypatch.setattr(opinfo, "fully_counted", lambda res: True)
    monkeypatch.setattr(opinfo, "_summary", lambda results, seconds: print(f"{len(results)} OpInfos"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert opinfo.main([]) == 0
    return out.getvalue(), stderr.getvalue()


def test_the_opinfo_sweep_shows_a_bar_on_a_terminal_and_nothing_in_a_log(opinfo, monkeypatch):
    out, err = _opinfo_sweep(opinfo, monkeypatch, _Tty())
    frames = _frames(err)
    assert frames[0].startswith("OpInfo sweep, 2 OpInfos [" + "." * 24 + "] 0/2 abs, ")
    assert any(f.startswith("OpInfo sweep, 2 OpInfos [" + "#" * 12 + "." * 12 + "] 1/2 add, ") for f in frames)
    assert frames[-1].startswith("OpInfo sweep, 2 OpInfos [" + "#" * 24 + "] 2 OpInfos in ")
    assert "[1/2] abs (1 runs, 0.1 s): ok" in out and "[2/2] add (1 runs, 0.1 s): ok" in out
    out, err = _opinfo_sweep(opinfo, monkeypatch, io.StringIO())
    assert err == "" and "\r" not in out and "[2/2] add (1 runs, 0.1 s): ok" in out


# ---- trace loading ----------------------------------------------------------------------------------------------
def _trace(rank: int = 0, world: int = 1, extra: int = 0) -> dict:
    """One step: an mm of [64, 32] x [32, 16] on an H100 (its datasheet entry, so no warning about the device),
    and ``extra`` instant events that the loader reads and skips (to make a trace of many events cheaply)."""
    args = {"External id": 1, "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"],
            "Input Strides": [[32, 1], [16, 1]], "Concrete Inputs": ["", ""]}
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": args}]
    ev += [{"ph": "i", "name": "m", "ts": 1}] * extra
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "step.pt.trace.json"
    path.write_text(json.dumps(_trace(extra=33000)))  # 33,002 events: two reports of the share read
    return str(path)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "step.pt.trace.json"
    path.write_text(json.dumps(_trace()))
    return str(path)


def test_load_trace_reports_its_progress(trace_file):
    lines = []
    r = _load.load_trace(trace_file, progress=lines.append)
    assert r.total_flops == 2 * 64 * 32 * 16  # the mm: 2*M*N*K
    size_kb = os.path.getsize(trace_file) >> 10  # about 1 MB: counted in KB (MB from 64 MB up)
    # every 16,384 events, the events read and the file's KB read so far (of its size), growing
    read = [ln for ln in lines if ", KB read (" in ln]
    assert [ln.split()[0] for ln in read] == ["16384", "32768"]
    assert all(ln.endswith(f"/{size_kb})") for ln in read)
    done = [int(ln.split("(")[1].split("/")[0]) for ln in read]
    assert 0 < done[0] < done[1] <= size_kb
    assert "33002 events read; nesting the ops and linking the kernels" in lines
    assert lines[-1] == "building the report (0/1)"


def test_load_trace_draws_a_bar_on_a_terminal_and_nothing_elsewhere(small_trace, monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    _load.load_trace(small_trace)
    frames = _frames(tty.getvalue())
    assert frames[0].startswith("reading step.pt.trace.json [" + "." * 24 + "] 2 events read; nesting the ops")
    assert frames[1].startswith("reading step.pt.trace.json [" + "." * 24 + "] 0/1 building the report, ")
    assert frames[-1].startswith("reading step.pt.trace.json [" + "#" * 24 + "] done in ")
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    _load.load_trace(small_trace)
    assert pipe.getvalue() == ""
    monkeypatch.setenv("ROOFLINE_PROGRESS", "0")
    monkeypatch.setattr(sys, "stderr", tty := _Tty())
    _load.load_trace(small_trace)
    assert tty.getvalue() == ""


def test_a_failing_load_closes_its_bar(tmp_path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": nope}]}')  # not JSON inside the first event
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with pytest.raises(ValueError, match="bad.json"):
        _load.load_trace(str(bad))
    assert _frames(tty.getvalue())[-1].startswith("reading bad.json [" + "#" * 24 + "] stopped in ")
    with pytest.raises(TypeError, match="progress must be a callable"):
        _load.load_trace(str(bad), progress="yes")


def test_a_rank_directory_reports_each_rank(tmp_path, monkeypatch):
    for rank in range(3):
        (tmp_path / f"host{rank}_{100 + rank}.{1700000000000 + rank}.pt.trace.json").write_text(
            json.dumps(_trace(rank, 3)))
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # the ranks read here, one after the other
    lines = []
    ranks = _load.load_trace(str(tmp_path), progress=lines.append)
    assert isinstance(ranks, _ranks.RankSet) and len(ranks) == 3
    assert lines == ["ranks read (1/3)", "ranks read (2/3)", "ranks read (3/3)"]
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    _load.load_trace(str(tmp_path))
    frames = _frames(tty.getvalue())
    assert frames[-2].startswith(f"reading the rank traces of {tmp_path.name} [" + "#" * 24 + "] 3/3 ranks read, ")
    assert frames[-1].startswith(f"reading the rank traces of {tmp_path.name} [" + "#" * 24 + "] done in ")
    with pytest.raises(TypeError, match="progress must be a callable"):
        _ranks.load_ranks(str(tmp_path), progress=3)
