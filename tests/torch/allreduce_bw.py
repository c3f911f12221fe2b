"""all_reduce bus bandwidth for one backend: for each size (bytes of
float32), a warm-up, then the median time of a few runs. One JSON line per
size: {"backend", "bytes", "seconds", "busbw_gbps", "algbw_gbps"}.
busbw = bytes * 2 (n - 1) / n / time (what a ring moves per rank)."""
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist

from common import init


def main():
    backend = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2].split(",")]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0  # seconds per size, about
    rank, world = init(backend, timeout_s=300)
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        t0 = time.perf_counter()
        dist.all_reduce(t)  # warm-up (and the sessions' first use)
        # Every rank must run the same number of operations: agree on the
        # count from the slowest warm-up.
        warm = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(warm, op=dist.ReduceOp.MAX)
        runs = int(min(50, max(3, budget / max(warm.item(), 1e-6))))
        times = []
        for _ in range(runs):
            # Everyone starts together, so the time is the operation's.
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        # Agree on one figure: the slowest rank's median.
        med = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        sec = med.item()
        if rank == 0:
            print(json.dumps({"backend": backend, "world": world, "bytes": size, "runs": len(times),
                              "seconds": sec, "algbw_gbps": size * 8 / sec / 1e9,
                              "busbw_gbps": size * 8 * 2 * (world - 1) / world / sec / 1e9}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
