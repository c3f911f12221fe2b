// Python.h first, as Python asks: it sets feature macros the C library reads.
#include <Python.h>

#include "engine.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace tailmark::torch_backend {

using Clock = std::chrono::steady_clock;

namespace {
// The op's part on peer p's stream (an op has at most one each way), or -1.
template <typename Part>
int part_for(const std::vector<Part>& parts, int p) {
    for (size_t k = 0; k < parts.size(); k++)
        if (parts[k].peer == p)
            return static_cast<int>(k);
    return -1;
}

// The op peer p's stream serves one way (&Op::outs or &Op::ins), and its
// part: the oldest op that still has pieces for p ({nullptr, -1}: none).
template <typename Part>
std::pair<Op*, int> serving(const std::deque<std::unique_ptr<Op>>& active, std::vector<Part> Op::*parts, int p) {
    for (const auto& op : active) {
        const std::vector<Part>& v = (*op).*parts;
        const int k = part_for(v, p);
        if (k >= 0 && v[k].next < v[k].pieces.size())
            return {op.get(), k};
    }
    return {nullptr, -1};
}

// What tm_session_state's st (not 0) says: the session with a peer ended,
// naming the peer and why; or (st < 0) the channel itself failed, whatever
// the session: the local daemon went (its socket's path in the error) or
// broke the protocol, which names the daemon, not the peer.
std::string session_end(tm_channel* ch, int st, const char* dir, int peer) {
    if (st < 0)
        return std::string("the daemon: ") + tm_last_error(ch);
    return std::string("the session ") + dir + " rank " + std::to_string(peer) + " ended (" + tm_end_reason_name(st) +
           ")";
}
} // namespace

namespace {
// Every engine alive, for shutdown_all (never destroyed: static destructors
// run after the atexit hooks and must not see it half gone).
std::mutex& live_mu() {
    static auto* m = new std::mutex;
    return *m;
}
std::vector<Engine*>& live() {
    static auto* v = new std::vector<Engine*>;
    return *v;
}
} // namespace

void Engine::shutdown_all() {
    std::lock_guard<std::mutex> g(live_mu());
    for (Engine* e : live())
        e->stop();
}

void Engine::stop() {
    stop_.store(true);
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
        // The engine thread may drop the last reference to a tensor Python
        // also knew (an op's inputs, a Work's outputs), and that takes the
        // GIL. A caller holding it, Python destroying the process group,
        // waited for a thread that waited for it: a rank that never exited
        // (torch_host, 4 ranks of gloo_compare: the engine thread in
        // ~TensorImpl -> PyEval_AcquireThread, the main one in join).
        PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
        thread_.join();
        if (saved != nullptr)
            PyEval_RestoreThread(saved);
    }
    // Ops still pending end with an error (their Work's wait() raises).
    brk("the process group was destroyed with operations pending");
}

Engine::Engine(std::unique_ptr<Mesh> mesh, std::chrono::milliseconds timeout)
    : mesh_(std::move(mesh)), ch_(mesh_->channel()), timeout_(timeout), rank_(mesh_->rank()),
      size_(mesh_->size()), out_seq_(size_, 0), in_seq_(size_, 0), uses_(mesh_->nslots()) {
    for (int i = mesh_->nslots() - 1; i >= 0; i--)
        free_slots_.push_back(i);
    thread_ = std::thread([this] { run(); });
    std::lock_guard<std::mutex> g(live_mu());
    live().push_back(this);
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> g(live_mu());
        auto& v = live();
        for (size_t i = 0; i < v.size(); i++)
            if (v[i] == this) {
                v[i] = v.back();
                v.pop_back();
                break;
            }
    }
    stop();
}

void Engine::submit(std::unique_ptr<Op> op) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (broken_.empty()) {
            queue_.push_back(std::move(op));
            has_queued_.store(true, std::memory_order_release);
            cv_.notify_one();
            return;
        }
    }
    std::string why;
    {
        std::lock_guard<std::mutex> g(mu_);
        why = broken_;
    }
    if (op->on_done)
        op->on_done(std::make_exception_ptr(std::runtime_error(why)));
}

void Engine::brk(const std::string& why) {
    std::vector<std::unique_ptr<Op>> dead;
    std::string msg;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (broken_.empty())
            broken_ = why;
        msg = broken_;
        for (auto& o : queue_)
            dead.push_back(std::move(o));
        queue_.clear();
        has_queued_.store(false);
    }
    broken_local_ = true;
    for (auto& o : active_)
        dead.push_back(std::move(o));
    active_.clear();
    // Slots still out go back free when their completions come (after_break).
    for (auto& u : uses_)
        u = SlotUse{};
    for (auto& o : dead)
        if (o->on_done)
            o->on_done(std::make_exception_ptr(std::runtime_error(msg)));
}

bool Engine::activate() {
    if (!has_queued_.load(std::memory_order_acquire))
        return false;
    std::deque<std::unique_ptr<Op>> fresh;
    {
        std::lock_guard<std::mutex> g(mu_);
        fresh.swap(queue_);
        has_queued_.store(false);
    }
    const auto now = Clock::now();
    for (auto& op : fresh) {
        for (auto& o : op->outs)
            o.seq = ++out_seq_[o.peer];
        for (auto& i : op->ins)
            i.seq = ++in_seq_[i.peer];
        op->deadline = now + timeout_;
        active_.push_back(std::move(op));
    }
    return !fresh.empty();
}

bool Engine::ready(const Op& op, const OutPart& part) const {
    if (part.gate >= 0 && op.ins[part.gate].next < op.ins[part.gate].pieces.size())
        return false;
    if (part.dep < 0 || part.next < part.lag)
        return true;
    return op.ins[part.dep].next > part.next - part.lag;
}

int Engine::take_slot(Op& op, int pi) {
    const OutPart& part = op.outs[pi];
    const int s = free_slots_.back();
    free_slots_.pop_back();
    auto* h = reinterpret_cast<PieceHeader*>(mesh_->slot(s));
    *h = PieceHeader{};
    h->magic = PieceHeader::kMagic;
    h->kind = static_cast<uint8_t>(op.kind);
    h->seq = part.seq;
    h->index = static_cast<uint32_t>(part.next);
    h->count = static_cast<uint32_t>(part.pieces.size());
    h->bytes = part.pieces[part.next].len;
    h->tag = op.tag;
    if (mesh_->direct(part.peer))
        h->ref = 1 + mesh_->seg_offset(s);
    uses_[s] = SlotUse{&op, pi};
    return s;
}

unsigned char* Engine::payload(int s, int peer) const {
    return mesh_->direct(peer) ? mesh_->seg_slot(s) : mesh_->slot(s) + sizeof(PieceHeader);
}

int Engine::forward_to(const Op& op, int pi, size_t j) const {
    if (free_slots_.empty())
        return -1;
    const InPiece& in = op.ins[pi].pieces[j];
    for (size_t k = 0; k < op.outs.size(); k++) {
        const OutPart& o = op.outs[k];
        if (o.dep != pi)
            continue;
        const size_t oj = j + o.lag;
        if (o.next != oj || oj >= o.pieces.size() || o.pending_slot >= 0 || o.pieces[oj].src != in.dst ||
            o.pieces[oj].len != in.len)
            return -1;
        if (o.gate >= 0 && op.ins[o.gate].next < op.ins[o.gate].pieces.size())
            return -1;
        // The peer's stream serves the oldest op with pieces for it.
        return serving(active_, &Op::outs, o.peer).first == &op ? static_cast<int>(k) : -1;
    }
    return -1;
}

size_t Engine::heap_at(const OutPart& out, size_t j) const {
    const OutPiece& piece = out.pieces[j];
    return piece.fixed && piece.len != 0 ? mesh_->heap_ref(out.peer, piece.src, piece.len) : 0;
}

bool Engine::pump_out(Op& op, int pi) {
    OutPart& part = op.outs[pi];
    bool moved = false;
    while (part.next < part.pieces.size()) {
        if (!ready(op, part))
            break;
        int s = part.pending_slot;
        const OutPiece& piece = part.pieces[part.next];
        if (s < 0) {
            if (free_slots_.empty())
                break;
            s = take_slot(op, pi);
            // Bytes that stay put until the peer has taken them, where they
            // lie in the TensorHeap: the peer reads them there.
            const size_t at = heap_at(part, part.next);
            if (at != 0) {
                reinterpret_cast<PieceHeader*>(mesh_->slot(s))->ref = 1 + (kHeapRef | at);
                in_place_.fetch_add(1, std::memory_order_relaxed);
            } else if (piece.len != 0) {
                std::memcpy(payload(s, part.peer), piece.src, piece.len);
                if (mesh_->direct(part.peer))
                    copied_local_.fetch_add(1, std::memory_order_relaxed);
            }
        }
        const size_t inline_len = mesh_->direct(part.peer) ? 0 : piece.len;
        const int rc = tm_send(ch_, mesh_->out(part.peer), 0, mesh_->slot(s), sizeof(PieceHeader) + inline_len,
                               static_cast<uint64_t>(s));
        if (rc == -EAGAIN) {
            part.pending_slot = s;
            break;
        }
        if (rc < 0) {
            fail(&op, "sending to rank " + std::to_string(part.peer) + " failed: " + tm_last_error(ch_));
            return true;
        }
        part.pending_slot = -1;
        part.next++;
        moved = true;
    }
    return moved;
}

bool Engine::in_ready(const Op& op, const InPart& part) const {
    const size_t j = part.next;
    return (part.gate < 0 || op.ins[part.gate].next == op.ins[part.gate].pieces.size()) &&
           (part.after_in < 0 || op.ins[part.after_in].next > j) &&
           (part.after_out < 0 || op.outs[part.after_out].next > j);
}

const unsigned char* Engine::payload_in(int peer, const tm_message& m, const PieceHeader& h, size_t len) const {
    if (h.ref == 0)
        return m.len == sizeof h + len ? static_cast<const unsigned char*>(m.data) + sizeof h : nullptr;
    // By reference: within the peer's segment, or its TensorHeap, as this
    // rank maps it.
    const bool heap = ((h.ref - 1) & kHeapRef) != 0;
    const unsigned char* seg = heap ? mesh_->peer_heap(peer) : mesh_->peer_seg(peer);
    const size_t bytes = heap ? mesh_->peer_heap_bytes(peer) : mesh_->peer_seg_bytes(peer);
    const size_t off = (h.ref - 1) & ~kHeapRef, head = heap ? TensorHeap::kHead : Mesh::kSegHead;
    if (seg == nullptr || m.len != sizeof h || off < head || off > bytes || len > bytes - off)
        return nullptr;
    return seg + off;
}

bool Engine::pump_in(Op& op, int pi) {
    InPart& part = op.ins[pi];
    bool moved = false;
    while (part.next < part.pieces.size()) {
        // Not yet: the piece stays in the receive ring (its sender waits).
        if (!in_ready(op, part))
            break;
        tm_message m{};
        const int r = tm_recv(ch_, mesh_->in(part.peer), 0, &m);
        if (r == 0)
            break;
        if (r < 0) {
            fail(&op, "receiving from rank " + std::to_string(part.peer) + " failed: " + tm_last_error(ch_));
            return true;
        }
        const InPiece& piece = part.pieces[part.next];
        PieceHeader h{};
        if (m.len >= sizeof h)
            std::memcpy(&h, m.data, sizeof h);
        if (m.len >= sizeof h && h.magic == PieceHeader::kMagic && h.kind == static_cast<uint8_t>(Kind::Abort)) {
            take_note(op, m, h);
            return true;
        }
        const unsigned char* in = m.len >= sizeof h ? payload_in(part.peer, m, h, piece.len) : nullptr;
        if (in == nullptr && m.len == sizeof h && h.ref != 0 && h.magic == PieceHeader::kMagic) {
            tm_release(ch_, &m);
            fail(&op, "rank " + std::to_string(part.peer) + " sent a piece by reference (offset " +
                          std::to_string(h.ref - 1) + ", " + std::to_string(h.bytes) +
                          " bytes) that is not within its segment as this rank maps it (" +
                          std::to_string(mesh_->peer_seg_bytes(part.peer)) + " bytes)");
            return true;
        }
        if (in == nullptr || h.magic != PieceHeader::kMagic || h.kind != static_cast<uint8_t>(op.kind) ||
            h.seq != part.seq || h.index != part.next || h.count != part.pieces.size() || h.bytes != piece.len ||
            h.tag != op.tag) {
            const std::string got = m.len < sizeof h || h.magic != PieceHeader::kMagic
                                        ? "a message of " + std::to_string(m.len) + " bytes that is no piece"
                                        : std::string(kind_name(static_cast<Kind>(h.kind))) + " #" +
                                              std::to_string(h.seq) + " piece " + std::to_string(h.index) + "/" +
                                              std::to_string(h.count) + " of " + std::to_string(h.bytes) +
                                              " bytes, tag " + std::to_string(h.tag);
            tm_release(ch_, &m);
            fail(&op, "rank " + std::to_string(part.peer) + " sent " + got + " where this rank expected " +
                kind_name(op.kind) + " #" + std::to_string(part.seq) + " piece " + std::to_string(part.next) + "/" +
                std::to_string(part.pieces.size()) + " of " + std::to_string(piece.len) + " bytes, tag " +
                std::to_string(op.tag) + ": the ranks called different operations (or sizes)");
            return true;
        }
        // What this piece makes goes on at once: into the slot that sends
        // it, not into dst and then copied there (one pass over the bytes
        // fewer, and none at all over dst where the plan does not keep it).
        const int fwd = piece.len != 0 ? forward_to(op, pi, part.next) : -1;
        // Unless the piece that forwards it is read in place (from dst, in
        // the TensorHeap): then dst is what the peer reads, and the send
        // slot carries the header alone. One pass over the bytes fewer
        // again, on this rank's side and on its peer's.
        if (fwd >= 0 && heap_at(op.outs[fwd], op.outs[fwd].next) == 0) {
            const int s = take_slot(op, fwd);
            take_forward(op.dtype, op.red, payload(s, op.outs[fwd].peer), piece.dst, piece.a, in, piece.len,
                         part.in_left, piece.keep);
            op.outs[fwd].pending_slot = s;
            if (mesh_->direct(op.outs[fwd].peer))
                copied_local_.fetch_add(1, std::memory_order_relaxed);
        } else if (piece.len != 0) {
            if (piece.a != nullptr)
                reduce_into(op.dtype, op.red, piece.dst, piece.a, in, piece.len, part.in_left);
            else
                std::memcpy(piece.dst, in, piece.len);
        }
        tm_release(ch_, &m);
        part.next++;
        moved = true;
        if (fwd >= 0) {
            pump_out(op, fwd);
            if (broken_local_)
                return true; // op is gone
        }
    }
    return moved;
}

bool Engine::progress() {
    bool moved = false;
    tm_completion c[64];
    const int n = tm_poll_completions(ch_, c, 64);
    if (n < 0) {
        fail(nullptr, std::string("the daemon: ") + tm_last_error(ch_));
        return true;
    }
    for (int i = 0; i < n; i++) {
        if (c[i].cookie >= uses_.size())
            continue; // the abort note's (never before a break)
        const int s = static_cast<int>(c[i].cookie);
        const SlotUse u = uses_[s];
        uses_[s] = SlotUse{};
        free_slots_.push_back(s);
        if (u.op == nullptr)
            continue;
        if (c[i].status != TM_DELIVERED) {
            fail(u.op, "a message to rank " + std::to_string(u.op->outs[u.part].peer) + " failed (" +
                           tm_fail_reason_name(c[i].reason) + ")");
            return true;
        }
        u.op->outs[u.part].delivered++;
        moved = true;
    }
    // Each stream serves the oldest op that still has pieces for it.
    for (int p = 0; p < size_ && !broken_local_; p++) {
        if (p == rank_)
            continue;
        if (const auto [op, k] = serving(active_, &Op::outs, p); op != nullptr)
            moved |= pump_out(*op, k);
        if (broken_local_)
            break;
        if (const auto [op, k] = serving(active_, &Op::ins, p); op != nullptr)
            moved |= pump_in(*op, k);
    }
    if (!broken_local_)
        finish_done();
    return moved;
}

void Engine::finish_done() {
    for (auto it = active_.begin(); it != active_.end();) {
        if (!(*it)->done()) {
            ++it;
            continue;
        }
        std::unique_ptr<Op> op = std::move(*it);
        it = active_.erase(it);
        std::exception_ptr ex;
        try {
            if (op->on_success)
                op->on_success();
        } catch (...) {
            ex = std::current_exception();
        }
        if (op->on_done)
            op->on_done(ex);
    }
}

// Not tm_wait, a level over every flow: a peer already on its next op
// sends that op's pieces, which stay in the ring until this rank's caller
// posts the op, and tm_wait returned at once for them, every time, while
// this op waited for its deliveries. The thread spun, taking a CPU from
// the daemon and the other ranks.
void Engine::idle_wait() {
    tm_session s = 0;
    for (int p = 0; p < size_ && s == 0; p++) {
        if (p == rank_)
            continue;
        if (const auto [op, k] = serving(active_, &Op::ins, p); op != nullptr && in_ready(*op, op->ins[k]))
            s = mesh_->in(p);
    }
    tm_wait_sent(ch_, s, 0, 1);
}

void Engine::check_health() {
    const auto now = Clock::now();
    if (now < next_health_)
        return;
    next_health_ = now + std::chrono::milliseconds(10);
    for (auto& op : active_) {
        for (const auto& o : op->outs) {
            if (o.delivered == o.pieces.size())
                continue;
            if (const int st = tm_session_state(ch_, mesh_->out(o.peer)); st != 0) {
                fail(op.get(), session_end(ch_, st, "to", o.peer));
                return;
            }
        }
        for (const auto& i : op->ins) {
            if (i.next == i.pieces.size())
                continue;
            if (const int st = tm_session_state(ch_, mesh_->in(i.peer)); st != 0) {
                fail(op.get(), session_end(ch_, st, "from", i.peer));
                return;
            }
        }
        if (now > op->deadline) {
            std::string waiting;
            for (const auto& i : op->ins)
                if (i.next < i.pieces.size())
                    waiting += " rank " + std::to_string(i.peer) + " (received " + std::to_string(i.next) + "/" +
                               std::to_string(i.pieces.size()) + " pieces)";
            for (const auto& o : op->outs)
                if (o.delivered < o.pieces.size())
                    waiting += " rank " + std::to_string(o.peer) + " (took " + std::to_string(o.delivered) + "/" +
                               std::to_string(o.pieces.size()) + " pieces)";
            fail(op.get(), "timed out after " + std::to_string(timeout_.count()) + " ms waiting for" + waiting);
            return;
        }
    }
}

void Engine::run() {
    while (!stop_.load(std::memory_order_relaxed)) {
        bool moved = activate();
        if (broken_local_) {
            after_break();
            continue;
        }
        if (active_.empty()) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait_for(lk, std::chrono::milliseconds(50),
                         [this] { return has_queued_.load() || stop_.load(); });
            continue;
        }
        moved |= progress();
        if (broken_local_)
            continue;
        if (!moved) {
            check_health();
            if (!broken_local_ && !active_.empty())
                idle_wait();
        }
    }
}

} // namespace tailmark::torch_backend
