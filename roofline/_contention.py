"""The machine's load while a ``measure`` block ran, and whether it was measured under contention.

Timings taken while other processes compete for the CPUs (or while the hypervisor lends them to other guests) are
slow for reasons that have nothing to do with the code measured. A block records, at entry and at exit:

- the process's CPU time (``os.times``: user + system of all its threads) and the wall time;
- the machine-wide CPU time from ``/proc/stat`` (the ``cpu`` line: busy, idle and ``steal`` clock ticks);
- the runnable threads (``procs_running`` of ``/proc/stat``) minus this process's own running threads
  (``/proc/self/task/*/stat`` in state ``R``);
- the load averages (``os.getloadavg``).

:func:`judge` turns the two readings into reasons; the block is *measured under contention* when there is one:

- other processes kept at least half of the machine's CPU time busy during the block (machine busy time minus
  this process's CPU time, over CPUs x wall time; needs a block of at least 0.2 s: ``/proc/stat`` counts in ticks
  of 1/100 s);
- the hypervisor took at least 10% of the CPU time (steal);
- at entry and at exit alike, at least as many other threads were runnable as there are CPUs.

The load averages are recorded but decide nothing: they trail by a minute. Where ``/proc`` is missing the readings
are None and nothing is flagged. Everything here is cheap (a few small file reads) and never raises.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any, NamedTuple

OTHERS_SHARE = 0.5  # other processes' share of the machine's CPU time that counts as contention
STEAL_SHARE = 0.1  # steal share of the CPU time that counts as contention
MIN_WALL_S = 0.2  # shortest block whose /proc/stat tick counts are judged


class Snapshot(NamedTuple):
    """One reading: ``wall`` (monotonic seconds), ``cpu`` (process CPU seconds), ``busy`` / ``steal`` (machine
    CPU seconds from /proc/stat, None without it), ``runnable_others`` (None without /proc), ``loadavg``
    (1, 5, 15 minutes; None where unavailable), ``cpus`` (online CPUs)."""

    wall: float
    cpu: float
    busy: float | None
    steal: float | None
    runnable_others: int | None
    loadavg: tuple[float, float, float] | None
    cpus: int


def _ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK")) or 100
    except (ValueError, OSError, AttributeError):
        return 100


_HZ = _ticks()


def _proc_stat() -> tuple[float | None, float | None, int | None]:
    """(busy seconds, steal seconds, procs_running) of the whole machine, None where /proc/stat says nothing."""
    try:  # one read(2) of raw bytes: the entry reading runs inside the block's timed window, so keep it short
        fd = os.open("/proc/stat", os.O_RDONLY)
        try:
            text = os.read(fd, 1 << 16).decode("ascii", "replace")
        finally:
            os.close(fd)
    except OSError:
        return None, None, None
    busy = steal = running = None
    # only the first line ("cpu ...", the sum over CPUs) and "procs_running N" are parsed: the file's other lines
    # (one per CPU, interrupt counts) can be long
    first = text.split("\n", 1)[0].split()
    if len(first) >= 5 and first[0] == "cpu":
        try:
            v = [int(x) for x in first[1:9]] + [0] * (9 - len(first))
            user, nice, system, idle, iowait, irq, softirq, st = v[:8]
            busy = (user + nice + system + irq + softirq) / _HZ
            steal = st / _HZ
        except ValueError:
            pass
    at = text.find("\nprocs_running ")
    if at >= 0:
        try:
            end = text.find("\n", at + 15)
            running = int(text[at + 15:end if end >= 0 else len(text)].strip())
        except ValueError:
            pass
    return busy, steal, running


def _own_running_threads() -> int:
    """Threads of this process in state R (running or runnable), at least 1 (the one reading)."""
    n = 0
    for path in glob.glob("/proc/self/task/*/stat"):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        # the state follows the parenthesised command name, which may itself contain spaces or parentheses
        state = text[text.rfind(")") + 2:text.rfind(")") + 3]
        n += state == "R"
    return max(n, 1)


def snapshot(count_own_threads: bool = True) -> Snapshot:
    """The machine's load now. Never raises. ``count_own_threads=False`` skips the scan of this process's threads
    (one file read per thread) and counts only the calling thread as this process's: the cheap reading taken at
    the start of a block, inside its timed window (an own thread still spinning from earlier work then counts as
    another's; the check at exit is exact, and the runnable-threads evidence needs both)."""
    busy, steal, running = _proc_stat()
    own = _own_running_threads() if count_own_threads else 1
    others = None if running is None else max(0, running - own)
    try:
        load = tuple(round(x, 2) for x in os.getloadavg())
    except (OSError, AttributeError):
        load = None
    t = os.times()
    return Snapshot(time.monotonic(), t.user + t.system, busy, steal, others, load, os.cpu_count() or 1)


def readings(start: Snapshot, end: Snapshot) -> dict[str, Any]:
    """The load of the interval between two snapshots, as plain JSON values (None where unknown):
    ``wall_s``, ``process_cpu_s``, ``cpu_per_wall`` (process CPU time / wall time: up to the number of threads it
    keeps busy), ``others_share`` (other processes' share of the machine's CPU time), ``steal_share``,
    ``runnable_others`` ([at entry, at exit]), ``loadavg`` ([at entry, at exit], each 1/5/15 minutes), ``cpus``."""
    wall = max(end.wall - start.wall, 0.0)
    cpu = max(end.cpu - start.cpu, 0.0)
    capacity = end.cpus * wall
    others = steal = None
    if start.busy is not None and end.busy is not None and capacity > 0:
        others = round(min(max((end.busy - start.busy) - cpu, 0.0) / capacity, 1.0), 4)
    if start.steal is not None and end.steal is not None and capacity > 0:
        steal = round(min(max(end.steal - start.steal, 0.0) / capacity, 1.0), 4)
    return {
        "wall_s": round(wall, 6),
        "process_cpu_s": round(cpu, 6),
        "cpu_per_wall": round(cpu / wall, 4) if wall > 0 else None,
        "others_share": others,
        "steal_share": steal,
        "runnable_others": [start.runnable_others, end.runnable_others],
        "loadavg": [None if start.loadavg is None else list(start.loadavg),
                    None if end.loadavg is None else list(end.loadavg)],
        "cpus": end.cpus,
    }


def judge(load: dict[str, Any]) -> list[str]:
    """Why the interval described by ``load`` (a :func:`readings` dict) was measured under contention; empty
    when nothing says so. A pure function of its argument."""
    reasons = []
    wall = load.get("wall_s") or 0.0
    cpus = load.get("cpus") or 1
    others = load.get("others_share")
    if wall >= MIN_WALL_S and others is not None and others >= OTHERS_SHARE:
        reasons.append(f"other processes kept {100 * others:.0f}% of the {cpus} CPUs busy")
    steal = load.get("steal_share")
    if wall >= MIN_WALL_S and steal is not None and steal >= STEAL_SHARE:
        reasons.append(f"the hypervisor took {100 * steal:.0f}% of the CPU time (steal)")
    runnable = [r for r in (load.get("runnable_others") or []) if r is not None]
    if len(runnable) == 2 and min(runnable) >= cpus:
        reasons.append(f"{runnable[0]} and {runnable[1]} other threads were runnable at entry and exit, on "
                       f"{cpus} CPUs")
    return reasons


def block_meta(start: Snapshot | None) -> dict[str, Any]:
    """``{"load": readings, "contention": reasons}`` for a block that began at ``start`` and ends now (empty for
    ``start=None``)."""
    if start is None:
        return {}
    load = readings(start, snapshot())
    return {"load": load, "contention": judge(load)}
