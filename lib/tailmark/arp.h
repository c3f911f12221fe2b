// ARP for IPv4 over Ethernet (RFC 826), so that users configure IP addresses
// only: tailmarkd answers requests for its own address and resolves its
// peer's MAC. Frame parsing and building here; ArpResolver is the resolver's
// state, with time passed in, so it runs on whichever thread owns it and the
// tests drive it with simulated TSC values.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

namespace tailmark {

inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;
inline constexpr uint32_t kArpLen = 28;                // IPv4-over-Ethernet ARP body
inline constexpr uint32_t kArpFrameLen = 14 + kArpLen; // 42: Ethernet header + body
inline constexpr uint32_t kArpMinFrame = RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN; // 60: what we send

enum class ArpVerdict : uint8_t {
    NotArp,    // not an untagged ARP frame (another ethertype, a VLAN tag, < 14 bytes): not ours to
               // judge
    Malformed, // ethertype ARP, but not IPv4-over-Ethernet (htype 1, ptype 0x0800, hlen 6,
               // plen 4), an op other than 1 or 2, or truncated
    Request,   // op 1 (with my_ip: a request for my_ip from a unicast sender: answer it)
    Reply,     // op 2
    NotForUs,  // (with my_ip only) a well-formed request that must not be answered: for
               // another IP, or from a multicast/zero sender MAC. `out` is filled: it still
               // goes to ArpResolver::on_packet (RFC 826 updates a known sender from any ARP).
};

constexpr std::string_view to_string(ArpVerdict v) {
    switch (v) {
    case ArpVerdict::NotArp:
        return "not_arp";
    case ArpVerdict::Malformed:
        return "malformed";
    case ArpVerdict::Request:
        return "request";
    case ArpVerdict::Reply:
        return "reply";
    case ArpVerdict::NotForUs:
        return "not_for_us";
    }
    return "?";
}

struct ArpInfo {
    uint16_t op = 0; // kArpOpRequest or kArpOpReply
    rte_ether_addr sha{}, tha{};
    uint32_t spa = 0, tpa = 0; // host order
};

// Frame-level: NotArp, Malformed, Request or Reply; fills `out` for the last
// two. Works on chained mbufs; never reads past pkt_len (Ethernet padding
// after the 28-byte body is ignored). A frame whose VLAN tag the NIC stripped
// (RTE_MBUF_F_RX_VLAN_STRIPPED) is as tagged as one that still carries it.
ArpVerdict parse_arp(const rte_mbuf* m, ArpInfo& out);
// The same, then a Request that must not be answered is NotForUs (see above).
// A request from 0.0.0.0 (an RFC 5227 probe) for my_ip is a Request: answer
// it, so the prober sees the address is taken; the resolver learns nothing from it.
ArpVerdict parse_arp(const rte_mbuf* m, ArpInfo& out, uint32_t my_ip);

// Frames are padded with zeros to the 60-byte Ethernet minimum (the NIC adds
// the FCS). Each returns one single-segment mbuf, or nullptr (nothing taken
// from the pool) when the pool is empty or its data room is under 60 bytes.

// Who has target_ip? Broadcast, as ARP requires; tha zero (RFC 5227 2.1.1).
rte_mbuf* build_arp_request(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip,
                            uint32_t target_ip);
// The answer to `request`, unicast to its sender: sha/spa ours, tha/tpa the
// requester's (tpa 0.0.0.0 for a probe; the reply still goes to its MAC).
rte_mbuf* build_arp_reply(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip,
                          const ArpInfo& request);
// An ARP announcement (RFC 5227 2.3): a broadcast request with spa = tpa =
// my_ip, tha zero. Peers that already know us update their entry; sent at
// start-up it also refreshes a switch's MAC table.
rte_mbuf* build_gratuitous_arp(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip);

// A MAC an IPv4 host can have: not multicast or broadcast, not all zero.
inline bool arp_unicast_mac(const rte_ether_addr& a) {
    return rte_is_unicast_ether_addr(&a) && !rte_is_zero_ether_addr(&a);
}

// The resolver: a fixed table of kEntries IPv4 -> MAC entries; no
// allocation, no clock, no port. The owner feeds it every parsed ARP
// (on_packet), calls poll() from its loop, and sends the requests poll() asks
// for. Not thread-safe: one owner (the control or rx thread).
//
// Retry cadence: want(ip, t0) makes the first request due at once (the next
// poll); each later one is due retry_cycles after the previous send. After
// max_attempts requests without an answer, the poll at or after
// last send + retry_cycles gives up: failed(ip) is true and nothing more is
// sent (want() again starts over). An answer at any time, even after giving
// up, resolves the entry.
class ArpResolver {
public:
    static constexpr uint32_t kEntries = 64;
    static constexpr uint32_t kDefaultAttempts = 5;

    explicit ArpResolver(uint32_t max_attempts = kDefaultAttempts)
        : max_attempts_(max_attempts == 0 ? 1 : max_attempts) {}

    // Start resolving ip (no-op if it is resolved or being resolved; restarts
    // one that failed). The first request goes out at the next poll; now_tsc
    // is kept as since(ip). A learned-only entry may be evicted for it.
    // False: the table is full of wanted entries, or ip is 0.
    bool want(uint32_t ip, uint64_t now_tsc);
    // Drop an entry (a peer that went away, or to force a fresh resolution).
    void forget(uint32_t ip);

    bool lookup(uint32_t ip, rte_ether_addr& mac) const;
    bool failed(uint32_t ip) const;
    // Requests sent for ip since want() (for "did not answer ARP after N tries").
    uint32_t attempts(uint32_t ip) const;
    uint32_t max_attempts() const { return max_attempts_; }
    // The now_tsc of the want() that started the current resolution (0 if none).
    uint64_t since(uint32_t ip) const;

    // What an ARP packet did to the table.
    enum class Learn : uint8_t {
        Nothing,  // nothing to learn (or the same MAC again)
        Learned,  // a resolution: the reply to our request, or a new neighbour
        Refused,  // a resolved entry's sender claimed another MAC: not believed
        RefusedAgain, // ... and had already, since its resolution
    };
    // ARP is not authenticated, so an entry's MAC is set by a resolution and
    // nothing else (RFC 826's merge would let any ARP, a gratuitous one or a
    // request for someone else, move it):
    //  - a pending entry (want()) takes the first reply to us (op 2, tpa
    //    my_ip) from its address;
    //  - a sender not in the table is added when the packet's target is my_ip
    //    (it is about to talk to us), into a free entry only;
    //  - a resolved entry whose sender now claims another MAC keeps its MAC:
    //    Refused, for the owner to count and log; the entry is marked
    //    disputed, so lookup() no longer gives it and the next want()
    //    resolves it afresh (a request of ours, the first reply wins): a peer
    //    that really moved is found again by the next session to it, and a
    //    session already up keeps the MAC of its authenticated handshake.
    // Learns nothing from a probe (spa 0), from a sender claiming my_ip, or
    // from a sender MAC that is multicast or zero.
    Learn on_packet(const ArpInfo& a, uint32_t my_ip);

    // Calls send_request(ip) for every wanted, unresolved, not failed entry
    // whose request is due. send_request returns bool (false: nothing was sent,
    // e.g. the pool was empty; it is retried at the next poll and costs no
    // attempt) or void (always sent). Returns how many entries gave up in this call.
    template <class Send>
    uint32_t poll(uint64_t now_tsc, uint64_t retry_cycles, Send&& send_request);

private:
    enum class State : uint8_t { Free, Pending, Resolved, Failed };
    struct Entry {
        uint32_t ip = 0;
        State state = State::Free;
        bool wanted = false;   // want() was called: kept over learned-only entries
        uint32_t attempts = 0; // requests sent
        uint64_t last_tx = 0;  // TSC of the last request (valid when attempts > 0)
        uint64_t since = 0;    // want()'s now_tsc
        bool disputed = false; // resolved, and since then another MAC was claimed for it
        rte_ether_addr mac{};
    };
    Entry* find(uint32_t ip);
    const Entry* find(uint32_t ip) const;

    std::array<Entry, kEntries> e_{};
    uint32_t max_attempts_;
};

template <class Send>
uint32_t ArpResolver::poll(uint64_t now_tsc, uint64_t retry_cycles, Send&& send_request) {
    uint32_t gave_up = 0;
    for (Entry& x : e_) {
        if (x.state != State::Pending)
            continue;
        // Unsigned difference: correct across a TSC wrap.
        if (x.attempts != 0 && now_tsc - x.last_tx < retry_cycles)
            continue;
        if (x.attempts >= max_attempts_) {
            x.state = State::Failed;
            gave_up++;
            continue;
        }
        bool sent = true;
        if constexpr (std::is_void_v<decltype(send_request(x.ip))>)
            send_request(x.ip);
        else
            sent = static_cast<bool>(send_request(x.ip));
        if (sent) {
            x.attempts++;
            x.last_tx = now_tsc;
        }
    }
    return gave_up;
}

} // namespace tailmark
