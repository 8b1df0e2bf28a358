"""Validate the cache-aware roofline on ResNet-50 inference on this CPU.

Each op is timed (``timing="op"``, the fastest of ``--runs`` runs of the same op stream) and its time compared
with two predictions: the DRAM-only roofline (``r.classification()["t_min"]``: every byte from DRAM) and the
cache-aware one (``r.cache_analysis()["t_min"]``: bytes from the level the LRU model says they come from). The
bench prints the median relative error |predicted - measured| / measured of each, over the ops that move data,
overall and for the ops each model calls memory-bound, then checks the model's levels against measurement: ops
predicted to come from a cache should be those whose achieved bandwidth is above the DRAM roof, and stay below
the roof of the level predicted.

    python bench/cache_model.py [--batch 2] [--runs 5] [--threads N]

Timings on a shared machine are noisy; the fastest of several runs per op reduces it. The ceilings are the measured
(cached) ones of this CPU.
"""

import argparse
import time

import numpy as np
import torch

import roofline


def measure_once(model, x):
    with torch.no_grad(), roofline.measure(model, timing="op") as r:
        model(x)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    x = torch.randn(args.batch, 3, 224, 224)
    with torch.no_grad():
        model(x)
        model(x)
    reports = [measure_once(model, x) for _ in range(args.runs)]
    r = reports[0]
    if len(r.accesses) == 0:
        raise SystemExit("this build's recorder captures no dataflow (Report.accesses is empty)")
    n = len(r.records)
    if any(len(q.records) != n for q in reports):
        raise SystemExit("runs recorded different op streams")
    # the fastest of the runs: on a shared machine the least disturbed
    t = np.min(np.stack([q.records["t_end"] - q.records["t_start"] for q in reports]), axis=0)
    c = r.classification()
    t0 = time.perf_counter()
    ca = r.cache_analysis()
    t_analysis = time.perf_counter() - t0
    t0 = time.perf_counter()
    opps = r.fusion_opportunities()
    hs = r.hints()
    t_more = time.perf_counter() - t0

    nbytes = c["bytes"]
    sel = (nbytes > 0) & np.isfinite(t) & (t > 0)
    dram_err = np.abs(c["t_min"] - t) / t
    cache_err = np.abs(ca["t_min"] - t) / t
    names = np.array(r.op_names, dtype=object)[r.records["op"]]
    print(f"ResNet-50 inference, batch {args.batch}, {torch.get_num_threads()} threads, {n} op calls "
          f"({int(sel.sum())} moving data), fastest of {args.runs} runs per op")
    print(f"ceilings: {r.ceilings.name}; levels " + ", ".join(
        f"{lv} {cap / 2**20:.2f} MiB @ {bw / 1e9:.0f} GB/s" if np.isfinite(cap) else f"{lv} @ {bw / 1e9:.0f} GB/s"
        for lv, cap, bw in zip(ca["levels"], ca["capacities"], ca["bandwidths"])))
    print(f"{len(r.accesses)} access rows; cache analysis {t_analysis * 1e3:.1f} ms, fusion + hints {t_more * 1e3:.1f} ms")
    print()
    mem_d = sel & (c["bound"] != 2)
    mem_c = sel & (ca["bound"] != 2)
    print(f"{'median relative error of per-op time':<44} {'DRAM-only':>10} {'cache-aware':>12}")
    print(f"{'  all ops moving data':<44} {np.median(dram_err[sel]):>10.3f} {np.median(cache_err[sel]):>12.3f}")
    print(f"{'  ops memory-bound in each model':<44} {np.median(dram_err[mem_d]):>10.3f} "
          f"{np.median(cache_err[mem_c]):>12.3f}")
    both = sel & (c["bound"] != 2) & (ca["bound"] != 2)
    print(f"{'  ops memory-bound in both':<44} {np.median(dram_err[both]):>10.3f} {np.median(cache_err[both]):>12.3f}")
    verdict = "lower" if np.median(cache_err[sel]) < np.median(dram_err[sel]) else "NOT lower"
    inplace = sel & np.array([n.split(".")[1].endswith("_") for n in names], bool)
    print(f"{'  in-place ops (no output to allocate)':<44} {np.median(dram_err[inplace]):>10.3f} "
          f"{np.median(cache_err[inplace]):>12.3f}")
    print(f"{'  ops faster than the predicted roof (violations)':<44} {int((sel & (t < c['t_min'] * 0.98)).sum()):>10} "
          f"{int((sel & (t < ca['t_min'] * 0.98)).sum()):>12}")
    print(f"the cache-aware median error over all ops moving data is {verdict} than the DRAM-only one")
    print()
    achieved = nbytes / t
    dram_bw = float(c["bw"][0])
    above = sel & (achieved > dram_bw)
    from_cache = sel & (ca["level"] != "DRAM") & (ca["level"] != "")
    lvl_bw = {lv: bw for lv, bw in zip(ca["levels"], ca["bandwidths"])}
    below_level = np.array([achieved[i] <= lvl_bw.get(ca["level"][i], np.inf) for i in range(n)])
    print("ops predicted to come from a cache vs ops measured above the DRAM roof:")
    print(f"  predicted cache & above DRAM roof   {int((from_cache & above).sum()):>5}")
    print(f"  predicted cache & below DRAM roof   {int((from_cache & ~above & sel).sum()):>5}")
    print(f"  predicted DRAM  & above DRAM roof   {int((~from_cache & above).sum()):>5}")
    print(f"  predicted DRAM  & below DRAM roof   {int((~from_cache & ~above & sel).sum()):>5}")
    if (from_cache & above).any():
        print(f"  of those predicted from cache and above the DRAM roof, below the predicted level's roof: "
              f"{int((from_cache & above & below_level).sum())}/{int((from_cache & above).sum())}")
    print()
    print("by op (memory-bound calls in the DRAM-only model):")
    print(f"{'op':<42} {'calls':>5} {'from cache':>10} {'above DRAM':>10} {'err DRAM':>9} {'err cache':>9}")
    for name in sorted(set(names[mem_d].tolist())):
        m = mem_d & (names == name)
        print(f"{name:<42} {int(m.sum()):>5} {int((m & from_cache).sum()):>10} {int((m & above).sum()):>10} "
              f"{np.median(dram_err[m]):>9.3f} {np.median(cache_err[m]):>9.3f}")
    print()
    print(f"fusion opportunities: {len(opps)}; hints: {len(hs)}")
    for h in hs[:5]:
        print(f"  - {h}")


if __name__ == "__main__":
    main()
