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
# 16 M cases of all five dtypes took 2 of the suite's 15 minutes.
# TT_COUNTS / TT_DTYPES / TT_WORLDS / TT_BIG_DTYPES: a subset.
# Then, on the same ranks, gloo_compare.py: every operation (the above and
# reduce, gather, scatter, all_to_all, all_to_all_single, the flat
# all_gather_into_tensor and reduce_scatter_tensor, batch_isend_irecv) on
# tailmark and on gloo (kernel TCP over the same veths) on identical seeded
# random inputs, compared bit for bit or within the bound it states; the
# error paths; tags received out of order. TT_GC_COUNTS (0,1,7,4099,1048583;
# above 65536 only in TT_GC_BIG, float32). TT_PARTS: "ops gloo" (a subset).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
COUNTS=${TT_COUNTS:-1,1023,4096,1048583,16777216}
DTYPES=${TT_DTYPES:-float32,float64,bfloat16,int32,int64}
BIG_DTYPES=${TT_BIG_DTYPES:-float32,int64}
for world in ${TT_WORLDS:-2 3}; do
    tt_mesh "$world"
    if [[ " ${TT_PARTS:-ops gloo} " == *" ops "* ]]; then
        start=$SECONDS
        tt_run ops$world 900 "$TT_DIR/ops.py" "$COUNTS" "$DTYPES" "$BIG_DTYPES"
        if tt_all_ok; then
            tm_log "ok: $world ranks, every op and dtype at $COUNTS (over 2 M elements: $BIG_DTYPES): $(tail -1 "$TM_WORK/ops$world.0.out") ($((SECONDS - start)) s)"
        else
            tm_fail "$world ranks: a rank failed"
            tt_show ops$world
        fi
    fi
    if [[ " ${TT_PARTS:-ops gloo} " == *" gloo "* ]]; then
        start=$SECONDS
        tt_run gc$world 300 "$TT_DIR/gloo_compare.py" "${TT_GC_COUNTS:-0,1,7,4099,1048583}" "$DTYPES" \
            "${TT_GC_BIG:-float32}"
        if tt_all_ok; then
            tm_log "ok: $world ranks, tailmark against gloo: $(tail -1 "$TM_WORK/gc$world.0.out") ($((SECONDS - start)) s)"
            grep -h "^rank 1: tailmark, tags" "$TM_WORK/gc$world.1.out" | sed 's/^/    /'
        else
            tm_fail "$world ranks, tailmark against gloo: a rank failed"
            tt_show gc$world
        fi
    fi
    for ((r = 0; r < world; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
    for ((r = 0; r < world; r++)); do wait "${TT_PID[r]}"; done
    for ns in "${TT_NS[@]}" "$TT_BR"; do ip netns del "$ns" 2>/dev/null; done
done
tm_finish
