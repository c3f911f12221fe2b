// A session's flow i as the engine installs it, from what the two ends
// agreed (Session::params, the link's data keys): its receive spec under
// this end's id, its send spec to the peer's flow, and the addresses its
// packets carry. Every application that runs sessions on the engine (the
// daemon's service and its benchmark) builds its flows' specs here, so the
// keys, tags and ids of one flow are derived in one place.
#pragma once

#include <cstdint>

#include <rte_ether.h>
#include <rte_ring.h>

#include "tailmark/completion_ring.h"
#include "tailmark/receiver.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"

namespace tailmark::engine {

// The addresses of s's packets from this end (mac, src_ip) to its peer.
Addressing address_to(const Session& s, const rte_ether_addr& mac, uint32_t src_ip);

// Flow i's receive side under this end's id `id`: its ring and per-packet
// completion ring (null: none), the peer's flow id, and its data's
// authentication: version 2's tag key from the link; without a link
// (--flow-control off: no session agreed) version 1, untagged. `acknowledge`
// false: nobody to acknowledge to (ready-made packets), so no link.
RecvFlowSpec recv_spec(const Session& s, uint16_t i, uint16_t id, CompletionRing* ring, rte_ring* pkt_cq,
                       bool acknowledge = true);

// Flow i's packets to the peer's flow (peer_base + i) over window
// `ring_size`, tagged as the link says. False: the session's MTU cannot
// carry them (the session agreed it: it fits).
bool tx_flow(const Session& s, uint16_t i, uint32_t ring_size, const Addressing& a, TxFlow& out);

// Flow i's send side, reliable, under this end's id (local_base + i):
// tx_flow's packets, the session's message size, its link, and `paths`
// source ports (a path per rail at least). The caller sets how it reports,
// takes its payload, its user pointer, and a local peer's words. False: as tx_flow.
bool send_spec(const Session& s, uint16_t i, uint32_t ring_size, const Addressing& a, uint32_t paths,
               SendFlowSpec& out);

} // namespace tailmark::engine
