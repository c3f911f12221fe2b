"""DDP trains a seeded MLP (about 1 M parameters, bucket_cap_mb=1) for a
number of steps on the backend given; every rank writes its per-step losses
(as float.hex) and rank 0 the final state_dict, for ddp.sh to compare
between backends."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import init


def main():
    backend, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rank, world = init(backend)
    torch.manual_seed(1234)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                          nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 16))
    nparams = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    losses = []
    for _ in range(steps):
        x = torch.randn(64, 256, generator=gen)
        y = torch.randn(64, 16, generator=gen)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(f"{out}.losses.{rank}", "w") as f:
        f.write("\n".join(float(v).hex() for v in losses) + "\n")
    if rank == 0:
        torch.save(model.state_dict(), f"{out}.state")
    print(f"rank {rank}: {nparams} parameters, {steps} steps, last loss {losses[-1]:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
