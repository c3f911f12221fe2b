// The C API's boundary (tailmark/client.h): argument checks, the channel's
// state (failed, daemon gone) answered first, and no exception past it.
// The library allocates only on the control path; a bad_alloc there is
// -ENOMEM with a message, anything else unexpected -EFAULT.
#include <cerrno>
#include <new>

#include "channel.h"
#include "tailmark/client.h"

// The C header repeats the ABI's numbers for C programs: they must agree.
namespace abi = tailmark::channel;
static_assert(+TM_DELIVERED == +abi::TM_DELIVERED && +TM_FAILED == +abi::TM_FAILED);
static_assert(+TM_FAIL_RETRY_LIMIT == +abi::TM_FAIL_RETRY_LIMIT &&
              +TM_FAIL_RECEIVER_RESTARTED == +abi::TM_FAIL_RECEIVER_RESTARTED &&
              +TM_FAIL_PEER_TIMEOUT == +abi::TM_FAIL_PEER_TIMEOUT && +TM_FAIL_CLOSED == +abi::TM_FAIL_CLOSED &&
              +TM_FAIL_REFUSED == +abi::TM_FAIL_REFUSED && +TM_FAIL_INVALID == +abi::TM_FAIL_INVALID);
static_assert(+TM_END_CLOSED == +abi::TM_END_CLOSED && +TM_END_PEER_CLOSED == +abi::TM_END_PEER_CLOSED &&
              +TM_END_PEER_TIMEOUT == +abi::TM_END_PEER_TIMEOUT && +TM_END_PEER_RESET == +abi::TM_END_PEER_RESET &&
              +TM_END_REFUSED == +abi::TM_END_REFUSED && +TM_END_NO_ANSWER == +abi::TM_END_NO_ANSWER &&
              +TM_END_OTHER == +abi::TM_END_OTHER);

namespace {

int caught(tm_channel* ch) {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return ch->err.set(ENOMEM, "out of memory");
    } catch (...) {
        return ch->err.set(EFAULT, "internal error (an exception in libtailmark-client)");
    }
}

template <class F>
int guarded(tm_channel* ch, F&& f) {
    if (ch == nullptr)
        return -EINVAL;
    try {
        if (int rc = ch->check(); rc < 0)
            return rc;
        return f();
    } catch (...) {
        return caught(ch);
    }
}

} // namespace

extern "C" {

int tm_attach(const tm_attach_opts* opts, tm_channel** out) {
    if (out == nullptr)
        return -EINVAL;
    *out = nullptr;
    tm_channel* ch = nullptr;
    try {
        ch = new tm_channel;
    } catch (...) {
        return -ENOMEM;
    }
    *out = ch;
    try {
        return ch->attach(opts);
    } catch (...) {
        return caught(ch);
    }
}

void tm_detach(tm_channel* ch) {
    if (ch == nullptr)
        return;
    try {
        ch->bye();
    } catch (...) {
    }
    delete ch; // sessions unmapped, arena unmapped, socket and fds closed
}

const char* tm_last_error(const tm_channel* ch) {
    return ch != nullptr ? ch->err.get() : "no channel (tm_attach could not allocate one, or none was given)";
}

uint32_t tm_mtu(const tm_channel* ch) { return ch != nullptr ? ch->mtu : 0; }
uint32_t tm_local_ipv4(const tm_channel* ch) { return ch != nullptr ? ch->local_ip : 0; }
uint32_t tm_max_flows(const tm_channel* ch) { return ch != nullptr ? ch->max_flows : 0; }

int tm_connect(tm_channel* ch, const char* ipv4, uint16_t port, const tm_connect_opts* opts, tm_session* out) {
    return guarded(ch, [&] {
        if (out == nullptr)
            return ch->err.set(EINVAL, "tm_connect: no place for the session (out is NULL)");
        return ch->connect(ipv4, port, opts, out);
    });
}

int tm_listen(tm_channel* ch, uint16_t port, const tm_listen_opts* opts) {
    return guarded(ch, [&] { return ch->listen(port, opts); });
}

int tm_unlisten(tm_channel* ch, uint16_t port) {
    return guarded(ch, [&] { return ch->unlisten(port); });
}

int tm_accept(tm_channel* ch, int timeout_ms, tm_session_info* info) {
    return guarded(ch, [&] { return ch->accept(timeout_ms, info); });
}

int tm_session_state(tm_channel* ch, tm_session s) {
    return guarded(ch, [&] { return ch->session_state(s); });
}

int tm_session_get_info(tm_channel* ch, tm_session s, tm_session_info* info) {
    return guarded(ch, [&] {
        if (info == nullptr)
            return ch->err.set(EINVAL, "tm_session_get_info: info is NULL");
        return ch->session_info(s, info);
    });
}

int tm_close(tm_channel* ch, tm_session s) {
    return guarded(ch, [&] { return ch->close(s); });
}

void* tm_buf_alloc(tm_channel* ch, size_t len) {
    if (ch == nullptr)
        return nullptr;
    try {
        if (ch->check() < 0)
            return nullptr;
        return ch->arena.alloc(len, ch->err);
    } catch (...) {
        caught(ch);
        return nullptr;
    }
}

void tm_buf_free(tm_channel* ch, void* buf) {
    if (ch == nullptr || buf == nullptr)
        return;
    try { // also on a channel whose daemon is gone: it is our memory
        (void)ch->arena.free(buf, ch->err);
    } catch (...) {
        caught(ch);
    }
}

int tm_send(tm_channel* ch, tm_session s, uint16_t flow, const void* buf, size_t len, uint64_t cookie) {
    return guarded(ch, [&] { return ch->send(s, flow, buf, len, cookie); });
}

int tm_poll_completions(tm_channel* ch, tm_completion* out, int max) {
    return guarded(ch, [&] { return ch->poll_completions(out, max); });
}

int tm_recv(tm_channel* ch, tm_session s, uint16_t flow, tm_message* msg) {
    return guarded(ch, [&] {
        if (msg == nullptr)
            return ch->err.set(EINVAL, "tm_recv: msg is NULL");
        return ch->recv(s, flow, msg);
    });
}

int tm_recv_any(tm_channel* ch, tm_message* msg) {
    return guarded(ch, [&] {
        if (msg == nullptr)
            return ch->err.set(EINVAL, "tm_recv_any: msg is NULL");
        return ch->recv_any(msg);
    });
}

int tm_release(tm_channel* ch, const tm_message* msg) {
    return guarded(ch, [&] {
        if (msg == nullptr)
            return ch->err.set(EINVAL, "tm_release: msg is NULL");
        return ch->release(msg);
    });
}

int tm_wait(tm_channel* ch, int timeout_ms) {
    return guarded(ch, [&] { return ch->wait(timeout_ms); });
}

int tm_wait_flow(tm_channel* ch, tm_session s, uint16_t flow, int timeout_ms) {
    return guarded(ch, [&] { return ch->wait_flow(s, flow, timeout_ms); });
}

int tm_wait_sent(tm_channel* ch, tm_session s, uint16_t flow, int timeout_ms) {
    return guarded(ch, [&] { return ch->wait_sent(s, flow, timeout_ms); });
}

const char* tm_end_reason_name(int reason) {
    switch (reason) {
    case 0: return "alive";
    case TM_END_CLOSED: return "closed";
    case TM_END_PEER_CLOSED: return "peer closed";
    case TM_END_PEER_TIMEOUT: return "peer timed out";
    case TM_END_PEER_RESET: return "peer restarted";
    case TM_END_REFUSED: return "refused";
    case TM_END_NO_ANSWER: return "no answer";
    case TM_END_OTHER: return "replaced or other";
    default: return "unknown reason";
    }
}

const char* tm_fail_reason_name(int reason) {
    switch (reason) {
    case TM_FAIL_NONE: return "none";
    case TM_FAIL_RETRY_LIMIT: return "retry limit reached";
    case TM_FAIL_RECEIVER_RESTARTED: return "receiver restarted";
    case TM_FAIL_PEER_TIMEOUT: return "peer timed out";
    case TM_FAIL_CLOSED: return "session closed";
    case TM_FAIL_REFUSED: return "refused";
    case TM_FAIL_INVALID: return "invalid submission (buffer outside the arena or over max_msg)";
    default: return "unknown reason";
    }
}

} // extern "C"
