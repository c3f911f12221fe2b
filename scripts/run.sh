#!/usr/bin/env bash
# Builds if needed, then runs tailmarkd's main job on the embedded default:
# a loopback over net_ring (no NIC needed), 4 KiB messages, one completion
# flag per message. Extra arguments are passed to tailmarkd after "--".
#   scripts/run.sh                        the default
#   scripts/run.sh --msg-size 65536       any tailmarkd option
# On a fresh machine it installs only what this needs (the "run" package set
# of scripts/lib/common.sh: DPDK, the compiler, meson) and builds only
# tailmarkd, saying each step as it goes. The test suites' and the torch
# backend's packages come with scripts/test.sh, or scripts/deps.sh test torch.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

t0=$SECONDS
tm_say "step 1/4: packages (the run set: ${TM_PACKAGES_RUN[*]})"
tm_ensure_packages run || exit 1
tm_say "step 2/4: hugepages"
tm_setup_hugepages
tm_say "step 3/4: build"
TM_TARGETS=app/tailmarkd/tailmarkd tm_build || exit 1
daemon=$(tm_daemon) || { tm_say "tailmarkd was not built"; exit 1; }

mkdir -p "$TM_BUILD/run"
tm_say "step 4/4: run (ready after $((SECONDS - t0)) s): $daemon"
# shellcheck disable=SC2086
exec "$daemon" -l 0-1 --no-pci --vdev=net_ring0 $TAILMARK_EAL_MEM --file-prefix "tm_run_$$" \
    --log-level=lib.eal:warning -- \
    --config "$TM_ROOT/config/loopback.ini" --exit-when-done \
    --summary-json "$TM_BUILD/run/summary.json" "$@"
