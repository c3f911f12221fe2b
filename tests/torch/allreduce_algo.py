"""all_reduce latency, the ring against recursive doubling, interleaved in
one job (the same ranks, daemons and sessions): for each round, each size,
both algorithms (their order alternating by round), each a batch of
back-to-back all_reduces of float32 (steady state, as osu_allreduce times
it) after a barrier; a batch's time is the slowest rank's. One JSON line
per (round, size, algorithm) on rank 0:
{"world", "round", "bytes", "algo", "runs", "us"} (us: per all_reduce).
  allreduce_algo.py SIZES [ROUNDS [SECONDS_PER_BATCH]]
TT_ALGOS: the algorithms compared (default "ring,rd"; "ring,hier" for the
hierarchical one, on ranks that share their hosts' daemons)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import tailmark.torch as tt
from common import init


def batch(t, runs):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(runs):
        dist.all_reduce(t)
    el = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(el, op=dist.ReduceOp.MAX)
    return el.item()


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    per = float(sys.argv[3]) if len(sys.argv) > 3 else 0.15
    rank, world = init("tailmark", timeout_s=300)
    algos = tuple(os.environ.get("TT_ALGOS", "ring,rd").split(","))  # the ring first: the ratios' base
    runs = {}
    for size in sizes:  # warm-up, and each size's batch length from the slower algorithm
        t = torch.ones(max(1, size // 4), dtype=torch.float32)
        slow = 0.0
        for a in algos:
            tt.set_allreduce(a)
            batch(t, 2)
            slow = max(slow, batch(t, 3) / 3)
        runs[size] = int(min(2000, max(3, per / slow)))
    for rnd in range(rounds):
        for size in sizes:
            t = torch.ones(max(1, size // 4), dtype=torch.float32)
            for a in (algos if rnd % 2 == 0 else algos[::-1]):
                tt.set_allreduce(a)
                sec = batch(t, runs[size])
                if rank == 0:
                    print(json.dumps({"world": world, "round": rnd, "bytes": max(4, size // 4 * 4), "algo": a,
                                      "runs": runs[size], "us": sec / runs[size] * 1e6}), flush=True)
    tt.set_allreduce("auto")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
