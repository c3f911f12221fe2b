"""A rank whose operation waits on a peer sleeps (issue 39). Rank 1 sends
rank 0 a tensor, and receives one from it HOLD seconds later. Rank 0 sends
first and waits for its send to be delivered, while rank 1's piece, for a
receive that rank 0 has not posted yet, sits in its ring: what a peer
already on its next operation leaves there. The engine thread waited with
tm_wait, which returned at once for that piece, every time: it spun, a CPU
taken from the daemon and the other ranks (2 x 2 ranks over the wire, a
1 MiB all_to_all back to back, took about twice as long). It now waits for
its completions and the one stream it can take (tm_wait_sent).

The check: rank 0's CPU time (every thread of the process) over its wait is
under a quarter of the wait; then both receives are exact. Rank 0 prints
"ok idle: ..." once both ranks have passed.

  idle.py   (torchrun --nproc_per_node 2, one daemon)
"""
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import init  # noqa: E402

HOLD = 2.0
rank, world = init("tailmark")
assert world == 2, world
peer = 1 - rank
x = torch.arange(4096, dtype=torch.int64) + 10**6 * rank
y = torch.zeros(4096, dtype=torch.int64)
bad = []
dist.barrier()  # both ranks start together: rank 0's wait is HOLD less its 0.2 s
if rank == 1:
    w = dist.isend(x, 0)
    time.sleep(HOLD)  # rank 0's send waits for this receive
    dist.recv(y, 0)
    w.wait()
else:
    time.sleep(0.2)  # rank 1's piece lands in this rank's ring meanwhile
    c0, t0 = time.process_time(), time.monotonic()
    dist.isend(x, 1).wait()
    cpu, wall = time.process_time() - c0, time.monotonic() - t0
    dist.recv(y, 1)
    if wall < HOLD / 2:
        bad.append("the send was delivered after %.2f s: rank 1 did not hold it" % wall)
    if cpu > wall / 4:
        bad.append("%.2f s of CPU over a %.2f s wait for a delivery: the engine spun" % (cpu, wall))
if not torch.equal(y, torch.arange(4096, dtype=torch.int64) + 10**6 * peer):
    bad.append("the tensor from rank %d is not what it sent" % peer)
for b in bad:
    print("rank %d: %s" % (rank, b), flush=True)
flag = torch.tensor([len(bad)], dtype=torch.int32)
dist.all_reduce(flag)
if rank == 0 and flag.item() == 0:
    print("ok idle: rank 0 used %.3f s of CPU over its %.2f s wait for a delivery" % (cpu, wall), flush=True)
dist.destroy_process_group()
sys.exit(1 if flag.item() else 0)
