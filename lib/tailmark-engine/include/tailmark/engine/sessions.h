// A session's flows on the engine, for an application that runs sessions
// (tailmarkd's service and its benchmark alike): each flow's two halves made
// from what the session agreed (session_flows.h) and installed on the
// engine, taken back when the session ends and freed once nothing holds
// them; the flows by number for other threads (FlowRegistry); the sessions
// in the order they came up, an ended one forgotten once nothing refers to
// it. All of it on the control thread, which also hands the engine's
// answers here (on_answer).
//
// The application's records derive from SessionFlow and SessionRec, and it
// adds its own part of a flow (tailmarkd: its verifying consumer) through
// SessionHooks: made with the receive half, posted with it as its own ops,
// taken back at its end, and freed with it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tailmark/completion_ring.h"
#include "tailmark/engine/engine.h"
#include "tailmark/engine/flow_registry.h"
#include "tailmark/engine/session_flows.h"
#include "tailmark/flow_ids.h"
#include "tailmark/session.h"

namespace tailmark::engine {

struct SessionRec;

// One flow of a session: its send half, its receive half, or both (a
// session of this process to itself). The engine keeps its RecvPlace part
// (where the receive half is) from the install to the removal.
struct SessionFlow : RecvPlace {
    uint32_t index = 0;                 // in the registry: the flow's number
    SessionRec* send_session = nullptr; // the session its send half belongs to (one to itself: both)
    SessionRec* recv_session = nullptr;
    SessionRec* session = nullptr;      // the one it is shown under
    uint32_t ring_size = 0;
    // Send half.
    Sender* sender = nullptr;
    SendFlow* send = nullptr;
    uint16_t send_id = 0;
    unsigned send_lcore = 0;
    // Receive half (RecvPlace: receiver, recv, recv_id, recv_lcore).
    std::unique_ptr<CompletionRing> ring;
    bool ring_gone = false;             // its session ended: the ring went with it
    rte_ring* pkt_cq = nullptr;         // per-packet completions (SessionsConfig::pkt_cq)
    FlowAuth recv_auth{{}, kVersion};   // its data's version and tag key
    // Its end: what the data plane said when it let go.
    uint32_t detach_pending = 0;        // removals not answered yet
    bool detached = false;
    bool forgotten = false;             // its session was forgotten: the slot serves another flow
    Sender::FlowView last_send{};
    uint32_t last_acked = 0, last_released = 0, last_gave_up = 0;
};

// A session as the application tracks it (the control thread's only).
struct SessionRec {
    uint32_t index = 0;           // in the order sessions came up
    Session* s = nullptr;         // the table's (null once forgotten there)
    uint16_t id = 0;
    bool connector = false;
    uint8_t data_version = 1;     // of its data packets: 2 tagged
    bool data_auth = false;       // version 2: the tags cover the payloads
    Endpoint peer;
    std::vector<SessionFlow*> flows; // index i: flow i of the session
    uint32_t pending = 0;         // requests the lcores have not answered yet
    enum class Stage : uint8_t { Installing, Live, Detaching, Gone } stage = Stage::Installing;
    SessionEnd end = SessionEnd::None;
    uint64_t up_tsc = 0, down_tsc = 0;
    bool floor_said = false;      // the congestion-control floor warning was logged (FlowWatch)
    void* user = nullptr;         // the application's own record of it: not forgotten while set

    SessionRec() = default;
    virtual ~SessionRec() = default; // the application's record is deleted through this one
    SessionRec(const SessionRec&) = delete;
    SessionRec& operator=(const SessionRec&) = delete;
    // The record of the table's session s, as it comes up.
    void take(Session& t, bool is_connector) {
        id = t.id;
        s = &t;
        connector = is_connector;
        data_version = t.params.version;
        data_auth = t.params.data_auth;
        peer = t.peer;
    }
};

// What the application adds to its flows. Every member may be empty.
struct SessionHooks {
    // Its part of a receive half just made (false: `err` says why).
    std::function<bool(SessionFlow& f, SessionRec& a, const Session& s, std::string& err)> recv_made;
    // Its own ops posted with the receive half, and at its removal: how many
    // answers to wait for; ends_recv: an answer that ends its part.
    std::function<uint32_t(SessionFlow& f, SessionRec& a)> recv_posted;
    std::function<uint32_t(SessionFlow& f, SessionRec& a, FailReason why)> recv_closing;
    std::function<bool(const Request& r)> ends_recv;
    // The receive half let go (its part's last counts kept, freed a little
    // later), or never posted (freed now); holds: its part still there.
    std::function<void(SessionFlow& f, DeferredFree& later, uint64_t now)> recv_released;
    std::function<void(SessionFlow& f)> recv_freed;
    std::function<bool(const SessionFlow& f)> holds;
    // Every answer about a session's flows in: `installed` (its flows went
    // in; an acceptor's ACCEPT was sent), or its removal over.
    std::function<void(SessionRec& a, bool installed, uint64_t now)> settled;
    // A flow's record to free (the application's type); slot i given to a
    // new flow; a forgotten session's flow (its counts into the totals).
    std::function<void(SessionFlow* f)> free_flow;
    std::function<void(uint32_t slot)> slot_taken;
    std::function<void(SessionFlow& f)> forgetting;
};

struct SessionsConfig {
    uint32_t src_ip = 0;        // this end's address (host order)
    rte_ether_addr mac{};       // and the port's MAC its packets carry
    uint16_t udp_port = 47474;
    uint32_t paths = 1;         // source ports a flow's data is sprayed over (at least one per rail)
    int tx_socket = 0, rx_socket = 0;
    bool pkt_cq = false;        // a per-packet completion ring with each receive half
    bool acknowledge = true;    // false: ready-made packets, nobody to acknowledge to
    uint64_t id_quarantine = 0; // TSC cycles a released flow id waits before it names another (flow_ids.h)
};

class Sessions {
public:
    // `reg`: the flows by number, the application's (other threads read it
    // before and after this object's life).
    Sessions(Engine& e, SessionTable& t, FlowRegistry<SessionFlow>& reg, const SessionsConfig& c, SessionHooks h = {});
    ~Sessions(); // the sessions' records (the flows are the application's to free)
    Sessions(const Sessions&) = delete;
    Sessions& operator=(const Sessions&) = delete;

    // --- the flows by number (registry) ---
    // f's slot (f->index): a forgotten flow's (freed a second later) or a
    // new one; false: full. publish() shows new slots to other threads;
    // abandon(): a flow that never went live, or a forgotten session's.
    bool add_flow(SessionFlow* f, uint64_t now);
    void abandon(SessionFlow& f);
    void publish();
    size_t room() const { return reg_.room(); }
    const FlowRegistry<SessionFlow>& registry() const { return reg_; }
    FlowRegistry<SessionFlow>& registry() { return reg_; }

    // --- sessions ---
    SessionRec& add_session(std::unique_ptr<SessionRec> a);
    SessionRec* session(uint16_t sid); // a session of the table's, by id (null: none)
    const std::vector<std::unique_ptr<SessionRec>>& sessions() const { return sessions_; }
    // The other end of a session with this process (s.local_peer), and its
    // flow i if made (else null).
    SessionRec* local_peer(const Session& s);
    SessionFlow* local_peer_flow(const Session& s, uint16_t i);
    // Beyond `keep` ended sessions, the oldest that nothing refers to any
    // more go: their flows' slots serve new flows. How many went in all.
    void forget_ended(uint64_t now, size_t keep);
    // Each control round: the table forgets its ended sessions whose flows
    // the lcores gave back (their records stay, without it), and those that
    // never had any (a connector's ids, named by its CONNECT only, back).
    void reap(uint64_t now);
    uint64_t forgotten() const { return forgotten_; }

    // --- a flow's halves ---
    // Flow i of session s's receive half on f, under this end's id (false:
    // `err` says why; free_recv frees what was made); post_recv installs it
    // (a.pending counts the answers).
    bool make_recv(SessionFlow& f, SessionRec& a, const Session& s, uint16_t id, uint16_t i, std::string& err);
    void post_recv(SessionFlow& f, SessionRec& a);
    void free_recv(SessionFlow& f);
    // How a send half is opened: its window, whether its Sender reports each
    // message, how it takes the payload, the source's per-flow pointer.
    struct SendOpen {
        uint32_t ring_size = 0;
        bool report = false;
        PayloadMode payload = PayloadMode::Copy;
        void* user = nullptr;
    };
    // The Sender flow i of s goes by (a peer in this process: the in-memory
    // loopback's, to its flow's Receiver).
    uint32_t send_queue_for(const Session& s, uint16_t i);
    // Flow i of s's send half on f, through Sender si (a.pending counts its
    // answer); a peer in this process credits it through its words, not
    // ACKs. install_send: a spec made otherwise. False: out of memory.
    bool open_send(SessionFlow& f, SessionRec& a, const Session& s, uint16_t i, uint32_t si, const SendOpen& o);
    bool install_send(SessionFlow& f, SessionRec& a, const SendFlowSpec& sp, uint32_t si);
    Addressing address_to(const Session& s) const { return engine::address_to(s, cfg_.mac, cfg_.src_ip); }
    // A session's end: its send halves failed (what they owed reported) and
    // removed, its receive halves removed; each freed as its answers come.
    void detach(SessionRec& a, uint64_t now);
    // The engine's answer about a flow of a session (Engine::set_answers).
    void on_answer(const Request& r, uint64_t now);

    // --- a flow's cursors, live or as last seen ---
    static Sender::FlowView send_view(const SessionFlow& f) { return f.send != nullptr ? Sender::view(f.send) : f.last_send; }
    static uint32_t released_of(const SessionFlow& f);
    static uint32_t acked_of(const SessionFlow& f);
    // A send half and no receive half: once its session ended, its cursors
    // are its last send view.
    static bool send_only(const SessionFlow& f) { return f.send_session != nullptr && f.recv_session == nullptr; }

    FlowIds& send_ids() { return send_ids_; }
    FlowIds& recv_ids() { return recv_ids_; }
    uint64_t ids_reused() const { return send_ids_.reused() + recv_ids_.reused(); }

private:
    void release_recv(SessionFlow& f, uint64_t now); // its ring, once nothing holds it
    bool forgettable(const SessionRec& a) const;

    Engine& e_;
    SessionTable& t_;
    SessionsConfig cfg_;
    SessionHooks h_;
    FlowRegistry<SessionFlow>& reg_;
    std::vector<std::unique_ptr<SessionRec>> sessions_;
    uint32_t next_index_ = 0;
    uint64_t forgotten_ = 0;
    FlowIds send_ids_, recv_ids_;
};

} // namespace tailmark::engine
