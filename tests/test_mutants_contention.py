"""The contention reading's details (roofline/_hardware/_contention.py) that the broader tests leave open: the
fallbacks where the system says nothing (no clock-tick rate, no CPU count, no affinity), the edges of the /proc/stat
parser (a first line of exactly four counters, an old kernel's seven-field line, an empty procs_running value, a
ninth field that is not a number), the 64 KiB read of a /proc file, the process's CPU time summed over its threads,
waited-for and live children, the rounding of every figure a reading records, and the default of ``block_meta``.

Every /proc text here is written by hand (``_read`` and ``_tids`` are replaced), so nothing depends on the machine's
load; expected values are worked out in the tests. Tick counts are whole multiples of the clock-tick rate, so the
seconds they stand for are exact."""

from __future__ import annotations

import os

import pytest

from roofline._hardware import _contention as c

HZ = c._HZ
_TIMES = type(os.times())  # os.times_result, taken before any test replaces os.times


def _times(user, system, children_user, children_system):
    """An ``os.times()`` result with the given CPU seconds."""
    return _TIMES((user, system, children_user, children_system, 0.0))


def _fake_proc(monkeypatch, files, tasks):
    """Serve ``files`` (path -> text) to ``_read`` and ``tasks`` (pid -> thread ids) to ``_tids``."""
    monkeypatch.setattr(c, "_read", lambda path: files.get(path))
    monkeypatch.setattr(c, "_tids", lambda pid: list(tasks.get(pid, [])))


# ---------------------------------------------------------------------------------------------------------------
# Where the system says nothing
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [ValueError, OSError])
def test_an_unknown_tick_rate_is_the_usual_100(monkeypatch, error):
    def fail(name):
        raise error(name)

    monkeypatch.setattr(os, "sysconf", fail)
    assert c._ticks() == 100
    monkeypatch.delattr(os, "sysconf")  # a platform without sysconf at all
    assert c._ticks() == 100


def test_an_unknown_cpu_count_is_one_and_read_once(monkeypatch):
    monkeypatch.setattr(c, "_CPUS", [])
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert c._cpu_count() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert c._cpu_count() == 1  # the first answer is kept


def test_a_proc_file_is_read_whole_past_one_read_up_to_its_cap(tmp_path, monkeypatch):
    # /proc/stat of a large machine runs past one 64 KiB read; its procs_running line is near the end
    path = tmp_path / "big"
    path.write_bytes(b"0123456789" * 7000 + b"\nprocs_running 3\n")  # 70017 bytes: two reads
    text = c._read(str(path))
    assert len(text) == 70017 and text.endswith("procs_running 3\n")
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 65536)  # exactly one full read, then an empty one at the end of the file
    assert c._read(str(exact)) == "x" * 65536
    monkeypatch.setattr(c, "_READ_MAX", 65536)  # the cap: no more read once it is reached
    assert c._read(str(path)) == ("0123456789" * 7000)[:65536]
    longer = tmp_path / "longer"
    longer.write_bytes(b"y" * (3 * 65536 + 100))
    monkeypatch.setattr(c, "_READ_MAX", 3 * 65536)  # three full reads reach it; the bytes past them are not read
    assert c._read(str(longer)) == "y" * (3 * 65536)
    small = tmp_path / "small"
    small.write_bytes(b"cpu  1 2 3\n\xff")  # not ASCII: replaced, not an error
    assert c._read(str(small)) == "cpu  1 2 3\n\ufffd"
    assert c._read(str(tmp_path / "missing")) is None


# ---------------------------------------------------------------------------------------------------------------
# /proc/stat and /proc/<pid>/stat
# ---------------------------------------------------------------------------------------------------------------


def test_cpu_fields_read_only_the_first_eight():
    # user nice system idle iowait irq softirq steal, then guest fields that are ignored, whatever they hold
    fields = ["10", "2", "3", "400", "5", "6", "7", "8", "guest?"]
    assert c._cpu_fields(fields) == ((10 + 2 + 3 + 6 + 7) / HZ, 8 / HZ)


def test_a_first_line_of_four_counters_is_read():
    # "cpu" and user nice system idle: five words, the fewest that are parsed; the rest count 0
    assert c._parse_stat("cpu 100 20 30 400\nprocs_running 2\n") == ((100 + 20 + 30) / HZ, 0.0, 2)
    assert c._parse_stat("cpu 100 20 30\nprocs_running 2\n") == (None, None, 2)


def test_an_old_kernels_seven_field_line_is_read_alone():
    # before steal time existed the "cpu" line had seven counters; the per-CPU line after it is not part of it
    text = "cpu  100 20 30 400 5 6 7\ncpu0 100 20 30 400 5 6 7\nprocs_running 3\n"
    assert c._parse_stat(text) == ((100 + 20 + 30 + 6 + 7) / HZ, 0.0, 3)


def test_an_empty_procs_running_value_is_unknown():
    # the value ends at its own line's end: the next line's number is not taken for it
    assert c._parse_stat("cpu  1 2 3 4 5 6 7 8\nprocs_running \n7\n")[2] is None
    assert c._parse_stat("cpu  1 2 3 4 5 6 7 8\nprocs_running 12\nprocs_blocked 0\n")[2] == 12
    assert c._parse_stat("cpu  1 2 3 4 5 6 7 8\nprocs_running 9")[2] == 9


def test_a_process_stat_with_a_bad_time_field_counts_nothing(monkeypatch):
    # fields after the state: 10 numbers, then utime is not a number
    _fake_proc(monkeypatch, {"/proc/43/stat": "43 (x) S 1 2 3 4 5 6 7 8 9 10 zz 2 3 4 5"}, {})
    assert c._stat_cpu("43") == 0.0


# ---------------------------------------------------------------------------------------------------------------
# The process's CPU time: its threads, its waited-for children and its live ones
# ---------------------------------------------------------------------------------------------------------------


def _child_stat(pid, utime, stime, cutime, cstime):
    return f"{pid} (worker) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0"


def test_descendants_sum_waited_for_and_live_children(monkeypatch):
    monkeypatch.setattr(os, "times", lambda: _times(7.0, 3.0, 0.5, 0.125))
    files = {"/proc/self/task/100/children": "200 ", "/proc/200/stat": _child_stat(200, HZ, 0, HZ, 0)}
    _fake_proc(monkeypatch, files, {"self": []})
    # waited for: 0.5 + 0.125; child 200 (found through thread 100, listed by the caller): 1 + 1 s
    assert c.descendants_cpu(["100"]) == 0.5 + 0.125 + 2.0
    # no threads given: they are listed (none here), so no live child is found
    assert c.descendants_cpu() == 0.5 + 0.125


def _snapshot_proc(monkeypatch):
    """A 2-CPU machine, every CPU allowed: /proc/stat, two threads of this process (one running), one live child."""
    stat = "cpu  300 0 100 1000 0 0 0 50 0 0\ncpu0 150 0 50 500 0 0 0 25 0 0\ncpu1 150 0 50 500 0 0 0 25 0 0\n" \
           "procs_running 5\n"
    files = {"/proc/stat": stat,
             "/proc/self/task/100/stat": "100 (python) R 1 1 1", "/proc/self/task/101/stat": "101 (python) S 1 1 1",
             "/proc/self/task/100/children": "200\n", "/proc/200/stat": _child_stat(200, HZ, 0, HZ, 0)}
    _fake_proc(monkeypatch, files, {"self": ["100", "101"]})
    monkeypatch.setattr(c, "_affinity", lambda: [0, 1])
    monkeypatch.setattr(c, "_cpu_count", lambda: 2)
    monkeypatch.setattr(os, "times", lambda: _times(1.5, 0.25, 0.5, 0.125))
    monkeypatch.setattr(os, "getloadavg", lambda: (1.23456, 0.5, 2.0))


def test_snapshot_adds_own_and_descendants_cpu_and_rounds_the_load(monkeypatch):
    _snapshot_proc(monkeypatch)
    s = c.snapshot()
    # own 1.5 + 0.25; waited-for children 0.5 + 0.125; the live child 1 + 1 s
    assert s.cpu == 1.5 + 0.25 + 0.5 + 0.125 + 2.0 == 4.375
    assert s.busy == (300 + 100) / HZ and s.steal == 50 / HZ
    assert s.runnable_others == 5 - 1 and s.cpus == 2 and s.machine_cpus == 2
    assert s.loadavg == (1.23, 0.5, 2.0)


def test_snapshot_reads_the_whole_machine_line_unless_fewer_cpus_are_allowed(monkeypatch):
    seen = []
    monkeypatch.setattr(c, "_proc_stat", lambda cpus=None: seen.append(cpus) or (1.0, 0.0, 1))
    monkeypatch.setattr(c, "_cpu_count", lambda: 8)
    monkeypatch.setattr(c, "_affinity", lambda: list(range(8)))  # every CPU allowed
    assert c.snapshot(count_own_threads=False).cpus == 8
    monkeypatch.setattr(c, "_affinity", lambda: None)  # affinity unknown
    assert c.snapshot(count_own_threads=False).cpus == 8
    monkeypatch.setattr(c, "_affinity", lambda: [2, 5])
    assert c.snapshot(count_own_threads=False).cpus == 2
    assert seen == [None, None, [2, 5]]


# ---------------------------------------------------------------------------------------------------------------
# Readings, the verdict and the block's record
# ---------------------------------------------------------------------------------------------------------------


def _snap(wall, cpu, busy, steal, runnable=0, cpus=1, machine=1):
    return c.Snapshot(wall, cpu, busy, steal, runnable, None, cpus, machine)


def test_readings_of_a_block_shorter_than_a_cpu_second():
    # 0.5 s on 1 CPU: a capacity of 0.5 CPU-seconds; steal 0.1 s of it, the process busy 0.25 s
    r = c.readings(_snap(0.0, 0.0, 0.0, 0.0), _snap(0.5, 0.25, 0.25, 0.1))
    assert r["steal_share"] == 0.2 and r["cpu_per_wall"] == 0.5 and r["others_share"] == 0.0


def test_readings_round_wall_to_microseconds_and_steal_to_four_digits():
    r = c.readings(_snap(0.0, 0.0, None, 0.0), _snap(1.23456789, 0.0, None, 0.123456 * 1.23456789))
    assert r["wall_s"] == 1.234568
    assert r["steal_share"] == 0.1235


def test_judge_without_a_wall_time_flags_no_share():
    shares = {"others_share": 0.9, "steal_share": 0.5, "cpus": 2}
    assert c.judge(shares) == []
    assert c.judge({**shares, "wall_s": 0.0}) == []
    assert c.judge({**shares, "wall_s": None}) == []
    assert c.judge({**shares, "wall_s": 1.0}) == ["other processes kept 90% of the 2 CPUs busy",
                                                  "the hypervisor took 50% of the CPU time (steal)"]


def test_block_meta_judges_a_timed_block_by_default(monkeypatch):
    # 1 s on 2 CPUs: busy 1.5 s, 0.5 of them this process: others 1 / 2; 4 other threads runnable at both ends
    start = _snap(0.0, 0.0, 10.0, 0.0, runnable=4, cpus=2, machine=2)
    monkeypatch.setattr(c, "snapshot", lambda count_own_threads=True: _snap(1.0, 0.5, 11.5, 0.0, 4, 2, 2))
    reasons = ["other processes kept 50% of the 2 CPUs busy",
               "4 and 4 other threads were runnable at entry and exit, on 2 CPUs"]
    meta = c.block_meta(start)
    assert meta["contention"] == reasons and meta["load"]["others_share"] == 0.5
    assert c.block_meta(start, timed=False)["contention"] == []
    assert c.block_meta(None) == {}
