# Shared by the torch suites: source it after tests/integration/lib.sh.
# tt_mesh N [PER]: N network namespaces ("nodes"), each with its own
# `tailmarkd --mode service` on net_af_packet over a veth whose other end
# is a port of one bridge (in a namespace of its own), and PER ranks
# (default 1) in each, which share its daemon: TT_N = N x PER ranks, rank r
# in node r / PER (as torchrun numbers them). Every node's veth also
# carries a kernel address (10.77.0.K+1/24: gloo's TCP, for the
# comparisons); tailmark's address is another (198.18.1.K+1), which the
# kernel neither owns nor answers ARP for.
# Sets TT_NODES (N), TT_PER, TT_N, and per node K: TT_NS[K], TT_SOCK[K],
# TT_IP[K] (tailmark), TT_KIP[K] (kernel), TT_PID[K] (the daemon's
# `timeout`); with PER 1, node K is rank K.
# TT_DAEMON_S: the daemons' lifetime (900 s; the benchmark's meshes live
# longer).
# TT_PEER_TIMEOUT_MS: the daemons' --peer-timeout-ms (5000), for the bounds
# that derive from it.
# TT_MTU (default 1500): the veths' and the bridge's MTU, both backends'
# link; above 1500 the daemons take --mtu TT_MTU and af_packet socket ring
# frames large enough for it (framesz; the PMD's reported 1518-byte maximum
# is left aside, see drivers/port_plan.cc's af_packet_frame).
# TT_RAILS (default 1, at most 4): each node's links (rails, issue 38). Rail
# i > 0 is a veth eth<i> into a bridge br<i> of its own (in TT_BR), with the
# same MTU, the daemon's port i (net_af_packet<i>, the same ring) and
# address 198.18.<i+1>.K+1 (--rails): a separate link, so that what each
# rail carries is its veth's counters alone. No kernel address on a rail
# (the daemon's data, and nothing of the kernel's, goes out of it); the
# daemons learn each other's rails from the handshake, not by ARP.
# TT_DAEMON_EXTRA: more options for every daemon, word-split (an A/B by
# hand: TT_DAEMON_EXTRA="--cc off"); none in the suites.
# shellcheck shell=bash
TT_PY=${TAILMARK_PYTHON:-/usr/bin/python3}
# TT_PYRUN: TT_PY as the command for a script that imports tailmark.torch
# (under a sanitizer build, with its runtime: TM_SAN_RUN).
TT_PYRUN=("${TM_SAN_RUN[@]}" "$TT_PY")
TT_PYPATH=${TAILMARK_PYTHONPATH:-$TM_SRC/build/lib/tailmark-torch}
TT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TT_PEER_TIMEOUT_MS=5000

tt_require() {
    if ! "$TT_PY" -c 'import torch.distributed' 2>/dev/null; then
        tm_log "torch is not installed for $TT_PY (scripts/test.sh installs python3-torch)"
        exit 1
    fi
    if ! PYTHONPATH=$TT_PYPATH "${TT_PYRUN[@]}" -c 'import tailmark.torch' 2>"$TM_WORK/import.err"; then
        tm_log "tailmark.torch does not import from $TT_PYPATH: $(tail -3 "$TM_WORK/import.err")"
        exit 1
    fi
}

tt_mesh() {
    local n=$1 r i
    local rails=${TT_RAILS:-1}
    if ! [[ $rails =~ ^[1-4]$ ]]; then tm_fail "TT_RAILS=$rails: 1 to 4"; tm_finish; fi
    TT_NODES=$n
    TT_PER=${2:-1}
    TT_N=$((n * TT_PER))
    TT_MESHES=$((${TT_MESHES:-0} + 1)) # a script may build one after another
    TT_BR=tm_tb${TT_MESHES}_$$
    TM_NETNS+=("$TT_BR")
    ip netns add "$TT_BR" || { tm_fail "bridge namespace"; tm_finish; }
    for ((i = 0; i < rails; i++)); do
        ip netns exec "$TT_BR" ip link add br$i type bridge || { tm_fail "bridge br$i"; tm_finish; }
        ip netns exec "$TT_BR" ip link set br$i up
    done
    ip netns exec "$TT_BR" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    # The bridge stands for a switch, which runs no firewall: where the host
    # loaded br_netfilter (Docker does), every frame it forwards went
    # through iptables' hooks too, the sender's CPU paying (its veth_xmit
    # runs the bridge). That was 16% of a daemon's samples in a 1 MiB
    # all_to_all at 2 x 2 ranks, MTU 1500 (2026-12-07, ad4d1a5), and each
    # daemon's CPU time went from 1.02-1.13 s to 0.80-0.98 (4 MiB, 40 ops).
    # Without the module the sysctls do not exist, nor anything to turn off.
    for t in iptables ip6tables arptables; do
        ip netns exec "$TT_BR" sysctl -qw net.bridge.bridge-nf-call-$t=0 2>/dev/null || true
    done
    for ((r = 0; r < n; r++)); do
        TT_NS[r]=tm_tr${TT_MESHES}${r}_$$
        TM_NETNS+=("${TT_NS[r]}")
        ip netns add "${TT_NS[r]}" || { tm_fail "namespace ${TT_NS[r]}"; tm_finish; }
        ip netns exec "${TT_NS[r]}" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
        ip netns exec "${TT_NS[r]}" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
        ip link add eth0 netns "${TT_NS[r]}" type veth peer name p$r netns "$TT_BR" ||
            { tm_fail "veth of rank $r"; tm_finish; }
        ip netns exec "$TT_BR" ip link set p$r master br0
        ip netns exec "$TT_BR" ip link set p$r mtu "${TT_MTU:-1500}" up
        ip netns exec "${TT_NS[r]}" ip link set eth0 mtu "${TT_MTU:-1500}"
        ip netns exec "${TT_NS[r]}" ip link set lo up
        TT_KIP[r]=10.77.0.$((r + 1))
        TT_IP[r]=198.18.1.$((r + 1))
        ip netns exec "${TT_NS[r]}" ip addr add "${TT_KIP[r]}/24" dev eth0
        ip netns exec "${TT_NS[r]}" ip link set eth0 up
        for ((i = 1; i < rails; i++)); do
            ip link add eth$i netns "${TT_NS[r]}" type veth peer name p${r}r$i netns "$TT_BR" ||
                { tm_fail "veth of rank $r's rail $i"; tm_finish; }
            ip netns exec "$TT_BR" ip link set p${r}r$i master br$i
            ip netns exec "$TT_BR" ip link set p${r}r$i mtu "${TT_MTU:-1500}" up
            ip netns exec "${TT_NS[r]}" ip link set eth$i mtu "${TT_MTU:-1500}" up
        done
    done
    for ((i = 0; i < rails; i++)); do ip netns exec "$TT_BR" ip link set br$i mtu "${TT_MTU:-1500}"; done
    local vdev_extra="" mtu_opt=()
    if [ "${TT_MTU:-1500}" -gt 1500 ]; then
        # A ring frame: the frame, the tpacket header and sockaddr (80 B),
        # in 512-byte steps (drivers/port_plan.cc checks both), 8 per block, 1024 frames.
        local fs=$(((TT_MTU + 14 + 80 + 511) / 512 * 512))
        vdev_extra=",framesz=$fs,blocksz=$((fs * 8)),framecnt=1024"
        mtu_opt=(--mtu "$TT_MTU")
    else
        vdev_extra=",framecnt=4096"
    fi
    # A sanitizer build: the receivers' NACK delay (the daemon's default,
    # 200 us, doubling with each repeat up to 64 times) times TM_SAN_SLOW.
    # Its daemons drain their af_packet rings that many times slower, so a
    # gap's NACK was repeated before the retransmission it asked for could
    # arrive, and the duplicates overflowed the ring again: at 3 ranks, in
    # 3 of 5 torch_ops runs under ASan+UBSan, rank 1 retransmitted up to
    # 497 k packets (the release build: 82 k), rank 2 dropped 104 k of them
    # outside its window and 80 k as duplicates or completed, and a session
    # ended by --retry-limit or --peer-timeout-ms with both daemons alive.
    # At 3200 us: 15 k retransmitted, 77 NACKs (10317 before), no failure.
    local nack_opt=()
    if [ "$TM_SAN_SLOW" -gt 1 ]; then nack_opt=(--nack-delay-us $((200 * TM_SAN_SLOW))); fi
    for ((r = 0; r < n; r++)); do
        TT_SOCK[r]=$TM_WORK/r$r.sock
        # The rails' ports take the primary's ring: the daemon refuses a
        # rail whose af_packet frames are smaller than its port's.
        local rail_vdev=() rail_opt=() rail_ips=()
        for ((i = 1; i < rails; i++)); do
            rail_vdev+=("--vdev=net_af_packet$i,iface=eth$i$vdev_extra")
            rail_ips+=("$i:198.18.$((i + 1)).$((r + 1))")
        done
        [ "$rails" -gt 1 ] && rail_opt=(--rails "$(IFS=,; echo "${rail_ips[*]}")")
        # Two vCPUs: the daemons take turns on them (their busy loops are
        # what the scheduler shares with the ranks). Six busy processes on
        # two vCPUs delay RTT samples by scheduler time slices (ms), far
        # above congestion control's 500 us queue target, with no queue
        # anywhere (a bridge, no bottleneck). The daemons run congestion
        # control's defaults all the same, as users do: its stall rule
        # counts a feedback silence off the delay, and the receiver's hold
        # comes off every sample (docs/congestion.md). Until 2026-12-04 the
        # suites set --cc-target-us 20000 (TT_CC_TARGET_US still does).
        # The retry budget is the daemon's default: as many expiries as fill
        # --peer-timeout-ms, which is what declares a rank dead here. (12
        # expiries, 1.7 s, once stood in for the old default of 8, which a
        # CI run's 2-rank 32 MiB send outlived with both daemons alive; under
        # --sanitize, 12 ended a 16 M-element all_reduce at 2 and 3 ranks
        # with both daemons alive, in 2 of 2 torch_ops runs.)
        tm_start d$r "${TT_DAEMON_S:-900}" ns "${TT_NS[r]}" -- \
            --vdev=net_af_packet0,iface=eth0$vdev_extra "${rail_vdev[@]}" -l $((r % 2)) -- \
            --mode service --src-ip "${TT_IP[r]}" "${rail_opt[@]}" --control-socket "${TT_SOCK[r]}" \
            --secret "$TM_SECRET" "${mtu_opt[@]}" \
            --stats-period 0 --peer-timeout-ms "$TT_PEER_TIMEOUT_MS" --idle-sleep-us ${TT_IDLE_SLEEP_US:-50} \
            ${TT_CC_TARGET_US:+--cc-target-us $TT_CC_TARGET_US} ${TT_RETRY_LIMIT:+--retry-limit $TT_RETRY_LIMIT} "${nack_opt[@]}" ${TT_DAEMON_EXTRA:-}
        TT_PID[r]=$TM_PID
    done
    for ((r = 0; r < n; r++)); do
        local sock=${TT_SOCK[r]} err=$TM_WORK/d$r.err
        # shellcheck disable=SC2317
        up() { grep -q "applications attach on" "$err" 2>/dev/null && [ -S "$sock" ]; }
        tm_await d$r "${TT_PID[r]}" 30 up "the daemon never listened on its socket"
    done
}

# tt_run NAME TIMEOUT SCRIPT ARGS...: the script once per rank, each in its
# node's namespace, with RANK, WORLD_SIZE, TT_STORE (a FileStore path: the
# rendezvous), its node's daemon's TAILMARK_SOCKET and kernel address
# (TT_KIP). Waits for all; sets TT_RC[r]; output in $TM_WORK/NAME.r.out.
# TT_WRAP_r: a command rank r runs under (e.g. unshare: a pid namespace).
tt_run() {
    local name=$1 tmo=$2 script=$3 r k wrap
    shift 3
    local store=$TM_WORK/$name.store
    rm -f "$store"
    local pids=()
    for ((r = 0; r < TT_N; r++)); do
        k=$((r / TT_PER))
        wrap=TT_WRAP_$r
        # shellcheck disable=SC2086 # the wrapper's words
        ip netns exec "${TT_NS[k]}" env RANK=$r WORLD_SIZE=$TT_N TT_STORE="$store" \
            TAILMARK_SOCKET="${TT_SOCK[k]}" TT_KIP="${TT_KIP[k]}" TT_MASTER="${TT_KIP[0]}" \
            GLOO_SOCKET_IFNAME=eth0 PYTHONPATH="$TT_PYPATH" OMP_NUM_THREADS=1 \
            timeout -k 5 "$tmo" ${!wrap:-} "${TT_PYRUN[@]}" "$script" "$@" >"$TM_WORK/$name.$r.out" 2>&1 &
        pids[r]=$!
    done
    for ((r = 0; r < TT_N; r++)); do
        wait "${pids[r]}"
        TT_RC[r]=$?
    done
}

# tt_show NAME: every rank's output tail.
tt_show() {
    local r
    for ((r = 0; r < TT_N; r++)); do
        tm_log "--- $1 rank $r (exit ${TT_RC[r]:-?})"
        tail -n 12 "$TM_WORK/$1.$r.out" | sed 's/^/    /'
    done
}

# tt_all_ok NAME: every rank exited 0.
tt_all_ok() {
    local r
    for ((r = 0; r < TT_N; r++)); do
        [ "${TT_RC[r]}" -eq 0 ] || return 1
    done
    return 0
}
