/* libtailmark-client: send and receive whole messages through a running
 * `tailmarkd --mode service`, with one completion per message.
 *
 * The application links no DPDK and takes no EAL arguments. It attaches to
 * the daemon's Unix socket and shares memory with it:
 *   - an arena (memfd, hugetlb when it can be had) that tm_buf_alloc() hands
 *     out; the daemon registers it with DPDK and sends from it zero-copy;
 *   - per accepted session, receive rings the daemon writes messages into;
 *     tm_recv() returns them in place.
 *
 * Every call returns 0 (or a count) on success and a negative errno on
 * failure; tm_last_error() then says why in one line. The library never
 * aborts and never prints. A tm_channel is used by one thread at a time:
 * nothing in it is locked (two threads need two channels, or a lock of
 * their own around every call).
 *
 * Once the daemon is gone (its socket closed), every call on the channel
 * returns -ECONNRESET; a daemon that breaks the protocol, -EPROTO; a channel
 * whose tm_attach failed, -ENOTCONN. Only tm_detach (and tm_buf_free) still
 * do their work then.
 *
 * Environment: TAILMARK_SOCKET (the daemon's socket when opts give none),
 * TAILMARK_NO_HUGETLB=1 (the arena on normal pages even where hugepages
 * could be had).
 */
#ifndef TAILMARK_CLIENT_H
#define TAILMARK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: this API is what it exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define TM_DEFAULT_SOCKET "/run/tailmark/tailmarkd.sock"

typedef struct tm_channel tm_channel;
typedef uint32_t tm_session;

/* --- attach ------------------------------------------------------------- */

struct tm_attach_opts {
    const char *socket_path; /* NULL: $TAILMARK_SOCKET, else TM_DEFAULT_SOCKET */
    size_t arena_bytes;      /* send buffers; 0: 64 MiB */
    const char *name;        /* for the daemon's log; NULL: the program's */
};

/* Attach to a daemon. *out is set on success; on failure it is NULL, or, when
 * a channel could be made at all, a channel whose tm_last_error() says why
 * (free it with tm_detach). */
int tm_attach(const struct tm_attach_opts *opts, tm_channel **out);
/* Closes every session of the channel and frees it. */
void tm_detach(tm_channel *ch);
/* The last failure's message, one line; "" when none. */
const char *tm_last_error(const tm_channel *ch);
/* The daemon's port MTU, and the most flows a session may have. */
uint32_t tm_mtu(const tm_channel *ch);
uint32_t tm_max_flows(const tm_channel *ch);
/* The daemon's own IPv4 address (its --src-ip), host order: what peers
 * tm_connect to. */
uint32_t tm_local_ipv4(const tm_channel *ch);

/* --- sessions ----------------------------------------------------------- */

struct tm_connect_opts {
    uint16_t nflows;          /* 0: 1 */
    uint32_t ring_size;       /* messages in flight per flow, a power of two; 0: 64 */
    uint32_t max_msg;         /* the largest message, bytes; 0: 1 MiB */
    uint32_t timeout_ms;      /* give up connecting after; 0: the daemon's */
    const uint8_t *secret;    /* 16 bytes; NULL: the daemon's --secret */
};

/* Open a session to a peer daemon's listener on `port` (blocks until the
 * peer accepts, refuses or does not answer: -ECONNREFUSED, -ETIMEDOUT). */
int tm_connect(tm_channel *ch, const char *ipv4, uint16_t port, const struct tm_connect_opts *opts,
               tm_session *out);

struct tm_listen_opts {
    uint16_t max_flows;       /* refuse sessions with more; 0: the daemon's limit */
    uint32_t max_ring;        /* ... a larger ring; 0: no limit of our own */
    uint32_t max_msg;         /* ... larger messages; 0: no limit of our own */
    const uint8_t *secret;    /* 16 bytes; NULL: the daemon's --secret */
};

/* Take the sessions peers open to `port`. One listener per port in the whole
 * daemon: another application already listening gets -EBUSY. */
int tm_listen(tm_channel *ch, uint16_t port, const struct tm_listen_opts *opts);
int tm_unlisten(tm_channel *ch, uint16_t port);

struct tm_session_info {
    tm_session session;
    uint16_t port;            /* the local port it arrived on (listener) or went to */
    uint16_t nflows;
    uint32_t peer_ip;         /* host order */
    uint16_t peer_port;
    uint32_t ring_size;
    uint32_t max_msg;
};

/* The next session accepted on any of the channel's listeners: 1 with *info
 * filled, 0 when none arrived within timeout_ms (0: do not wait; -1: wait
 * for ever). */
int tm_accept(tm_channel *ch, int timeout_ms, struct tm_session_info *info);

/* 0 while the session lives, else why it ended (TM_END_*); -ENOENT for a
 * session the channel does not hold (never had, or closed: an accepted one
 * at tm_close, a connected one once its completions were drained after it). */
int tm_session_state(tm_channel *ch, tm_session s);
/* What tm_connect or tm_accept agreed for the session (the daemon's values,
 * which may differ from those asked for). */
int tm_session_get_info(tm_channel *ch, tm_session s, struct tm_session_info *info);
enum {
    TM_END_CLOSED = 1,       /* closed by this application */
    TM_END_PEER_CLOSED = 2,  /* the peer closed it */
    TM_END_PEER_TIMEOUT = 3, /* the peer fell silent */
    TM_END_PEER_RESET = 4,   /* the peer restarted */
    TM_END_REFUSED = 5,
    TM_END_NO_ANSWER = 6,
    TM_END_OTHER = 7,
};
/* "closed", "peer closed", ...; "alive" for 0; never NULL. */
const char *tm_end_reason_name(int reason);

/* Close a session: its outstanding sends complete as failed (TM_FAIL_CLOSED),
 * its receive rings are unmapped. Blocks until the daemon confirms that the
 * session's flows are out of its data plane (ENDED; at most ~10 s, then
 * -ETIMEDOUT, the session closed here anyway). A connected session's
 * completions stay pollable until drained. */
int tm_close(tm_channel *ch, tm_session s);

/* --- sending ------------------------------------------------------------ */

/* Send buffers come from the channel's arena (64-byte aligned, first fit);
 * NULL (tm_last_error) when it has no room. A buffer handed to tm_send must
 * stay untouched until its completion arrives. */
void *tm_buf_alloc(tm_channel *ch, size_t len);
void tm_buf_free(tm_channel *ch, void *buf);

/* Queue one message (buf inside the arena, 0 <= len <= max_msg). Does not
 * block: -EAGAIN when the flow's submission ring is full. -EINVAL: buf not
 * inside the arena, or no such flow; -EMSGSIZE: len > max_msg; -EPIPE: the
 * session has ended. */
int tm_send(tm_channel *ch, tm_session s, uint16_t flow, const void *buf, size_t len, uint64_t cookie);

enum { TM_DELIVERED = 1, TM_FAILED = 2 };
enum {
    TM_FAIL_NONE = 0,
    TM_FAIL_RETRY_LIMIT = 1,        /* the peer stopped answering for it */
    TM_FAIL_RECEIVER_RESTARTED = 2, /* the peer daemon restarted */
    TM_FAIL_PEER_TIMEOUT = 3,       /* the session timed out */
    TM_FAIL_CLOSED = 4,             /* the session was closed first */
    TM_FAIL_REFUSED = 5,
    TM_FAIL_INVALID = 6,            /* the daemon refused the request (bad buffer) */
};
/* "retry limit reached", "receiver restarted", ...; never NULL. */
const char *tm_fail_reason_name(int reason);

struct tm_completion {
    uint64_t cookie;
    tm_session session;
    uint16_t flow;
    uint8_t status;           /* TM_DELIVERED: the remote application released it */
    uint8_t reason;           /* TM_FAIL_* when TM_FAILED */
    uint32_t msg_id;
};

/* Up to max send completions of any session, in each flow's order (the
 * flows taken in turn, a different one first on each call). */
int tm_poll_completions(tm_channel *ch, struct tm_completion *out, int max);

/* --- receiving ---------------------------------------------------------- */

struct tm_message {
    const void *data;         /* in place in the receive ring; valid until released */
    size_t len;
    tm_session session;
    uint16_t flow;
    uint32_t msg_id;
};

/* The flow's next completed message, in order: 1 (filled), 0 (none yet). */
int tm_recv(tm_channel *ch, tm_session s, uint16_t flow, struct tm_message *msg);
/* The next completed message of any flow of any accepted session, the flows
 * taken round-robin (each call starts after the flow the last one served). */
int tm_recv_any(tm_channel *ch, struct tm_message *msg);
/* Hand a message's slot back (this is what the sender sees as delivered).
 * Per flow, messages are released in the order tm_recv returned them. */
int tm_release(tm_channel *ch, const struct tm_message *msg);

/* --- waiting ------------------------------------------------------------ */

/* Until a message, a completion, an accepted session or a session's end is
 * ready: spins briefly, then sleeps on a wake pipe the daemon signals.
 * 1: ready; 0: timeout_ms passed (-1: no limit). "Ready" is a level for
 * messages (the next one of some flow has completed), completions and
 * sessions waiting in tm_accept; a session's end counts once (the first
 * tm_wait after it returns 1). */
int tm_wait(tm_channel *ch, int timeout_ms);
/* Until the next message of one receive flow of an accepted session is
 * ready, or the session has ended: 1; 0 when timeout_ms passed (-1: no
 * limit). Messages of other flows neither return it nor wake it, so an
 * application that reads its flows in a fixed turn sleeps while the flow in
 * turn is incomplete (tm_wait would return at once while another flow holds
 * a message). -ENOENT: no such session; -EINVAL: not an accepted session,
 * or no such flow. */
int tm_wait_flow(tm_channel *ch, tm_session s, uint16_t flow, int timeout_ms);
/* Until a send completion of any flow is ready, or (s != 0) the next
 * message of receive flow `flow` of accepted session s, or a session has
 * ended (counted once, as tm_wait counts it): 1; 0 when timeout_ms passed
 * (-1: no limit). Messages of other flows neither return it nor wake it, so
 * an application waiting for its sends to be delivered while a message it
 * will take only later sits in a ring (a peer already on its next round)
 * sleeps: tm_wait would return at once, every time. s == 0 (never a
 * session's id): completions alone. -ENOENT, -EINVAL: as tm_wait_flow. */
int tm_wait_sent(tm_channel *ch, tm_session s, uint16_t flow, int timeout_ms);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* TAILMARK_CLIENT_H */
