// <tailmark/channel_abi.h>: the channel between an application
// (libtailmark-client) and a running tailmarkd --mode service: what crosses
// the Unix socket, and the layout of the memory both map. A public header of
// the client library (installed beside client.h, C++ only), because both
// ends build against it: the library, the daemon (app/tailmarkd/service/),
// tailmark-ctl, and anyone who speaks the channel without the library. No
// DPDK here.
//
// Versioned: kChannelAbi is the layout's version. HELLO (and STATUS) carry
// it, and a daemon refuses a client of another one (EPROTO). Changing a
// layout raises kChannelAbi. Adding a request, with no layout changed,
// raises kChannelAbiMinor instead: a client of an older minor works
// unchanged, and a newer request sent to an older daemon is answered EPROTO.
// The static_asserts at the end pin every message's size, so a change to
// the bytes cannot go unnoticed.
//
// Socket: AF_UNIX, SOCK_SEQPACKET (one message per request, boundaries
// kept), file descriptors attached with SCM_RIGHTS. Every message starts
// with MsgHeader; the app sends requests, the daemon answers each with its
// req_id, and sends events (req_id 0) on its own.
//
//   app                                         tailmarkd
//   HELLO + [arena memfd]  -------------->   checks its seals (F_SEAL_SHRINK at
//                                               least) and size (--max-arena), maps it,
//                                               registers it with DPDK (zero copy)
//   <---  WELCOME + [control memfd,            the app's control block (Doorbell) and
//                    wake fd]                  the read end of the daemon's wake pipe
//   CONNECT ip:service, flows, ring, max  -->   a session (ARP, handshake)
//   <---  CONNECTED + [send memfd]              per flow: a submission and a
//                                               completion ring (SendRings)
//   LISTEN service, limits  -------------->
//   <---  OK / ERROR(EBUSY)
//   <---  ACCEPTED + [recv memfd] (event)        per flow: a completion ring
//                                               (the CompletionRing layout)
//   CLOSE session  ---------------------->   <---  OK
//   <---  ENDED session, reason (event)
//   (the socket closes: the daemon frees everything of the app's)
//
//   tailmark-ctl (no HELLO, no arena)
//   STATUS  ------------------------------>   the daemon's state as JSON
//   <---  STATUS_REPLY + [json memfd]          (then the daemon closes the socket)
// (C++ on both sides: the library's C API is in tailmark/client.h.)
//
// Trust: the daemon serves every application of the host, so nothing an
// application holds may fault or block it. Every memfd the daemon hands over
// is sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL before it goes (its
// size cannot change under the daemon's mapping); an arena without
// F_SEAL_SHRINK is refused. The wake fd is the read end of a pipe whose
// write end only the daemon holds, O_NONBLOCK: its writes never block. (Not
// an eventfd: both processes would share one open file description, and the
// app could clear O_NONBLOCK on it with F_SETFL, fill the counter, and
// block the daemon's next write.) A connection must say HELLO within
// kHelloTimeoutMs, and its peer (SO_PEERCRED) must be allowed
// (--allow-uid, --allow-group), or the daemon closes it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tailmark::channel {

// 2: the wake fd is the daemon's pipe, in WELCOME (1: the app's eventfd, in HELLO).
inline constexpr uint32_t kChannelAbi = 2;
// 1: TM_MSG_STATUS (0: ABI 2 as it began). 2: tm_doorbell.want (a wait on
// one receive flow; 0 there is what every older client leaves). 3:
// tm_doorbell.want's kWantSent (a wait on send completions, and at most one
// receive flow).
inline constexpr uint32_t kChannelAbiMinor = 3;
inline constexpr uint32_t kMaxMsg = 512;   // the largest socket message
inline constexpr uint32_t kSecretLen = 16; // a session secret, as bytes
inline constexpr uint32_t kHelloTimeoutMs = 3000; // a connection's HELLO, from its accept

enum tm_msg_type {
    TM_MSG_HELLO = 1,     // app: attach (fd: the arena memfd, sealed)
    TM_MSG_WELCOME = 2,   // daemon (fds: control memfd, wake pipe's read end)
    TM_MSG_CONNECT = 3,   // app: open a session to a peer
    TM_MSG_CONNECTED = 4, // daemon (fd: the session's send rings)
    TM_MSG_LISTEN = 5,    // app: take the sessions peers open on a service
    TM_MSG_UNLISTEN = 6,  // app: a tm_msg_listen with only `service` set
    TM_MSG_ACCEPTED = 7,  // daemon, event (fd: the session's receive rings)
    TM_MSG_CLOSE = 8,     // app: close a session
    TM_MSG_ENDED = 9,     // daemon, event: a session ended
    TM_MSG_OK = 10,       // daemon: the request is done
    TM_MSG_ERROR = 11,    // daemon: the request failed (errno and a message)
    TM_MSG_BYE = 12,      // app: detach, a bare header, no reply (closing the socket does the same)
    TM_MSG_STATUS = 13,   // any allowed connection, instead of HELLO: the daemon's state (minor 1)
    TM_MSG_STATUS_REPLY = 14, // daemon (fd: a sealed memfd holding json_bytes of JSON)
};

struct tm_msg_header {
    uint32_t type;   // tm_msg_type
    uint32_t len;    // the whole message, this header included
    uint64_t req_id; // the request it answers; 0 for an event
};

// The arena: a memfd the app made (MFD_HUGETLB where it can be had, else
// normal pages), its size a multiple of page_size, sealed at least
// F_SEAL_SHRINK (the library seals F_SEAL_SHRINK | F_SEAL_GROW |
// F_SEAL_SEAL): the daemon refuses one that could shrink under its mapping
// (EINVAL), and one over its --max-arena (EFBIG). It maps it read-only
// (nothing prefaulted), registers it with DPDK (rte_extmem_register) and
// DMA-maps it for its ports at IOVA = its own virtual address where zero
// copy is safe (IOVA as VA, or only virtual devices); tx then sends from it
// zero-copy. Elsewhere the daemon copies the messages into its mbufs.
struct tm_msg_hello {
    struct tm_msg_header h;
    uint32_t abi;         // kChannelAbi
    uint32_t pid;
    uint64_t arena_bytes; // the arena memfd's size (the first fd)
    uint32_t page_size;   // the arena's page size (2 MiB for hugetlb, else 4096)
    uint32_t reserved;
    char name[32];        // for the daemon's log
};

// Carries the control memfd (control_bytes, sealed) and the wake fd (the
// read end of the daemon's pipe) in that order.
struct tm_msg_welcome {
    struct tm_msg_header h;
    uint32_t app_id;
    uint32_t max_flows;   // per session
    uint64_t control_bytes; // the control memfd's size
    uint32_t mtu;         // the daemon's port MTU
    uint32_t local_ip;    // the daemon's --src-ip, host order (0 from older daemons)
};

struct tm_msg_connect {
    struct tm_msg_header h;
    uint32_t ip;          // the peer's IPv4 address, host order
    uint16_t service;     // the listener there (a port number)
    uint16_t nflows;
    uint32_t ring_size;   // completion slots per flow (power of two)
    uint32_t max_msg;     // the largest message
    uint32_t timeout_ms;  // give up connecting after (0: the daemon's)
    uint32_t has_secret;  // 0: the daemon's --secret
    uint8_t secret[16];
};

// The send side of a session: per flow one send-ring block (tm_send_layout),
// flow i at i * flow_stride. The session id is the daemon's (unique in it).
struct tm_msg_connected {
    struct tm_msg_header h;
    uint32_t session;     // the app's handle for it
    uint16_t nflows;
    uint16_t reserved;
    uint32_t ring_size;
    uint32_t max_msg;
    uint32_t sq_size;     // entries of each flow's submission ring
    uint32_t cq_size;     // ... and completion ring
    uint64_t send_bytes;  // the send memfd's size
    uint64_t flow_stride; // bytes between two flows' SendRings
};

struct tm_msg_listen {
    struct tm_msg_header h;
    uint16_t service;
    uint16_t max_flows;   // refuse sessions beyond these (0: the daemon's limits)
    uint32_t max_ring;
    uint32_t max_msg;
    uint32_t has_secret;  // 0: the daemon's --secret
    uint8_t secret[16];
};

// An accepted session's receive side: per flow one completion ring in the
// CompletionRing layout (lib/tailmark/ring_layout.h: RingHeader with magic
// and version, ConsumerCursor, slots, regions), flow i at i * flow_stride
// (a multiple of 4096). Message msg_id of a flow has completed when its
// slot's flag (slot msg_id mod ring_size) reads msg_id + 1 (acquire); its
// bytes are the slot's msg_len bytes of region msg_id mod ring_size. The
// app releases it by storing msg_id + 1 to the cursor's `released` (release
// order), one message after another.
struct tm_msg_accepted {
    struct tm_msg_header h;
    uint32_t session;
    uint16_t service;
    uint16_t nflows;
    uint32_t peer_ip;
    uint16_t peer_port;
    uint16_t reserved;
    uint32_t ring_size;
    uint32_t max_msg;
    uint64_t recv_bytes;  // the receive memfd's size
    uint64_t flow_stride; // bytes between two flows' rings
};

struct tm_msg_close {
    struct tm_msg_header h;
    uint32_t session;
    uint32_t reserved;
};

// Why a session ended (and so its flows' outstanding messages failed).
enum tm_end_reason {
    TM_END_CLOSED = 1,       // closed by this application
    TM_END_PEER_CLOSED = 2,  // the peer closed it
    TM_END_PEER_TIMEOUT = 3, // the peer fell silent
    TM_END_PEER_RESET = 4,   // the peer restarted
    TM_END_REFUSED = 5,      // the peer refused it
    TM_END_NO_ANSWER = 6,    // nobody answered the handshake (or ARP)
    TM_END_OTHER = 7,        // e.g. replaced by a newer incarnation of the peer's session
};

// Sent once the session's flows are out of the data plane: for a connected
// session every completion of its messages is in its completion rings
// before ENDED is sent; for an accepted one nothing more is written to its
// receive rings. The app's mappings stay valid until it unmaps them.
struct tm_msg_ended {
    struct tm_msg_header h;
    uint32_t session;
    uint32_t reason;      // tm_end_reason
};

// A request failed. err: EBUSY (LISTEN: the port has a listener; HELLO or
// the connection: --max-apps applications attached, or --max-pending
// connections that have not said HELLO), EACCES (the connection: this uid
// and gid may not attach), ETIMEDOUT (the connection: no HELLO in time),
// EFBIG (HELLO: the arena is over --max-arena),
// ECONNREFUSED (CONNECT: the peer refused; text names the setting and both
// values), ETIMEDOUT (CONNECT: no answer), EHOSTUNREACH (CONNECT: ARP got
// no answer), EINVAL (a field out of range; text names it), ENOSPC (no flow
// ids or session slots left), ENOMEM, EPROTO (a malformed message; the
// daemon then closes the socket), ENOENT (no such session).
struct tm_msg_error {
    struct tm_msg_header h;
    int32_t err;          // a positive errno
    char text[200];       // one line, NUL-terminated
};

// The daemon's state for operators (tailmark-ctl), asked on a connection
// that says no HELLO and maps nothing: the same peers may ask as may attach
// (--allow-uid, --allow-group). The answer is JSON (one object; its schema,
// versioned by its "schema" field, is in docs/operating.md) in a memfd
// sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL; the daemon
// then closes the connection (one STATUS per connection). A daemon may
// answer from a snapshot up to 50 ms old.
struct tm_msg_status {
    struct tm_msg_header h;
    uint32_t abi;         // kChannelAbi
    uint32_t minor;       // kChannelAbiMinor
    uint32_t flags;       // 0
    uint32_t reserved;
};

struct tm_msg_status_reply {
    struct tm_msg_header h;
    uint32_t abi;         // the daemon's kChannelAbi
    uint32_t minor;       // ... and kChannelAbiMinor
    uint64_t json_bytes;  // the memfd's JSON, from offset 0
};

// --- shared memory -------------------------------------------------------

// A single-producer single-consumer ring of fixed-size entries. The producer
// writes an entry, then head with a release store; the consumer reads head
// with acquire, the entry, then tail with a release store. Indexes run
// freely (mod 2^32); size is a power of two.
struct tm_spsc {
    alignas(64) uint32_t head; // producer's
    alignas(64) uint32_t tail; // consumer's
    alignas(64) uint32_t size;
    uint32_t entry_bytes;
};

// App -> daemon: one message to send.
struct tm_sqe {
    uint64_t offset; // of its bytes in the app's arena
    uint32_t len;
    uint32_t reserved;
    uint64_t cookie; // the app's, handed back in the completion
};

// Daemon -> app: one message done.
enum tm_send_status {
    TM_DELIVERED = 1, // the remote application released it
    TM_FAILED = 2,    // never confirmed (reason: TM_FAIL_*)
};
enum tm_fail_reason {
    TM_FAIL_NONE = 0,
    TM_FAIL_RETRY_LIMIT = 1,
    TM_FAIL_RECEIVER_RESTARTED = 2,
    TM_FAIL_PEER_TIMEOUT = 3,
    TM_FAIL_CLOSED = 4,
    TM_FAIL_REFUSED = 5,
    TM_FAIL_INVALID = 6, // the submission was refused: outside the arena, or larger than max_msg (msg_id ~0)
};
struct tm_cqe {
    uint64_t cookie;
    uint32_t msg_id;
    uint8_t status;  // tm_send_status
    uint8_t reason;  // tm_fail_reason
    uint16_t reserved;
};

// One send flow's rings in the send memfd: the submission ring (app writes),
// then the completion ring (daemon writes), each header followed by its
// entries, every part on its own cache lines:
//   [tm_spsc sq][sq_size x tm_sqe][tm_spsc cq][cq_size x tm_cqe]
// The daemon takes a submission only when the completion ring has room for
// the completions of everything it holds plus that one, so a completion is
// never dropped: an app that stops polling completions stops its sends.
struct tm_send_layout {
    uint64_t sq, sqe, cq, cqe, total; // offsets from the flow's start; total: a multiple of 64
};
static inline uint64_t tm_align64(uint64_t x) { return (x + 63) / 64 * 64; }
static inline struct tm_send_layout tm_send_rings(uint32_t sq_size, uint32_t cq_size) {
    struct tm_send_layout l;
    l.sq = 0;
    l.sqe = tm_align64(sizeof(struct tm_spsc));
    l.cq = tm_align64(l.sqe + (uint64_t)sq_size * sizeof(struct tm_sqe));
    l.cqe = tm_align64(l.cq + sizeof(struct tm_spsc));
    l.total = tm_align64(l.cqe + (uint64_t)cq_size * sizeof(struct tm_cqe));
    return l;
}

// The app's control block (the control memfd): how it sleeps. The app sets
// `sleeping` to 1 (seq_cst), looks for work once more, then blocks in poll()
// on the wake fd (WELCOME's pipe) and the socket; afterwards it drains the
// pipe and sets `sleeping` to 0. The daemon's control loop (every
// millisecond or so), seeing `sleeping`, looks at the app's rings and, once
// a completion or a message is there, swaps `sleeping` to 0 and writes one
// byte into the pipe (never blocking: a full pipe loses nothing, the app
// has a byte to wake on already).
//
// `want` (minor 2), written before `sleeping`: 0, wake for anything; or
// tm_want_flow(session, flow), wake only once that receive flow's next
// message has completed. An app that reads its flows in a fixed turn then
// sleeps while other flows hold messages, instead of being woken for them
// on every round of the daemon (tm_wait is a level over all flows). A
// daemon older than minor 2 ignores it (more wake-ups, nothing lost), and
// one that cannot find the flow wakes the app. A session's end always
// wakes it through the socket.
//
// kWantSent (minor 3), alone or with a flow's word: wake once any send
// flow of the app has a completion (or that flow its next message). An app
// that waits for its sends to be delivered while a message it will take
// only later sits in a ring (a peer already on its next operation) sleeps,
// instead of being woken for that message on every round. A daemon of
// minor 2 reads kWantSent alone as 0 (it wakes the app for anything, as
// before), and with a flow as that flow alone: a completion then ends the
// app's wait only at its timeout.
struct tm_doorbell {
    alignas(64) uint32_t sleeping;
    uint32_t reserved;
    uint64_t want;
    alignas(64) uint64_t wakes; // wake-ups the daemon wrote (diagnostics)
};
inline constexpr uint64_t kWantFlow = 1ull << 63;
inline constexpr uint64_t kWantSent = 1ull << 62;
inline constexpr uint64_t tm_want_flow(uint32_t session, uint16_t flow) {
    return kWantFlow | static_cast<uint64_t>(session) << 16 | flow;
}

// The bytes of ABI 2: a change here is a change of kChannelAbi.
static_assert(sizeof(tm_sqe) == 24);
static_assert(sizeof(tm_cqe) == 16);
static_assert(sizeof(tm_spsc) == 192);
static_assert(sizeof(tm_doorbell) == 128 && offsetof(tm_doorbell, want) == 8);
static_assert(sizeof(tm_msg_header) == 16);
static_assert(sizeof(tm_msg_hello) == 72 && sizeof(tm_msg_welcome) == 40);
static_assert(sizeof(tm_msg_connect) == 56 && sizeof(tm_msg_connected) == 56);
static_assert(sizeof(tm_msg_listen) == 48 && sizeof(tm_msg_accepted) == 56);
static_assert(sizeof(tm_msg_close) == 24 && sizeof(tm_msg_ended) == 24);
static_assert(sizeof(tm_msg_error) == 224);
static_assert(sizeof(tm_msg_connect) <= kMaxMsg && sizeof(tm_msg_accepted) <= kMaxMsg &&
              sizeof(tm_msg_error) <= kMaxMsg);
static_assert(sizeof(tm_msg_status) == 32 && sizeof(tm_msg_status_reply) == 32);

} // namespace tailmark::channel
