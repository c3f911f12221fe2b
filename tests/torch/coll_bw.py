"""Collective bandwidth and latency for one backend (scripts/bench.sh
--torch). argv: backend, ops ("all_reduce,all_to_all"), sizes (bytes of
float32, comma-separated), seconds per (op, size), about (default 2).

For each op, each size: a warm-up (the sessions' first use), then as many
runs as fit the budget (3..50, the count agreed from the slowest rank's
warm-up, since every rank must run the same number of operations), each
started together after a barrier. The figure is the slowest rank's median
time. Rank 0 prints one JSON line per (op, size): {"backend", "op",
"world", "bytes", "runs", "seconds", "algbw_gbps", "busbw_gbps"}, and
last {"backend", "world", "maxrss_mib"}: the largest rank's peak RSS.

The size is each rank's buffer, as nccl-tests count it: all_reduce's
tensor; all_to_all's input (all_to_all_single, even splits: size / world
to each rank, itself included). Bus bandwidth, nccl-tests' convention:
all_reduce bytes x 2(n-1)/n / time, all_to_all bytes x (n-1)/n / time."""
import json
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist

from common import init

BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}


def main():
    backend = sys.argv[1]
    ops = sys.argv[2].split(",")
    sizes = [int(s) for s in sys.argv[3].split(",")]
    budget = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    rank, world = init(backend, timeout_s=600)
    for op in ops:
        if op not in BUS:
            raise SystemExit(f"coll_bw.py: unknown op {op} (all_reduce, all_to_all)")
        for size in sizes:
            n = size // 4
            if op == "all_reduce":
                t = torch.ones(n, dtype=torch.float32)
                run = lambda: dist.all_reduce(t)  # noqa: E731
            else:
                n -= n % world  # even splits
                inp = torch.full((n,), float(rank), dtype=torch.float32)
                outp = torch.empty(n, dtype=torch.float32)
                run = lambda: dist.all_to_all_single(outp, inp)  # noqa: E731
            t0 = time.perf_counter()
            run()
            warm = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(warm, op=dist.ReduceOp.MAX)
            runs = int(min(50, max(3, budget / max(warm.item(), 1e-6))))
            times = []
            for _ in range(runs):
                dist.barrier()
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            if op == "all_to_all":
                # What came from rank p is p (a cheap check that it moved).
                got = outp.view(world, -1)[:, 0].tolist()
                if got != [float(p) for p in range(world)]:
                    raise SystemExit(f"rank {rank}: all_to_all of {size} B: got {got}")
            med = torch.tensor([statistics.median(times)], dtype=torch.float64)
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            sec = med.item()
            if rank == 0:
                print(json.dumps({"backend": backend, "op": op, "world": world, "bytes": size,
                                  "runs": len(times), "seconds": sec, "algbw_gbps": size * 8 / sec / 1e9,
                                  "busbw_gbps": size * 8 * BUS[op](world) / sec / 1e9}), flush=True)
            del run
            t = inp = outp = None  # noqa: F841  (free this size's buffers before the next)
    peak = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024], dtype=torch.float64)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"backend": backend, "world": world, "maxrss_mib": round(peak.item())}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
