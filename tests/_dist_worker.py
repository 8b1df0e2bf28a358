"""One rank of the distributed tests (tests/test_distributed.py): ``python _dist_worker.py STORE RANK WORLD OUT
SCENARIO[,SCENARIO...]``. Joins a gloo process group through a file store, runs the scenarios and writes what it
saw (and the references it computed) to ``OUT/rank<RANK>.json``; rank 0 also writes the gathered results. The
expected values are computed here from the models' parameters and from single-process runs; the assertions are
in the test module."""

import copy
import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode

import roofline
from roofline import distributed as rd

STORE, RANK, WORLD, OUT, SCENARIOS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
CEIL = "H100 SXM"  # datasheet ceilings: no CPU benchmark in the tests


def param_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def flop_counter(model, x):
    with FlopCounterMode(display=False) as fc:
        model(x).sum().backward()
    return fc.get_total_flops()


def single(model, x, opt_factory=None):
    """roofline counts of one step of a plain (undistributed) copy on this rank's batch."""
    m = copy.deepcopy(model)
    opt = opt_factory(m) if opt_factory else None
    if opt:  # warm-up: optimizer state exists, as in the distributed run
        m(x).sum().backward()
        opt.step()
        opt.zero_grad()
    with roofline.measure(m, ceilings=CEIL) as r:
        m(x).sum().backward()
        if opt:
            opt.step()
    return r


def facts(r):
    """What the tests check about a report."""
    c = r.classification()
    rows = rd.collectives(r)
    bounds = [str(roofline.report.BOUNDS[int(c["bound"][row["record"]])]) for row in rows]
    ph = r.by_phase()
    return {
        "matrix_flops": r.matrix_flops, "vector_flops": r.vector_flops, "special_ops": r.special_ops,
        "bytes_read": r.bytes_read, "bytes_written": r.bytes_written, "calls": int(len(r.records)),
        "unknown": r.unknown_ops, "devices": r.meta.get("devices"), "distributed": r.meta.get("distributed"),
        "collectives": [{k: row[k] for k in ("op", "collective", "group_size", "message_bytes", "bus_bytes",
                                             "phase", "uncertain")} for row in rows],
        "collective_bounds": bounds,
        "collective_bw": [float(c["link_bw"][row["record"]]) for row in rows],
        "dram_bw": sorted({float(v) for v in c["bw"]}),
        "optimizer": {k: ph.get("optimizer", {}).get(k, 0) for k in ("vector_flops", "bytes_read",
                                                                      "bytes_written")},
        "totals_bound": r.totals()["bound"],
        "analysis_bounds": {op: row["bound"] for op, row in r.analysis().items()
                            if op in {x["op"] for x in rows if x["collective"] != "wait"}},
        "totals_bytes": r.totals()["bytes"], "network_bytes": r.totals().get("network_bytes"),
    }


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))


def ddp_case(model, x):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ref_fc = flop_counter(copy.deepcopy(model), x)
    ref = single(model, x)
    m = DDP(model)
    m(x).sum().backward()  # first iteration: DDP builds its buckets
    m.zero_grad()
    with roofline.measure(m, ceilings=CEIL) as r:
        m(x).sum().backward()
    out = facts(r)
    out.update(grad_bytes=param_bytes(model), ref_flop_counter=ref_fc, ref_matrix_flops=ref.matrix_flops)
    return r, out


def scenario_ddp_mlp():
    torch.manual_seed(100 + RANK)
    return ddp_case(mlp(), torch.randn(8, 32))


def scenario_ddp_resnet():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    torch.manual_seed(100 + RANK)
    return ddp_case(model, torch.randn(2, 3, 32, 32))


def scenario_fsdp():
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    layers = [torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True) for _ in range(2)]
    model = torch.nn.Sequential(*layers)
    torch.manual_seed(100 + RANK)
    x = torch.randn(2, 8, 32)
    opt_factory = lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, foreach=True)  # noqa: E731
    ref = single(model, x, opt_factory)
    pbytes = param_bytes(model)
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    opt = opt_factory(model)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    with roofline.measure(model, ceilings=CEIL) as r:
        model(x).sum().backward()
        opt.step()
    out = facts(r)
    out["fsdp_copies"] = {k: {f: v[f] for f in ("calls", "bytes_read", "bytes_written")}
                          for k, v in r.by_op().items() if k.startswith("fsdp.")}
    out.update(param_bytes=pbytes, ref_matrix_flops=ref.matrix_flops,
               ref_optimizer={k: ref.by_phase()["optimizer"][k] for k in ("vector_flops", "bytes_read",
                                                                           "bytes_written")})
    return r, out


def scenario_tp():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    x = torch.randn(4, 16)  # the same on every rank
    ref_fc = flop_counter(copy.deepcopy(model), x)
    mesh = init_device_mesh("cpu", (WORLD,))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    model(x).sum().backward()  # the first call runs DTensor's sharding propagation
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    lock = ShardingPropagator.__dict__["_fake_mode_lock"]
    with roofline.measure(model, ceilings=CEIL) as r:
        model(x).sum().backward()
        inside = ShardingPropagator.__dict__["_fake_mode_lock"]
    out = facts(r)
    out.update(ref_flop_counter=ref_fc, output_bytes=4 * 16 * 4)
    out["lock_wrapped_inside"] = inside is not lock and getattr(inside, "inner", None) is lock
    out["lock_restored"] = ShardingPropagator.__dict__["_fake_mode_lock"] is lock
    try:  # an exception inside the block leaves torch as it was
        with roofline.measure(model, ceilings=CEIL):
            model(x)
            raise KeyError("inside")
    except KeyError:
        pass
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    out["restored_after_error"] = (ShardingPropagator.__dict__["_fake_mode_lock"] is lock
                                   and not _get_current_dispatch_mode_stack())
    return r, out


def scenario_tp_first_call():
    """The first call of a fresh TP model inside the block: sharding propagation runs inside it."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.GELU(), torch.nn.Linear(40, 8))
    x = torch.randn(4, 24)
    ref_fc = flop_counter(copy.deepcopy(model), x)
    mesh = init_device_mesh("cpu", (WORLD,))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    with roofline.measure(model, ceilings=CEIL) as r:
        model(x).sum().backward()
    out = facts(r)
    out.update(ref_flop_counter=ref_fc)
    return r, out


def scenario_api():
    """The torch.distributed calls one by one, on 1,000 float32 elements (4,000 bytes) per rank."""
    x = torch.ones(1000)
    with roofline.measure(ceilings=CEIL) as r:
        dist.all_reduce(x)
        dist.all_gather_into_tensor(torch.empty(1000 * WORLD), x)
        dist.reduce_scatter_tensor(torch.empty(1000 // WORLD), x)
        dist.all_to_all_single(torch.empty(1000), x)
        dist.broadcast(x, src=0)
        dist.all_gather([torch.empty(1000) for _ in range(WORLD)], x)
        dist.gather(x, [torch.empty(1000) for _ in range(WORLD)] if RANK == 0 else None, dst=0)
        if RANK == 0:
            dist.send(x, dst=1)
        elif RANK == 1:
            dist.recv(x, src=0)
        dist.barrier()
        work = dist.all_reduce(x, async_op=True)
        work.wait()
    return r, facts(r)


def scenario_errors():
    """gather with a rank whose block raised, then with mismatched versions, then with a rank that never comes."""
    res = {}
    with roofline.measure(ceilings=CEIL) as ok:
        torch.ones(4) + 1
    # 1. rank 1's block raises; it still calls gather (in a finally)
    try:
        try:
            with roofline.measure(ceilings=CEIL) as r:
                if RANK == 1:
                    raise KeyError("boom")
                torch.ones(4) + 1
        finally:
            try:
                rd.gather(r, timeout=30)
                res["raised"] = None
            except Exception as e:  # noqa: BLE001
                res["raised"] = f"{type(e).__name__}: {e}"
    except KeyError:
        pass
    # 2. rank 1 runs another roofline version
    real = rd.VERSION  # the version a rank's payload carries
    if RANK == 1:
        rd.VERSION = "0.0.0+other"
    try:
        rd.gather(ok, timeout=30)
        res["version"] = None
    except Exception as e:  # noqa: BLE001
        res["version"] = f"{type(e).__name__}: {e}"
    finally:
        rd.VERSION = real
    # 3. rank 1 never calls gather: rank 0 times out
    if RANK == 0:
        import time

        t0 = time.monotonic()
        try:
            rd.gather(ok, timeout=3)
            res["timeout"] = None
        except Exception as e:  # noqa: BLE001
            res["timeout"] = f"{type(e).__name__}: {e}"
        res["timeout_s"] = time.monotonic() - t0
    return None, res


def main():
    dist.init_process_group("gloo", init_method=f"file://{STORE}", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    results = {}
    link = rd.measure_interconnect(sizes=(1 << 12, 1 << 16), iters=2)
    results["interconnect"] = link
    for name in SCENARIOS.split(","):
        try:
            r, out = globals()[f"scenario_{name}"]()
            if r is not None:
                merged = roofline.gather(r, timeout=60)
                out["saved"] = os.path.join(OUT, f"{name}.rank{RANK}.json")
                r.to_json(out["saved"])
                if merged is not None:
                    out["merged_totals"] = merged.totals()
                    out["merged_table"] = merged.table()
                    out["merged_ranks"] = merged.rank_ids
            results[name] = out
        except Exception:  # noqa: BLE001 - reported to the test
            results[name] = {"error": traceback.format_exc()}
    with open(os.path.join(OUT, f"rank{RANK}.json"), "w") as f:
        json.dump(results, f, default=str)
    if "errors" not in SCENARIOS:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # a rank abandoned by a timed-out gather must not wait for the others at exit


if __name__ == "__main__":
    main()
