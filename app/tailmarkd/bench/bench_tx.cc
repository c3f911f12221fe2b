// The benchmark's tx side (bench.h): each tx role's completion sink, each
// Sender's message source (the generator, or --replay's queues), and the
// generator's buffers.
#include "bench/bench.h"

#include <algorithm>
#include <string>

#include <rte_malloc.h>

#include "bench/source.h"
#include "run/runtime.h"

namespace tailmark::app {

namespace {

constexpr uint64_t kGenBudget = 512ull << 20; // generator buffers per tx lcore, at most (bytes)

} // namespace

// send: each delivery is a latency sample (submit to the peer's release).
void Bench::attach_tx(TxCtx& c) {
    c.delivery_latency = opt_.mode == Mode::Send;
    if (c.delivery_latency)
        c.set_sink(gen_delivered, &c);
}

// The port's Sender q, on tx role c: the generator's messages, or with
// --replay none (the role sends the ready-made packets on a queue of its own).
void Bench::attach_sender(uint32_t q, Sender& s, TxCtx& c) {
    if (!opt_.replay) {
        // Batched where the generator can batch: not into its one scratch
        // buffer (--flow-control off), nor paced, nor the shell's.
        s.set_source(gen_source, &c,
                     (opt_.fixed_payload || opt_.flow_control) && opt_.rate == 0 && !opt_.interactive ? gen_source_many
                                                                                                      : nullptr);
        return;
    }
    ReplayQueue rq;
    rq.q = std::make_unique<TxBurst>(static_cast<uint16_t>(rt_.tx_port_id()), static_cast<uint16_t>(q),
                                     engine::sender_config(rt_.ecfg(), rt_.tsc_hz(), false).stall);
    rq.flows.reserve(opt_.flows);
    c.replay.push_back(std::move(rq));
}

// The generator's buffers: each tx lcore's flows may hold up to a window
// of messages each until they are delivered, within a memory budget, but
// at least one per flow (fewer stop nothing: a flow waits for a buffer).
bool Bench::make_gen_bufs(SetupError& e) {
    if (opt_.mode == Mode::Recv || opt_.fixed_payload || opt_.replay)
        return true;
    const uint32_t T = rt_.ntx();
    const uint64_t size = RTE_ALIGN_CEIL(opt_.msg_size ? opt_.msg_size : 1, 64);
    for (uint32_t t = 0; t < T; t++) {
        TxCtx* c = rt_.tx_for(t);
        const uint64_t nflows = (opt_.flows + T - 1) / T;
        uint64_t n = std::min<uint64_t>(nflows * opt_.ring_size, std::max<uint64_t>(kGenBudget / size, nflows));
        n = std::max<uint64_t>(n, 1);
        c->buf_size = size;
        auto* bufs = static_cast<GenBuf*>(rte_zmalloc_socket("tm_gen_bufs", sizeof(GenBuf) * n, 64, rt_.tx_socket()));
        auto* mem = static_cast<uint8_t*>(rte_malloc_socket("tm_gen_data", size * n, 64, rt_.tx_socket()));
        if (bufs == nullptr || mem == nullptr) {
            rte_free(bufs);
            rte_free(mem);
            e = {1, "out of memory: generator buffers (" + std::to_string(n) + " x " + std::to_string(size) +
                        " B: flows x --ring-size x --msg-size) (raise EAL -m)"};
            return false;
        }
        allocs_.push_back(bufs);
        allocs_.push_back(mem);
        for (uint64_t i = 0; i < n; i++) {
            GenBuf& b = bufs[i];
            b.data = mem + i * size;
            b.owner = c;
            b.shinfo.free_cb = gen_buf_free;
            b.shinfo.fcb_opaque = &b;
            rte_mbuf_ext_refcnt_set(&b.shinfo, 0); // the Sender's hold is the first reference
            b.next = c->free_bufs;
            c->free_bufs = &b;
        }
    }
    return true;
}

} // namespace tailmark::app
