"""One collective, back to back, on one tensor: rank 0 prints a JSON line
with the median, least and most time per op. Every rank runs the same
number, so all end on the same op (a timed loop that each rank stopped on
its own clock left one rank in a barrier while another still sent).

  loop.py BYTES ITERS   (env LOOP_BACKEND tailmark|gloo, LOOP_OP ar|a2a)
"""
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import init  # noqa: E402

backend = os.environ.get("LOOP_BACKEND", "tailmark")
opn = os.environ.get("LOOP_OP", "ar")
rank, world = init(backend, timeout_s=300)
size, iters = int(sys.argv[1]), int(sys.argv[2])
t = torch.ones(size // 4)
o = torch.empty_like(t)


def op():
    if opn == "a2a":
        dist.all_to_all_single(o, t)
    else:
        dist.all_reduce(t)


for _ in range(3):
    op()
dist.barrier()
ts = []
for _ in range(iters):
    t0 = time.perf_counter()
    op()
    ts.append(time.perf_counter() - t0)
ts.sort()
if rank == 0:
    print('{"backend": "%s", "op": "%s", "bytes": %d, "iters": %d, "med_ms": %.2f, "min_ms": %.2f, "max_ms": %.2f}'
          % (backend, opn, size, iters, ts[len(ts) // 2] * 1e3, ts[0] * 1e3, ts[-1] * 1e3), flush=True)
dist.barrier()
dist.destroy_process_group()
