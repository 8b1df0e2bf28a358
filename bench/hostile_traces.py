"""Hostile and damaged traces too big for the test suite, read by roofline's trace reader
(roofline/_traces/_read.py): each case is generated into --tmp, read in a child process of its own with a time limit,
and judged: the expected outcome (a TraceError, or events with the reader's issues saying what was skipped or cut),
within the time limit, and a peak memory (VmHWM, the child's own high-water RSS) that stays bounded whatever the
file's size. The small versions of these cases are in tests/test_trace_read.py.

    python bench/hostile_traces.py [--tmp /tmp/roofline-hostile] [--scale 1.0] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1 << 20

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["ROOFLINE_ROOT"])
from roofline._traces._read import open_trace, TraceError


def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


base = hwm()
t = time.perf_counter()
out = {"events": 0, "issues": [], "error": None}
try:
    r = open_trace(sys.argv[1])
    for b in r.event_batches():
        out["events"] += len(b)
    out["issues"] = r.issues
    out["complete"] = r.complete
except TraceError as e:
    out["error"] = str(e)[-300:]
out["wall"] = time.perf_counter() - t
out["peak"] = hwm()
out["base"] = base
print(json.dumps(out))
"""

EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2.0, "args": {}}'


def normal_events(n):
    return b",\n".join([EVENT] * n)


def write(path, parts, compress=False):
    """Write the byte strings (or generators of them) of ``parts`` to ``path``, streamed."""
    f = gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")
    with f:
        for p in parts:
            if isinstance(p, (bytes, bytearray)):
                f.write(p)
            else:
                for q in p:
                    f.write(q)
    return path


def repeat(piece: bytes, total: int):
    """``piece`` repeated to ``total`` bytes, in 16 MB writes."""
    block = piece * max(1, (16 * MB) // len(piece))
    left = total
    while left > 0:
        b = block[:left]
        left -= len(b)
        yield b


def cases(tmp, scale):
    big = int(300 * MB * scale)
    head = b'{"schemaVersion": 1, "traceEvents": [\n' + normal_events(1000) + b",\n"
    tail = b",\n" + normal_events(1000) + b'\n], "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}'
    yield ("one huge event (300 MB string)", "skipped",
           lambda p: write(p, [head, b'{"ph": "X", "name": "', repeat(b"x", big), b'"}', tail]))
    yield ("one huge event, gzip (a few MB on disk)", "skipped",
           lambda p: write(p, [head, b'{"ph": "X", "name": "', repeat(b"x", big), b'"}', tail], compress=True))
    yield ("huge event of backslashes and escaped quotes", "skipped",
           lambda p: write(p, [head, b'{"name": "', repeat(b'\\\\\\"', big), b'"}', tail]))
    yield ("1 GB of blanks inside traceEvents, gzip", "skipped",
           lambda p: write(p, [head, repeat(b" ", int(1024 * MB * scale)), EVENT, tail], compress=True))
    yield ("huge header member (300 MB; 80 MB at least)", "skipped",  # the limit is 64 MB
           lambda p: write(p, [b'{"metadata": "', repeat(b"m", max(big, 80 * MB)), b'", "traceEvents": [',
                               normal_events(10), b"]}"]))
    yield ("10 million brackets deep", "TraceError",
           lambda p: write(p, [b'{"traceEvents": [', repeat(b"[", int(10 * MB * scale))]))
    yield ("100 MB trace cut at its end", "truncated",
           lambda p: write(p, [head, repeat(EVENT + b",\n", int(100 * MB * scale))]))
    yield ("200 MB trace, its gzip cut in the middle", "truncated",
           lambda p: _cut_gzip(p, [head, repeat(EVENT + b",\n", int(200 * MB * scale)), EVENT, tail]))
    yield ("20 million elements that are not objects", "events",
           lambda p: write(p, [b'{"traceEvents": [0', repeat(b",1", int(40 * MB * scale)), b"]}"]))
    yield ("random bytes (100 MB)", "TraceError",
           lambda p: write(p, [b"{", (os.urandom(MB) for _ in range(int(100 * scale)))]))
    yield ("200,000 top-level members", "TraceError",
           lambda p: write(p, [b"{", b",".join(b'"k%d": 1' % i for i in range(200_000)), b', "traceEvents": []}']))
    yield ("numbers beyond 64 bits and a double, NaN", "events",
           lambda p: write(p, [b'{"traceEvents": [', b",".join([b'{"id": 123456789012345678901234567890, '
                                                                 b'"ts": 1e400, "dur": NaN}'] * 100_000), b"]}"]))


def _cut_gzip(path, parts):
    write(path, parts, compress=True)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tmp", default="/tmp/roofline-hostile")
    ap.add_argument("--scale", type=float, default=1.0, help="size factor of the generated files")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    a = ap.parse_args()
    os.makedirs(a.tmp, exist_ok=True)
    print(f"{'case':46} {'file MB':>8} {'outcome':11} {'s':>6} {'peak MB':>8} {'base':>5}  verdict / detail")
    bad = 0
    for i, (name, expect, make) in enumerate(cases(a.tmp, a.scale)):
        path = os.path.join(a.tmp, f"case{i}.json")
        make(path)
        size = os.path.getsize(path)
        t = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True,
                               timeout=a.timeout, env=dict(os.environ, ROOFLINE_ROOT=ROOT))
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            r = json.loads(lines[-1]) if lines else {"crash": (p.stderr.strip().splitlines() or ["?"])[-1],
                                                     "rc": p.returncode}
        except subprocess.TimeoutExpired:
            r = {"crash": f"no answer within {a.timeout} s"}
        wall = time.perf_counter() - t
        if not a.keep:
            os.remove(path)
        if "crash" in r:
            bad += 1
            print(f"{name:46} {size / MB:8.1f} {'CRASH':11} {wall:6.1f} {'-':>8} {'':5}  FAIL: {r['crash']}")
            continue
        if r["error"]:
            outcome, detail = "TraceError", r["error"][-110:]
        elif any("truncated" in x for x in r["issues"]):
            outcome, detail = "truncated", f"{r['events']} events; {r['issues'][-1][:90]}"
        elif any("skipped" in x for x in r["issues"]):
            outcome, detail = "skipped", f"{r['events']} events; {r['issues'][0][:90]}"
        else:
            outcome, detail = "events", f"{r['events']} events, complete={r.get('complete')}"
        extra = (r["peak"] - r["base"]) / MB
        # bounded: what the reader holds beyond its imports stays within a few chunks, one event and one batch
        ok = outcome == expect and extra < 400
        bad += not ok
        print(f"{name:46} {size / MB:8.1f} {outcome:11} {r['wall']:6.1f} {r['peak'] / MB:8.0f} {r['base'] / MB:5.0f}  "
              f"{'ok' if ok else 'FAIL (expected ' + expect + ')'}: {detail}")
        sys.stdout.flush()
    print(f"\n{'all cases as expected' if not bad else f'{bad} case(s) not as expected'}; peak MB is the child's "
          "high-water RSS, base its RSS after imports (the reader's share must stay under 400 MB)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
