"""A process group destroyed while its engine thread is still finishing
operations whose tensors only that thread holds. Python destroys the group
holding the GIL; the engine thread, dropping the last reference to a tensor
Python also knew, takes the GIL: the destructor used to wait (join) for a
thread that waited for it, and the rank never exited.

  teardown.py ROUNDS: each round makes a tailmark group (new_group), posts
  64 async all_reduces of fresh tensors keeping no reference to them or their
  Works, and destroys the group at once. Prints "ok teardown ROUNDS rounds";
  a deadlock is torchrun's timeout."""
import sys
import time

import torch
import torch.distributed as dist

from common import init


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    init("tailmark")
    t0 = time.perf_counter()
    for _ in range(rounds):
        g = dist.new_group(backend="tailmark")
        for _ in range(64):
            dist.all_reduce(torch.ones(1024), group=g, async_op=True)
        dist.destroy_process_group(g)
    print(f"ok teardown {rounds} rounds ({time.perf_counter() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
