// How a broken group ends on every rank, not only on the one that saw the
// failure. A rank that gives up tells every peer why: an abort note on its
// send stream, after the pieces it sent before. From then on it takes and
// drops whatever the peers send it. A peer's send then completes, and the
// peer reaches the note, or a peer of its own that is gone, instead of its
// operation timeout.
//
// Seen in torch_fail (CI, 2026-12-05): rank 1 was killed inside an
// all_to_all. Rank 0 raised on its failed message to rank 1 and stopped
// reading. Rank 2 had all of rank 1's part, so only its pieces to rank 0
// were left, and a piece counts as delivered only once the peer's
// application releases it. Every session rank 2 watched was alive, so it
// waited for the 120 s timeout.
#include "engine.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tailmark::torch_backend {

namespace {
// The note's completion cookie: past every slot's, so progress() skips it.
constexpr uint64_t kNoteCookie = ~uint64_t{0};
constexpr size_t kNoteText = Mesh::kNoteBytes - sizeof(PieceHeader);

// A peer's words, fit to print in an error: bytes outside printable ASCII
// become '?'.
std::string printable(const unsigned char* p, size_t n) {
    std::string s(reinterpret_cast<const char*>(p), n);
    for (char& c : s)
        if (c < 0x20 || c > 0x7e)
            c = '?';
    return s;
}
} // namespace

void Engine::fail(const Op* op, const std::string& cause, int origin, const std::string& first_cause) {
    std::string why = "tailmark (rank " + std::to_string(rank_) + "): ";
    if (op != nullptr)
        why += op->what + ": ";
    why += cause;
    if (!broken_local_ && size_ > 1) {
        const std::string& text = origin < 0 ? cause : first_cause;
        note_len_ = static_cast<uint32_t>(std::min(text.size(), kNoteText));
        auto* h = reinterpret_cast<PieceHeader*>(mesh_->note());
        *h = PieceHeader{};
        h->magic = PieceHeader::kMagic;
        h->kind = static_cast<uint8_t>(Kind::Abort);
        h->index = static_cast<uint32_t>(origin < 0 ? rank_ : origin);
        h->count = static_cast<uint32_t>(size_);
        h->bytes = note_len_;
        std::memcpy(mesh_->note() + sizeof(PieceHeader), text.data(), note_len_);
        note_owed_.assign(size_, true);
        note_owed_[rank_] = false;
    }
    brk(why);
}

void Engine::take_note(const Op& op, tm_message& m, const PieceHeader& h) {
    const auto* text = static_cast<const unsigned char*>(m.data) + sizeof h;
    const std::string cause = printable(text, std::min<size_t>({h.bytes, m.len - sizeof h, kNoteText}));
    const int origin = h.index < static_cast<uint32_t>(size_) ? static_cast<int>(h.index) : -1;
    tm_release(ch_, &m);
    if (origin < 0) {
        fail(&op, "a rank gave up on the group: " + cause);
        return;
    }
    fail(&op, "rank " + std::to_string(origin) + " gave up on the group: " + cause, origin, cause);
}

void Engine::after_break() {
    tm_completion c[64];
    int n = 0;
    while ((n = tm_poll_completions(ch_, c, 64)) > 0)
        for (int i = 0; i < n; i++)
            if (c[i].cookie < uses_.size())
                free_slots_.push_back(static_cast<int>(c[i].cookie));
    if (n < 0) { // the daemon is gone: nothing more to tell anyone
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return stop_.load(); });
        return;
    }
    for (int p = 0; p < size_ && !note_owed_.empty(); p++) {
        if (!note_owed_[p])
            continue;
        // -EAGAIN: the stream is full; the peer reads it, or its session ends.
        if (tm_session_state(ch_, mesh_->out(p)) != 0 ||
            tm_send(ch_, mesh_->out(p), 0, mesh_->note(), sizeof(PieceHeader) + note_len_, kNoteCookie) != -EAGAIN)
            note_owed_[p] = false;
    }
    for (int p = 0; p < size_; p++) {
        if (p == rank_)
            continue;
        tm_message m{};
        while (tm_recv(ch_, mesh_->in(p), 0, &m) > 0)
            tm_release(ch_, &m);
    }
    // A plain sleep, not tm_wait: a session offered to this channel and
    // never accepted keeps tm_wait ready, and a broken group accepts none.
    // 5 ms a round drains a ring of 16 messages a peer: 3 GB/s of 1 MiB.
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(5), [this] { return stop_.load(); });
}

} // namespace tailmark::torch_backend
