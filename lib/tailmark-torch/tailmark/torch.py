"""torch.distributed over tailmark.

    import tailmark.torch            # registers the backend "tailmark"
    dist.init_process_group("tailmark", init_method=..., rank=r, world_size=n)

Each rank talks to its host's `tailmarkd --mode service` through
libtailmark-client: the socket in $TAILMARK_SOCKET (else
/run/tailmark/tailmarkd.sock). Ranks find each other, and agree on the
job's session secret, through the c10d store; nothing else is configured.
Optional: TAILMARK_TORCH_PORT (the first listener port tried, 7300),
TAILMARK_TORCH_MSG (bytes per message, 1 MiB), TAILMARK_TORCH_RING
(messages in flight per peer, 16), TAILMARK_ALLREDUCE (all_reduce's
algorithm: ring, rd for recursive doubling, hier for hierarchical, or auto,
by size and by how the ranks share their hosts' daemons: the default),
TAILMARK_TORCH_HEAP_MB (where ranks share a host: the shared memory that
holds this process's CPU tensors of 256 KiB and more, so that those ranks
read them in place; 1024, 0 for none).
"""
import atexit as _atexit

import torch.distributed as _dist

from . import _c

# The groups' threads stop while the interpreter is still whole (see
# Engine::shutdown_all): never during its finalization.
_atexit.register(_c.shutdown)

BACKEND = "tailmark"


def _create(store, rank, world_size, timeout):
    return _c.create_process_group(store, rank, world_size, timeout)


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create)


def set_allreduce(algorithm, group=None):
    """all_reduce's algorithm on `group` (default: the default group) from
    now on: "ring", "rd" (recursive doubling), "hier" (hierarchical: a chain
    within each host to its first rank, the ring between those, a chain
    back) or "auto" (recursive doubling for small tensors; above, hier where
    ranks share a daemon and there are several, else the ring;
    TAILMARK_ALLREDUCE's value when the group was made). Every rank must set the same, between the same
    operations."""
    _c.set_allreduce(group if group is not None else _dist.distributed_c10d._get_default_group(), algorithm)


def stats(group=None):
    """This rank's pieces to ranks of its host on `group` so far:
    {"pieces_in_place": read by them in this rank's tensor (no copy here),
    "pieces_copied": copied into a shared slot first, "heap_bytes": the
    bytes of this process's tensors in its heap now}. A tensor made after
    the group, of 256 KiB or more, lives where they can read it
    (TAILMARK_TORCH_HEAP_MB); all_to_all, all_to_all_single, send, gather
    and scatter read it in place."""
    return _c.stats(group if group is not None else _dist.distributed_c10d._get_default_group())
