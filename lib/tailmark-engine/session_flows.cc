#include "tailmark/engine/session_flows.h"

#include <algorithm>
#include <cstring>

namespace tailmark::engine {

Addressing address_to(const Session& s, const rte_ether_addr& mac, uint32_t src_ip) {
    Addressing a;
    a.src_mac = mac;
    a.dst_mac = s.peer_mac;
    a.src_ip = src_ip;
    a.dst_ip = s.peer.ip;
    a.udp_port = s.peer.port;
    return a;
}

RecvFlowSpec recv_spec(const Session& s, uint16_t i, uint16_t id, CompletionRing* ring, rte_ring* pkt_cq,
                       bool acknowledge) {
    RecvFlowSpec rs;
    rs.id = id;
    rs.ring = ring;
    rs.key = s.params.key_of(i);
    rs.stride = stride_for_mtu(s.params.mtu, s.params.version);
    if (s.link != nullptr) { // version 2: the peer's packets tagged under the link's key
        rs.auth = {s.link->rx_data_key, s.params.version};
        rs.auth.data_auth = s.link->data_auth;
        memcpy(rs.auth.auth_h, s.link->rx_auth_h, sizeof(rs.auth.auth_h));
    } else {
        rs.auth = {SipKey{}, kVersion};
    }
    rs.peer_flow = static_cast<uint16_t>(s.peer_base + i);
    rs.link = acknowledge ? s.link : nullptr;
    rs.pkt_cq = pkt_cq;
    return rs;
}

bool tx_flow(const Session& s, uint16_t i, uint32_t ring_size, const Addressing& a, TxFlow& out) {
    return TxFlow::make(out, static_cast<uint16_t>(s.peer_base + i), s.params.key_of(i), ring_size, s.params.mtu, a,
                        s.link->data_version, s.link->tx_data_key, s.link->data_auth ? s.link->tx_auth_h : nullptr);
}

bool send_spec(const Session& s, uint16_t i, uint32_t ring_size, const Addressing& a, uint32_t paths,
               SendFlowSpec& out) {
    out = SendFlowSpec{};
    out.id = static_cast<uint16_t>(s.local_base + i);
    out.ring_size = ring_size;
    out.max_msg = s.params.max_msg;
    out.reliable = true;
    out.paths = std::max<uint32_t>(paths, s.link->rails); // a path per rail at least
    out.link = s.link;
    return tx_flow(s, i, ring_size, a, out.tx);
}

} // namespace tailmark::engine
