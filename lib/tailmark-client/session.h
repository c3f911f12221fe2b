// A session as the application holds it: one it connected (send rings:
// submissions out, completions back) or one it accepted (receive rings, read
// in place). Both map a memfd the daemon handed over; the mapping goes with
// the session.
#pragma once

#include <cstdint>
#include <vector>

#include "mapping.h"
#include "recv_ring.h"
#include "send_rings.h"
#include "tailmark/client.h"

namespace tailmark::client {

struct Session {
    enum class Kind : uint8_t { Connected, Accepted };

    Kind kind = Kind::Connected;
    tm_session_info info{};
    int end_reason = 0;  // TM_END_* once ENDED came; 0 while it lives
    bool closed = false; // tm_close'd: a connected one stays until its completions are drained
    Mapping mem;
    std::vector<SendFlow> send; // Connected
    std::vector<RecvRing> recv; // Accepted

    tm_session id() const { return info.session; }
    bool drained() const {
        for (const SendFlow& f : send)
            if (!f.cq.empty())
                return false;
        return true;
    }
};

} // namespace tailmark::client
