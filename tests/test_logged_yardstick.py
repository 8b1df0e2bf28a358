"""The trainer callbacks' logged scalars say what MFU and MBU were divided by: a contention flag and the ceilings'
code (roofline.integrations._run.Run.profile_figures)."""

import types

from roofline.integrations import _run


def _report(meta):
    totals = {"mfu": 0.25, "mbu": 0.5, "achieved_flops": 1e9, "achieved_bytes": 2e9, "compute_share": 0.75}
    return types.SimpleNamespace(totals=lambda: totals, wall_time=0.5, meta=meta)


def test_contention_and_ceilings_code_are_logged():
    quiet = _run.Run.profile_figures(_report({"ceilings_yardstick": {"kind": "measured"}}), None)
    assert quiet["roofline/profile/contention"] == 0.0 and quiet["roofline/profile/ceilings_code"] == 0.0
    busy = _run.Run.profile_figures(_report({"ceilings_contention": ["the benchmark threads got 36% of their CPUs"],
                                              "ceilings_yardstick": {"kind": "theoretical"}}), None)
    assert busy["roofline/profile/contention"] == 1.0 and busy["roofline/profile/ceilings_code"] == 2.0
    # the codes as docs/training.md lists them
    assert _run.CEILINGS_CODES == {"measured": 0, "idle": 1, "theoretical": 2, "datasheet": 3, "file": 4,
                                    "given": 5}
    assert busy["roofline/profile/mfu"] == 0.25 and busy["roofline/profile/step_time"] == 0.5
    # a report that names no yardstick (a projection) logs no code, and no contention
    none = _run.Run.profile_figures(_report({}), None)
    assert "roofline/profile/ceilings_code" not in none and none["roofline/profile/contention"] == 0.0
