"""``roofline.steady(seconds=...)``: steps measured until they have taken a given wall time (on a shared host the
machine's speed moves in phases of seconds, so a comparable least time needs steps spread over them), and the
``"ops_min"`` composition from each half of the steps (``meta["steady"]["step_time"]["halves"]``). The clock is
stood in for by one the step advances, so every count below is arithmetic in the test."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import SteadyReport, cli  # noqa: E402
from roofline._loops import _steady  # noqa: E402
from test_step_time_ops import _set_times  # noqa: E402  (lay a step's op calls back to back)

MS = 1e-3


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 4)
    return m, torch.randn(2, 8)


@pytest.fixture
def clock(monkeypatch):
    """A clock that only the step moves: one second per step."""
    now = [100.0]
    monkeypatch.setattr(_steady, "_clock", lambda: now[0])

    def tick():
        now[0] += 1.0

    return tick


def test_steps_are_measured_past_repeat_until_they_have_taken_the_seconds(model, clock):
    m, x = model
    calls = []

    def step():
        calls.append(1)
        clock()
        m(x).sum().backward()

    r = roofline.steady(step, m, warmup=1, repeat=2, seconds=5.5, ceilings="theoretical")
    # one second a step (the warm-up's too, before the clock starts): 5 steps take 5 s < 5.5, the 6th reaches 6
    assert len(r.repeats) == 6 and len(calls) == 7
    assert r.meta["steady"]["repeat"] == 6
    assert r.meta["steady"]["seconds"] == {"asked": 5.5, "took": 6.0, "steps": 6, "capped": False}
    assert "median of 6 measured steps" in r.steady_line()


def test_repeat_still_sets_the_least_number_of_steps(model, clock):
    m, x = model

    def step():
        clock()
        m(x).sum().backward()

    r = roofline.steady(step, m, warmup=0, repeat=4, seconds=1.5, ceilings="theoretical")
    assert len(r.repeats) == 4  # 2 s were enough, 4 were asked
    assert r.meta["steady"]["seconds"]["took"] == 4.0


def test_the_step_limit_stops_it_with_a_warning_unless_repeat_asks_for_more(model, clock, monkeypatch):
    m, x = model
    monkeypatch.setattr(_steady, "SECONDS_MAX_STEPS", 3)
    step = lambda: m(x).sum().backward()  # noqa: E731  (the clock never moves: only the limit stops it)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = roofline.steady(step, m, warmup=0, repeat=1, seconds=10, ceilings="theoretical")
    assert len(r.repeats) == 3
    assert r.meta["steady"]["seconds"] == {"asked": 10.0, "took": 0.0, "steps": 3, "capped": True}
    said = [str(x.message) for x in w if "seconds=10" in str(x.message)]
    assert said and "stopped at 3 measured steps" in said[0] and "3 steps; a larger repeat measures more" in said[0]
    assert all(x.filename == __file__ for x in w if "seconds=10" in str(x.message))  # the user's line
    with pytest.warns(UserWarning, match=r"stopped at 3 measured steps after 0 s \(the most it measures to fill "
                                         r"the time, 3 steps; a larger repeat measures more\)"):
        roofline.steady(step, m, warmup=0, repeat=3, seconds=10, ceilings="theoretical")  # repeat at the limit
    with pytest.warns(UserWarning, match=r"stopped at 5 measured steps after 0 s \(repeat=5\)"):
        r = roofline.steady(step, m, warmup=0, repeat=5, seconds=10, ceilings="theoretical")
    assert len(r.repeats) == 5 and r.meta["steady"]["seconds"]["capped"]  # repeat above the limit: repeat wins


def test_without_seconds_nothing_is_added(model):
    m, x = model
    r = roofline.steady(lambda: m(x).sum().backward(), m, warmup=0, repeat=2, ceilings="theoretical")
    assert len(r.repeats) == 2 and "seconds" not in r.meta["steady"]


@pytest.mark.parametrize("bad,exc", [(True, TypeError), ("5", TypeError), ([1], TypeError), (0, ValueError),
                                     (-1.0, ValueError), (math.nan, ValueError), (math.inf, ValueError),
                                     (10**400, ValueError), (np.bool_(True), TypeError)])
def test_bad_seconds_are_refused_before_any_step_runs(model, bad, exc):
    m, x = model
    ran = []
    with pytest.raises(exc, match="seconds"):
        roofline.steady(lambda: ran.append(1), m, seconds=bad)
    assert not ran


def test_numpy_and_int_seconds_are_taken(model, clock):
    m, x = model

    def step():
        clock()
        m(x).sum().backward()

    assert roofline.steady(step, m, warmup=0, repeat=1, seconds=np.float64(2.0),
                           ceilings="theoretical").meta["steady"]["seconds"]["steps"] == 2
    r = roofline.steady(step, m, warmup=0, repeat=1, seconds=3, ceilings="theoretical")
    # three steps take exactly the three seconds asked: filled, not stopped by the limit
    assert r.meta["steady"]["seconds"] == {"asked": 3.0, "took": 3.0, "steps": 3, "capped": False}
    from fractions import Fraction

    for half in (0.5, Fraction(1, 2)):  # under a second, and any real number
        assert roofline.steady(step, m, warmup=0, repeat=1, seconds=half,
                               ceilings="theoretical").meta["steady"]["seconds"]["asked"] == 0.5


@pytest.mark.filterwarnings("ignore:.*intra-op threads under contention:UserWarning")  # a busy machine
def test_ops_min_from_each_half_of_the_steps(model):
    m, x = model
    runs = roofline.steady(lambda: m(x).sum().backward(), m, warmup=1, repeat=5, timing="op",
                           ceilings="theoretical").repeats
    n = len(runs[0].records)
    # steps 1-2 (the first half of 5) in a slow phase: every call 2 ms, 3 ms outside ops; steps 3-5: 1 ms and 1 ms,
    # the middle one (in neither half: each half has 2 steps) disturbed in call 0 by 4 ms and 0.5 ms outside ops
    _set_times(runs[0], [2.0] * n, 3.0)
    _set_times(runs[1], [2.0] * n, 3.0)
    _set_times(runs[2], [5.0] + [1.0] * (n - 1), 0.5)
    _set_times(runs[3], [1.0] * n, 1.0)
    _set_times(runs[4], [1.0] * n, 1.0)
    rep = SteadyReport._from_runs(runs, warmup=1, ceilings="theoretical", step_time="ops_min")
    st = rep.meta["steady"]["step_time"]
    assert st["halves"] == pytest.approx([(2.0 * n + 3.0) * MS, (1.0 * n + 1.0) * MS])
    assert rep.wall_time == pytest.approx((n + 0.5) * MS)  # the least over all the steps, the middle one's too
    line = rep.steady_line()
    assert f"from each half of the steps: {2 * n + 3:.2f} and {n + 1:.2f} ms" in line
    html = rep.to_html()
    assert f"from each half of the steps: {2 * n + 3:.2f} and {n + 1:.2f} ms" in html
    # four steps, two halves of two: step 1 slow, step 2 less so, steps 3 and 4 quick
    _set_times(runs[0], [3.0] * n, 3.0)
    _set_times(runs[1], [2.0] * n, 2.0)
    _set_times(runs[2], [1.0] * n, 1.0)
    rep4 = SteadyReport._from_runs(runs[:4], warmup=1, ceilings="theoretical", step_time="ops_min")
    assert rep4.meta["steady"]["step_time"]["halves"] == pytest.approx([(2.0 * n + 2.0) * MS, (n + 1.0) * MS])
    # three steps: no halves
    rep3 = SteadyReport._from_runs(runs[:3], warmup=1, ceilings="theoretical", step_time="ops_min")
    assert "halves" not in rep3.meta["steady"]["step_time"]
    assert "half of the steps" not in rep3.steady_line()


@pytest.mark.filterwarnings("ignore:.*intra-op threads under contention:UserWarning")  # a busy machine
def test_halves_edited_by_hand_are_left_out_of_the_views(model):
    m, x = model
    rep = roofline.steady(lambda: m(x).sum().backward(), m, warmup=1, repeat=4, timing="op",
                          ceilings="theoretical", step_time="ops_min")
    assert "half of the steps" in rep.steady_line() and "half of the steps" in rep.to_html()  # composed: shown
    for bad in (["a", None], [math.nan, 0.01], [True, 0.01], [0.01, -0.01], [0.01], 0.01):
        rep.meta["steady"]["step_time"]["halves"] = bad
        assert "half of the steps" not in rep.steady_line()
        assert "half of the steps" not in rep.to_html()


def test_cli_seconds(capsys, monkeypatch):
    assert cli.main(["profile", "test_cli:tiny", "--seconds", "0"]) == 1
    assert "--seconds must be a finite number of seconds > 0, got 0" in capsys.readouterr().err
    assert cli.main(["profile", "test_cli:tiny", "--seconds", "nan"]) == 1
    assert "got nan" in capsys.readouterr().err
    seen = {}
    real = roofline.steady

    def spy(*a, **k):
        seen.update(k)
        return real(*a, **{**k, "seconds": None})

    monkeypatch.setattr(roofline, "steady", spy)
    assert cli.main(["profile", "test_cli:tiny", "--timing", "op", "--step-time", "ops_min", "--ceilings",
                     "datasheet", "--repeat", "4", "--seconds", "12.5"]) == 0
    err = capsys.readouterr().err
    assert seen["seconds"] == 12.5 and seen["repeat"] == 4
    assert "median of 4 measured steps, more until they have taken 12.5 s" in err
    assert cli.main(["profile", "test_cli:tiny", "--device", "meta", "--seconds", "3"]) == 0
    assert "--seconds 3 ignored: nothing is timed on meta" in capsys.readouterr().err


def test_plain_steps_run_after_each_measured_one_outside_roofline(model, monkeypatch):
    m, x = model
    now = [0.0]
    monkeypatch.setattr(_steady, "_clock", lambda: now[0])
    inside = []
    costs = iter([30, 20, 25, 16, 18, 17, 19])  # ms: the warm-up, then measured and plain in turn: plain 25, 18, 19

    def step():
        inside.append(torch._C._len_torch_dispatch_stack() > 0)  # under roofline's dispatch mode or not
        now[0] += next(costs) * MS
        m(x).sum().backward()

    r = roofline.steady(step, m, warmup=1, repeat=3, ceilings="theoretical", plain=True)
    # warm-up (outside), then measured (inside) and plain (outside) in turn
    assert inside == [False, True, False, True, False, True, False]
    p = r.meta["steady"]["plain"]
    assert p["steps"] == 3 and p["least"] == pytest.approx(18 * MS) and p["median"] == pytest.approx(19 * MS)
    # like with like: the least plain step against the least measured one (the blocks' own clock reads)
    assert p["measured_least"] == min(q.wall_time for q in r.repeats)
    assert "without roofline: least 18.00 ms over 3 steps run outside roofline; the least measured step took " \
        f"{p['measured_least'] * 1e3:.2f} ms" in r.steady_line()
    assert "least 18.00 ms over 3 steps run outside roofline" in r.to_html()


def test_plain_steps_are_timed_with_the_device_synchronised(model, monkeypatch):
    m, x = model
    synced = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: (synced.append(len(ran)), events.append("sync")))
    now = iter([10.0, 10.25])
    monkeypatch.setattr(_steady, "_clock", lambda: (events.append("clock"), next(now))[1])
    ran = []
    assert _steady._plain_step(lambda: (ran.append(1), events.append("step"))) == 0.25
    assert synced == [0, 1]  # before the step and after it
    assert events == ["sync", "clock", "step", "sync", "clock"]  # the clock inside the synchronised span
    monkeypatch.setattr(_steady, "_clock", lambda: 0.0)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # CUDA present, not in use: nothing to wait for
    assert _steady._plain_step(lambda: ran.append(1)) >= 0 and synced == [0, 1] and len(ran) == 2


def test_without_plain_nothing_is_added_and_a_bad_plain_is_refused(model):
    m, x = model
    r = roofline.steady(lambda: m(x).sum().backward(), m, warmup=0, repeat=2, ceilings="theoretical")
    assert "plain" not in r.meta["steady"] and "without roofline" not in r.steady_line()
    ran = []
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="plain must be True or False"):
            roofline.steady(lambda: ran.append(1), m, plain=bad)
    assert not ran


def test_plain_figures_edited_by_hand_are_left_out_of_the_views(model):
    m, x = model
    rep = roofline.steady(lambda: m(x).sum().backward(), m, warmup=0, repeat=2, ceilings="theoretical", plain=True)
    assert "without roofline" in rep.steady_line() and "without roofline" in rep.to_html()
    for bad in ({"steps": 2, "least": math.nan}, {"steps": 2, "least": 0.0}, {"steps": True, "least": 0.01},
                {"steps": 0, "least": 0.01}, {"steps": 2, "least": "1"}, {"steps": 2}, [1, 2], None):
        rep.meta["steady"]["plain"] = bad
        assert "without roofline" not in rep.steady_line()
        assert "without roofline" not in rep.to_html()
    from roofline.render._render import plain_text
    # nothing measured to compare with (timing=None), or a malformed measured figure: the plain figure alone
    for measured in (None, math.nan, 0.0, True):
        rep.meta["steady"]["plain"] = {"steps": 1, "least": 0.002, "measured_least": measured}
        assert plain_text(rep.meta["steady"]) == "least 2.00 ms over 1 step run outside roofline"
    # 3 ms measured against 2 ms plain: +50%, the instrumentation; 1.5 ms against 2 ms: -25%, the host
    rep.meta["steady"]["plain"] = {"steps": 4, "least": 0.002, "measured_least": 0.003}
    assert plain_text(rep.meta["steady"]) == ("least 2.00 ms over 4 steps run outside roofline; the least measured "
                                              "step took 3.00 ms, +50.0%: what roofline's instrumentation adds")
    rep.meta["steady"]["plain"]["measured_least"] = 0.0015
    assert plain_text(rep.meta["steady"]).endswith("step took 1.50 ms, -25.0%: quicker than the plain steps (the "
                                                   "host's speed or load differed between them)")
    rep.meta["steady"]["plain"]["measured_least"] = 0.002  # equal: nothing added
    assert plain_text(rep.meta["steady"]).endswith("took 2.00 ms, +0.0%: what roofline's instrumentation adds")


def test_cli_plain(capsys, monkeypatch):
    seen = {}
    real = roofline.steady

    def spy(*a, **k):
        seen.update(k)
        return real(*a, **k)

    monkeypatch.setattr(roofline, "steady", spy)
    assert cli.main(["profile", "test_cli:tiny", "--ceilings", "datasheet", "--repeat", "2", "--plain"]) == 0
    out = capsys.readouterr()
    assert seen["plain"] is True
    assert "median of 2 measured steps, each followed by one outside roofline (timed)" in out.err
    assert "without roofline: least " in out.out and "over 2 steps run outside roofline" in out.out
    seen.clear()
    assert cli.main(["profile", "test_cli:tiny", "--ceilings", "datasheet", "--repeat", "2"]) == 0
    assert seen["plain"] is False and "without roofline" not in capsys.readouterr().out
    assert cli.main(["profile", "test_cli:tiny", "--device", "meta", "--plain"]) == 0
    assert "--plain ignored: nothing is timed on meta" in capsys.readouterr().err
    assert seen["plain"] is False
    assert cli.main(["profile", "test_cli:tiny", "--timing", "none", "--plain"]) == 0
    assert "--plain ignored: nothing is timed (--timing none)" in capsys.readouterr().err
    assert seen["plain"] is False
