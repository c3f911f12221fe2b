// The sessions and their flows by number (sessions.h): the registry's
// slots, the sessions in the order they came up, and the ended ones
// forgotten. A daemon that serves sessions for months would otherwise keep
// every flow it ever had, scans would grow with its age, and no session
// could start once 65536 flows had come and gone; so the last `keep` ended
// sessions stay (the summary, the shell and telemetry show them), and an
// older one's flows give their slots to new flows.
#include "tailmark/engine/sessions.h"

namespace tailmark::engine {

Sessions::Sessions(Engine& e, SessionTable& t, FlowRegistry<SessionFlow>& reg, const SessionsConfig& c,
                   SessionHooks h)
    : e_(e), t_(t), cfg_(c), h_(std::move(h)), reg_(reg) {
    send_ids_.set_quarantine(c.id_quarantine);
    recv_ids_.set_quarantine(c.id_quarantine);
}

Sessions::~Sessions() = default;

bool Sessions::add_flow(SessionFlow* f, uint64_t now) {
    SessionFlow* old = nullptr;
    if (!reg_.add(f, f->index, old))
        return false;
    if (h_.slot_taken)
        h_.slot_taken(f->index);
    if (old != nullptr && h_.free_flow) // other threads had a second to let go of it
        e_.later(now, [fn = h_.free_flow, old] { fn(old); });
    return true;
}

void Sessions::abandon(SessionFlow& f) {
    f.session = f.send_session = f.recv_session = nullptr;
    f.detached = true;
    f.forgotten = true;
    reg_.release(f.index);
}

void Sessions::publish() { reg_.publish(); }

SessionRec& Sessions::add_session(std::unique_ptr<SessionRec> a) {
    a->index = next_index_++;
    sessions_.push_back(std::move(a));
    return *sessions_.back();
}

SessionRec* Sessions::session(uint16_t sid) {
    for (auto& a : sessions_)
        if (a->s != nullptr && a->id == sid)
            return a.get();
    return nullptr;
}

SessionRec* Sessions::local_peer(const Session& s) { return s.local_peer ? session(s.peer_id) : nullptr; }

SessionFlow* Sessions::local_peer_flow(const Session& s, uint16_t i) {
    SessionRec* peer = local_peer(s);
    return peer != nullptr && i < peer->flows.size() ? peer->flows[i] : nullptr;
}

void Sessions::reap(uint64_t now) {
    for (Session* s : t_.sessions()) {
        if (s->state != SessionState::Ended)
            continue;
        SessionRec* a = session(s->id);
        if (a != nullptr && a->stage != SessionRec::Stage::Gone)
            continue;
        if (a != nullptr)
            a->s = nullptr; // each flow's id went back with it
        else if (s->connector)
            send_ids_.release(s->local_base, s->params.nflows, now); // never installed (the CONNECT named them)
        t_.forget(s);
    }
}

// Ended, its flows out of every lcore, the session table and the
// application done with it: nothing but the registry refers to it.
bool Sessions::forgettable(const SessionRec& a) const {
    if (a.stage != SessionRec::Stage::Gone || a.s != nullptr || a.user != nullptr || a.pending != 0)
        return false;
    for (const SessionFlow* f : a.flows)
        if (f->send != nullptr || f->recv != nullptr || (h_.holds && h_.holds(*f)) || f->ring ||
            f->detach_pending != 0 || f->moving || (f->send_session != nullptr && f->send_session != &a) ||
            (f->recv_session != nullptr && f->recv_session != &a))
            return false;
    return true;
}

void Sessions::forget_ended(uint64_t now, size_t keep) {
    size_t ended = 0;
    for (const auto& a : sessions_)
        ended += forgettable(*a);
    for (size_t k = 0; k < sessions_.size() && ended > keep;) {
        SessionRec* a = sessions_[k].get();
        if (!forgettable(*a)) {
            k++;
            continue;
        }
        for (SessionFlow* f : a->flows) {
            if (h_.forgetting)
                h_.forgetting(*f);
            abandon(*f);
        }
        sessions_[k].release();
        sessions_.erase(sessions_.begin() + static_cast<std::ptrdiff_t>(k));
        e_.later(now, [a] { delete a; }); // telemetry may be reading a flow's session
        forgotten_++;
        ended--;
    }
}

} // namespace tailmark::engine
