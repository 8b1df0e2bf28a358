"""Loading Kineto traces: speed (MB/s of uncompressed JSON) and peak memory of roofline's reader and of the whole
``roofline.load_trace``, beside HTA's (Holistic Trace Analysis) trace loading, on the same files, in one run; then a
synthetic directory of 1,000 rank traces summarised through an executor.

Each measurement runs in a child process of its own (nothing shared, no warm cache of Python objects), one at a time;
the time is the load alone (each method's imports done before the clock starts); its peak memory is the child's
high-water RSS (VmHWM; imports included: "base" is the RSS after the imports), under an address-space limit
(``--mem-limit-gb``: a loader that needs more fails with MemoryError and is reported as such, rather than pushing a
shared machine into swap).

Methods:
  reader/<decoder>   roofline._traces._read.open_trace: every event decoded and dropped (msgspec, orjson, json)
  whole/orjson       the naive way: the whole document decoded by orjson at once (gc paused), then dropped
  ijson              ijson's C backend (yajl2_c) streaming traceEvents items (what HTA's fast path builds on)
  load_trace         roofline.load_trace: the reader, the event model and the report
  hta/json, hta/ijson  hta.common.trace_parser.parse_trace_dataframe with HTA's default JSON backend and with its
                     IJSON_BATCH_AND_COMPRESS backend (needs --hta-python: a Python with holistictraceanalysis)

Traces: TraceLens's H100 traces (tests/data/traces/tracelens_h100/) and synthetic ones of --sizes MB, made by
replicating the events of the largest (times and ids shifted per copy), written to --tmp (not kept in the repository).

    python bench/trace_load.py --hta-python /work/venv-hta/bin/python [--sizes 200,1000] [--ranks 1000] [--quick]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's roofline
DEV = os.path.join(ROOT, "tests", "data", "traces", "tracelens_h100")

CHILD = r"""
import gc, json, os, resource, sys, time


def peak_rss():
    # VmHWM: this process's own high-water mark (ru_maxrss would carry the forking parent's from before exec)
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


method, path = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, os.environ.get("ROOFLINE_ROOT", "."))
import gzip
n = 0
# imports first, outside the timing (each method's own: roofline with NumPy, orjson, ijson, HTA with pandas)
if method.startswith("reader/"):
    from roofline._traces._read import open_trace
elif method == "whole/orjson":
    import orjson
elif method == "ijson":
    import ijson
elif method == "load_trace":
    import warnings
    warnings.simplefilter("ignore")
    import roofline
elif method.startswith("hta/"):
    import logging
    logging.disable(logging.CRITICAL)
    import warnings
    warnings.simplefilter("ignore")
    from hta.configs.parser_config import ParserBackend, ParserConfig
    from hta.common.trace_parser import parse_trace_dataframe
base = peak_rss()
t0, c0 = time.perf_counter(), time.process_time()
try:
    if method.startswith("reader/"):
        r = open_trace(path, decoder=method.split("/")[1])
        for b in r.event_batches():
            n += len(b)
    elif method == "whole/orjson":
        data = open(path, "rb").read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        gc.disable()
        n = len(orjson.loads(data)["traceEvents"])
        del data
    elif method == "ijson":
        f = gzip.open(path, "rb") if open(path, "rb").read(2) == b"\x1f\x8b" else open(path, "rb")
        for _ in ijson.items(f, "traceEvents.item", use_float=True):
            n += 1
    elif method == "load_trace":
        rep = roofline.load_trace(path)
        n = len(rep.records)
    elif method.startswith("hta/"):
        cfg = ParserConfig()
        cfg.parser_backend = ParserBackend.JSON if method == "hta/json" else ParserBackend.IJSON_BATCH_AND_COMPRESS
        meta, df, sym = parse_trace_dataframe(path, cfg)
        n = len(df)
    else:
        raise SystemExit("unknown method " + method)
    err = None
except MemoryError:
    err = "MemoryError (address-space limit)"
except Exception as e:
    err = f"{type(e).__name__}: {str(e)[:200]}"
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"n": n, "wall": wall, "cpu": cpu, "maxrss": peak_rss(), "base": base, "error": err}))
"""


def run_child(python, method, path, limit, timeout):
    env = dict(os.environ, ROOFLINE_ROOT=ROOT, PYTHONWARNINGS="ignore")
    t = time.perf_counter()
    try:
        p = subprocess.run([python, "-c", CHILD, method, path, str(limit)], capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall": time.perf_counter() - t}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (p.stderr or "").strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        why = f"crashed (signal {-p.returncode})" if p.returncode < 0 else f"failed: {tail[0][:200]}"
        return {"error": f"child {why}", "wall": time.perf_counter() - t}
    return json.loads(lines[-1])


def json_size(path) -> int:
    if open(path, "rb").read(2) != b"\x1f\x8b":
        return os.path.getsize(path)
    n = 0
    with gzip.open(path, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                return n
            n += len(b)


def make_synthetic(src, mb, out):
    """A trace of about ``mb`` MB of JSON: the events of ``src`` copied, each copy's times shifted past the previous
    copy's and its ids (correlation, External id, flow ids) offset, so that the copies do not collide."""
    if os.path.exists(out) and abs(os.path.getsize(out) - mb * 1e6) < 0.2 * mb * 1e6:
        return out
    import orjson
    with gzip.open(src, "rb") as f:
        doc = orjson.loads(f.read())
    ev = doc.pop("traceEvents")
    ts = [e["ts"] for e in ev if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts)) * 1.01 + 1000.0
    one = sum(len(orjson.dumps(e)) + 2 for e in ev)
    copies = max(1, round(mb * 1e6 / one))
    ids = 10 ** 7
    with open(out, "wb") as f:
        head = orjson.dumps(doc)[1:-1]
        f.write(b"{" + head + b', "traceEvents": [\n')
        first = True
        for k in range(copies):
            parts = []
            for e in ev:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + k * span
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] += k * ids
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for key in ("correlation", "External id"):
                        if isinstance(a.get(key), int):
                            a[key] += k * ids
                    e2["args"] = a
                parts.append(orjson.dumps(e2))
            f.write((b"" if first else b",\n") + b",\n".join(parts))
            first = False
        f.write(b"\n]}")
    return out


def make_rank_dir(src, n, out):
    """``n`` rank traces (gzip, tensorboard_trace_handler's names) from ``src``: each with its distributedInfo and an
    NCCL all-reduce kernel at the end of the step whose length varies by rank (rank 7 of every 100 is 5x longer), so
    that the summary has communication to rank and outliers to find."""
    marker = os.path.join(out, f".made-{n}")
    if os.path.exists(marker):
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    import orjson
    with gzip.open(src, "rb") as f:
        doc = orjson.loads(f.read())
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel" and isinstance(e.get("ts"), (int, float))]
    end = max(e["ts"] + e.get("dur", 0) for e in kernels)
    dev = kernels[0].get("pid", 0)
    base = orjson.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[1:-1]
    body = b",\n".join(orjson.dumps(e) for e in ev)
    for r in range(n):
        dur = 200.0 + (r % 13) * 10.0 + (800.0 if r % 100 == 7 else 0.0)
        nccl = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": dev,
                "tid": 99, "ts": end - 100.0, "dur": dur, "args": {"device": dev, "stream": 99}}
        info = {"backend": "nccl", "rank": r, "world_size": n}
        text = (b"{" + base + b', "distributedInfo": ' + orjson.dumps(info) + b', "traceEvents": [\n' + body
                + b",\n" + orjson.dumps(nccl) + b"\n]}")
        with open(os.path.join(out, f"node{r // 8:03d}_{4000 + r}.{1733300000000000000 + r}.pt.trace.json.gz"),
                  "wb") as f:
            f.write(gzip.compress(text, compresslevel=1))
    open(marker, "w").close()
    return out


RANKS_CHILD = r"""
import json, os, resource, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.environ["ROOFLINE_ROOT"])
from concurrent.futures import ProcessPoolExecutor
from roofline._traces._ranks import load_ranks
d, workers = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
with ProcessPoolExecutor(workers) as ex:
    rs = load_ranks(d, executor=ex)
t1 = time.perf_counter()
text = rs.table()
t2 = time.perf_counter()
print(text)
self = next((int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:")), 0)
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print("RESULT " + json.dumps({"ranks": len(rs), "load": t1 - t0, "summary": t2 - t1, "parent_rss": self,
                              "child_rss": kids}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hta-python", help="a Python with holistictraceanalysis installed (HTA skipped without it)")
    ap.add_argument("--sizes", default="200,1000", help="synthetic trace sizes in MB (comma-separated)")
    ap.add_argument("--ranks", type=int, default=1000, help="ranks of the synthetic directory (0: skip)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="processes of the rank executor")
    ap.add_argument("--tmp", default="/tmp/roofline-trace-bench", help="where the synthetic traces are written")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit of each child")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed to each child")
    ap.add_argument("--methods", default="reader/msgspec,reader/orjson,reader/json,whole/orjson,ijson,load_trace,"
                                          "hta/json,hta/ijson")
    ap.add_argument("--quick", action="store_true", help="dev traces only, no synthetic traces, 50 ranks at most")
    a = ap.parse_args()
    os.makedirs(a.tmp, exist_ok=True)
    limit = int(a.mem_limit_gb * (1 << 30))
    methods = a.methods.split(",")
    hta = a.hta_python
    if hta and subprocess.run([hta, "-c", "import hta"], capture_output=True).returncode != 0:
        print(f"HTA skipped: {hta} cannot import hta (pip install holistictraceanalysis in that environment)")
        hta = None
    elif not hta:
        print("HTA skipped: no --hta-python given (a Python with holistictraceanalysis installed)")
    if not hta:
        methods = [m for m in methods if not m.startswith("hta/")]
    from roofline._traces._read import DECODERS
    for m in [m for m in methods if m.startswith("reader/") and m.split("/")[1] not in DECODERS]:
        print(f"{m} skipped: {m.split('/')[1]} is not installed")
        methods.remove(m)

    dev = sorted(glob.glob(os.path.join(DEV, "*.json.gz")), key=os.path.getsize)
    if not dev:
        raise SystemExit(f"no dev traces in {DEV}")
    traces = list(dev)
    if not a.quick:
        for mb in [int(x) for x in a.sizes.split(",") if x]:
            t = time.perf_counter()
            p = make_synthetic(dev[-1], mb, os.path.join(a.tmp, f"synthetic_{mb}MB.json"))
            print(f"made {p} ({os.path.getsize(p) / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
            traces.append(p)

    print(f"\nuncompressed JSON MB/s per wall-clock second and per CPU second (on a shared machine the CPU figure is "
          f"the steadier; CPU seconds in brackets), peak RSS of a child process per measurement; limit "
          f"{a.mem_limit_gb:g} GB of address space each; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    head = (f"{'trace':44} {'MB':>6}  {'method':14} {'s':>7} {'(cpu)':>7} {'MB/s':>7} {'cpu':>6} {'peak MB':>8} "
            f"{'base':>5} {'events':>9}")
    print(head)
    print("-" * len(head))
    results = {}
    for path in traces:
        size = json_size(path)
        name = os.path.basename(path).replace(".json.gz", "").replace(".json", "")[:44]
        for m in methods:
            python = hta if m.startswith("hta/") else sys.executable
            r = run_child(python, m, path, limit, a.timeout)
            results[(path, m)] = r
            if r.get("error"):
                print(f"{name:44} {size / 1e6:6.0f}  {m:14} {r['wall']:7.2f} {'':7} {'-':>7} {'-':>6} {'-':>8}  "
                      f"{r['error']}")
            else:
                print(f"{name:44} {size / 1e6:6.0f}  {m:14} {r['wall']:7.2f} ({r['cpu']:5.2f}) "
                      f"{size / 1e6 / r['wall']:7.1f} {size / 1e6 / max(r['cpu'], 1e-9):6.0f} {r['maxrss'] / 1e6:8.0f} "
                      f"{r['base'] / 1e6:5.0f} {r['n']:9d}")
            sys.stdout.flush()
        # side by side: the reader and load_trace against HTA on this trace
        ref = results.get((path, "hta/json"))
        if ref and not ref.get("error"):
            for m in ("reader/msgspec", "reader/orjson", "load_trace", "hta/ijson"):
                r = results.get((path, m))
                if r and not r.get("error"):
                    print(f"{'':44} {'':6}  {m} vs hta/json: {ref['wall'] / r['wall']:.1f}x faster "
                          f"({ref['cpu'] / r['cpu']:.1f}x in CPU time), {r['maxrss'] / ref['maxrss']:.2f}x the peak "
                          f"memory")
        print()

    n = min(a.ranks, 50) if a.quick else a.ranks
    if n:
        d = make_rank_dir(dev[0], n, os.path.join(a.tmp, f"ranks_{n}"))
        total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(d, "*.gz")))
        print(f"{n} rank traces in {d} ({total / 1e6:.0f} MB gzip, each {os.path.basename(dev[0])} with its rank and "
              f"an NCCL kernel), summarised by load_ranks through a ProcessPoolExecutor of {a.workers} workers:")
        env = dict(os.environ, ROOFLINE_ROOT=ROOT)
        p = subprocess.run([sys.executable, "-c", RANKS_CHILD, d, str(a.workers)], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=max(a.timeout, 3600))
        out = p.stdout.splitlines()
        res = [json.loads(ln[7:]) for ln in out if ln.startswith("RESULT ")]
        print("\n".join(ln for ln in out if not ln.startswith("RESULT ")))
        if not res:
            print("rank summary failed:", (p.stderr or "").strip()[-500:])
        else:
            r = res[0]
            print(f"-> {r['ranks']} ranks in {r['load']:.1f} s ({r['ranks'] / r['load']:.1f} ranks/s); the summary "
                  f"and table {r['summary'] * 1e3:.1f} ms; peak RSS: driver {r['parent_rss'] / 1e6:.0f} MB, largest "
                  f"worker {r['child_rss'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
