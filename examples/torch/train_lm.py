r"""A small language model trained with DistributedDataParallel over tailmark.

torchrun starts the ranks; each reaches its host's `tailmarkd --mode service`
through TAILMARK_SOCKET (one daemon per host, shared by its ranks). One host:

    TAILMARK_SOCKET=/run/tailmark/tailmarkd.sock PYTHONPATH=build/lib/tailmark-torch \
      torchrun --nnodes 1 --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/tr \
      examples/torch/train_lm.py

Two hosts: the same on each, with --nnodes 2 --node_rank 0 (1 on the other)
--master_addr HOST0 --master_port 29500. (--redirects 1 --tee 1: Debian 12's
torch 1.13 cannot parse torchrun's default.)

The model reads bytes (a vocabulary of 256) and predicts the next one: two
transformer layers under a causal mask, context 64, 137 k parameters. The
text is made here, deterministically (lines of sums, "417+86=503"), so
nothing is downloaded. Each rank draws its batches from its own part of the
text; DDP averages the gradients with all_reduce, over tailmark or (--backend
gloo) over TCP. Rank 0 prints the loss every 10 steps, then a summary.
"""
import argparse
import random
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CONTEXT = 64


def make_text(lines=4000, seed=0):
    """Lines of sums, as bytes: the digits are random, their form is what to learn."""
    rnd = random.Random(seed)
    text = ""
    for _ in range(lines):
        a, b = rnd.randrange(1000), rnd.randrange(1000)
        text += f"{a}+{b}={a + b}\n"
    return torch.tensor(list(text.encode()), dtype=torch.long)


class TinyLM(nn.Module):
    def __init__(self, d_model=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(256, d_model)
        self.pos = nn.Embedding(CONTEXT, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, 256)

    def forward(self, x):  # (batch, T) bytes -> (batch, T, 256) logits of each next byte
        t = x.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(t)  # -inf above the diagonal
        return self.head(self.blocks(self.tok(x) + self.pos(torch.arange(t)), mask=causal))


def main():
    p = argparse.ArgumentParser(description="A small language model, DDP over tailmark.")
    p.add_argument("--backend", choices=["tailmark", "gloo"], default="tailmark")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank and step")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    if args.backend == "tailmark":
        import tailmark.torch  # noqa: F401  (registers the backend "tailmark")
    dist.init_process_group(args.backend)  # env://: torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.use_deterministic_algorithms(True)

    shard = make_text().chunk(world)[rank]  # this rank's part of the text
    batches = torch.Generator().manual_seed(1000 * args.seed + rank)
    torch.manual_seed(args.seed)  # one initial model (DDP broadcasts rank 0's anyway)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    dist.barrier()
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        at = torch.randint(len(shard) - CONTEXT - 1, (args.batch,), generator=batches)
        x = torch.stack([shard[i:i + CONTEXT] for i in at])
        y = torch.stack([shard[i + 1:i + CONTEXT + 1] for i in at])
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()  # DDP's all_reduce of the gradients
        opt.step()
        if step == 1:
            first = loss.item()
        if rank == 0 and (step == 1 or step % 10 == 0):
            print(f"step {step:3d}  loss {loss.item():.6f}", flush=True)
    seconds = time.perf_counter() - start
    if rank == 0:
        tokens = step * args.batch * CONTEXT * world
        print(f"done: {step} steps, world size {world}, {args.backend}: loss {first:.6f} -> "
              f"{loss.item():.6f}, {tokens / seconds:.0f} tokens/s, {seconds:.1f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
