"""Shared by the torch test scripts: the process group from the
environment, as tt_run sets it (RANK, WORLD_SIZE, TT_STORE: a FileStore)
or as torchrun does (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: env://)."""
import datetime
import os

import torch.distributed as dist


def init(backend, timeout_s=120):
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if backend == "tailmark":
        import tailmark.torch  # noqa: F401  (registers the backend)
        # TT_INLINE_RANKS="0,2": these ranks keep their pieces to the
        # host's other ranks inline (TAILMARK_TORCH_DIRECT=0), the others
        # send by reference: a host where some ranks cannot map the others.
        if str(rank) in os.environ.get("TT_INLINE_RANKS", "").split(","):
            os.environ["TAILMARK_TORCH_DIRECT"] = "0"
    if backend == "gloo":
        # gloo over kernel TCP on the same veth (TT_KIP); the store is a file.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    if "TT_STORE" in os.environ:
        init_method = "file://" + os.environ["TT_STORE"] + "." + backend
    else:
        init_method = "env://"  # torchrun's
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world
