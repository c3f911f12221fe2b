// The RxPlacer's flow table: a flow's receive state made (prepare_flow),
// installed on and taken off the owner lcore, its per-flow settings, and what
// the Receiver reads of a flow by id (cumulative ACK, echo, ACK request).
// Off the packet path: placement, completion and the gap scan are in rx_placer.cc.
#include "tailmark/rx_placer.h"
#include "tailmark/rx_placer_flow.h"

#include <rte_byteorder.h>
#include <rte_malloc.h>

#include "tailmark/polyval.h"

namespace tailmark {

using namespace rx_placer_detail;

namespace {
// Bits per slot: as many packets as the flow's region can hold, not the 64K a
// group may have. 8 KiB per slot put every slot's first word at the same cache
// sets, and 64 flows' slots no longer fitted in L2.
uint32_t max_packets(uint64_t region_size, uint32_t stride) {
    const uint64_t n = region_size / stride + 2; // plan_group: at most full + 2
    return n < kMaxPktsPerMessage ? static_cast<uint32_t>(n) : kMaxPktsPerMessage;
}
} // namespace

RxPlacer::RxPlacer(const ParserConfig& cfg, int socket_id) : cfg_(cfg), socket_(socket_id) {
    flows_.reserve(kMaxFlows);
    table_ = static_cast<FlowRx**>(
        rte_zmalloc_socket("tm_flow_table", sizeof(FlowRx*) * 65536, RTE_CACHE_LINE_SIZE, socket_));
}

RxPlacer::~RxPlacer() {
    for (FlowRx* f : flows_)
        if (f->owned)
            destroy_flow(f);
    rte_free(table_);
}

RxPlacer::FlowRx* RxPlacer::prepare_flow(uint16_t flow, CompletionRing* ring, uint32_t key, uint32_t stride,
                                          int socket_id, const FlowAuth& auth) {
    if (ring == nullptr || stride <= kTrailerLen || stride > UINT16_MAX ||
        (auth.version != kVersion && auth.version != kVersion2))
        return nullptr;
    auto* f = static_cast<FlowRx*>(rte_zmalloc_socket("tm_flow_rx", sizeof(FlowRx), 64, socket_id));
    if (f == nullptr)
        return nullptr;
    const uint32_t n = ring->size();
    f->max_pkts = max_packets(ring->region_size(), stride);
    const uint32_t words = (f->max_pkts + 63) / 64;
    f->slots = static_cast<SlotRx*>(rte_zmalloc_socket("tm_slot_rx", sizeof(SlotRx) * n, 64, socket_id));
    f->bits = static_cast<uint64_t*>(
        rte_zmalloc_socket("tm_slot_bits", sizeof(uint64_t) * words * n, 64, socket_id));
    if (f->slots == nullptr || f->bits == nullptr) {
        destroy_flow(f);
        return nullptr;
    }
    for (uint32_t i = 0; i < n; i++)
        f->slots[i].seen = f->bits + static_cast<uint64_t>(i) * words;
    f->ring = ring;
    f->released_word = ring->released_word();
    f->gave_up_word = ring->gave_up_word();
    f->released_seen = ring->released();
    f->gave_up_seen = __atomic_load_n(f->gave_up_word, __ATOMIC_ACQUIRE);
    f->cum = f->released_seen;
    f->acked = f->cum;
    f->key = key;
    f->mask = ring->mask();
    f->region_size = ring->region_size();
    f->stride = stride;
    f->id = flow;
    f->version = auth.version;
    f->tag_key = auth.key;
    f->data_auth = auth.data_auth && auth.version == kVersion2;
    f->loopback = auth.loopback;
    f->crc_from = auth.loopback ? UINT32_MAX : 0;
    if (f->data_auth)
        polyval_key(f->auth_key, auth.auth_h);
    return f;
}

void RxPlacer::destroy_flow(FlowRx* f) {
    if (f == nullptr)
        return;
    rte_free(f->bits);
    rte_free(f->slots);
    rte_free(f);
}

bool RxPlacer::install(FlowRx* f) {
    // flows_ was reserved: installing on the owner lcore never allocates.
    if (table_ == nullptr || f == nullptr || table_[f->id] != nullptr || flows_.size() == flows_.capacity())
        return false;
    table_[f->id] = f;
    flows_.push_back(f);
    return true;
}

RxPlacer::FlowRx* RxPlacer::uninstall(uint16_t flow) {
    FlowRx* f = table_ != nullptr ? table_[flow] : nullptr;
    if (f == nullptr)
        return nullptr;
    table_[flow] = nullptr;
    // A message of the flow may complete on the placer it moves to: its
    // bytes streamed here must be in memory before that placer's flag.
    fence_streamed();
    for (size_t i = 0; i < flows_.size(); i++)
        if (flows_[i] == f) {
            flows_[i] = flows_.back();
            flows_.pop_back();
            break;
        }
    return f;
}

bool RxPlacer::add_flow(uint16_t flow, CompletionRing* ring, uint32_t key, uint32_t stride, const FlowAuth& auth) {
    if (table_ == nullptr || table_[flow] != nullptr)
        return false;
    FlowRx* f = prepare_flow(flow, ring, key, stride, socket_, auth);
    if (f == nullptr)
        return false;
    f->owned = true;
    if (!install(f)) {
        destroy_flow(f);
        return false;
    }
    return true;
}

void RxPlacer::set_nack_ring(uint16_t flow, rte_ring* q) {
    if (table_ != nullptr && table_[flow] != nullptr)
        table_[flow]->nack_q = q;
}

uint32_t RxPlacer::acked_upto(uint16_t flow) const {
    const FlowRx* f = table_ != nullptr ? table_[flow] : nullptr;
    return f ? __atomic_load_n(&f->acked, __ATOMIC_ACQUIRE) : 0;
}

const uint32_t* RxPlacer::acked_word(const FlowRx* f) { return &f->acked; }

bool RxPlacer::echo_of(uint16_t flow, uint16_t& stamp, uint64_t& arrived) const {
    uint16_t port;
    return echo_of(flow, stamp, arrived, port);
}

bool RxPlacer::echo_of(uint16_t flow, uint16_t& stamp, uint64_t& arrived, uint16_t& port) const {
    const FlowRx* f = table_ != nullptr ? table_[flow] : nullptr;
    if (f == nullptr || f->echo_tsc == 0)
        return false;
    stamp = rte_be_to_cpu_16(f->echo);
    arrived = f->echo_tsc;
    port = f->echo_port;
    return true;
}

bool RxPlacer::take_ack_request(uint16_t flow) {
    FlowRx* f = table_ != nullptr ? table_[flow] : nullptr;
    return f && __atomic_load_n(&f->ack_req, __ATOMIC_RELAXED) && __atomic_exchange_n(&f->ack_req, 0, __ATOMIC_ACQ_REL);
}

void RxPlacer::set_packet_completion_ring(uint16_t flow, rte_ring* r) {
    if (table_ != nullptr && table_[flow] != nullptr)
        table_[flow]->pkt_cq = r;
}

} // namespace tailmark
