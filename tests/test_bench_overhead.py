"""bench/overhead.py's estimators (the benchmark itself is run by hand: its figures depend on the machine).

The paired ratio is checked on round times whose per-round differences are written out here, so the expected
medians are arithmetic in the test; the allocator setting is checked in a child process (it changes the process's
allocator for good)."""

import importlib.util
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "overhead.py")
_spec = importlib.util.spec_from_file_location("roofline_bench_overhead", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _times(bare, d_fcm, d_roofline):
    return {"bare": list(bare), "fcm": [b + d for b, d in zip(bare, d_fcm)],
            "roofline": [b + d for b, d in zip(bare, d_roofline)]}


def test_paired_ratio_of_constant_differences_is_exact_with_a_point_interval():
    # the bare run drifts between rounds; every round FlopCounterMode adds 10 ms and roofline 4 ms
    t = _times([0.100, 0.130, 0.090, 0.115], [0.010] * 4, [0.004] * 4)
    ratio, lo, hi = bench.paired_ratio(t)
    assert ratio == pytest.approx(0.4)
    assert lo == pytest.approx(0.4) and hi == pytest.approx(0.4)


def test_paired_ratio_is_the_ratio_of_median_differences_and_the_interval_holds_it():
    # differences: FlopCounterMode 8, 10, 10, 12, 30 ms (median 10); roofline 3, 4, 4, 5, 20 ms (median 4): the
    # outlier round (30 / 20) moves neither median
    t = _times([0.1] * 5, [0.010, 0.012, 0.008, 0.030, 0.010], [0.004, 0.005, 0.003, 0.020, 0.004])
    ratio, lo, hi = bench.paired_ratio(t)
    assert ratio == pytest.approx(0.4)
    assert lo <= 0.4 <= hi
    assert hi - lo > 0  # the rounds disagree: the interval is not a point
    # the bootstrap is seeded: the same rounds give the same interval
    assert bench.paired_ratio(t)[1:] == (lo, hi)


def test_paired_ratio_resamples_without_a_ratio_leave_the_interval_open_above():
    # two rounds of seven where FlopCounterMode added nothing: a resample drawing four or more of them (about one in
    # nine) has no ratio; it counts as infinite (the rounds cannot bound the ratio), it is not dropped (which would
    # narrow the interval) and does not disorder the sort (as a NaN would)
    d_fcm = [0.0, 0.0, 0.010, 0.020, 0.010, 0.010, 0.015]
    d_roofline = [0.001, 0.002, 0.003, 0.009, 0.004, 0.006, 0.005]
    ratio, lo, hi = bench.paired_ratio(_times([0.1] * 7, d_fcm, d_roofline))
    assert ratio == pytest.approx(0.004 / 0.010)  # medians 4 ms and 10 ms
    assert hi == math.inf
    # the lower end is a resample's ratio: no smaller than the smallest median over the largest (1 ms / 20 ms)
    assert 0.001 / 0.020 - 1e-9 <= lo <= ratio


def test_paired_ratio_rare_resamples_without_a_ratio_keep_the_interval_finite():
    # one round of fifteen where FlopCounterMode added nothing: a resample needs eight or more draws of it to lose
    # its ratio (odds below one in ten thousand), so the 95th percentile is a ratio
    d_fcm = [0.0] + [0.010] * 14
    d_roofline = [0.001] + [0.004] * 7 + [0.005] * 7
    ratio, lo, hi = bench.paired_ratio(_times([0.1] * 15, d_fcm, d_roofline))
    assert ratio == pytest.approx(0.4)  # medians 4 ms (the eighth of fifteen sorted) and 10 ms
    eps = 1e-9  # the differences are taken of float seconds
    assert 0.001 / 0.010 - eps <= lo <= ratio <= hi <= 0.005 / 0.010 + eps
    assert hi != math.inf


def test_paired_ratio_without_a_flop_counter_difference_is_nan():
    t = _times([0.1, 0.1, 0.1], [0.0, 0.0, 0.0], [0.001, 0.002, 0.001])
    ratio, lo, hi = bench.paired_ratio(t)
    assert math.isnan(ratio) and math.isnan(lo) and math.isnan(hi)


_PIN_CHILD = r"""
import ctypes, importlib.util, json, resource, sys
spec = importlib.util.spec_from_file_location("b", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def faults(n=64 << 20):  # minor page faults of touching a freshly allocated 64 MiB buffer, freed after
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0

faults()
before = faults()
what = m.pin_malloc()
faults()
print(json.dumps({"what": what, "before": before, "after": faults()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_pin_malloc_keeps_a_freed_large_buffer_mapped():
    # in a child process: pinning changes the process's allocator for good
    import json
    import platform

    out = subprocess.run([sys.executable, "-c", _PIN_CHILD, _PATH], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if platform.libc_ver()[0] != "glibc":
        assert r["what"].startswith("default ("), r
        return
    assert r["what"].startswith("pinned (glibc mmap threshold "), r
    if "threshold 32 MiB" in r["what"]:  # an older glibc's cap: a 64 MiB buffer is still mapped anew
        pytest.skip("glibc caps the mmap threshold at 32 MiB")
    # glibc's defaults map a 64 MiB buffer anew on every allocation (page faults each time it is touched); pinned,
    # the freed buffer stays in the heap and touching it again faults (almost) nowhere
    assert r["before"] > 0 and r["after"] * 4 <= r["before"], r


def test_bench_refuses_bad_round_settings():
    for argv in (["--repeats", "0"], ["--seconds", "-1"]):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2  # argparse's usage error, before any workload is built


@pytest.mark.parametrize("warmup, runs", [(True, 4), (False, 3)])
def test_timed_runs_a_warm_up_only_when_asked(warmup, runs, monkeypatch):
    # the rounds time each variant once per round (warmup=False): its first run happened before the rounds
    calls, entered, collected = [], [], []
    # a full collection before each run, counted instead of run (in a worker holding torch and the test models a
    # real one takes a second or two)
    monkeypatch.setattr(bench.gc, "collect", lambda *a: collected.append(1))

    class Wrap:
        def __enter__(self):
            entered.append(1)

        def __exit__(self, *exc):
            return False

    seconds = bench.timed(lambda: calls.append(1), 3, Wrap, warmup=warmup)
    assert len(calls) == runs and len(entered) == runs and len(collected) == runs
    assert seconds >= 0.0
