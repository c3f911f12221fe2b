"""all_reduce (SUM) over rails, checked exactly at 2 ranks. Every rank
draws both ranks' inputs (each from its rank's seed), so it knows the sum:
integer tensors (small values, no overflow) and float tensors of full
mantissas and mixed exponents, compared bit for bit with a + b computed
here (at 2 ranks each element is one addition, the same in either order).
Each (dtype, count) by size (auto); at counts from PINNED_MIN up, pinned to
the ring and to recursive doubling too. Prints one line per case and exits
1 on the first wrong element.
  rails.py COUNTS DTYPES [WRONG]: WRONG (a dtype) makes that dtype's
  expected sum wrong in one element, to see the check fail."""
import sys
import time

import torch
import torch.distributed as dist

import tailmark.torch as tt
from common import init

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}
PINNED_MIN = 1 << 20


def inputs(rank, n, dt):
    """Rank `rank`'s input: integers in [-1000, 1000), or normals scaled by
    2^[-20, 20) per element (sums that round, of operands far apart)."""
    g = torch.Generator().manual_seed(1000 + rank)
    if dt.is_floating_point:
        x = torch.randn(n, generator=g, dtype=torch.float64)
        x *= torch.pow(2.0, torch.randint(-20, 20, (n,), generator=g).to(torch.float64))
        return x.to(dt)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dt)


def bits(t):
    """t as integers of its element's width: equal means bit for bit."""
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def expect_equal(what, got, want):
    gb, wb = bits(got), bits(want)
    if not torch.equal(gb, wb):
        bad = (gb != wb).nonzero().flatten()
        i = bad[0].item()
        print(f"FAIL {what}: {bad.numel()} elements differ, first at {i}: got {got[i].item()!r} "
              f"(bits {gb[i].item():#x}), want {want[i].item()!r} (bits {wb[i].item():#x})", flush=True)
        sys.exit(1)


def main():
    counts = [int(c) for c in sys.argv[1].split(",")]
    dtypes = sys.argv[2].split(",")
    wrong = sys.argv[3] if len(sys.argv) > 3 else ""
    rank, world = init("tailmark")
    if world != 2:
        print(f"FAIL: rails.py is for 2 ranks (one addition per element), not {world}", flush=True)
        sys.exit(1)
    cases = 0
    for name in dtypes:
        dt = DTYPES[name]
        for n in counts:
            mine = inputs(rank, n, dt)
            want = inputs(0, n, dt) + inputs(1, n, dt)
            if name == wrong and n > 0:
                bits(want)[n // 2] ^= 1
            dist.barrier()  # the inputs drawn on both ranks: the time is the all_reduces'
            t0 = time.perf_counter()
            for algo in ("auto", "ring", "rd") if n >= PINNED_MIN else ("auto",):
                tt.set_allreduce(algo)
                t = mine.clone()
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
                expect_equal(f"all_reduce ({algo}) sum {name} x {n}", t, want)
                cases += 1
            tt.set_allreduce("auto")
            mib = n * mine.element_size() / (1 << 20)
            print(f"ok {name} x {n} ({mib:.2f} MiB): {time.perf_counter() - t0:.2f} s", flush=True)
    dist.barrier()
    print(f"ok: {cases} all_reduces exact", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
