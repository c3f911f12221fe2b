"""An operation in a loop until it raises. Touches $TT_MARK.<rank> after
the fifth, so fail.sh knows the ranks are mid-run before it kills something.

TT_OP selects the operation:
  all_reduce (the default): 1 M float32, the sum checked each time.
  all_to_all: all_to_all_single with uneven splits (SPLITS: rank s sends
  SPLITS[s][d] * UNIT float32 to rank d: each rank's input and output
  differ in size, one split is empty),
  every received chunk checked; each op's values change with its number, so
  a stale chunk is caught too. Also writes its state to $TT_MARK.<rank>.state
  before and after each operation's wait(), one line each ("in N", N the
  operation's number from 0, after the op was posted; "out N" when it
  returned), unbuffered: a process killed by SIGKILL leaves the last line it
  wrote, and fail.sh reads it while the process is stopped, so it kills a
  rank that is inside an all_to_all.

On the error it prints one line, `raised at <ns> after <n> <op>s:
<error>` (<ns>: time.time_ns(), the clock of fail.sh's `date +%s%N`; <n>:
the operations completed, so the one that raised is number <n>), then
keeps its process group, and so its sessions, until $TT_MARK.release
exists (60 s at most), and exits 3. A rank that raised and exited at once
would end its sessions, and the ranks still waiting could then raise naming
it, not the rank or daemon that went: rank 2 once reported rank 0's session
closed after rank 1's daemon was killed. Kept open, every survivor has to
notice the loss itself."""
import os
import sys
import time

import torch
import torch.distributed as dist

from common import init

# all_to_all: rank s sends SPLITS[s][d] units to rank d (3 ranks). Inputs
# 7, 6 and 3 units, outputs 6, 5 and 5: no two alike, no rank's input the
# size of its output; rank 2 sends rank 1 nothing (an empty piece).
SPLITS = [[1, 4, 2], [3, 1, 2], [2, 0, 1]]
UNIT = 1 << 18  # float32: 1 MiB


def all_reduce_loop(rank, world, mark, count):
    t = torch.ones(1 << 20)
    while True:
        dist.all_reduce(t)
        if not torch.equal(t, torch.full_like(t, float(world))):
            print(f"FAIL: wrong sum after {count[0]} all_reduces", flush=True)
            sys.exit(1)
        t.fill_(1.0)
        count[0] += 1
        if count[0] == 5:
            open(f"{mark}.{rank}", "w").close()


def all_to_all_loop(rank, world, mark, count):
    if world != len(SPLITS):
        print(f"FAIL: the all_to_all case is for {len(SPLITS)} ranks, not {world}", flush=True)
        sys.exit(1)
    ins = [SPLITS[rank][d] * UNIT for d in range(world)]
    outs = [SPLITS[s][rank] * UNIT for s in range(world)]
    x = torch.empty(sum(ins))
    y = torch.empty(sum(outs))
    xs, ys = x.split(ins), y.split(outs)
    state = os.open(f"{mark}.{rank}.state", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    value = lambda n, s, d: float((n % 1000) * 16 + s * 4 + d)  # noqa: E731  exact in float32
    while True:
        n = count[0]
        for d in range(world):
            xs[d].fill_(value(n, rank, d))
        y.fill_(-1.0)
        work = dist.all_to_all_single(y, x, [SPLITS[s][rank] * UNIT for s in range(world)],
                                      [SPLITS[rank][d] * UNIT for d in range(world)], async_op=True)
        os.write(state, f"in {n}\n".encode())
        work.wait()
        os.write(state, f"out {n}\n".encode())
        for s in range(world):
            if not torch.equal(ys[s], torch.full_like(ys[s], value(n, s, rank))):
                print(f"FAIL: all_to_all #{n}: the chunk from rank {s} is wrong", flush=True)
                sys.exit(1)
        count[0] += 1
        if count[0] == 5:
            open(f"{mark}.{rank}", "w").close()


def main():
    rank, world = init("tailmark", timeout_s=int(os.environ["TT_TIMEOUT"]))
    mark = os.environ["TT_MARK"]
    op = os.environ.get("TT_OP", "all_reduce")
    loop = {"all_reduce": all_reduce_loop, "all_to_all": all_to_all_loop}[op]
    count = [0]
    t0 = time.monotonic()
    try:
        loop(rank, world, mark, count)
    except RuntimeError as e:
        at = time.time_ns()
        took = time.monotonic() - t0
        print(f"{count[0]} {op}s took {took:.2f} s ({took / max(count[0], 1) * 1000:.0f} ms each, the last "
              "one's wait() included)", flush=True)
        print(f"raised at {at} after {count[0]} {op}s: {e}", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{mark}.release") and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)


if __name__ == "__main__":
    main()
