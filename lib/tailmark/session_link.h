// What the data plane knows of a session: the peer's address, the MAC key and
// both epochs. The control plane (session.h) fills it before any flow of the
// session is installed and frees it after every flow was removed, so the
// data plane reads it without a lock; the stamps are the only fields written
// after set-up, each by one writer.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "tailmark/siphash.h"
#include "tailmark/wire.h"

namespace tailmark {

// Rails: the ports of one host, each with an address of its own (--rails).
// A session's data is striped over the rails both ends have, rail i to the
// peer's rail i (the handshake exchanges them); control rides rail 0.
inline constexpr uint32_t kMaxRails = 4;

// A rail beyond the first as the handshake names it (control.h).
struct RailAddress {
    uint32_t ip = 0; // host order
    uint8_t mac[6]{};
};

// One rail's addresses as a packet carries them: the Ethernet addresses
// (destination, source) and the IPv4 source and destination (network
// order). A data packet's (Sender::aim), an ACK's (Receiver::emit) and a
// session packet's (SessionTable::send) template is rewritten with them.
struct RailHeader {
    uint8_t macs[12]{};
    uint32_t ips[2]{};

    static constexpr uint32_t kIpsAt = kEthLen + 12; // the IPv4 addresses in an L2-L4 template
    // The addresses of an Ethernet/IPv4 template, and into one.
    static RailHeader of(const uint8_t* l2l4) {
        RailHeader h;
        memcpy(h.macs, l2l4, sizeof(h.macs));
        memcpy(h.ips, l2l4 + kIpsAt, sizeof(h.ips));
        return h;
    }
    void write(uint8_t* l2l4) const {
        memcpy(l2l4, macs, sizeof(macs));
        memcpy(l2l4 + kIpsAt, ips, sizeof(ips));
    }
};

struct alignas(64) SessionLink {
    SipKey key;                // the session's secret: every control packet's MAC
    uint32_t local_epoch = 0;  // this end's incarnation of the session
    uint32_t peer_epoch = 0;
    uint16_t local_id = 0;     // session ids (control.h, SESSION packets)
    uint16_t peer_id = 0;
    bool local_peer = false;   // both ends in this process (loopback): control in memory, not on the wire
    bool connector = false;    // this end sends data (it connected)
    // The session's data version (wire-format.md) and, version 2, its data
    // keys: this end's packets are tagged under tx_data_key, the peer's
    // verified under rx_data_key (data_tag.h).
    uint8_t data_version = kVersion;
    SipKey tx_data_key{}, rx_data_key{};
    // --data-auth (version 2): the tag covers the payload too, through a
    // POLYVAL under these hash keys (data_tag.h), one per direction.
    bool data_auth = false;
    uint8_t tx_auth_h[16]{}, rx_auth_h[16]{};
    // Own address -> peer: Ethernet, IPv4 and UDP of every control packet.
    alignas(8) uint8_t l2l4[kEthLen + kIpLen + kUdpLen]{};
    // The rails the data is striped over (1: the one port; rail 0's header is
    // l2l4's), each rail's addresses; fixed before any flow is installed.
    uint8_t rails = 1;
    RailHeader rail[kMaxRails]{};
    // Written by the data plane (relaxed), read by the control plane:
    alignas(64) std::atomic<uint64_t> peer_ctl_tsc{0}; // latest authentic ACK/NACK from the peer (sender side)
    std::atomic<uint64_t> ack_tx_tsc{0};               // latest ACK/NACK this end sent (receiver side)
    std::atomic<uint64_t> peer_data_tsc{0};            // latest data placed that the peer sent (receiver side)
};

} // namespace tailmark
