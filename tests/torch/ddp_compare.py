"""Compares two DDP runs (ddp.py's outputs A and B, e.g. tailmark's and
gloo's) of WORLD ranks: every rank's per-step losses and the final
state_dict, bit for bit (RTOL 0) or within RTOL of each tensor's scale:
|a - b| <= RTOL (|b| + max |b| of the tensor), so that an element near zero
is held to the tensor's scale, not to its own. Prints one line; exits 1 on
a difference.
usage: ddp_compare.py A B WORLD RTOL"""
import sys
import torch
a, b, world, rtol = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
bad = []
worst = 0.0
def close(x, y):
    global worst
    if rtol == 0:
        return torch.equal(x, y)
    scale = y.abs().max().item()
    worst = max(worst, ((x - y).abs().max() / max(scale, 1e-30)).item())
    return torch.allclose(x, y, rtol=rtol, atol=rtol * scale)
for r in range(world):
    la = [float.fromhex(v) for v in open(f"{a}.losses.{r}").read().split()]
    lb = [float.fromhex(v) for v in open(f"{b}.losses.{r}").read().split()]
    if len(la) != len(lb) or not close(torch.tensor(la, dtype=torch.float64), torch.tensor(lb, dtype=torch.float64)):
        bad.append(f"rank {r} losses differ: {la[:3]}... vs {lb[:3]}...")
sa, sb = torch.load(f"{a}.state"), torch.load(f"{b}.state")
n = 0
for k in sa:
    n += sa[k].numel()
    if not close(sa[k], sb[k]):
        bad.append(f"state {k}: max |diff| {(sa[k] - sb[k]).abs().max().item()}")
if bad:
    print("; ".join(bad))
    sys.exit(1)
print(f"{len(la)} losses per rank and {n} parameters " + ("equal bit for bit" if rtol == 0 else f"within rtol {rtol} (largest difference {worst:.2e} of a tensor's scale)"))
