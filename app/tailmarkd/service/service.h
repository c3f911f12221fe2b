// --mode service: applications attach over a Unix socket
// (<tailmark/channel_abi.h>, the client library's public header) and send
// and receive their own messages through this daemon's data plane, with no
// DPDK of their own.
//
// The control loop (main lcore) runs it all but the data path: the socket
// (accept, requests, events), the applications' memory (their arena mapped
// and registered with DPDK for zero-copy tx; each session's send rings and
// receive rings as memfds both map), sessions opened and accepted on their
// behalf (SessionTable), and the sleeping applications' wake-ups. The data
// path is two hooks on the tx lcore: svc_source() takes an application's
// next submission as the Sender's next message (extbuf over its arena), and
// svc_complete_burst() puts the Sender's completions in its completion ring. The
// rx lcore places into the application's receive rings as into any
// CompletionRing. An application that goes away (the socket closes) loses
// its sessions; its memory is let go only once nothing references it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include "options/options.h"
#include "run/flow_ctx.h"
#include "service/counters.h"
#include "tailmark/engine/flow_watch.h"
#include "tailmark/engine/node.h"
#include "tailmark/channel_abi.h"

namespace tailmark::app {

struct SvcApp;
struct SvcSession;
struct StatusSnapshot;

// One send flow of an application's session, on its tx lcore (the Sender's
// per-flow user pointer). Written by the tx lcore only, but `held` (shared
// infos in flight) which the lcore freeing the last mbuf returns.
struct alignas(64) SvcSendFlow {
    channel::tm_spsc* sq = nullptr;
    const channel::tm_sqe* sqe = nullptr;
    channel::tm_spsc* cq = nullptr;
    channel::tm_cqe* cqe = nullptr;
    uint32_t sq_mask = 0, cq_mask = 0;
    uint32_t sq_tail = 0; // ours: the app's copy is only written
    uint32_t cq_head = 0; // ours
    // The app's indexes as last read: its lines are read again only when
    // these say empty (sq) or full (cq), as the app's own ends do.
    uint32_t sq_head_seen = 0;
    uint32_t cq_tail_seen = 0;
    uint32_t inflight = 0; // submissions taken, completions not yet written
    const uint8_t* arena = nullptr;
    uint64_t arena_len = 0;
    rte_iova_t arena_iova = 0;
    uint64_t max_msg = 0;
    bool zero_copy = true; // false: the Sender copies (no shared info taken)
    // One shared info per message the Sender may hold, and as many again
    // for those the port still references after their completion: an
    // mbuf may outlive the message (a retransmitted copy in a tx queue).
    rte_mbuf_ext_shared_info* shinfo = nullptr;
    uint32_t nshinfo = 0;
    rte_ring* free_shinfo = nullptr; // MP/SC: indexes into shinfo
    // Shared infos out (held by the Sender or an mbuf): the arena is in use.
    uint32_t shinfo_out() const { return free_shinfo != nullptr ? nshinfo - rte_ring_count(free_shinfo) : 0; }
    alignas(64) SvcCounters ctr; // tx lcore
};

// The Sender's source for an application's flow (ctx: the engine's
// Switches, for the run's phase).
bool svc_source(void* ctx, void* user, uint32_t msg_id, Message& m, uint64_t& cookie);
// The tx lcore's completion sink (TxCtx::set_sink) in --mode service: each
// completion into its flow's ring, and each flow's written completions made
// visible to the app once per burst (the app polls that line).
void svc_complete_burst(void* ctx, const SendCompletion* done, uint32_t n);

// What the service runs on, and nothing else of the daemon's: the engine's
// public API (engine::Node: the ports, the engine, the session table and the
// sessions' flows; engine::FlowWatch: each flow's rates), the daemon's
// options, and the secret its sessions are keyed with.
struct ServiceHost {
    engine::Node& node;
    const engine::FlowWatch& watch;
    const Options& opt;
    const SipKey& secret;
    uint64_t tsc_hz;
};

class Service {
public:
    explicit Service(const ServiceHost& host);
    ~Service();
    Service(const Service&) = delete;
    Service& operator=(const Service&) = delete;

    bool open(SetupError& e);      // binds the control socket
    void poll(uint64_t now);       // the control loop, every tick
    void on_session(Session& s, uint64_t now); // the session table's news for our sessions
    void on_stage(AppSession& a, uint64_t now); // a session's flows went in (Live) or out (Gone)
    AcceptDecision decide(uint16_t port, Session& s, const FlowParams& p);
    // The MTU of a session between two of its applications: the in-memory
    // loopback's when it carries them (zero copy), else the port's.
    uint32_t local_mtu() const;
    void shutdown(uint64_t now);   // closes every application (the daemon stops)
    
    uint32_t apps() const { return static_cast<uint32_t>(apps_.size()); }
    // Every send flow's counters, live or gone, and the sessions: from the
    // control thread or the telemetry's (under counters_mu_).
    SvcCounters counters(uint32_t* sessions = nullptr) const;

private:
    void accept_apps();
    void read_app(SvcApp& app, uint64_t now);
    void handle(SvcApp& app, const uint8_t* msg, size_t len, const int* fds, int nfds, uint64_t now);
    void on_hello(SvcApp& app, const channel::tm_msg_hello& m, const int* fds, int nfds);
    void refuse_hello(SvcApp& app, uint64_t req, int err, const std::string& text, int arena_fd);
    bool admit(SvcApp& app, const channel::tm_msg_hello& m, int nfds, int arena_fd);
    bool map_arena(SvcApp& app, const channel::tm_msg_hello& m, int arena_fd);
    void welcome(SvcApp& app, const channel::tm_msg_hello& m);
    void on_connect(SvcApp& app, const channel::tm_msg_connect& m, uint64_t now);
    void on_listen(SvcApp& app, const channel::tm_msg_listen& m);
    void on_unlisten(SvcApp& app, uint64_t req, uint16_t port);
    void on_close(SvcApp& app, uint64_t req, uint32_t session, uint64_t now);
    void install_send(SvcSession& ss, Session& s, uint64_t now);
    void connected(SvcSession& ss);
    void accepted(SvcSession& ss, uint64_t now);
    void ended(SvcSession& ss);
    void drop_app(SvcApp& app, uint64_t now, const char* why);
    void close_session(SvcSession& ss, uint64_t now);
    void finish_closes(uint64_t now);
    void free_session(SvcSession* ss, uint64_t now);
    void reap(uint64_t now);
    void wake(uint64_t now);
    bool send_msg(SvcApp& app, const void* msg, size_t len, int fd = -1, int fd2 = -1);
    bool peer_allowed(int fd, std::string& who);
    void expire_hellos(uint64_t now);
    bool log_refusal(uint64_t now); // a refusal's WARNING: at most one a second (the rest counted)
    void hand_over(SvcSession& ss, const void* msg, size_t len, const char* what);
    void free_send_memory(SvcSession& ss);
    void reply_ok(SvcApp& app, uint64_t req);
    void reply_error(SvcApp& app, uint64_t req, int err, const std::string& text);
    // tailmark-ctl's STATUS (status.h).
    void on_status(SvcApp& app, const channel::tm_msg_status& m, uint64_t now);
    StatusSnapshot status_snapshot(uint64_t now) const;

    // The engine's parts, by what the service calls them.
    engine::Sessions& flows() { return h_.node.sessions(); } // the sessions' flows
    SessionTable& table() { return h_.node.table(); }
    const Options& options() const { return h_.opt; }
    int tx_socket() const { return h_.node.ports().tx_socket; }
    int rx_socket() const { return h_.node.ports().rx_socket; }
    // Frees what the lcores may still be reading a second later (nothing
    // once the engine is gone: teardown frees it all).
    void later(uint64_t now, std::function<void()> fn);

    ServiceHost h_;
    int listen_fd_ = -1;
    std::string path_;
    uint32_t next_app_ = 1;
    std::vector<std::unique_ptr<SvcApp>> apps_;
    std::map<uint16_t, SvcApp*> listeners_;       // port -> its application
    std::vector<std::unique_ptr<SvcSession>> sessions_;
    std::vector<std::pair<SvcSession*, uint64_t>> closing_; // receivers flushing their last ACK, until
    uint64_t next_socket_tsc_ = 0;
    uint32_t ring_names_ = 0;
    SvcCounters gone_; // of send flows freed
    SvcCounters ctl_;  // the control thread's: connections and HELLOs (single writer, read with peek)
    bool zero_copy_ = true; // decided once in open(): sends reference the arenas
    uint64_t refusal_log_tsc_ = 0;
    uint64_t refusals_unlogged_ = 0;
    // The control thread changes sessions_, their send flows and gone_ under
    // it; counters() reads them under it. Never taken on the data plane.
    mutable std::mutex counters_mu_;
    // STATUS: the last answer and when it was made; when the socket opened.
    std::string status_cache_;
    uint64_t status_tsc_ = 0, opened_tsc_ = 0;
};

} // namespace tailmark::app
