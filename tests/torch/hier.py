"""all_reduce's hierarchical algorithm puts less on the wire than the ring:
on ranks that share their hosts' daemons (ops.sh's NxP layouts), each
host's first rank reads its daemon's data port counters (tailmark-ctl)
around K all_reduces of the same tensor pinned to the ring, then K pinned
to hier, then K on auto, a barrier between. Per host, the ring sends
2(n-1)/n of the tensor across hosts per all_reduce (one of its links
leaves the host), hier 2(H-1)/H (only the first ranks' ring, H hosts), so
hier/ring is (H-1)n / (H(n-1)): 0.857 at 4 hosts x 2 ranks, 0.571 at
2 x 4. It must be below 0.93 (a hier that sent from every rank would be
1.0 or more), and auto must be hier (within 3%). The results themselves
are checked exactly here (each rank's own integers), and against gloo
by gloo_compare.py.
  hier.py TAILMARK_CTL [ELEMENTS [K]]"""
import json
import os
import subprocess
import sys
import time
import zlib

import torch
import torch.distributed as dist

import tailmark.torch as tt
from common import init


def port_tx_bytes(ctl):
    # The daemon answers STATUS from a snapshot up to 50 ms old (channel_abi.h):
    # a read within 50 ms of the one before got that one's figures again (0 B
    # for 2 all_reduces of 4 MiB, once they took under 50 ms).
    time.sleep(0.1)
    out = subprocess.run([ctl, "--socket", os.environ["TAILMARK_SOCKET"], "--json", "ports"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return sum(int(p["tx_bytes"]) for p in json.loads(out) if p["role"] in ("data", "rail"))


def main():
    ctl = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rank, world = init("tailmark", timeout_s=300)
    # Each host's daemon by its socket's name (int64: what all_gather carries).
    host = torch.tensor([zlib.crc32(os.environ["TAILMARK_SOCKET"].encode())], dtype=torch.int64)
    got = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(got, host)
    hosts = [int(h.item()) for h in got]
    first = hosts.index(int(host.item())) == rank  # this host's first rank measures its daemon
    nhosts = len(set(hosts))
    # Each rank's own integer values (exact in float32): a rank whose bytes
    # were read before they were written, or twice, shows in the sum.
    base = (torch.arange(count) % 4096).to(torch.float32)
    want = world * base + world * (world - 1) / 2
    t = torch.empty(count, dtype=torch.float32)
    sent = {}
    for algo in ("ring", "hier", "auto"):
        tt.set_allreduce(algo)
        dist.barrier()
        before = port_tx_bytes(ctl) if first else 0
        for _ in range(k):
            torch.add(base, rank, out=t)
            dist.all_reduce(t)
        dist.barrier()
        sent[algo] = port_tx_bytes(ctl) - before if first else 0
        if not torch.equal(t, want):
            bad = (t != want).nonzero()
            print(f"FAIL: rank {rank}: all_reduce ({algo}): {bad.numel()} elements are not the sum of the ranks' "
                  f"values, first at {bad[0].tolist()}", flush=True)
            sys.exit(1)
    tt.set_allreduce("auto")
    if first:
        ratio = sent["hier"] / sent["ring"]
        want = (nhosts - 1) * world / (nhosts * (world - 1))
        line = (f"rank {rank}: its daemon's port sent {sent['ring']} B for {k} all_reduces of {4 * count} B by the "
                f"ring, {sent['hier']} by hier ({ratio:.3f}x; {want:.3f}x the payload), {sent['auto']} by auto "
                f"({nhosts} hosts x {world // nhosts} ranks)")
        if ratio >= 0.93:
            print(f"FAIL: {line}: hier is not hierarchical", flush=True)
            sys.exit(1)
        if abs(sent["auto"] / sent["hier"] - 1) > 0.03:
            print(f"FAIL: {line}: auto did not choose hier", flush=True)
            sys.exit(1)
        print(f"ok: {line}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
