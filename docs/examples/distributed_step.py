"""A DDP step and an FSDP2 step on 2 CPU ranks with gloo, measured per rank and merged on rank 0.

    python docs/examples/distributed_step.py          # starts the 2 ranks itself (no torchrun needed)

It also writes each rank's FSDP2 report to fsdp2_rank<N>.json in the current directory.

Each rank measures its own step; rank 0 gathers the reports and prints the per-rank table and the communication
share. The interconnect ceiling of this run is the gloo all-reduce bus bandwidth measured first over loopback."""

import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import roofline
from roofline import distributed as rd


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))


def transformer():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
                                 for _ in range(2)])


def run(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    link = rd.measure_interconnect()  # every rank calls it: an all-reduce sweep over loopback
    torch.manual_seed(rank)

    # DDP: the reducer's bucketed all-reduce of the gradients
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(mlp())
    x = torch.randn(64, 256)
    model(x).sum().backward()  # the first step builds DDP's buckets
    with roofline.measure(model, timing="op") as r:
        model(x).sum().backward()
    merged = roofline.gather(r)
    if rank == 0:
        print(f"gloo all-reduce bus bandwidth: {link['busbw'] / 1e9:.2f} GB/s")
        print("== DDP ==")
        print(rd.communication(r))
        print(merged)

    # FSDP2: parameters all-gathered per layer, gradients reduce-scattered, the optimizer on the local shards
    from torch.distributed.fsdp import fully_shard

    model = transformer()
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(8, 32, 128)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    with roofline.measure(model, timing="op") as r:
        model(x).sum().backward()
        opt.step()
    r.to_json(f"fsdp2_rank{rank}.json")  # for `python -m roofline merge fsdp2_rank*.json`
    merged = roofline.gather(r)
    if rank == 0:
        print("== FSDP2 ==")
        for k, v in rd.communication(r).items():
            print(f"{k:>15}: {v['calls']} calls, {v['message_bytes'] / 1e6:.3f} MB messages, "
                  f"{v['bus_bytes'] / 1e6:.3f} MB on the bus")
        print(merged)
        print(r.table(top=6))
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(2, port), nprocs=2)
