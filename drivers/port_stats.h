// A port's counters as rte_eth_stats_get gives them, with what the PMD does
// not count where it can be read: net_af_packet's kernel drops.
//
// Why: 22.11's net_af_packet never fills imissed. A frame the kernel had for
// the port while every slot of the socket's rx ring was full (the lcore
// descheduled, or slower than the wire) is counted by the kernel alone, in
// the socket's PACKET_STATISTICS, so "RX-missed 0" showed over real loss.
// The PMD's sockets are its private data; they are found among this
// process's descriptors by what they are (AF_PACKET, bound to the port's
// interface). Reading PACKET_STATISTICS clears it, so the drops are summed
// here per port. Control path only: it scans /proc/self/fd. (Two ports of
// this process on one interface would share one interface's drops: the
// first to read takes them.)
#pragma once

#include <cstdint>

#include <rte_ethdev.h>

namespace tailmark::drivers {

// rte_eth_stats_get(port, st), plus net_af_packet's kernel drops (since the
// port started) in st->imissed. 0, or rte_eth_stats_get's error.
int port_stats(uint16_t port, rte_eth_stats* st);

// rte_eth_stats_reset(port), and the kernel drops counted from zero again.
int port_stats_reset(uint16_t port);

} // namespace tailmark::drivers
