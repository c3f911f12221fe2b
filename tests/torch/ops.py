"""Every operation and dtype at the given element counts, checked exactly
(integer-valued data, so every rank knows the expected result). Prints one
line per (op, dtype, count) and exits 1 on the first wrong element.
  ops.py COUNTS [DTYPES [BIG_DTYPES]]: counts over 2 M elements only in
  BIG_DTYPES (default: every dtype)."""
import ctypes
import sys
import time

import torch
import torch.distributed as dist

import tailmark.torch as tt
from common import init

# all_reduce also runs pinned to the ring and to recursive doubling, besides
# auto, at counts up to this (4 MiB of float32: above every world's threshold).
PINNED_MAX = (1 << 20) + 7
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64}


class Buffers:
    """Every tensor the checks use, carved out of a few byte buffers that
    are allocated (and faulted in) once: a fresh 64 MiB tensor costs about a
    second of page faults on this VM, more than the operation it feeds.
    madvise(MADV_HUGEPAGE) makes those faults 2 MiB each where THP is
    'madvise' (Debian's default)."""

    def __init__(self, nbytes, count):
        libc = ctypes.CDLL(None, use_errno=True)
        self.raw = []
        for _ in range(count):
            b = torch.empty(nbytes + (2 << 20), dtype=torch.uint8)
            start = (b.data_ptr() + (2 << 20) - 1) & ~((2 << 20) - 1)
            libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(nbytes // (2 << 20) * (2 << 20)), 14)
            b.zero_()
            self.raw.append(b)

    def get(self, i, n, dt):
        es = torch.empty(0, dtype=dt).element_size()
        return self.raw[i][:n * es].view(dt)


def fill(dst, salt, scale=1, add=0):
    """dst[i] = ((i * 7 + salt) % 5) * scale + add, copied from its period
    (torch's element-wise int64 arithmetic takes seconds at 16 M here).
    Small integers: bfloat16 holds those below 256 exactly, so the sums of
    three ranks stay exact in every dtype."""
    n = dst.numel()
    period = torch.tensor([((k * 7 + salt) % 5) * scale + add for k in range(5)], dtype=dst.dtype)
    m = n // 5
    dst[:m * 5].view(m, 5).copy_(period.expand(m, 5))
    dst[m * 5:].copy_(period[:n - m * 5])
    return dst


def expect_equal(what, got, want):
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        first = bad[0].item() if bad.numel() else -1
        print(f"FAIL {what}: {bad.numel()} elements differ, first at {first}: "
              f"got {got.flatten()[first].item() if first >= 0 else '?'}, "
              f"want {want.flatten()[first].item() if first >= 0 else '?'}", flush=True)
        sys.exit(1)


def main():
    counts = [int(c) for c in sys.argv[1].split(",")]
    dtypes = sys.argv[2].split(",") if len(sys.argv) > 2 else list(DTYPES)
    big = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set(dtypes)
    rank, world = init("tailmark")
    tri = world * (world + 1) // 2  # the ranks' offsets (r + 1) summed
    bufs = Buffers(max(counts) * 8, 3 + world)
    MINE, WORK, WANT, MULTI = 0, 1, 2, 3  # MULTI..: all_gather's outputs, then reduce_scatter's inputs
    checked = 0
    for name in dtypes:
        dt = DTYPES[name]
        for n in counts:
            if n > (2 << 20) and name not in big:
                continue
            tag = f"{name} x {n}"
            t0 = time.perf_counter()
            mine = fill(bufs.get(MINE, n, dt), 1, 1, rank + 1)
            t = bufs.get(WORK, n, dt)
            want = bufs.get(WANT, n, dt)
            # all_reduce: sum, min, max; then avg of world * values (exact).
            # By size (auto), then pinned to each algorithm up to PINNED_MAX
            # elements (both sides of auto's threshold); above, auto only.
            for algo in ("auto", "ring", "rd") if n <= PINNED_MAX else ("auto",):
                tt.set_allreduce(algo)
                for op, red, w in (("sum", dist.ReduceOp.SUM, (world, tri)),
                                   ("min", dist.ReduceOp.MIN, (1, 1)),
                                   ("max", dist.ReduceOp.MAX, (1, world))):
                    t.copy_(mine)
                    dist.all_reduce(t, op=red)
                    expect_equal(f"all_reduce ({algo}) {op} {tag}", t, fill(want, 1, *w))
                fill(t, 1, world, (rank + 1) * world)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                expect_equal(f"all_reduce ({algo}) avg {tag}", t, fill(want, 1, world, tri))
            tt.set_allreduce("auto")
            # broadcast from every root
            for root in range(world):
                if rank == root:
                    t.copy_(mine)
                else:
                    t.zero_()
                dist.broadcast(t, src=root)
                expect_equal(f"broadcast from {root} {tag}", t, fill(want, 1, 1, root + 1))
            # all_gather
            outs = [bufs.get(MULTI + r, n, dt).zero_() for r in range(world)]
            dist.all_gather(outs, mine)
            for r in range(world):
                expect_equal(f"all_gather part {r} {tag}", outs[r], fill(want, 1, 1, r + 1))
            # reduce_scatter: rank r's chunk c is fill(salt c + 2) + r + 1
            ins = [fill(bufs.get(MULTI + c, n, dt), c + 2, 1, rank + 1) for c in range(world)]
            t.zero_()
            dist.reduce_scatter(t, ins)
            expect_equal(f"reduce_scatter {tag}", t, fill(want, rank + 2, world, tri))
            # send/recv around the ring: each rank sends to the next
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            t.zero_()
            reqs = [dist.isend(mine, nxt, tag=n % 1000), dist.irecv(t, prv, tag=n % 1000)]
            for q in reqs:
                q.wait()
            expect_equal(f"send/recv {tag}", t, fill(want, 1, 1, prv + 1))
            dist.barrier()
            checked += 1
            print(f"ok {tag}: all_reduce sum/avg/min/max, broadcast x{world}, all_gather, reduce_scatter, "
                  f"send/recv, barrier ({time.perf_counter() - t0:.1f} s)", flush=True)
    # A future completes with the tensors (what DDP's comm hooks chain on).
    t = torch.full((4,), float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    res = fut.wait()
    expect_equal("future's value", res[0], torch.full((4,), float(tri)))
    print(f"ok future; {checked} cases", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
