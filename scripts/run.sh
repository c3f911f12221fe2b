#!/usr/bin/env bash
# Builds if needed, then runs tailmarkd's main job on the embedded default:
# a loopback over net_ring (no NIC needed), 4 KiB messages, one completion
# flag per message. Extra arguments are passed to tailmarkd after "--".
#   scripts/run.sh                        the default
#   scripts/run.sh --msg-size 65536       any tailmarkd option
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

tm_ensure_packages || exit 1
tm_setup_hugepages
tm_build || exit 1
daemon=$(tm_daemon) || { tm_say "tailmarkd was not built"; exit 1; }

mkdir -p "$TM_BUILD/run"
# shellcheck disable=SC2086
exec "$daemon" -l 0-1 --no-pci --vdev=net_ring0 $TAILMARK_EAL_MEM --file-prefix "tm_run_$$" \
    --log-level=lib.eal:warning -- \
    --config "$TM_ROOT/config/loopback.ini" --exit-when-done \
    --summary-json "$TM_BUILD/run/summary.json" "$@"
