// A connected session's send side: per flow a submission ring we produce
// (tm_sqe) and a completion ring we consume (tm_cqe), in the send memfd the
// CONNECTED reply carries, laid out by tm_send_rings() at flow_stride.
#pragma once

#include <cstdint>
#include <vector>

#include "tailmark/channel_abi.h"
#include "last_error.h"
#include "mapping.h"
#include "spsc_ring.h"

namespace tailmark::client {

struct SendFlow {
    SpscProducer<channel::tm_sqe> sq;
    SpscConsumer<channel::tm_cqe> cq;
};

// Checks the CONNECTED geometry against the memfd and every flow's ring
// headers, then maps it: 0, or -EPROTO (err names what did not fit).
int map_send_rings(const channel::tm_msg_connected& c, int fd, Mapping& mem, std::vector<SendFlow>& flows,
                   LastError& err);

} // namespace tailmark::client
