"""The machine's load while a ``measure`` block ran, and whether it was measured under contention.

Timings taken while other processes compete for the CPUs (or while the hypervisor lends them to other guests) are
slow for reasons that have nothing to do with the code measured. A block records, at entry and at exit:

- the process's CPU time (``os.times``: user + system of all its threads) with that of its descendants (child
  processes it waited for, and live ones from ``/proc/<pid>/stat``: DataLoader workers do the block's work) and the
  wall time;
- the CPU time of the CPUs the process may run on (``os.sched_getaffinity``) from ``/proc/stat`` (their ``cpuN``
  lines, or the ``cpu`` line when all are allowed: busy, idle and ``steal`` clock ticks);
- the runnable threads (``procs_running`` of ``/proc/stat``) minus this process's own running threads
  (``/proc/self/task/*/stat`` in state ``R``);
- the load averages (``os.getloadavg``).

:func:`judge` turns the two readings into reasons; the block is *measured under contention* when there is one:

- other processes kept at least half of the machine's CPU time busy during the block (machine busy time minus
  this process's CPU time, over CPUs x wall time; needs a block of at least 0.2 s: ``/proc/stat`` counts in ticks
  of 1/100 s);
- the hypervisor took at least 10% of the CPU time (steal);
- at entry and at exit alike, at least as many other threads were runnable as there are CPUs.

Where the kernel keeps scheduler statistics (``/proc/self/task/*/schedstat``: Linux), each reading also holds,
per thread of this process, its time on a CPU and its time spent runnable but waiting for one (nanoseconds). Their
change over the block gives ``threads_cpu_s``, ``threads_wait_s`` and ``wait_share`` (waiting / (waiting + on a
CPU)): how much the block's own threads were held back by others, whatever the machine's totals say, and with it
``unwaited_s``, the block's time with those waits taken out (:func:`unwaited`). A block counts as measured under
contention when its threads waited at least a quarter of their runnable time (``WAIT_SHARE``) and at least 2 ms.

The load averages are recorded but decide nothing: they trail by a minute. Where ``/proc`` is missing the readings
are None and nothing is flagged. Everything here is cheap (a few small file reads) and never raises.
A count-only block (``timing=None``, or ops on meta/fake tensors only) records the load but is never flagged: its
counts do not depend on it.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from typing import Any, NamedTuple

OTHERS_SHARE = 0.5  # other processes' share of the machine's CPU time that counts as contention
STEAL_SHARE = 0.1  # steal share of the CPU time that counts as contention
MIN_WALL_S = 0.2  # shortest block whose /proc/stat tick counts are judged
WAIT_SHARE = 0.25  # share of its threads' runnable time spent waiting for a CPU that counts as contention
MIN_WAIT_S = 0.002  # and the least waiting that does (the kernel accounts waits at scheduling events)


class Snapshot(NamedTuple):
    """One reading: ``wall`` (monotonic seconds), ``cpu`` (process CPU seconds), ``busy`` / ``steal`` (machine
    CPU seconds from /proc/stat, None without it), ``runnable_others`` (None without /proc), ``loadavg``
    (1, 5, 15 minutes; None where unavailable), ``cpus`` (the CPUs this process may run on: its affinity; busy and
    steal are those CPUs'), ``machine_cpus`` (online CPUs), ``threads`` (thread id -> (nanoseconds on a CPU,
    nanoseconds runnable and waiting for one) from the scheduler's statistics; None where unreadable)."""

    wall: float
    cpu: float
    busy: float | None
    steal: float | None
    runnable_others: int | None
    loadavg: tuple[float, float, float] | None
    cpus: int
    machine_cpus: int = 0
    threads: dict | None = None


def _ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK")) or 100
    except (ValueError, OSError, AttributeError):
        return 100


_HZ = _ticks()


def _affinity() -> list[int] | None:
    """The CPUs this process may run on (``os.sched_getaffinity``), None where unknown."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _cpu_fields(fields: list[str]) -> tuple[float, float] | None:
    """(busy, steal) seconds of one ``cpu`` / ``cpuN`` line's fields (after the name)."""
    try:
        v = [int(x) for x in fields[:8]] + [0] * max(0, 8 - len(fields))
    except ValueError:
        return None
    user, nice, system, idle, iowait, irq, softirq, st = v[:8]
    return (user + nice + system + irq + softirq) / _HZ, st / _HZ


def _proc_stat(cpus: list[int] | None = None) -> tuple[float | None, float | None, int | None]:
    """(busy seconds, steal seconds, procs_running) from /proc/stat, None where it says nothing: of the CPUs in
    ``cpus`` (the per-CPU lines) when given and not all of the machine's, else of the whole machine."""
    text = _read("/proc/stat")  # the entry reading runs inside the block's timed window: keep it short
    if text is None:
        return None, None, None
    return _parse_stat(text, cpus)


def _parse_stat(text: str, cpus: list[int] | None = None) -> tuple[float | None, float | None, int | None]:
    """:func:`_proc_stat` of the file's text."""
    busy = steal = running = None
    # the first line ("cpu ...", the sum over CPUs), or the per-CPU lines of the allowed CPUs, and
    # "procs_running N" are parsed: the file's other lines (interrupt counts) can be long
    if cpus:
        want = {f"cpu{i}" for i in cpus}
        got, b, st = 0, 0.0, 0.0
        for ln in text.split("\n"):
            if not ln.startswith("cpu"):
                break
            f = ln.split()
            if f and f[0] in want:
                v = _cpu_fields(f[1:])
                if v is not None:
                    got, b, st = got + 1, b + v[0], st + v[1]
        if got == len(want):
            busy, steal = b, st
    else:
        first = text.split("\n", 1)[0].split()
        if len(first) >= 5 and first[0] == "cpu":
            v = _cpu_fields(first[1:])
            if v is not None:
                busy, steal = v
    at = text.find("\nprocs_running ")
    if at >= 0:
        try:
            end = text.find("\n", at + 15)
            running = int(text[at + 15:end if end >= 0 else len(text)].strip())
        except ValueError:
            pass
    return busy, steal, running


_CPUS: list = []


def _cpu_count() -> int:
    """os.cpu_count(), read once (it scans /sys on every call; the machine does not change under a process)."""
    if not _CPUS:
        _CPUS.append(os.cpu_count() or 1)
    return _CPUS[0]


_READ_CHUNK = 1 << 16
_READ_MAX = 1 << 24  # /proc/stat of a machine with hundreds of CPUs and thousands of interrupts runs past 64 KiB


def _read(path: str) -> str | None:
    """A /proc file's text (up to 16 MiB), None where unreadable: open(2), read(2) until the end, close(2), without a
    Python file object (several times cheaper, and this runs twice per measured block). One read is enough for the
    small files of most machines; /proc/stat, whose procs_running line comes after a line per CPU and the interrupt
    counts, is read on where the first read filled its buffer."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = [os.read(fd, _READ_CHUNK)]
        total = len(parts[-1])
        while len(parts[-1]) == _READ_CHUNK and total < _READ_MAX:
            parts.append(os.read(fd, _READ_CHUNK))
            total += len(parts[-1])
        return b"".join(parts).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _tids(pid: str) -> list[str]:
    """The thread ids of process ``pid`` (``/proc/<pid>/task``; empty when unreadable)."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _running(stat: str | None) -> bool:
    """Whether a ``/proc/.../stat`` text says state R. The state follows the parenthesised command name, which may
    itself contain spaces or parentheses."""
    if not stat:
        return False
    at = stat.rfind(")")
    return stat[at + 2:at + 3] == "R"


def _own_running_threads(tids: list[str] | None = None) -> int:
    """Threads of this process in state R (running or runnable), at least 1 (the one reading)."""
    n = sum(_running(_read(f"/proc/self/task/{tid}/stat")) for tid in (_tids("self") if tids is None else tids))
    return max(n, 1)


def _schedstats(tids: list[str]) -> dict | None:
    """Thread id -> (ns on a CPU, ns waiting for one) of this process's threads ``tids`` (``schedstat``), None where
    the kernel does not keep them. A thread that ended between the listing and the read is left out."""
    out = {}
    for tid in tids:
        text = _read(f"/proc/self/task/{tid}/schedstat")
        if text is None:
            continue
        f = text.split()
        try:
            out[tid] = (int(f[0]), int(f[1]))
        except (IndexError, ValueError):
            continue
    return out or None


def _stat_cpu(pid: str) -> float:
    """utime + stime + cutime + cstime (seconds) of process ``pid``: its own CPU time and that of its children it
    has waited for; 0.0 where unreadable."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return 0.0
    try:
        v = text[text.rfind(")") + 2:].split()
        return sum(int(x) for x in v[11:15]) / _HZ  # fields 14-17 of proc(5), counted after the state (field 3)
    except ValueError:
        return 0.0


def _children(pid: str, tids: list[str] | None = None) -> list[str]:
    """Live children of process ``pid`` (every thread's ``children`` file)."""
    out = []
    for tid in _tids(pid) if tids is None else tids:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            out.extend(text.split())
    return out


def descendants_cpu(tids: list[str] | None = None) -> float:
    """CPU seconds of this process's descendants: those it waited for (``os.times`` children) and the live ones
    (``/proc``: each one's own time and that of the children it waited for, recursively). A block's work done by
    child processes (DataLoader workers, compile workers) is the process's own, not another process's. 0.0 for
    the live part where /proc is missing. ``tids``: this process's thread ids, when already listed."""
    t = os.times()
    total = t.children_user + t.children_system
    if tids is None:
        tids = _tids("self")
    seen, todo = set(), _children("self", tids)
    while todo:
        pid = todo.pop()
        if pid in seen or len(seen) > 4096:
            continue
        seen.add(pid)
        total += _stat_cpu(pid)
        todo.extend(_children(pid))
    return total


def _usable_cpus(allowed, machine: int) -> tuple[int, Any]:
    """(how many CPUs this process may run on, the set of them or None when that is all of the machine's): the
    affinity ``allowed`` where it names fewer CPUs than the ``machine`` has, else the machine's count."""
    cpus = allowed if allowed and len(allowed) < machine else None
    return (len(cpus) if cpus else machine), cpus


def snapshot(count_own_threads: bool = True) -> Snapshot:
    """The machine's load now. Never raises. ``count_own_threads=False`` skips the scan of this process's threads
    (one file read per thread) and counts only the calling thread as this process's: the cheap reading taken at
    the start of a block, inside its timed window (an own thread still spinning from earlier work then counts as
    another's; the check at exit is exact, and the runnable-threads evidence needs both)."""
    machine = _cpu_count()
    count, cpus = _usable_cpus(_affinity(), machine)
    busy, steal, running = _proc_stat(cpus)
    tids = _tids("self")  # listed once: the own-threads scan and the children walk both read them
    own = _own_running_threads(tids) if count_own_threads else 1
    others = None if running is None else max(0, running - own)
    try:
        load = tuple(round(x, 2) for x in os.getloadavg())
    except (OSError, AttributeError):
        load = None
    t = os.times()
    cpu = t.user + t.system + descendants_cpu(tids)
    return Snapshot(time.monotonic(), cpu, busy, steal, others, load, count, machine,
                    _schedstats(tids))


# set by roofline.steady and roofline.profile around the blocks of steps measured with step_time="ops_min": their
# op-timed sessions read their thread's waits for a CPU around each op (roofline._capture._session.Session.op_waits)
OP_WAITS: contextvars.ContextVar = contextvars.ContextVar("roofline_op_waits", default=False)

_OWN = threading.local()  # per thread: its schedstat file, kept open (False: not opened yet; None: unreadable)


class _Fd:
    """A file descriptor closed when its holder goes (a thread's ``_OWN`` when the thread ends), without the
    ResourceWarning an unclosed file object would give."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __del__(self):
        try:
            os.close(self.fd)
        except OSError:
            pass


def _forget_own():
    _OWN.__dict__.clear()  # in a forked child: the file open in the forking thread is the parent thread's


os.register_at_fork(after_in_child=_forget_own)


def run_delay_ns() -> int | None:
    """Nanoseconds the calling thread has spent runnable but waiting for a CPU since it started (the second field
    of its ``schedstat``; exact: the kernel adds each wait when the thread gets a CPU back), None where the kernel
    does not keep it. One read of a file each thread keeps open (a microsecond or two): cheap enough around each op
    of a step measured with ``step_time="ops_min"`` (roofline._loops._steady._ops_min)."""
    f = getattr(_OWN, "f", False)
    if f is False:
        try:
            f = _Fd(os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY))
        except OSError:
            f = None
        _OWN.f = f
    if f is None:
        return None
    try:
        return int(os.pread(f.fd, 64, 0).split()[1])
    except (OSError, IndexError, ValueError):
        return None


def thread_times(start: Snapshot, end: Snapshot) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds waiting for one) of this process's threads between two snapshots, None without
    scheduler statistics. A thread started in between counts from zero; one that ended is left out."""
    if not start.threads or not end.threads:
        return None
    return _thread_deltas(start.threads, end.threads)[:2]


def _thread_deltas(before: dict, after: dict) -> tuple[float, float, float]:
    """(seconds on a CPU, seconds waiting for one, both summed, and the seconds on a CPU of the busiest thread: the
    least wall time the window can have taken) over the threads of ``after`` (thread id -> (ns, ns)), from their
    readings in ``before``: a thread missing there counts from zero, one missing in ``after`` (it ended) is left
    out, and no thread's change counts below zero."""
    run = wait = busiest = 0
    for tid, (r, w) in after.items():
        r0, w0 = before.get(tid, (0, 0))
        ran = max(r - r0, 0)
        run += ran
        wait += max(w - w0, 0)
        busiest = max(busiest, ran)
    return run * 1e-9, wait * 1e-9, busiest * 1e-9


def thread_stats() -> dict | None:
    """Thread id -> (ns on a CPU, ns waiting for one) of every thread of this process now (``schedstat``), None
    where the kernel does not keep them: what a block reads next to its clock reads, so that its step's own waits
    are known (:func:`step_readings`). One file read per thread. Never raises."""
    try:
        stats = _schedstats(_tids("self"))
        if stats:
            for tid, (run, wait) in stats.items():
                run = thread_cpu_ns(tid)
                if run is not None:
                    stats[tid] = (run, wait)
        return stats
    except Exception:  # noqa: BLE001 - a reading, never a failure
        return None


def thread_cpu_ns(tid) -> int | None:
    """Thread ``tid`` (of this process)'s time on a CPU in nanoseconds from its CPU-time clock, None where it
    cannot be read. ``schedstat``'s own figure is the kernel's last update of it, which for a thread running at
    the time of the read trails by up to a scheduler tick (milliseconds): too coarse for one step. The clock brings
    a running thread's time up to date first. Its id is Linux's encoding of a thread's CPU clock (what
    ``pthread_getcpuclockid`` returns: ``~tid << 3 | 6``), readable for any thread of the calling process."""
    try:
        return time.clock_gettime_ns((~int(tid) << 3) | 6)
    except (OSError, ValueError, OverflowError, AttributeError):
        return None


def step_readings(before: dict | None, after: dict | None, wall: float | None) -> dict[str, Any] | None:
    """The scheduler's view of the block's threads over a ``wall``-second window (``before`` and ``after``: two
    :func:`thread_stats` read at its edges, inside it): ``wall_s``, ``threads_cpu_s``, ``threads_wait_s`` and
    ``unwaited_s`` (:func:`unwaited`), or None where either reading or the wall time is missing. A thread started in
    between counts from zero; one that ended is left out."""
    if not before or not after or wall is None or not wall > 0:
        return None
    run_s, wait_s, busiest = _thread_deltas(before, after)
    cpus = _usable_cpus(_affinity(), _cpu_count())[0]
    return {"wall_s": round(wall, 6), "threads_cpu_s": round(run_s, 6), "threads_wait_s": round(wait_s, 6),
            "unwaited_s": round(unwaited(wall, run_s, wait_s, cpus, busiest), 6)}


def unwaited(wall: float, cpu_s: float, wait_s: float, cpus: int, busiest: float = 0.0) -> float:
    """The time of a block of ``wall`` seconds had its threads never waited for a CPU: the wall time scaled by the
    share of their runnable time they spent on one, ``wall * cpu / (cpu + wait)``, and never less than ``cpu /
    cpus`` (all the CPUs busy with the block's own threads: waits for each other's CPU are not others' doing) nor
    than ``busiest``, the most one thread spent on a CPU (the waits are pooled over the threads: one thread's long
    wait would otherwise shorten another's time on a CPU). Equal to ``wall`` when nothing waited. An estimate: time a thread spent blocked (I/O, a device, a lock) is
    scaled as if it were runnable, and a contended cache or memory bus slows the time on a CPU as well."""
    if wall <= 0 or cpu_s + wait_s <= 0:
        return wall
    return min(wall, max(wall * cpu_s / (cpu_s + wait_s), cpu_s / max(cpus, 1), busiest))


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
        "machine_cpus": end.machine_cpus or end.cpus,
        **_thread_readings(start, end, wall),
    }


def _thread_readings(start: Snapshot, end: Snapshot, wall: float) -> dict[str, Any]:
    """The scheduler's view of the block's own threads (empty without it): ``threads_cpu_s``, ``threads_wait_s``,
    ``wait_share`` and ``unwaited_s``."""
    if not start.threads or not end.threads:
        return {}
    run, wait, busiest = _thread_deltas(start.threads, end.threads)
    return {"threads_cpu_s": round(run, 6), "threads_wait_s": round(wait, 6),
            "wait_share": round(wait / (run + wait), 4) if run + wait > 0 else 0.0,
            "unwaited_s": round(unwaited(wall, run, wait, end.cpus, busiest), 6)}


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
    share, waited = load.get("wait_share"), load.get("threads_wait_s")
    if share is not None and waited is not None and share >= WAIT_SHARE and waited >= MIN_WAIT_S:
        reasons.append(f"this process's threads waited {100 * share:.0f}% of their runnable time for a CPU "
                       f"({1e3 * waited:.1f} ms)")
    runnable = [r for r in (load.get("runnable_others") or []) if r is not None]
    machine = load.get("machine_cpus") or cpus  # procs_running counts the whole machine's threads
    if len(runnable) == 2 and min(runnable) >= machine:
        reasons.append(f"{runnable[0]} and {runnable[1]} other threads were runnable at entry and exit, on "
                       f"{machine} CPUs")
    return reasons


def block_meta(start: Snapshot | None, timed: bool = True) -> dict[str, Any]:
    """``{"load": readings, "contention": reasons}`` for a block that began at ``start`` and ends now (empty for
    ``start=None``). ``timed=False`` (a count-only block: ``timing=None``, or ops only on meta/fake tensors, whose
    numbers no load can change) records the load and flags nothing."""
    if start is None:
        return {}
    load = readings(start, snapshot())
    return {"load": load, "contention": judge(load) if timed else []}
