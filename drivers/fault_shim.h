// Fault injection for testing recovery: this kernel has no netem, so tailmark
// brings its own. A FaultShim sits on an rx queue (rte_eth_add_rx_callback)
// and, per packet, drops, duplicates, holds back (reorders) or corrupts.
//
// It works on received bursts only. A tx callback cannot drop safely: the
// caller of rte_eth_tx_burst still owns, and may retry, every packet past the
// returned count, so one freed inside the callback would be freed twice.
// Faults "in both directions" are shims on the rx queue of each end.
//
// Spec, on the command line and in the shell:
//   drop=R,dup=R,reorder=R,corrupt=R[,seed=N]     every R a probability in [0, 1]
// A fixed seed replays a run exactly (same packets, same decisions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

namespace tailmark::drivers {

struct FaultSpec {
    double drop = 0, dup = 0, reorder = 0, corrupt = 0;
    uint64_t seed = 1;

    bool active() const { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
    std::string str() const;
};

// Parses a spec. False with one message naming the field on error.
bool parse_fault_spec(std::string_view text, FaultSpec& out, std::string& err);

struct FaultCounters {
    uint64_t seen = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0;
    // What arrived before any fault, by tailmark flags: retransmitted data
    // packets (RETX) and NACKs. A test balances them against the counts of
    // the process that sent them: on a link that loses nothing else, equal.
    uint64_t arrived_retx = 0, arrived_nack = 0;
    // Session packets (handshake, keep-alive, close) and ARP pass untouched:
    // the shim tests the data path's recovery; the session layer's own loss
    // handling (CONNECT retries, liveness timeouts) has tests of its own,
    // and real loss (nftables in reliability.sh) hits them too.
    uint64_t passed = 0;
};

class FaultShim {
public:
    static constexpr uint16_t kHold = 64;   // packets held back at most
    static constexpr uint16_t kMaxIn = 512; // largest burst it applies faults to

    // `name` names the request ring (set(), below); unique per shim.
    FaultShim(const FaultSpec& spec, const char* name);
    ~FaultShim(); // frees what it still holds
    FaultShim(const FaultShim&) = delete;
    FaultShim& operator=(const FaultShim&) = delete;

    // Applies the faults to a burst in place and returns the new count (at
    // most max). Dropped packets are freed; a duplicate is the same mbuf with
    // its reference count raised (no copy, no allocation); a packet held back
    // comes out at the end of the next call, behind packets that arrived after
    // it; corruption flips one bit past the Ethernet header.
    uint16_t apply(rte_mbuf** pkts, uint16_t n, uint16_t max);

    // Readable from any thread (relaxed loads of counters the owner writes).
    FaultCounters counters() const;
    const FaultSpec& spec() const { return spec_; }

    // From the control plane (the shell): a new spec, taken by the lcore that
    // polls the queue at its next burst, through an SP/SC rte_ring: the
    // data path takes no lock. False if the request ring is full.
    bool set(const FaultSpec& spec);

    // Installs this shim on rx queue `queue` of `port`; nullptr on failure.
    const rte_eth_rxtx_callback* attach_rx(uint16_t port, uint16_t queue);

private:
    uint64_t next();
    bool chance(double p) { return p > 0 && (p >= 1 || double(next() >> 11) * 0x1.0p-53 < p); }
    void corrupt(rte_mbuf* m);
    void tap(rte_mbuf* const* pkts, uint16_t n);

    FaultSpec spec_;
    uint64_t state_;
    struct rte_ring* requests_ = nullptr;
    FaultCounters ctr_;
    rte_mbuf* held_[kHold];      // held during the last call: released in this one
    uint16_t nheld_ = 0;
};

} // namespace tailmark::drivers
