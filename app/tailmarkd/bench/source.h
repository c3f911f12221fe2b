// The generator as the Senders' message source (Sender::set_source): the
// benchmark's application on a tx lcore. It writes generate()'s content into
// a buffer of its lcore's stack when a Sender asks for a message, and the
// Sender holds the buffer until the message is delivered. Kept apart from
// generator.h, which is DPDK-free and linked by tailmark-consumer too.
#pragma once

#include <cstdint>

namespace tailmark {
struct Message;
struct SendCompletion;
struct SourceLimits;
} // namespace tailmark

namespace tailmark::app {

// The Senders' message source (SendSource) on a tx lcore: ctx is the TxCtx,
// flow_user the GenFlow. See source.cc.
bool gen_source(void* ctx, void* flow_user, uint32_t msg_id, Message& msg, uint64_t& cookie);
// The same, batched (SendSourceMany).
uint32_t gen_source_many(void* ctx, void* flow_user, uint32_t first, uint32_t max, const SourceLimits& lim,
                         Message* msgs, uint64_t* cookies);
// The tx lcore's completion sink (TxCtx::set_sink) in --mode send: each
// delivered message's latency, its cookie (the submit TSC) to now, into the
// lcore's and the flow's histograms. ctx is the TxCtx, each user a GenFlow.
void gen_delivered(void* ctx, const SendCompletion* done, uint32_t n);
// A generator buffer's free_cb (rte_mbuf_ext_shared_info): back on its stack.
void gen_buf_free(void* addr, void* opaque);

} // namespace tailmark::app
