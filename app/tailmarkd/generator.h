// The built-in message generator: deterministic content per (flow, msg_id),
// so the consumer can regenerate it and compare every byte. Four interleaved
// xorshift64 lanes seeded by splitmix64(flow, msg_id): every 8-byte word
// depends on its position, so a misplaced, stale or foreign chunk shows up.
// No allocation, no state outside the call: usable on the fast path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tailmark::app {

void generate(uint16_t flow, uint32_t msg_id, uint8_t* dst, size_t len);

// True when src[0..len) is exactly what generate() writes.
bool verify(uint16_t flow, uint32_t msg_id, const uint8_t* src, size_t len);

} // namespace tailmark::app

namespace tailmark {
struct Message;
struct SourceLimits;
} // namespace tailmark

namespace tailmark::app {

// The Senders' message source (SendSource) on a tx lcore: ctx is the TxCtx,
// flow_user the GenFlow. See tx_lcore.cc.
bool gen_source(void* ctx, void* flow_user, uint32_t msg_id, Message& msg, uint64_t& cookie);
// The same, batched (SendSourceMany).
uint32_t gen_source_many(void* ctx, void* flow_user, uint32_t first, uint32_t max, const SourceLimits& lim,
                         Message* msgs, uint64_t* cookies);
// A generator buffer's free_cb (rte_mbuf_ext_shared_info): back on its stack.
void gen_buf_free(void* addr, void* opaque);

} // namespace tailmark::app
