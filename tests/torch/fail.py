"""all_reduce in a loop until it raises: prints how many completed and the
error, and exits 3. Touches $TT_MARK.<rank> after the fifth, so fail.sh
knows the ranks are mid-run before it kills something."""
import os
import sys

import torch
import torch.distributed as dist

from common import init


def main():
    rank, world = init("tailmark", timeout_s=int(os.environ.get("TT_TIMEOUT", "20")))
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
                open(f"{os.environ['TT_MARK']}.{rank}", "w").close()
    except RuntimeError as e:
        print(f"raised after {n} all_reduces: {e}", flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
