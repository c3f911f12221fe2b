#!/usr/bin/env bash
# DDP over tailmark equals DDP over gloo: a seeded MLP of about 1 M
# parameters (bucket_cap_mb=1), 20 steps, the same script and data on both
# backends (gloo on kernel TCP over the same veths). With 2 ranks every
# per-step loss and the final state_dict are equal bit for bit (a + b is the
# same sum in any order); with 3 ranks they agree within rtol 1e-6 (the two
# rings add in different orders): |a - b| <= 1e-6 (|b| + max |b| of the
# tensor), so that an element near zero is held to the tensor's scale, not
# to its own (a rounding difference of 1e-9 is not "relative" to 1e-7).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
STEPS=${TT_STEPS:-20}
for world in ${TT_WORLDS:-2 3}; do
    tt_mesh "$world"
    ok=1
    for b in tailmark gloo; do
        tt_run ddp$world$b 600 "$TT_DIR/ddp.py" $b "$TM_WORK/ddp$world$b" "$STEPS"
        if ! tt_all_ok; then
            tm_fail "$world ranks, $b: a rank failed"
            tt_show ddp$world$b
            ok=0
        fi
    done
    if [ $ok -eq 1 ]; then
        if [ "$world" -eq 2 ]; then rtol=0; else rtol=1e-6; fi
        if out=$("$TT_PY" "$TT_DIR/ddp_compare.py" "$TM_WORK/ddp${world}tailmark" "$TM_WORK/ddp${world}gloo" "$world" "$rtol"); then
            tm_log "ok: DDP, $world ranks: tailmark = gloo: $out"
        else
            tm_fail "DDP, $world ranks: tailmark != gloo: $out"
        fi
    fi
    for ((r = 0; r < world; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
    for ((r = 0; r < world; r++)); do wait "${TT_PID[r]}"; done
    for ns in "${TT_NS[@]}" "$TT_BR"; do ip netns del "$ns" 2>/dev/null; done
done
tm_finish
