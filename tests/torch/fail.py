"""all_reduce in a loop until it raises. Touches $TT_MARK.<rank> after the
fifth, so fail.sh knows the ranks are mid-run before it kills something.

On the error it prints one line, `raised at <ns> after <n> all_reduces:
<error>` (<ns>: time.time_ns(), the clock of fail.sh's `date +%s%N`), then
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


def main():
    rank, world = init("tailmark", timeout_s=int(os.environ["TT_TIMEOUT"]))
    mark = os.environ["TT_MARK"]
    t = torch.ones(1 << 20)
    n = 0
    try:
        while True:
            dist.all_reduce(t)
            if not torch.equal(t, torch.full_like(t, float(world))):
                print(f"FAIL: wrong sum after {n} all_reduces", flush=True)
                sys.exit(1)
            t.fill_(1.0)
            n += 1
            if n == 5:
                open(f"{mark}.{rank}", "w").close()
    except RuntimeError as e:
        at = time.time_ns()
        print(f"raised at {at} after {n} all_reduces: {e}", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{mark}.release") and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)


if __name__ == "__main__":
    main()
