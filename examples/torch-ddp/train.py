"""One model trained on several nodes with torch.distributed (gloo, CPU).

Run by dispatch once per rank (``dispatch submit --backend slurm --nodes 2 -- python
train.py``): it reads nothing but the launch contract dispatch sets (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK...), so the same file runs under ``torchrun``
too (which sets the same variables for its workers).

It proves the ranks are one job: an ``all_reduce`` of ``rank + 1`` must give
``1 + 2 + ... + WORLD_SIZE`` on every rank, and after a few DistributedDataParallel
steps on different data per rank every rank holds the same weights. Exit 1 otherwise.

``--seconds N`` keeps training (a step every half second) for N seconds, so that a node
can be lost mid-run.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=0.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    where = f"rank {rank}/{world} on {os.environ.get('SLURMD_NODENAME', socket.gethostname())}"

    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    print(f"{where}: all_reduce={total.item():g} expected={expected:g}", flush=True)

    torch.manual_seed(0)  # the same initial weights everywhere; DDP checks it too
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    until = time.monotonic() + args.seconds
    steps = 0
    while steps < 5 or time.monotonic() < until:
        x = torch.randn(16, 4, generator=data)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()  # gradients averaged over every rank
        optimiser.step()
        steps += 1
        if steps >= 5:
            time.sleep(0.5)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    in_sync = all(torch.equal(g, weights) for g in gathered)
    print(f"{where}: steps={steps} loss={loss.item():.4f} weights-in-sync={in_sync}", flush=True)
    dist.barrier()  # no rank tears the group down while another still talks to it
    dist.destroy_process_group()
    return 0 if total.item() == expected and in_sync else 1


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's teardown: torch's C++ side can still abort there
    # ("terminate called without an active exception", exit 134) after a clean run on a
    # loaded machine, which would turn a finished training into a failure. Everything
    # this script owes is done and flushed above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
