#include "drivers/fault_shim.h"

#include <cerrno>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <rte_branch_prediction.h>
#include <rte_ether.h>
#include <netinet/in.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

namespace tailmark::drivers {

namespace {
// Written by the lcore that owns the shim, read by others: relaxed atomics.
inline void inc(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
} // namespace

std::string FaultSpec::str() const {
    char b[160];
    snprintf(b, sizeof(b), "drop=%g,dup=%g,reorder=%g,corrupt=%g,seed=%llu", drop, dup, reorder, corrupt,
             static_cast<unsigned long long>(seed));
    return b;
}

// Formatted, not concatenated: GCC 12 at -O3 warns falsely (-Wrestrict) on
// chains of std::string operator+.
__attribute__((format(printf, 1, 2))) static std::string say(const char* fmt, ...) {
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof(b), fmt, ap);
    va_end(ap);
    return b;
}

bool parse_fault_spec(std::string_view text, FaultSpec& out, std::string& err) {
    FaultSpec s;
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            err = say("'%.*s' is not NAME=VALUE", int(item.size()), item.data());
            return false;
        }
        const std::string name(item.substr(0, eq)), value(item.substr(eq + 1));
        char* end = nullptr;
        errno = 0;
        if (name == "seed") {
            const unsigned long long v = strtoull(value.c_str(), &end, 0);
            if (value.empty() || *end != '\0' || errno != 0 || value[0] == '-') {
                err = say("seed '%s' is not a non-negative integer", value.c_str());
                return false;
            }
            s.seed = v;
            continue;
        }
        double* field = name == "drop" ? &s.drop : name == "dup" ? &s.dup : name == "reorder" ? &s.reorder
                      : name == "corrupt" ? &s.corrupt : nullptr;
        if (field == nullptr) {
            err = say("unknown field '%s' (drop, dup, reorder, corrupt, seed)", name.c_str());
            return false;
        }
        const double v = strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0 || v > 1) {
            err = say("%s '%s' is not a probability in [0, 1]", name.c_str(), value.c_str());
            return false;
        }
        *field = v;
    }
    out = s;
    return true;
}

FaultShim::FaultShim(const FaultSpec& spec, const char* name) : spec_(spec), state_(spec.seed) {
    requests_ = rte_ring_create_elem(name, sizeof(FaultSpec), 8, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

FaultShim::~FaultShim() {
    if (nheld_)
        rte_pktmbuf_free_bulk(held_, nheld_);
    rte_ring_free(requests_);
}

bool FaultShim::set(const FaultSpec& spec) {
    FaultSpec copy = spec; // the ring API takes a non-const pointer
    return requests_ != nullptr && rte_ring_sp_enqueue_elem(requests_, &copy, sizeof(copy)) == 0;
}

FaultCounters FaultShim::counters() const {
    FaultCounters c;
    c.seen = __atomic_load_n(&ctr_.seen, __ATOMIC_RELAXED);
    c.dropped = __atomic_load_n(&ctr_.dropped, __ATOMIC_RELAXED);
    c.duplicated = __atomic_load_n(&ctr_.duplicated, __ATOMIC_RELAXED);
    c.reordered = __atomic_load_n(&ctr_.reordered, __ATOMIC_RELAXED);
    c.corrupted = __atomic_load_n(&ctr_.corrupted, __ATOMIC_RELAXED);
    c.arrived_retx = __atomic_load_n(&ctr_.arrived_retx, __ATOMIC_RELAXED);
    c.arrived_nack = __atomic_load_n(&ctr_.arrived_nack, __ATOMIC_RELAXED);
    c.passed = __atomic_load_n(&ctr_.passed, __ATOMIC_RELAXED);
    return c;
}

// splitmix64: one multiply-xorshift step per decision, and a seed of 0 works.
uint64_t FaultShim::next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void FaultShim::corrupt(rte_mbuf* m) {
    const uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len <= RTE_ETHER_HDR_LEN)
        return;
    uint32_t off = RTE_ETHER_HDR_LEN + static_cast<uint32_t>(next() % (len - RTE_ETHER_HDR_LEN));
    rte_mbuf* seg = m;
    while (off >= seg->data_len) {
        off -= seg->data_len;
        seg = seg->next;
    }
    rte_pktmbuf_mtod_offset(seg, uint8_t*, off)[0] ^= static_cast<uint8_t>(1u << (next() & 7));
    inc(ctr_.corrupted);
}

// The flags byte of a tailmark header (version 1, or 2: data with a tag) behind Ethernet, IPv4 (IHL 5) and
// UDP, or 0. The shim sits in front of the parser, so it only peeks.
static inline uint8_t tailmark_flags(const rte_mbuf* m) {
    constexpr uint32_t kAt = RTE_ETHER_HDR_LEN + 20 + 8; // the tailmark header
    if (m->data_len < kAt + 2)
        return 0;
    const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
    if (p[12] != 0x08 || p[13] != 0x00 || p[14] != 0x45 || p[RTE_ETHER_HDR_LEN + 9] != IPPROTO_UDP ||
        (p[kAt] != 1 && p[kAt] != 2))
        return 0;
    return p[kAt + 1];
}

// Frames the shim leaves alone: tailmark SESSION packets and ARP.
static inline bool session_layer(const rte_mbuf* m) {
    if (m->data_len >= RTE_ETHER_HDR_LEN) {
        const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
        if (p[12] == 0x08 && p[13] == 0x06)
            return true;
    }
    return (tailmark_flags(m) & 0x10) != 0;
}

void FaultShim::tap(rte_mbuf* const* pkts, uint16_t n) {
    uint64_t retx = 0, nack = 0;
    for (uint16_t i = 0; i < n; i++) {
        const uint8_t f = tailmark_flags(pkts[i]);
        retx += (f & 0x0E) == 0x08; // RETX on a data packet
        nack += (f & 0x04) != 0;
    }
    if (retx)
        inc(ctr_.arrived_retx, retx);
    if (nack)
        inc(ctr_.arrived_nack, nack);
}

uint16_t FaultShim::apply(rte_mbuf** pkts, uint16_t n, uint16_t max) {
    if (unlikely(requests_ != nullptr && rte_ring_count(requests_) != 0)) {
        FaultSpec s;
        while (rte_ring_sc_dequeue_elem(requests_, &s, sizeof(s)) == 0) {
            spec_ = s;
            state_ = s.seed; // a fixed seed replays from here
        }
    }
    tap(pkts, n);
    if (n > kMaxIn || (!spec_.active() && nheld_ == 0)) // nothing to do
        return n;
    // What was held during the last call comes out behind this burst.
    rte_mbuf* release[kHold];
    const uint16_t nrelease = nheld_;
    for (uint16_t i = 0; i < nrelease; i++)
        release[i] = held_[i];
    nheld_ = 0;

    // Duplicates make the output run ahead of the input: read from a copy.
    rte_mbuf* in[kMaxIn];
    for (uint16_t i = 0; i < n; i++)
        in[i] = pkts[i];

    uint16_t k = 0;
    for (uint16_t i = 0; i < n; i++) {
        rte_mbuf* m = in[i];
        if (unlikely(session_layer(m))) {
            pkts[k++] = m;
            inc(ctr_.passed);
            continue;
        }
        inc(ctr_.seen);
        if (chance(spec_.drop)) {
            rte_pktmbuf_free(m);
            inc(ctr_.dropped);
            continue;
        }
        if (chance(spec_.corrupt))
            corrupt(m);
        if (nheld_ < kHold && chance(spec_.reorder)) {
            held_[nheld_++] = m;
            inc(ctr_.reordered);
            continue;
        }
        pkts[k++] = m;
        // Room is left for this burst's packets still to come and for the
        // released ones, so a duplicate never pushes a packet out.
        if (chance(spec_.dup) && k + (n - i - 1) + nrelease < max) {
            rte_mbuf_refcnt_update(m, 1);
            pkts[k++] = m;
            inc(ctr_.duplicated);
        }
    }
    for (uint16_t i = 0; i < nrelease; i++) {
        if (k < max)
            pkts[k++] = release[i];
        else if (nheld_ < kHold)
            held_[nheld_++] = release[i]; // no room: next time
        else
            rte_pktmbuf_free(release[i]), inc(ctr_.dropped);
    }
    return k;
}

static uint16_t rx_fault_cb(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint16_t max, void* arg) {
    return static_cast<FaultShim*>(arg)->apply(pkts, n, max);
}

const rte_eth_rxtx_callback* FaultShim::attach_rx(uint16_t port, uint16_t queue) {
    return rte_eth_add_rx_callback(port, queue, rx_fault_cb, this);
}

} // namespace tailmark::drivers
