"""Pieces to ranks of the same host, read in place in the sender's tensor
(TensorHeap, issue 39): all_to_all_single from a tensor made before the
group (ordinary memory: each piece copied into a shared slot) and from one
made after it (in the heap: read in place, no copy), then send/recv around
the ring, gather and scatter from the heap; then the collectives that
forward what they take (all_reduce's ring, broadcast's and reduce's chains,
all_gather's and reduce_scatter's rings), whose forwarded pieces are read
in place in the forwarding rank's tensor or scratch; then a forked child (a
DataLoader worker) that allocates elsewhere. Every result exact; this
rank's counts from tailmark.torch.stats exact too. Rank 0 prints "ok heap:
..." once every rank has passed.

  heap.py      (torchrun --nproc_per_node 4, one daemon)
  TT_HEAP_EXPECT=copied: the heap is off (TAILMARK_TORCH_HEAP_MB=0), so
  every piece is copied; the default expectation then fails.
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import init  # noqa: E402

E = 128 * 1024  # int32 elements a chunk: 512 KiB, one piece (a 1 MiB message carries 1048512 bytes)
rank = int(os.environ["RANK"])


def payload(r, n):
    """Rank r's input: n chunks of E, every element tells its rank and place."""
    return torch.arange(n * E, dtype=torch.int32) + r * 10**7


before = payload(rank, int(os.environ["WORLD_SIZE"]))  # before the group: not in the heap
before_ar = payload(rank, int(os.environ["WORLD_SIZE"]))
rank, world = init("tailmark")
import tailmark.torch as tt  # noqa: E402

assert world == 4, world
heap = os.environ.get("TT_HEAP_EXPECT", "in_place") == "in_place"
fails = []


def check(what, got, want):
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        fails.append(f"{what}: {bad.numel()} elements differ, first at {bad[0].tolist()}")


def counts(what, s0, in_place, copied):
    s = tt.stats()
    d = {k: s[k] - s0[k] for k in ("pieces_in_place", "pieces_copied")}
    if d != {"pieces_in_place": in_place, "pieces_copied": copied}:
        fails.append(f"{what}: {d}, not {in_place} in place and {copied} copied")
    return s


def a2a_expected():
    return torch.cat([payload(s, world)[rank * E:(rank + 1) * E] for s in range(world)])


# 1. From ordinary memory: 3 pieces (one per peer), each copied into a slot.
s = tt.stats()
out = torch.empty(world * E, dtype=torch.int32)
dist.all_to_all_single(out, before)
check("all_to_all_single from a tensor made before the group", out, a2a_expected())
s = counts("all_to_all_single from a tensor made before the group", s, 0, world - 1)
# 2. From a tensor made after the group: in the heap, read in place.
x = payload(rank, world)
out = torch.empty(world * E, dtype=torch.int32)
dist.all_to_all_single(out, x)
check("all_to_all_single from the heap", out, a2a_expected())
s = counts("all_to_all_single from the heap", s, world - 1 if heap else 0, 0 if heap else world - 1)
# 3. send/recv around the ring, from the heap: one piece each.
y = payload(rank, 1)
got = torch.empty(E, dtype=torch.int32)
ops = [dist.P2POp(dist.isend, y, (rank + 1) % world), dist.P2POp(dist.irecv, got, (rank - 1) % world)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
check("recv from the heap", got, payload((rank - 1) % world, 1))
s = counts("send from the heap", s, 1 if heap else 0, 0 if heap else 1)

# 4. gather to rank 0 and scatter from it, from the heap: one piece from each
# other rank; the root's scatter, one to each.
g = payload(rank, 1)
glist = [torch.empty(E, dtype=torch.int32) for _ in range(world)] if rank == 0 else None
dist.gather(g, glist, dst=0)
if rank == 0:
    for q in range(world):
        check(f"gather from rank {q}", glist[q], payload(q, 1))
s = counts("gather from the heap", s, 0 if rank == 0 or not heap else 1, 1 if rank != 0 and not heap else 0)
slist = [payload(100 + q, 1) for q in range(world)] if rank == 0 else None
got = torch.empty(E, dtype=torch.int32)
dist.scatter(got, slist, src=0)
check("scatter from rank 0", got, payload(100 + rank, 1))
s = counts("scatter from the heap", s, world - 1 if rank == 0 and heap else 0,
           world - 1 if rank == 0 and not heap else 0)

# 5. The collectives that forward what they take, E or 4E elements: one
# piece a step. Each rank's every piece goes in place where its tensor (or
# the op's scratch) is in the heap: 2(n-1) for all_reduce's ring, n-1 for
# all_gather's and reduce_scatter's; one for the chains' ranks that send.
sum_r = sum(range(world)) * 10**7


def want_sum(n_chunks):
    return world * torch.arange(n_chunks * E, dtype=torch.int32) + sum_r


def pieces(what, s0, n):
    return counts(what, s0, n if heap else 0, 0 if heap else n)


dist.all_reduce(before_ar)  # ordinary memory: every piece through a slot, heap or not
check("all_reduce of a tensor made before the group", before_ar, want_sum(world))
s = counts("all_reduce of a tensor made before the group", s, 0, 2 * (world - 1))
x = payload(rank, world)
dist.all_reduce(x)
check("all_reduce from the heap", x, want_sum(world))
s = pieces("all_reduce from the heap", s, 2 * (world - 1))
b = payload(rank, 1)
dist.broadcast(b, src=0)  # the chain 0 -> 1 -> 2 -> 3
check("broadcast from rank 0", b, payload(0, 1))
s = pieces("broadcast from the heap", s, 1 if rank < world - 1 else 0)
v = payload(rank, 1)
dist.reduce(v, dst=0)  # the chain 1 -> 2 -> 3 -> 0, partial sums in scratch
if rank == 0:
    check("reduce to rank 0", v, want_sum(1))
s = pieces("reduce from the heap", s, 0 if rank == 0 else 1)
gout = torch.empty(world * E, dtype=torch.int32)
dist.all_gather_into_tensor(gout, payload(rank, 1))
check("all_gather_into_tensor", gout, torch.cat([payload(q, 1) for q in range(world)]))
s = pieces("all_gather_into_tensor from the heap", s, world - 1)
rs = torch.empty(E, dtype=torch.int32)
dist.reduce_scatter_tensor(rs, payload(rank, world))
check("reduce_scatter_tensor", rs, want_sum(world)[rank * E:(rank + 1) * E])
s = pieces("reduce_scatter_tensor from the heap", s, world - 1)

# 6. A forked child (a DataLoader worker) allocates elsewhere, and frees a
# tensor it inherited from the heap without touching the books. Each side
# reads its books around its own allocation: the engine's thread releases
# the tensors of ops that already returned when it retires them, so the
# books may shrink at any moment in the rank (a CI run read 13107200 bytes
# before the fork and 12058624 after the rank's 2 MiB tensor: 3 MiB of the
# ops above released meanwhile); the child has no engine thread.
pid = os.fork()
if pid == 0:
    h = tt.stats()["heap_bytes"]
    z = torch.ones(4 * E, dtype=torch.int32)
    code = 0 if tt.stats()["heap_bytes"] == h else 1
    del z, x
    os._exit(code)
_, status = os.waitpid(pid, 0)
if status != 0:
    fails.append(f"a forked child allocated in the heap, or failed (wait status {status})")
# The rank's own: in the heap, 2 MiB more on its books. A release on the
# engine's thread between the two reads shows as less: read again (5 tries;
# a tensor not in the heap grows them by 0 every time).
for _ in range(5):
    h0 = tt.stats()["heap_bytes"]
    z = torch.ones(4 * E, dtype=torch.int32)
    grown = tt.stats()["heap_bytes"] - h0
    if grown == (4 * E * 4 if heap else 0):
        break
    del z
else:
    fails.append(f"heap_bytes grew by {grown} with a 2 MiB tensor, 5 times")

ok = torch.tensor([0 if fails else 1], dtype=torch.int32)
dist.all_reduce(ok)
for f in fails:
    print(f"rank {rank}: {f}", flush=True)
if rank == 0 and ok.item() == world:
    print(f"ok heap: {world} ranks, all_to_all_single, send, gather, scatter, all_reduce, broadcast, reduce, "
          f"all_gather_into_tensor and reduce_scatter_tensor exact; rank 0's pieces {s}",
          flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if not fails and ok.item() == world else 1)
