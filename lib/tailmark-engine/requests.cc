// The engine's requests, applied on the lcore between two rounds: flows
// into and out of its Senders and Receivers (the control thread's
// install, removal, failure and move of a flow). Never on the fast path
// proper: serve_requests() looks at its ring once a round and finds it
// empty nearly always.
#include <rte_cycles.h>

#include "tailmark/engine/lcore.h"

namespace tailmark::engine {

void apply_engine_request(Request& r) {
    switch (r.op) {
    case Request::Op::AddSend:
        r.ok = static_cast<Sender*>(r.engine)->install(static_cast<SendFlow*>(r.obj));
        break;
    case Request::Op::RemoveSend: {
        SendFlow* f = static_cast<Sender*>(r.engine)->remove(r.id);
        r.ok = f != nullptr;
        r.obj = f;
        break;
    }
    case Request::Op::FailSend: // what the peer said before it ended is heard first
        static_cast<Sender*>(r.engine)->hear_all(rte_rdtsc());
        static_cast<Sender*>(r.engine)->fail(r.id, r.why);
        r.ok = true;
        break;
    case Request::Op::FailLink:
        static_cast<Sender*>(r.engine)->hear_all(rte_rdtsc());
        static_cast<Sender*>(r.engine)->fail_link(static_cast<const SessionLink*>(r.obj), r.why);
        r.ok = true;
        break;
    case Request::Op::AddRecv:
    case Request::Op::MoveRecvIn:
        r.ok = static_cast<Receiver*>(r.engine)->install(static_cast<RecvFlow*>(r.obj));
        break;
    case Request::Op::RemoveRecv:
    case Request::Op::MoveRecvOut: {
        RecvFlow* f = static_cast<Receiver*>(r.engine)->remove(r.id);
        r.ok = f != nullptr;
        r.obj = f;
        break;
    }
    default:
        r.ok = false; // not an engine op
        break;
    }
}

} // namespace tailmark::engine
