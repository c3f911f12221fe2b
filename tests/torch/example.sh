#!/usr/bin/env bash
# The README's torchrun example (examples/torch/train_lm.py, issue 39) on two
# "nodes": two network namespaces on one bridge (tt_mesh 2), each with its
# own `tailmarkd --mode service`, and in each `torchrun --nnodes 2
# --nproc_per_node 4 --node_rank K` (python3 -m torch.distributed.run; the
# rendezvous at node 0's kernel address): 8 ranks, 50 steps of DDP. Then the
# same on gloo (kernel TCP over the same veths).
#
#  1. every rank exits 0: both torchruns exit 0 (an agent exits 0 only when
#     all its workers did) and each started 4 ranks (their logs).
#  2. rank 0 printed steps 1, 10, ..., 50 and "done: 50 steps, world size 8".
#  3. the final loss is finite and at least MARGIN (2.0) below the first
#     (measured 5.70 -> 2.42: ln 256 = 5.55 is a blind guess; a random digit
#     costs ln 10 = 2.3 at best).
#  4. tailmark against gloo, every loss rank 0 printed: step 1's equal (the
#     same broadcast model and batches, before any all_reduce), the others
#     within TOL (1e-4). The two rings add each gradient's 8 terms in other
#     orders (each sum within 7 eps sum|g_i| of the other, docs/torch.md),
#     and 49 AdamW steps carry that on; both orders are fixed, so the
#     difference is the same in every run: equal to the 6 printed decimals
#     up to step 20, 1e-6 at 30, 3e-6 at 40, 2.7e-5 at 50. A rank's
#     gradients left out of every all_reduce differ by 2e-3 at step 10 and
#     1e-2 at step 30 (seen failing). Left out of one step's only, the loss
#     moves less than rounding does (1.5e-5 at step 50): the sums themselves
#     are torch_ddp's to check (the state_dict within rtol 1e-6).
#  5. the ranks of a node talked through their daemon's memory, and only to
#     the other node's over the wire: at SIGINT each daemon exits 0 having
#     sent packets both ways (packets_local > 0, port.tx > 0, which add up to
#     packets_tx), every one in memory a piece's 64-byte header alone
#     (bytes_local == 64 x packets_local: the node's ranks read each other's
#     bytes in place, Mesh::direct; before, the payload went through the
#     daemon's memory, 4-6 times the bytes out of its port); of its 56
#     sessions, 24 to its own address (4 ranks x 3 local peers x 2
#     directions) and 32 to the other node's (4 x 4 x 2); none failed.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
EXAMPLE=$TM_SRC/examples/torch/train_lm.py
STEPS=50
MARGIN=2.0
TOL=1e-4

tt_mesh 2
PORT=29600
# run NAME ARGS...: the example under torchrun on both nodes at once; sets
# RC[k], output in NAME.K.out, the ranks' logs under NAME.K.logs.
run() {
    local name=$1 k pids=()
    shift
    PORT=$((PORT + 1))
    for k in 0 1; do
        ip netns exec "${TT_NS[k]}" env TAILMARK_SOCKET="${TT_SOCK[k]}" PYTHONPATH="$TT_PYPATH" \
            OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0 \
            timeout -k 5 300 "${TT_PYRUN[@]}" -m torch.distributed.run --nnodes 2 --nproc_per_node 4 --node_rank $k \
            --master_addr "${TT_KIP[0]}" --master_port $PORT --redirects 1 --tee 1 --log_dir "$TM_WORK/$name.$k.logs" \
            "$EXAMPLE" --steps $STEPS "$@" >"$TM_WORK/$name.$k.out" 2>&1 &
        pids[k]=$!
    done
    for k in 0 1; do
        wait "${pids[k]}"
        RC[k]=$?
    done
}
# check NAME: 1-3 on a run; sets DONE (rank 0's last line) when they hold.
check() {
    local name=$1 k n ok=1 line
    DONE=''
    for k in 0 1; do
        n=$(find "$TM_WORK/$name.$k.logs" -name stdout.log | wc -l)
        if [ "${RC[k]}" -ne 0 ] || [ "$n" -ne 4 ]; then
            tm_fail "$name: node $k: torchrun exit ${RC[k]}, $n ranks' logs (want 0 and 4)"
            grep -v '^\[W' "$TM_WORK/$name.$k.out" | tail -n 20 | sed 's/^/    /'
            ok=0
        fi
    done
    for n in 1 10 20 30 40 50; do
        grep -q "^\[default0\]:step *$n  loss" "$TM_WORK/$name.0.out" || { tm_fail "$name: rank 0 printed no step $n"; ok=0; }
    done
    line=$(grep -o 'done: .*' "$TM_WORK/$name.0.out")
    if ! [[ "$line" =~ ^done:\ $STEPS\ steps,\ world\ size\ 8,\ [a-z]+:\ loss\ ([0-9.]+)\ -\>\ ([0-9.a-z]+), ]]; then
        tm_fail "$name: rank 0's last line is not 'done: $STEPS steps, world size 8, ...': '$line'"
        return
    fi
    if ! "$TT_PY" -c "import math, sys; a, b = float('${BASH_REMATCH[1]}'), float('${BASH_REMATCH[2]}')
sys.exit(not (math.isfinite(b) and b <= a - $MARGIN))"; then
        tm_fail "$name: the loss went from ${BASH_REMATCH[1]} to ${BASH_REMATCH[2]}: want finite and at least $MARGIN lower"
        ok=0
    fi
    [ $ok -eq 1 ] && DONE=$line && tm_log "ok: $name: 2 nodes x 4 ranks exited 0; $line"
}

start=$SECONDS
run tm
check tm
TM_DONE=$DONE
tm_log "tailmark: $((SECONDS - start)) s"
for k in 0 1; do kill -INT "${TT_PID[k]}"; done
for k in 0 1; do
    wait "${TT_PID[k]}"
    TM_RC=$?
    tm_log "node $k's daemon: $(grep -m1 'in memory (between' "$TM_WORK/d$k.out" | sed 's/^ *//')"
    tm_expect_rc d$k 0 || continue
    tm_check d$k "d['packets_local'] > 0" "d['port']['tx'] > 0" \
        "d['packets_tx'] == d['packets_local'] + d['port']['tx']" \
        "d['bytes_local'] == 64 * d['packets_local']" "d['service']['failed'] == 0" "d['flows_failed'] == 0"
    split=$("$TT_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
own = sum(s["peer"].split(":")[0] == sys.argv[2] for s in d["sessions"])
print(own, len(d["sessions"]) - own)' "$TM_WORK/d$k.json" "${TT_IP[k]}")
    [ "$split" = "24 32" ] ||
        tm_fail "node $k's daemon: $split sessions to its own address and to others (want 24 32)"
done

start=$SECONDS
run gloo --backend gloo
check gloo
tm_log "gloo: $((SECONDS - start)) s"
if [ -n "$TM_DONE" ] && [ -n "$DONE" ]; then
    if out=$("$TT_PY" - "$TM_WORK/tm.0.out" "$TM_WORK/gloo.0.out" "$TOL" <<'PY'
import re, sys
a, b = ([(int(s), float(v)) for s, v in re.findall(r"\]:step +(\d+)  loss (\S+)", open(f).read())] for f in sys.argv[1:3])
tol, tol_s = float(sys.argv[3]), sys.argv[3]
diffs = [abs(x[1] - y[1]) for x, y in zip(a, b)]
if [s for s, _ in a] != [s for s, _ in b] or diffs[0] != 0 or not all(d <= tol for d in diffs[1:]):
    print("tailmark " + ", ".join(f"{s}: {v:.6f}" for s, v in a) + "; gloo " + ", ".join(f"{s}: {v:.6f}" for s, v in b))
    sys.exit(1)
worst = max(range(len(diffs)), key=lambda i: diffs[i])
print(f"step 1's loss equal ({a[0][1]:.6f}), steps 10-50's within {tol_s} (the largest difference {diffs[worst]:.1e} at step {a[worst][0]})")
PY
    ); then
        tm_log "ok: tailmark = gloo: $out"
    else
        tm_fail "tailmark != gloo (step 1 equal, then within $TOL): $out"
    fi
fi
tm_finish
