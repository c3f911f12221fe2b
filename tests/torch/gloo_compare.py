"""Every operation on tailmark and on gloo, in one job, on identical seeded
random inputs, compared element by element (issue 39 item 1, issue 36 item 2).
  gloo_compare.py COUNTS [DTYPES [BIG_DTYPES [nobreak]]]: element counts
  per rank (0, 1, odd, thousands, ~1M); counts over 65536 only in
  BIG_DTYPES; nobreak: leave out the last case, which breaks the group and
  leaves a message undelivered (which a daemon counts failed).

Inputs: rank r's tensors for a case come from torch.Generator seeded with
(SEED, r, the case), so every rank can also make every other rank's inputs
(for the bound below). Floats are uniform in (-1, 1) scaled by 2^k, k in [-6, 6]:
negative values, no period, magnitudes that cancel. Integers are uniform in
+-2^20 (int32) and +-2^40 (int64): sums of 4 ranks cannot overflow; uint8
takes every byte value, and its sums wrap, in gloo alike. Then the *_object
collectives (torch pickles into uint8 tensors), against gloo's.

How results compare with gloo's:
  * integers, min, max, and everything that only moves bytes (broadcast,
    all_gather, gather, scatter, all_to_all, send/recv): bit for bit.
  * sums and averages with 2 ranks: bit for bit. a + b == b + a in IEEE
    arithmetic, so any two-rank reduction order is gloo's; bfloat16's sum is
    float32's rounded once (c10::BFloat16 adds in float), as gloo's float32
    sum rounded is; halving is exact.
  * sums of n >= 3 ranks: the rings add in different orders (and
    recursive doubling in a third: at 3 ranks (x0 + x2) + x1, at 4
    (x0 + x1) + (x2 + x3)). Any order of
    recursive summation errs by at most (n-1) u S from the exact sum, with
    S = sum_i |x_i| over the ranks and u = eps/2 (Higham, Accuracy and
    Stability, 4.2), so two orders differ by at most
        |a - b| <= (n-1) * eps * S.
    bfloat16 (gloo has none: its reference is gloo's float32 sum of the
    same values, rounded once) adds one rounding of the result and float32
    steps: |a - b| <= n * eps_bf16 * S.
  * averages: both sides divide their sum by n once more (one rounding of
    the result each): |a - b| <= bound(sum) / n + eps * max(|a|, |b|).
    Integers' average truncates toward zero (tailmark's), against gloo's sum
    divided with rounding_mode="trunc" (gloo has no AVG at all).
Where gloo lacks the operation (torch 1.13's gloo has no reduce_scatter,
reduce_scatter_tensor, all_gather_into_tensor or list all_to_all) the
reference is gloo's nearest: all_reduce of the concatenated inputs, all_gather
concatenated, all_to_all_single on the concatenation. gloo's all_gather of
0 elements dies of SIGFPE: that case's reference is the inputs themselves.

all_reduce runs pinned to each algorithm, the ring, recursive doubling and
hierarchical (tailmark.torch.set_allreduce), and every rank's result is
checked bit for bit against every other's.
Also: every op with async_op=True, its future's value the output tensors
themselves; reduce leaves non-root tensors unchanged (gloo leaves partial
sums there: printed); batch_isend_irecv and tags; the error paths. Last,
two tags between one pair received in the opposite order: gloo matches
them; tailmark matches in order and breaks the group with an error naming
both tags (docs/torch.md), so it runs last.
"""
import sys
import time
import zlib

import torch
import torch.distributed as dist

import tailmark.torch as tt
from common import init

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8}
BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16}
SEED = 3916
REDS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}

rank = world = 0
gloo = None
stats = {"cases": 0, "bitwise": 0, "bounded": 0, "differ": 0}


def fail(what):
    print(f"FAIL rank {rank}: {what}", flush=True)
    sys.exit(1)


SCALES = {dt: torch.pow(2.0, torch.arange(-6, 7, dtype=torch.float64)).to(dt) for dt in (torch.float32, torch.float64)}
_made = {}


def data(r, key, count, dt):
    """Rank r's `count` inputs for case `key` (any rank can make them;
    kept until the case ends: absum_of makes them again)."""
    k = (r, key, count, dt)
    if k not in _made:
        g = torch.Generator().manual_seed(SEED * 1000003 + r * 7919 + zlib.crc32(key.encode()))
        if dt.is_floating_point:
            wide = torch.float64 if dt == torch.float64 else torch.float32
            x = torch.rand(count, generator=g, dtype=wide) * 2 - 1
            x *= SCALES[wide][torch.randint(0, 13, (count,), generator=g)]
            _made[k] = x.to(dt)
        elif dt == torch.uint8:  # every byte value: sums wrap, in gloo too
            _made[k] = torch.randint(0, 256, (count,), generator=g, dtype=dt)
        else:
            lim = 1 << 20 if dt == torch.int32 else 1 << 40
            _made[k] = torch.randint(-lim, lim, (count,), generator=g, dtype=dt)
    return _made[k]


def bits(t):
    return t.view(BITS[t.dtype]) if t.dtype in BITS else t


def gv(t):
    """What gloo moves for t: its bytes where gloo has no such dtype
    (bfloat16; nor int16). Last dimension doubles: keep it not dim 0."""
    return t.view(torch.uint8) if t.dtype == torch.bfloat16 else t


def exact(what, got, want):
    stats["cases"] += 1
    if got.shape != want.shape or not torch.equal(bits(got.contiguous()), bits(want.contiguous())):
        if got.shape != want.shape:
            fail(f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}")
        bad = (bits(got) != bits(want)).flatten().nonzero()
        i = bad[0].item()
        fail(f"{what}: {bad.numel()} of {got.numel()} elements differ, first at {i}: "
             f"{got.flatten()[i].item()!r} against gloo's {want.flatten()[i].item()!r}")
    stats["bitwise"] += 1


def same_everywhere(what, t):
    """Every rank holds t's very bits (gathered over gloo)."""
    stats["identical"] = stats.get("identical", 0) + 1
    if t.numel() == 0:  # gloo's all_gather of 0 elements: SIGFPE
        return
    u = t.contiguous().view(torch.uint8)
    outs = [torch.empty_like(u) for _ in range(world)]
    dist.all_gather(outs, u, group=gloo)
    for r in range(world):
        if not torch.equal(outs[r], outs[0]):
            i = (outs[r] != outs[0]).nonzero()[0].item() // t.element_size()
            fail(f"{what}: rank {r}'s result differs from rank 0's, first at element {i}: "
                 f"{outs[r].view(t.dtype)[i].item()!r} against {outs[0].view(t.dtype)[i].item()!r}")


def bounded(what, got, want, bound):
    """|got - want| <= bound, element-wise, in float64."""
    stats["cases"] += 1
    d = (got.double() - want.double()).abs()
    over = d > bound
    if over.any():
        i = over.flatten().nonzero()[0].item()
        fail(f"{what}: {int(over.sum())} elements beyond the bound, first at {i}: {got.flatten()[i].item()!r} "
             f"against gloo's {want.flatten()[i].item()!r}, |diff| {d.flatten()[i].item():.3e} > "
             f"{bound.flatten()[i].item():.3e}")
    stats["bounded"] += 1
    stats["differ"] += int((d != 0).sum())


def compare_reduced(what, got, want, red, dt, absum):
    """A reduction's result against gloo's: exact where the order cannot
    matter (see the module's docstring), else within the derived bound.
    absum(): sum over ranks of |x_i|, per element (float64)."""
    if not dt.is_floating_point or red in ("min", "max") or world == 2:
        return exact(what, got, want)
    eps = torch.finfo(dt).eps
    b = (world if dt == torch.bfloat16 else world - 1) * eps * absum()
    if red == "avg":
        b = b / world + eps * torch.maximum(got.double().abs(), want.double().abs())
    bounded(what, got, want, b)


def gloo_reduced(x, red):
    """What gloo makes of a reduction: bfloat16 in float32 (gloo has none),
    the average as the sum divided (gloo has no AVG)."""
    y = x.float() if x.dtype == torch.bfloat16 else x.clone()
    return y, (dist.ReduceOp.SUM if red == "avg" else REDS[red])


def gloo_finish(y, red, dt):
    if red == "avg":
        y = torch.div(y, world, rounding_mode="trunc") if not y.is_floating_point() else y / world
    return y.to(dt)


def check_future(what, work, want):
    """Waits; the future's value is exactly the op's output tensors."""
    work.wait()
    got = work.get_future().wait()
    if len(got) != len(want) or any(a.data_ptr() != b.data_ptr() or a.shape != b.shape for a, b in zip(got, want)):
        fail(f"{what}: the future's value is {len(got)} tensors, not the op's {len(want)} outputs")


def absum_of(key, count, dt, lo=0, hi=None):
    """S = sum_i |x_i| over the ranks' inputs, made again here (lazily)."""
    return lambda: _absum(key, count, dt, lo, hi)


def _absum(key, count, dt, lo, hi):
    s = None
    for r in range(world):
        x = data(r, key, count, dt)[lo:hi].double().abs()
        s = x if s is None else s + x
    return s


def splits(n):
    """all_to_all's uneven split matrix for about n elements per rank:
    S[src][dst] elements (rows), zeros among them."""
    base = n // (2 * world)
    return [[0 if (s + 2 * d) % 3 == 1 else base + (s + 3 * d) % 4 for d in range(world)] for s in range(world)]


def run_case(name, dt, n):
    _made.clear()
    tag = f"{name} x {n}"
    key = lambda op: f"{op}/{name}/{n}"  # noqa: E731
    # all_reduce and reduce, every reduce op
    for red in REDS:
        x = data(rank, key("ar" + red), n, dt)
        g, gop = gloo_reduced(x, red)
        dist.all_reduce(g, op=gop, group=gloo)
        # Each algorithm pinned (auto picks one of the two by size): the
        # ranks' results bit for bit alike, and against gloo's.
        for algo in ("ring", "rd", "hier"):
            tt.set_allreduce(algo)
            t = x.clone()
            check_future(f"all_reduce ({algo}) {red} {tag}", dist.all_reduce(t, op=REDS[red], async_op=True), [t])
            same_everywhere(f"all_reduce ({algo}) {red} {tag}", t)
            compare_reduced(f"all_reduce ({algo}) {red} {tag}", t, gloo_finish(g, red, dt), red, dt,
                            absum_of(key("ar" + red), n, dt))
        tt.set_allreduce("auto")
        root = (n + len(red)) % world
        x = data(rank, key("rd" + red), n, dt)
        t = x.clone()
        check_future(f"reduce {red} {tag}", dist.reduce(t, root, op=REDS[red], async_op=True), [t])
        g, gop = gloo_reduced(x, red)
        dist.reduce(g, root, op=gop, group=gloo)
        if rank == root:
            compare_reduced(f"reduce {red} to {root} {tag}", t, gloo_finish(g, red, dt), red, dt,
                            absum_of(key("rd" + red), n, dt))
        else:
            exact(f"reduce {red} to {root} {tag}: a non-root tensor unchanged", t, x)
            if red == "sum" and n >= 2 * world and not torch.equal(bits(g.to(dt)), bits(x)):
                stats["gloo_clobbered"] = stats.get("gloo_clobbered", 0) + 1
    # reduce_scatter (list) and reduce_scatter_tensor against gloo's all_reduce of the whole input
    for red in ("sum", "avg", "max"):
        x = data(rank, key("rs" + red), n * world, dt)
        y = torch.full((n,), 7, dtype=dt)
        check_future(f"reduce_scatter {red} {tag}",
                     dist.reduce_scatter(y, list(x.chunk(world) if n else [x[:0]] * world), op=REDS[red],
                                         async_op=True), [y])
        y2 = torch.full((n,), 7, dtype=dt)
        check_future(f"reduce_scatter_tensor {red} {tag}",
                     dist.reduce_scatter_tensor(y2, x, op=REDS[red], async_op=True), [y2])
        g, gop = gloo_reduced(x, red)
        dist.all_reduce(g, op=gop, group=gloo)
        want = gloo_finish(g[rank * n:(rank + 1) * n], red, dt)
        a = absum_of(key("rs" + red), n * world, dt, rank * n, (rank + 1) * n)
        compare_reduced(f"reduce_scatter {red} {tag}", y, want, red, dt, a)
        compare_reduced(f"reduce_scatter_tensor {red} {tag}", y2, want, red, dt, a)
    # broadcast from every root
    for root in range(world):
        x = data(rank, key(f"bc{root}"), n, dt)
        t, g = x.clone(), x.clone()
        check_future(f"broadcast from {root} {tag}", dist.broadcast(t, root, async_op=True), [t])
        dist.broadcast(gv(g), root, group=gloo)
        exact(f"broadcast from {root} {tag}", t, g)
    # all_gather, all_gather_into_tensor
    x = data(rank, key("ag"), n, dt)
    outs = [torch.full((n,), 7, dtype=dt) for _ in range(world)]
    check_future(f"all_gather {tag}", dist.all_gather(outs, x, async_op=True), outs)
    flat = torch.full((n * world,), 7, dtype=dt)
    check_future(f"all_gather_into_tensor {tag}", dist.all_gather_into_tensor(flat, x, async_op=True), [flat])
    if n:
        gouts = [torch.empty(n, dtype=dt) for _ in range(world)]
        dist.all_gather([gv(o) for o in gouts], gv(x), group=gloo)
        want = torch.cat(gouts)
    else:  # gloo's all_gather of 0 elements: SIGFPE
        want = torch.empty(0, dtype=dt)
    exact(f"all_gather {tag}", torch.cat(outs), want)
    exact(f"all_gather_into_tensor {tag}", flat, want)
    # gather to and scatter from a root
    root = n % world
    x = data(rank, key("ga"), n, dt)
    lst = [torch.full((n,), 7, dtype=dt) for _ in range(world)] if rank == root else None
    check_future(f"gather to {root} {tag}", dist.gather(x, lst, root, async_op=True), lst or [])
    glst = [torch.empty(n, dtype=dt) for _ in range(world)] if rank == root else None
    dist.gather(gv(x), [gv(o) for o in glst] if rank == root else None, root, group=gloo)
    if rank == root:
        exact(f"gather to {root} {tag}", torch.cat(lst), torch.cat(glst))
    src = data(rank, key("sc"), n * world, dt)
    lst = list(src.chunk(world)) if n else [src[:0]] * world
    y = torch.full((n,), 7, dtype=dt)
    check_future(f"scatter from {root} {tag}",
                 dist.scatter(y, lst if rank == root else None, root, async_op=True), [y])
    gy = torch.empty(n, dtype=dt)
    dist.scatter(gv(gy), [gv(c) for c in lst] if rank == root else None, root, group=gloo)
    exact(f"scatter from {root} {tag}", y, gy)
    # all_to_all_single, even: world x k rows of 3; uneven: splits(); all_to_all (list)
    k = n // (3 * world)
    x = data(rank, key("a2a"), world * k * 3, dt).view(world * k, 3)
    y = torch.full((world * k, 3), 7, dtype=dt)
    check_future(f"all_to_all_single even {tag}", dist.all_to_all_single(y, x, async_op=True), [y])
    gy = torch.empty((world * k, 3), dtype=dt)
    dist.all_to_all_single(gv(gy), gv(x), group=gloo)
    exact(f"all_to_all_single even {tag}", y, gy)
    S = splits(n)
    ins = [S[rank][d] for d in range(world)]
    outs_n = [S[s][rank] for s in range(world)]
    x = data(rank, key("a2av"), sum(ins) * 3, dt).view(sum(ins), 3)
    y = torch.full((sum(outs_n), 3), 7, dtype=dt)
    check_future(f"all_to_all_single uneven {tag}",
                 dist.all_to_all_single(y, x, outs_n, ins, async_op=True), [y])
    gy = torch.empty((sum(outs_n), 3), dtype=dt)
    dist.all_to_all_single(gv(gy), gv(x), outs_n, ins, group=gloo)
    exact(f"all_to_all_single uneven {tag} (splits {ins} out, {outs_n} in)", y, gy)
    xl = list(data(rank, key("a2al"), sum(ins), dt).split(ins))
    yl = [torch.full((c,), 7, dtype=dt) for c in outs_n]
    check_future(f"all_to_all {tag}", dist.all_to_all(yl, xl, async_op=True), yl)
    gy = torch.empty((sum(outs_n), 1), dtype=dt)
    dist.all_to_all_single(gv(gy), gv(torch.cat(xl).view(-1, 1)), outs_n, ins, group=gloo)
    exact(f"all_to_all {tag}", torch.cat(yl), gy.view(-1))
    # isend/irecv around the ring, and batch_isend_irecv both ways with two tags
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    x = data(rank, key("p2p"), n, dt)
    t = torch.full((n,), 7, dtype=dt)
    ws = [dist.isend(x, nxt, tag=3), dist.irecv(t, prv, tag=3)]
    check_future(f"isend {tag}", ws[0], [])
    check_future(f"irecv {tag}", ws[1], [t])
    g = torch.empty(n, dtype=dt)
    for w in [dist.isend(gv(x), nxt, group=gloo, tag=3), dist.irecv(gv(g), prv, group=gloo, tag=3)]:
        w.wait()
    exact(f"isend/irecv {tag}", t, g)
    xs = [data(rank, key(f"b{j}"), n + j, dt) for j in range(2)]
    ts = [torch.full((n + j % 2,), 7, dtype=dt) for j in range(3)]
    ops = [dist.P2POp(dist.isend, xs[0], nxt, tag=5), dist.P2POp(dist.isend, xs[1], nxt, tag=9),
           dist.P2POp(dist.irecv, ts[0], prv, tag=5), dist.P2POp(dist.irecv, ts[1], prv, tag=9)]
    if world > 2:  # and back the other way at once
        ops += [dist.P2POp(dist.isend, xs[0], prv, tag=6), dist.P2POp(dist.irecv, ts[2], nxt, tag=6)]
    for w, want in zip(dist.batch_isend_irecv(ops), [[], [], [ts[0]], [ts[1]], [], [ts[2]]]):
        check_future(f"batch_isend_irecv {tag}", w, want)
    gs = [torch.empty(n + j % 2, dtype=dt) for j in range(3)]
    gops = [dist.P2POp(dist.isend, gv(xs[0]), nxt, gloo, 5), dist.P2POp(dist.isend, gv(xs[1]), nxt, gloo, 9),
            dist.P2POp(dist.irecv, gv(gs[0]), prv, gloo, 5), dist.P2POp(dist.irecv, gv(gs[1]), prv, gloo, 9)]
    if world > 2:
        gops += [dist.P2POp(dist.isend, gv(xs[0]), prv, gloo, 6), dist.P2POp(dist.irecv, gv(gs[2]), nxt, gloo, 6)]
    for w in dist.batch_isend_irecv(gops):
        w.wait()
    for j in range(3 if world > 2 else 2):
        exact(f"batch_isend_irecv message {j} {tag}", ts[j], gs[j])
    check_future(f"barrier {tag}", dist.barrier(async_op=True), [])


def expect_error(what, fn, *texts):
    """fn raises RuntimeError whose message contains every one of texts."""
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        for s in texts:
            if s not in msg:
                fail(f"{what}: the error does not say {s!r}: {msg.splitlines()[0]!r}")
        stats["errors"] = stats.get("errors", 0) + 1
        return msg
    fail(f"{what}: no error")


def error_paths():
    """Each refused tensor or op: a RuntimeError naming the op, on every
    rank alike (raised before anything is sent: the group lives on)."""
    n = world

    def calls(make):
        root = 0
        lst = lambda: [make(2) for _ in range(n)]  # noqa: E731
        return {
            "all_reduce": lambda: dist.all_reduce(make(4)),
            "broadcast": lambda: dist.broadcast(make(4), 0),
            "reduce": lambda: dist.reduce(make(4), 0),
            "all_gather": lambda: dist.all_gather(lst(), make(2)),
            "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(make(2 * n), make(2)),
            "reduce_scatter": lambda: dist.reduce_scatter(make(2), lst()),
            "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(make(2), make(2 * n)),
            "gather": lambda: dist.gather(make(2), lst() if rank == root else None, root),
            "scatter": lambda: dist.scatter(make(2), lst() if rank == root else None, root),
            "all_to_all": lambda: dist.all_to_all(lst(), lst()),
            "all_to_all_single": lambda: dist.all_to_all_single(make(2 * n), make(2 * n)),
            "send": lambda: dist.send(make(2), (rank + 1) % n),
            "recv": lambda: dist.recv(make(2), (rank - 1) % n),
        }
    for dt in (torch.float16, torch.int8):
        for op, fn in calls(lambda k: torch.zeros(k, dtype=dt)).items():
            expect_error(f"{op} of {dt}", fn, f"tailmark: {op}: dtype", "is not supported")
    for op, fn in calls(lambda k: torch.zeros(2 * k)[::2]).items():
        expect_error(f"{op} of a non-contiguous tensor", fn, f"tailmark: {op}: tensors must be contiguous")
    for op, fn in {
        "all_reduce": lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.PRODUCT),
        "reduce": lambda: dist.reduce(torch.ones(4), 0, op=dist.ReduceOp.PRODUCT),
        "reduce_scatter": lambda: dist.reduce_scatter(torch.ones(2), [torch.ones(2)] * n, op=dist.ReduceOp.PRODUCT),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(torch.ones(2), torch.ones(2 * n),
                                                                    op=dist.ReduceOp.PRODUCT),
    }.items():
        expect_error(f"{op} PRODUCT", fn, f"tailmark: {op}: only sum, avg, min and max reduce")
    # A tensor on another device: no GPU here, but 'meta' tensors exist.
    # torch 1.13 routes six ops through its c10d operator registry, which
    # has no Meta kernel: they are refused before any backend sees them
    # (gloo's alike). The other seven reach tailmark, which names the device.
    refused_by_torch = ("all_reduce", "broadcast", "reduce", "all_to_all", "send", "recv")
    for op, fn in calls(lambda k: torch.zeros(k, device="meta")).items():
        if op in refused_by_torch:
            expect_error(f"{op} of a meta tensor", fn, "Could not run 'c10d::", "Meta' backend")
        else:
            expect_error(f"{op} of a meta tensor", fn, f"tailmark: {op}: tensors must be on the CPU (got meta)")
    if rank == 0:
        print(f"wrong device: a meta tensor (no GPU here); torch 1.13 itself refuses it for {', '.join(refused_by_torch)} "
              "('Could not run c10d::...', asserted), tailmark for the rest", flush=True)
    # all_to_all_single's splits: wrong on this rank alone are refused here
    expect_error("all_to_all_single, splits of the wrong sum",
                 lambda: dist.all_to_all_single(torch.zeros(2 * n), torch.zeros(2 * n), [2] * n, [1] * n),
                 "tailmark: all_to_all_single: the input split sizes add up to")
    # all_reduce's algorithm: only ring, rd, hier or auto
    try:
        tt.set_allreduce("tree")
        fail("set_allreduce('tree'): no error")
    except ValueError as e:
        if "ring, rd (recursive doubling), hier (hierarchical) or auto, not 'tree'" not in str(e):
            fail(f"set_allreduce('tree'): the error does not name the choices: {e}")
        stats["errors"] = stats.get("errors", 0) + 1
    # the group lives on after all of them
    t = torch.ones(3)
    dist.all_reduce(t)
    exact("all_reduce after the refusals", t, torch.full((3,), float(world)))


def tags_out_of_order():
    """Rank 0 sends tags 1 then 2 to rank 1, which receives tag 2 first.
    gloo matches tags; tailmark matches in posting order and fails."""
    a, b = torch.arange(5, dtype=torch.float32), torch.arange(5, dtype=torch.float32) + 100
    if rank == 0:
        for w in [dist.isend(a, 1, group=gloo, tag=1), dist.isend(b, 1, group=gloo, tag=2)]:
            w.wait()
    elif rank == 1:
        y2, y1 = torch.zeros(5), torch.zeros(5)
        ws = [dist.irecv(y2, 0, group=gloo, tag=2), dist.irecv(y1, 0, group=gloo, tag=1)]
        for w in ws:
            w.wait()
        exact("gloo: tags received in the opposite order", torch.cat([y1, y2]), torch.cat([a, b]))
    dist.barrier(group=gloo)
    if rank == 0:
        dist.isend(a, 1, tag=1)
        dist.isend(b, 1, tag=2)  # never waited for: rank 1 breaks its group
    elif rank == 1:
        y2, y1 = torch.zeros(5), torch.zeros(5)
        w2, w1 = dist.irecv(y2, 0, tag=2), dist.irecv(y1, 0, tag=1)
        msg = expect_error("tailmark: tags received in the opposite order", w2.wait,
                           "rank 0 sent send #", "tag 1 where this rank expected send #", "tag 2",
                           "the ranks called different operations")
        expect_error("tailmark: the second receive of the broken group", w1.wait, "tag 1 where")
        print(f"rank 1: tailmark, tags out of order: {msg.splitlines()[0]}", flush=True)
    dist.barrier(group=gloo)


def objects():
    """The *_object collectives (pickled into uint8 tensors by torch), on
    tailmark and on gloo: the same Python objects on every rank."""
    mine = {"rank": rank, "text": "r" * (rank * 37 % 101), "data": list(range(rank * 50))}
    got, ref = [None] * world, [None] * world
    dist.all_gather_object(got, mine)
    dist.all_gather_object(ref, mine, group=gloo)
    if got != ref:
        fail(f"all_gather_object: tailmark's {got!r:.200} against gloo's {ref!r:.200}")
    want = [{"rank": r, "text": "r" * (r * 37 % 101), "data": list(range(r * 50))} for r in range(world)]
    if got != want:
        fail(f"all_gather_object: {got!r:.200}")
    root = world - 1
    lst = [{"from": root, "n": list(range(300))}, "two", 3] if rank == root else [None, None, None]
    dist.broadcast_object_list(lst, src=root)
    if lst != [{"from": root, "n": list(range(300))}, "two", 3]:
        fail(f"broadcast_object_list from {root}: {lst!r:.200}")
    out = [None] * world if rank == 0 else None
    dist.gather_object(mine, out, dst=0)
    if rank == 0 and out != want:
        fail(f"gather_object to 0: {out!r:.200}")
    got = [None]
    dist.scatter_object_list(got, [("to", r, "x" * r) for r in range(world)] if rank == root else None, src=root)
    if got != [("to", rank, "x" * rank)]:
        fail(f"scatter_object_list from {root}: {got!r:.200}")
    stats["objects"] = 4


def main():
    global rank, world, gloo
    counts = [int(c) for c in sys.argv[1].split(",")]
    dtypes = sys.argv[2].split(",") if len(sys.argv) > 2 else list(DTYPES)
    big = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set(dtypes)
    rank, world = init("tailmark")
    gloo = dist.new_group(backend="gloo")
    t0 = time.perf_counter()
    for name in dtypes:
        for n in counts:
            if n > 65536 and name not in big:
                continue
            t1 = time.perf_counter()
            run_case(name, DTYPES[name], n)
            print(f"ok {name} x {n} ({time.perf_counter() - t1:.2f} s)", flush=True)
    objects()
    error_paths()
    if "nobreak" not in sys.argv[4:]:
        tags_out_of_order()
    print(f"ok gloo_compare: {stats['cases']} comparisons ({stats['bitwise']} bit for bit, {stats['bounded']} within "
          f"the bound, {stats['differ']} elements not bit-equal; {stats.get('identical', 0)} all_reduce results alike on every "
          f"rank, bit for bit), {stats.get('objects', 0)} *_object collectives equal to gloo's, "
          f"{stats.get('errors', 0)} refusals; gloo left partial "
          f"sums in {stats.get('gloo_clobbered', 0)} of this rank's non-root reduce tensors, which tailmark left unchanged "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
