"""`python -m roofline profile --step-time`: the step time the report divides by, as roofline.steady's step_time=,
checked before anything runs and named in the report."""

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import cli  # noqa: E402
from roofline import _profile_cmd  # noqa: E402
from roofline._loops import _steady  # noqa: E402

BUILT = []


def tiny(device, batch, seq, train):
    """A user callable: a small MLP inference step."""
    BUILT.append(device)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    x = torch.randn(batch or 4, 16, device=device)

    def step():
        with torch.no_grad():
            m(x)

    return m, step


@pytest.fixture(autouse=True)
def _clear():
    BUILT.clear()
    yield


def test_the_cli_offers_exactly_the_apis_choices():
    # spelled out in the command so that options are checked before torch is imported: the same tuple
    assert _profile_cmd.STEP_TIMES == _steady.STEP_TIMES


@pytest.mark.parametrize("kind", [k for k in _steady.STEP_TIMES if k != "median"])
def test_step_time_reaches_the_report_and_is_named(kind, tmp_path, capsys):
    js = tmp_path / "r.json"
    timing = "op" if kind == "ops_min" else "model"  # ops_min is composed from each op's time
    rc = cli.main(["profile", "test_cli_step_time:tiny", "--timing", timing, "--ceilings", "datasheet",
                   "--repeat", "3", "--step-time", kind, "--json", str(js)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert f"step time: {kind}" in out.err  # the plan line on stderr
    r = roofline.load(js)
    st = r.meta["steady"]["step_time"]
    assert st["kind"] == kind
    walls = r.meta["steady"]["wall_times"]
    if kind == "min":
        assert r.wall_time == min(walls)  # the least of the three measured wall times
    if kind == "ops_min":  # composed: the parts' least times, summed
        assert r.wall_time == st["ops"]["least"] + st["ops"]["between_least"] and "waits" in st
    assert r.wall_time <= max(walls)  # no choice divides by more than the slowest step's wall time
    assert "step time " in out.out.splitlines()[0]  # the report's first line says which


def test_default_is_the_median_wall_time(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc = cli.main(["profile", "test_cli_step_time:tiny", "--timing", "model", "--ceilings", "datasheet",
                   "--json", str(js)])
    assert rc == 0
    r = roofline.load(js)
    assert "step_time" not in r.meta["steady"]  # the median wall time: nothing else to say
    walls = sorted(r.meta["steady"]["wall_times"])
    assert r.wall_time == walls[1]  # the median of 3


def test_a_bad_step_time_is_a_usage_error_before_anything_is_built(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["profile", "test_cli_step_time:tiny", "--step-time", "mean"])
    assert e.value.code == 2
    assert "--step-time" in capsys.readouterr().err and BUILT == []


@pytest.mark.parametrize("extra, note", [
    (["--device", "meta"], "--step-time min ignored: nothing is timed on meta"),
    (["--timing", "none"], "--step-time min ignored: nothing is timed (--timing none)"),
])
def test_step_time_without_timing_is_ignored_and_says_so(extra, note, capsys):
    rc = cli.main(["profile", "test_cli_step_time:tiny", "--step-time", "min", "--ceilings", "datasheet"] + extra)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert note in err and "step time: min" not in err


def test_ops_min_without_op_timing_is_refused_before_anything_is_built(capsys):
    rc = cli.main(["profile", "test_cli_step_time:tiny", "--timing", "model", "--step-time", "ops_min"])
    err = capsys.readouterr().err
    assert rc != 0 and BUILT == []
    assert "--step-time ops_min composes the step from each op's time: it needs --timing op, got --timing model" in err


def test_help_lists_step_time():
    text = cli.build_parser()._subparsers._group_actions[0].choices["profile"].format_help()
    assert "--step-time" in text and "unwaited" in text
