#!/usr/bin/env bash
# Every operation (send/recv, broadcast, all_reduce sum/avg/min/max (by
# size, and up to 1 M + 7 elements pinned to the ring and to recursive
# doubling),
# all_gather, reduce_scatter, barrier) in every dtype (float32, float64,
# bfloat16, int32, int64) at element counts 1, 1023, 4096, 1M+7 and 16M,
# with 2 ranks and with 3: ranks in their own namespaces, each with its own
# tailmarkd --mode service, joined by veth and a bridge. Integer-valued
# data: every element is checked for equality (ops.py). Counts over 2 M
# elements in TT_BIG_DTYPES only (default float32 and int64: a 4-byte and an
# 8-byte element): the size of a message does not depend on what the
# reduction adds, which the smaller counts check in every dtype, and the
# 16 M cases of all five dtypes took 2 of the suite's 15 minutes. At 3 ranks
# in float32 alone (TT_BIG_DTYPES_3): the 8-byte case there took 26 of the
# 68 s of 3-rank cases (2026-12-06, d93b043: float32 14.4 s, int64 26.3;
# at 2 ranks 3.9 and 7.2, and int64 stays there).
# TT_COUNTS / TT_DTYPES / TT_WORLDS / TT_BIG_DTYPES: a subset.
# Then, on the same ranks, gloo_compare.py: every operation (the above and
# reduce, gather, scatter, all_to_all, all_to_all_single, the flat
# all_gather_into_tensor and reduce_scatter_tensor, batch_isend_irecv) on
# tailmark and on gloo (kernel TCP over the same veths) on identical seeded
# random inputs, compared bit for bit or within the bound it states; the
# error paths; tags received out of order. TT_GC_COUNTS (0,1,7,4099,1048583;
# above 65536 only in TT_GC_BIG, float32). TT_PARTS: "ops gloo" (a subset).
# Then ranks that share their node's daemon (issue 39: "4 namespaces x 2"):
# a TT_WORLDS entry NxP is N namespaces, each one daemon, with P ranks on
# it (tt_mesh N P; ranks numbered as torchrun does, 0..P-1 on the first
# node). The default runs 4x2 (world 8; about 20 s here, 10 of them
# gloo_compare itself); 2x2 (world 4) works too but is left out: 11 s more
# (7 of them the ranks starting) for what 4x2 and torch_host's 4 ranks on
# one daemon already cover. Each: gloo_compare.py alone, at
# TT_GC_SHARED_COUNTS (0,7,4099) in every dtype, without its last case (a
# message left undelivered by design: the daemons' failed count below). At SIGINT each daemon exits 0 having sent packets both through its
# memory and out of its port (packets_local > 0, port.tx > 0, adding up to
# packets_tx), none failed, and its sessions are P x (P-1) x 2 to its own
# address and P x (N-1) x P x 2 to the other nodes' (every rank opens one to
# each other rank and accepts one from each): the ranks of a node met through
# its daemon, the others over the wire. And every piece between them is a
# 64-byte header (bytes_local == 64 x packets_local: the ranks read each
# other's bytes in place), except on node 0, whose rank 0 runs in a pid
# namespace of its own (unshare): neither of that node's ranks can map the
# other's segment, so both send inline, and the daemon's memory carries
# their payload (bytes_local > 64 x packets_local). The results above are
# the same either way. Seen failing: with the fallback's "0" ignored (rank
# 0's pieces to rank 1 by reference it cannot read), gloo_compare fails.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
COUNTS=${TT_COUNTS:-1,1023,4096,1048583,16777216}
DTYPES=${TT_DTYPES:-float32,float64,bfloat16,int32,int64}
BIG_DTYPES=${TT_BIG_DTYPES:-float32,int64}
BIG_DTYPES_3=${TT_BIG_DTYPES_3:-${TT_BIG_DTYPES:-float32}}
for spec in ${TT_WORLDS:-2 3 4x2}; do
    nodes=${spec%x*} per=1 parts=${TT_PARTS:-ops gloo} gc_counts=${TT_GC_COUNTS:-0,1,7,4099,1048583} gc_extra=()
    if [[ $spec == *x* ]]; then
        per=${spec#*x} parts=gloo gc_counts=${TT_GC_SHARED_COUNTS:-0,7,4099} gc_extra=(nobreak)
    fi
    tt_mesh "$nodes" "$per"
    unset TT_WRAP_0
    [ "$per" -gt 1 ] && export TT_WRAP_0="unshare --pid --fork --mount-proc --kill-child"
    world=$TT_N
    what="$world ranks"
    [ "$per" -gt 1 ] && what="$world ranks ($nodes daemons x $per ranks)"
    if [[ " $parts " == *" ops "* ]]; then
        start=$SECONDS
        big=$BIG_DTYPES
        [ "$world" -ge 3 ] && big=$BIG_DTYPES_3
        tt_run ops$world 900 "$TT_DIR/ops.py" "$COUNTS" "$DTYPES" "$big"
        if tt_all_ok; then
            tm_log "ok: $world ranks, every op and dtype at $COUNTS (over 2 M elements: $big): $(tail -1 "$TM_WORK/ops$world.0.out") ($((SECONDS - start)) s)"
        else
            tm_fail "$world ranks: a rank failed"
            tt_show ops$world
        fi
    fi
    if [[ " $parts " == *" gloo "* ]]; then
        start=$SECONDS
        tt_run gc$spec 300 "$TT_DIR/gloo_compare.py" "$gc_counts" "${TT_GC_DTYPES:-$DTYPES,uint8}" "${TT_GC_BIG:-float32}" \
            "${gc_extra[@]}"
        if tt_all_ok; then
            tm_log "ok: $what, tailmark against gloo: $(tail -1 "$TM_WORK/gc$spec.0.out") ($((SECONDS - start)) s)"
            grep -h "^rank 1: tailmark, tags" "$TM_WORK/gc$spec.1.out" | sed 's/^/    /'
        else
            tm_fail "$what, tailmark against gloo: a rank failed"
            tt_show gc$spec
        fi
    fi
    meshes=1
    if [ "$per" -gt 1 ]; then # hier.py: all_reduce's hierarchical algorithm keeps the ranks off the wire
        meshes=2
        start=$SECONDS
        tt_run hier$spec 300 "$TT_DIR/hier.py" "${TAILMARK_CTL:-$TM_SRC/build/app/tailmark-ctl/tailmark-ctl}" 262144 2
        if tt_all_ok; then
            tm_log "ok: $what, hierarchical all_reduce ($((SECONDS - start)) s):"
            grep -h "^ok: " "$TM_WORK"/hier$spec.*.out | sed 's/^ok: /    /'
        else
            tm_fail "$what, hierarchical all_reduce: a rank failed"
            tt_show hier$spec
        fi
    fi
    for ((k = 0; k < nodes; k++)); do kill -INT "${TT_PID[k]}" 2>/dev/null; done
    for ((k = 0; k < nodes; k++)); do
        wait "${TT_PID[k]}"
        TM_RC=$?
        [ "$per" -gt 1 ] || continue
        tm_expect_rc d$k 0 || continue
        bytes="d['bytes_local'] == 64 * d['packets_local']"        # by reference
        [ "$k" -eq 0 ] && bytes="d['bytes_local'] > 64 * d['packets_local']" # inline: rank 0 in its own pid namespace
        tm_check d$k "d['packets_local'] > 0" "d['port']['tx'] > 0" \
            "d['packets_tx'] == d['packets_local'] + d['port']['tx']" "d['service']['failed'] == 0" "$bytes" &&
            tm_log "ok: $spec: node $k's daemon: $(grep -m1 'in memory (between' "$TM_WORK/d$k.out" | sed 's/^ *//')"
        split=$("$TT_PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
own = sum(s["peer"].split(":")[0] == sys.argv[2] for s in d["sessions"])
print(own, len(d["sessions"]) - own)' "$TM_WORK/d$k.json" "${TT_IP[k]}")
        want="$((meshes * per * (per - 1) * 2)) $((meshes * per * (nodes - 1) * per * 2))"
        [ "$split" = "$want" ] ||
            tm_fail "$spec: node $k's daemon: $split sessions to its own address and to others (want $want)"
    done
    for ns in "${TT_NS[@]}" "$TT_BR"; do ip netns del "$ns" 2>/dev/null; done
done
tm_finish
