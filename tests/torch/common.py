"""Shared by the torch test scripts: the process group from the
environment tt_run sets (RANK, WORLD_SIZE, TT_STORE)."""
import datetime
import os

import torch.distributed as dist


def init(backend, timeout_s=120):
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if backend == "tailmark":
        import tailmark.torch  # noqa: F401  (registers the backend)
    if backend == "gloo":
        # gloo over kernel TCP on the same veth (TT_KIP); the store is a file.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    dist.init_process_group(backend, init_method="file://" + os.environ["TT_STORE"] + "." + backend,
                            rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world
