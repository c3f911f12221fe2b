#include "send_rings.h"

#include <cstring>

namespace tailmark::client {

int map_send_rings(const channel::tm_msg_connected& c, int fd, Mapping& mem, std::vector<SendFlow>& flows,
                   LastError& err) {
    using ull = unsigned long long;
    if (c.nflows == 0)
        return err.set(EPROTO, "CONNECTED: session %u has no flows", c.session);
    if (!is_pow2(c.sq_size) || !is_pow2(c.cq_size) || c.sq_size > (1u << 24) || c.cq_size > (1u << 24))
        return err.set(EPROTO, "CONNECTED: ring sizes sq %u / cq %u are not powers of two up to 2^24", c.sq_size,
                       c.cq_size);
    const channel::tm_send_layout l = channel::tm_send_rings(c.sq_size, c.cq_size);
    if (c.flow_stride < l.total || c.flow_stride % 64 != 0)
        return err.set(EPROTO, "CONNECTED: flow stride %llu, but a flow's rings take %llu bytes (64-byte aligned)",
                       static_cast<ull>(c.flow_stride), static_cast<ull>(l.total));
    if (c.send_bytes / c.flow_stride < c.nflows)
        return err.set(EPROTO, "CONNECTED: %u flows at stride %llu do not fit in %llu bytes", c.nflows,
                       static_cast<ull>(c.flow_stride), static_cast<ull>(c.send_bytes));
    const int64_t have = fd_size(fd);
    if (have < 0 || static_cast<uint64_t>(have) < c.send_bytes)
        return err.set(EPROTO, "CONNECTED: the send memfd holds %lld bytes, not the %llu announced",
                       static_cast<long long>(have), static_cast<ull>(c.send_bytes));
    Mapping m;
    if (int rc = Mapping::map(fd, c.send_bytes, m); rc < 0)
        return err.set(-rc, "CONNECTED: mmap of the send rings (%llu bytes): %s", static_cast<ull>(c.send_bytes),
                       strerror(-rc));
    std::vector<SendFlow> f(c.nflows);
    for (uint32_t i = 0; i < c.nflows; ++i) {
        uint8_t* base = m.data() + i * c.flow_stride;
        auto* sq = reinterpret_cast<channel::tm_spsc*>(base + l.sq);
        auto* cq = reinterpret_cast<channel::tm_spsc*>(base + l.cq);
        if (!spsc_valid<channel::tm_sqe>(sq, c.sq_size) || !spsc_valid<channel::tm_cqe>(cq, c.cq_size))
            return err.set(EPROTO,
                           "CONNECTED: flow %u's ring headers do not match the reply (sq %u x %zu B, cq %u x %zu B)",
                           i, c.sq_size, sizeof(channel::tm_sqe), c.cq_size, sizeof(channel::tm_cqe));
        f[i].sq = SpscProducer<channel::tm_sqe>(sq, reinterpret_cast<channel::tm_sqe*>(base + l.sqe));
        f[i].cq = SpscConsumer<channel::tm_cqe>(cq, reinterpret_cast<channel::tm_cqe*>(base + l.cqe));
    }
    mem = std::move(m);
    flows = std::move(f);
    return 0;
}

} // namespace tailmark::client
