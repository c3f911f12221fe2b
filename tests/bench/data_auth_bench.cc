// What --data-auth costs per data packet (issue 35): TSC cycles per packet
// of the sender's build (TxMarker::build: header, payload copy, tag) and of
// the receiver's check (the tag RxPlacer::place verifies before placing:
// SipHash of the header and trailer, and with --data-auth the POLYVAL of the
// payload too), with version 2's tags over the header alone and with
// --data-auth, at 64 B messages (one packet) and 64 KiB messages (46
// packets of 1448 B). Not a test: a speed figure for scripts/bench.sh
// (results.json "data_auth"). Each figure is the best of 7 rounds.
//
//   data_auth_bench   one JSON object per line: {"tsc_hz", "kernel"}, then per
//                     size {"msg_size", "pkts", "tx_off", "tx_on", "rx_off", "rx_on"}
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <vector>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "tailmark/data_tag.h"
#include "tailmark/packet_parser.h"
#include "tailmark/polyval.h"
#include "tailmark/tx_marker.h"

using namespace tailmark;

namespace {

const SipKey kKey{0x0123456789ABCDEFull, 0xFEDCBA9876543210ull};
const uint8_t kH[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// The receiver's check of one packet: RxPlacer's (data_tag_ok), after the parser.
bool check(const rte_mbuf* m, const PolyvalKey* auth) {
    ParsedPacket p;
    return parse_packet(m, ParserConfig{}, p) == DropReason::None && data_tag_ok(kKey, auth, p, m);
}

struct Figures {
    double tx, rx;
};

Figures measure(rte_mempool* mp, size_t size, bool auth) {
    TxFlow flow;
    Addressing a{};
    a.src_ip = RTE_IPV4(198, 18, 0, 1);
    a.dst_ip = RTE_IPV4(198, 18, 0, 2);
    if (!TxFlow::make(flow, 1, 0xC0FFEE, 16, 1500, a, kVersion2, kKey, auth ? kH : nullptr))
        return {0, 0};
    PolyvalKey pk;
    polyval_key(pk, kH);
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; i++)
        data[i] = static_cast<uint8_t>(i * 131 + 7);
    TxMarker tx(mp, PayloadMode::Copy);
    const unsigned msgs = size <= 64 ? 4000 : 100;
    double best_tx = 1e30, best_rx = 1e30;
    std::vector<rte_mbuf*> pkts;
    for (int round = 0; round < 7; round++) {
        uint64_t t_tx = 0, t_rx = 0, n = 0;
        for (unsigned k = 0; k < msgs; k++) {
            TxMessage m;
            m.msg_id = k;
            m.bytes = data;
            if (!tx.prepare(flow, m))
                return {0, 0};
            pkts.resize(m.plan.pkt_count);
            uint64_t t0 = rte_rdtsc_precise();
            for (uint32_t first = 0; first < m.plan.pkt_count;) {
                const uint32_t b = std::min<uint32_t>(TxMarker::kMaxBurst, m.plan.pkt_count - first);
                if (tx.build(flow, m, first, b, pkts.data() + first) != static_cast<int>(b))
                    return {0, 0};
                first += b;
            }
            uint64_t t1 = rte_rdtsc_precise();
            bool ok = true;
            for (rte_mbuf* p : pkts)
                ok &= check(p, auth ? &pk : nullptr);
            uint64_t t2 = rte_rdtsc_precise();
            if (!ok) {
                fprintf(stderr, "data_auth_bench: a packet did not verify\n");
                return {0, 0};
            }
            rte_pktmbuf_free_bulk(pkts.data(), static_cast<unsigned>(pkts.size()));
            t_tx += t1 - t0;
            t_rx += t2 - t1;
            n += pkts.size();
        }
        best_tx = std::min(best_tx, double(t_tx) / double(n));
        best_rx = std::min(best_rx, double(t_rx) / double(n));
    }
    return {best_tx, best_rx};
}

} // namespace

int main(int argc, char** argv) {
    if (rte_eal_init(argc, argv) < 0) {
        fprintf(stderr, "data_auth_bench: EAL init failed\n");
        return 1;
    }
    rte_mempool* mp = rte_pktmbuf_pool_create("auth_bench", 1023, 0, 0, 2176, SOCKET_ID_ANY);
    if (mp == nullptr)
        return 1;
    printf("{\"tsc_hz\": %lu, \"kernel\": \"%s\"}\n", static_cast<unsigned long>(rte_get_tsc_hz()),
           polyval_kernel_name());
    for (const size_t size : {size_t(64), size_t(65536)}) {
        // Interleaved: off, on, off, on; the better of each.
        Figures off = measure(mp, size, false), on = measure(mp, size, true);
        const Figures off2 = measure(mp, size, false), on2 = measure(mp, size, true);
        off = {std::min(off.tx, off2.tx), std::min(off.rx, off2.rx)};
        on = {std::min(on.tx, on2.tx), std::min(on.rx, on2.rx)};
        if (off.tx == 0 || on.tx == 0)
            return 1;
        printf("{\"msg_size\": %zu, \"pkts\": %u, \"tx_off\": %.0f, \"tx_on\": %.0f, \"rx_off\": %.0f, \"rx_on\": %.0f}\n",
               size, plan_group(size, 1448).pkt_count, off.tx, on.tx, off.rx, on.rx);
    }
    rte_eal_cleanup();
    return 0;
}
