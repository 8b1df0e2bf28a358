"""The least unwaited step time and what an unwaited time cannot take out (roofline._loops._steady._step_time):
synthetic per-step loads, expected values by hand in the comments."""

from __future__ import annotations

import types
import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline import SteadyReport  # noqa: E402
from roofline._loops import _steady  # noqa: E402
from roofline.integrations import _run  # noqa: E402

BUSY = ["this process's threads waited 80% of their runnable time for a CPU (80.0 ms)"]


def _run_of(wall, wall_s=None, unwaited_s=None, contention=()):
    load = {} if wall_s is None else {"wall_s": wall_s, "unwaited_s": unwaited_s}
    return types.SimpleNamespace(wall_time=wall, meta={"load": load, "contention": list(contention)})


RUNS = [
    _run_of(0.10, 0.11, 0.022, BUSY),  # 0.10 * 0.022 / 0.11 = 0.020
    _run_of(0.12, 0.12, 0.030, BUSY),  # 0.12 * 0.030 / 0.12 = 0.030
    _run_of(0.09, 0.10, 0.025),        # 0.09 * 0.025 / 0.10 = 0.0225
    _run_of(0.20),                     # no statistics: its wall time, 0.20, stands
]


@pytest.mark.parametrize("kind, expect", [
    ("unwaited", (0.0225 + 0.030) / 2),  # median of 0.020, 0.0225, 0.030, 0.20
    ("unwaited_min", 0.020),             # the least of them
])
def test_the_unwaited_kinds_by_hand(kind, expect):
    t, meta = _steady._step_time(kind, RUNS, 0.11, threads=1, env={})
    assert t == pytest.approx(expect)
    assert meta["kind"] == kind and meta["wall_median"] == 0.11
    assert meta["values"] == pytest.approx([0.020, 0.030, 0.0225, 0.20])
    u = meta["unwaited"]
    # min 0.020, median 0.02625, max 0.20; spread (0.20 - 0.020) / 0.02625 = 6.857...
    assert u["min"] == pytest.approx(0.020) and u["median"] == pytest.approx(0.02625)
    assert u["max"] == pytest.approx(0.20) and u["spread"] == pytest.approx(0.18 / 0.02625)
    assert meta["missing"] == "no scheduler statistics for some steps: their wall time stands"
    assert "spin" not in meta  # one intra-op thread: nothing spins


def test_spin_is_said_for_contended_steps_of_several_threads_that_spin_wait():
    t, meta = _steady._step_time("unwaited_min", RUNS, 0.11, threads=2, env={})
    assert t == pytest.approx(0.020) and "OMP_WAIT_POLICY=PASSIVE" in meta["spin"]
    assert "2 intra-op threads" in meta["spin"]
    # a runtime told to sleep at once, one thread, or no contended step: nothing to say
    for env in ({"OMP_WAIT_POLICY": "Passive"}, {"GOMP_SPINCOUNT": "0"}, {"KMP_BLOCKTIME": " 0 "}):
        assert _steady._spin_note(4, env) is None
    assert _steady._spin_note(1, {}) is None
    assert _steady._spin_note(2, {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "300000"}) is not None
    quiet = [_run_of(0.1, 0.1, 0.05), _run_of(0.1, 0.1, 0.04)]
    assert "spin" not in _steady._step_time("unwaited", quiet, 0.1, threads=8, env={})[1]
    # steps without statistics: no unwaited time was taken, nothing to overstate
    assert "spin" not in _steady._step_time("unwaited", [_run_of(0.1, contention=BUSY)], 0.1, threads=8,
                                            env={})[1]


def test_a_report_of_the_least_unwaited_time_says_so_everywhere(monkeypatch):
    torch.manual_seed(0)
    m = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    r = roofline.steady(lambda: m(x).sum().backward(), m, warmup=1, repeat=3, ceilings="theoretical")
    # the same three measured steps, their loads set by hand: unwaited 1/2, 1/4 and 1/5 of each wall time
    for q, share in zip(r.repeats, (0.5, 0.25, 0.2)):
        q.meta["load"] = {"wall_s": 1.0, "unwaited_s": share}
        q.meta["contention"] = list(BUSY)
    walls = [q.wall_time for q in r.repeats]
    expect = min(w * s for w, s in zip(walls, (0.5, 0.25, 0.2)))
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = SteadyReport._from_runs(r.repeats, warmup=1, ceilings="theoretical", step_time="unwaited_min")
    assert s.wall_time == pytest.approx(expect)
    st = s.meta["steady"]["step_time"]
    assert st["kind"] == "unwaited_min" and "spin" in st
    assert [str(w.message) for w in caught if "spin" in str(w.message)]  # a warning says it too
    line = s.steady_line()
    assert "the least UNWAITED time" in line and "OVERSTATED" in line and "spread" in line
    assert s.summary().split("\n")[1].endswith(" least unwaited step time")
    assert "the least UNWAITED time of the measured steps" in s.to_html()
    back = roofline.load(s.to_json())
    assert back.meta["steady"]["step_time"] == st and back.wall_time == s.wall_time
    # the logged scalars name it: code 3, and the spin flag
    fig = _run.Run.profile_figures(s, None)
    assert fig["roofline/profile/step_time_code"] == 3.0 and fig["roofline/profile/step_time_spin"] == 1.0
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calm = SteadyReport._from_runs(r.repeats, warmup=1, ceilings="theoretical", step_time="unwaited_min")
    assert "spin" not in calm.meta["steady"]["step_time"] and not [w for w in caught if "spin" in str(w.message)]
    assert "roofline/profile/step_time_spin" not in _run.Run.profile_figures(calm, None)
