#!/usr/bin/env bash
# Installs package sets on demand (scripts/lib/common.sh): run, test, torch,
# pkg, all. scripts/run.sh installs "run" alone; scripts/test.sh all of them.
#   scripts/deps.sh torch        the torch.distributed backend's packages
#   scripts/deps.sh --list run   print a set, install nothing
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
if [ "${1:-}" = --list ]; then
    shift
    tm_packages_of "${@:-all}"
    exit
fi
tm_ensure_packages "${@:-all}"
