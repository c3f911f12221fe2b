#include "mesh.h"

#include "piece.h"
#include "tensor_heap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tailmark::torch_backend {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t env_u64(const char* name, uint64_t dflt, uint64_t lo, uint64_t hi) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0')
        return dflt;
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 0);
    if (errno != 0 || *end != '\0' || x < lo || x > hi)
        throw std::runtime_error(std::string("tailmark: ") + name + "=" + v + " is not a number in [" +
                                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
}

std::string hex(const uint8_t* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}

bool unhex(const std::string& s, uint8_t* out, size_t n) {
    if (s.size() != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        auto v = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            return -1;
        };
        const int hi = v(s[2 * i]), lo = v(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    return true;
}

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

} // namespace

MeshOptions MeshOptions::from_env() {
    MeshOptions o;
    o.base_port = static_cast<uint16_t>(env_u64("TAILMARK_TORCH_PORT", o.base_port, 1, 65000));
    o.max_msg = static_cast<uint32_t>(env_u64("TAILMARK_TORCH_MSG", o.max_msg, 4096, 64u << 20));
    o.ring_size = static_cast<uint32_t>(env_u64("TAILMARK_TORCH_RING", o.ring_size, 2, 4096));
    if ((o.ring_size & (o.ring_size - 1)) != 0)
        throw std::runtime_error("tailmark: TAILMARK_TORCH_RING=" + std::to_string(o.ring_size) +
                                 " is not a power of two");
    return o;
}

void Mesh::fail(const std::string& what) const {
    std::string m = "tailmark (rank " + std::to_string(rank_) + "): " + what;
    if (ch_ != nullptr && *tm_last_error(ch_) != '\0')
        m += ": ";
    if (ch_ != nullptr)
        m += tm_last_error(ch_);
    throw std::runtime_error(m);
}

Mesh::Mesh(int rank, int size, const Rendezvous& rv, const MeshOptions& opt)
    : rank_(rank), size_(size), out_(size, 0), in_(size, 0), endpoints_(size), direct_out_(size, false),
      peer_seg_(size, nullptr), peer_seg_bytes_(size, 0), heap_out_(size, false), peer_heap_(size, nullptr),
      peer_heap_bytes_(size, 0) {
    const auto deadline = Clock::now() + opt.timeout;
    payload_ = opt.max_msg - sizeof(PieceHeader);
    slot_bytes_ = (static_cast<size_t>(opt.max_msg) + 63) / 64 * 64;
    // Enough for every session's ring to be full twice over: a slot goes
    // back when the peer's application has released the message.
    nslots_ = static_cast<int>(std::max<size_t>(8, 2 * static_cast<size_t>(opt.ring_size) * (size - 1)));
    nslots_ = static_cast<int>(std::min<size_t>(nslots_, (size_t{512} << 20) / slot_bytes_ + 1));

    tm_attach_opts ao{};
    ao.arena_bytes = static_cast<size_t>(nslots_) * slot_bytes_ + (2u << 20);
    const std::string name = "torch rank " + std::to_string(rank);
    ao.name = name.c_str();
    if (int rc = tm_attach(&ao, &ch_); rc < 0) {
        const char* sock = std::getenv("TAILMARK_SOCKET");
        std::string m = "tailmark (rank " + std::to_string(rank) + "): cannot attach to tailmarkd at " +
                        (sock != nullptr ? sock : TM_DEFAULT_SOCKET) + " (TAILMARK_SOCKET)";
        if (ch_ != nullptr) {
            m += std::string(": ") + tm_last_error(ch_);
            tm_detach(ch_);
            ch_ = nullptr;
        }
        throw std::runtime_error(m);
    }
    try {
        slots_ = static_cast<unsigned char*>(tm_buf_alloc(ch_, static_cast<size_t>(nslots_) * slot_bytes_));
        if (slots_ == nullptr)
            fail("no room for the send slots in the arena");
        note_ = static_cast<unsigned char*>(tm_buf_alloc(ch_, kNoteBytes));
        if (note_ == nullptr)
            fail("no room for the abort note in the arena");
        if (size_ == 1)
            return;

        // The job's secret: rank 0 draws it; the store carries it.
        uint8_t secret[16];
        if (rank_ == 0) {
            if (getrandom(secret, sizeof secret, 0) != sizeof secret)
                fail(std::string("getrandom: ") + std::strerror(errno));
            rv.set("tailmark/secret", hex(secret, sizeof secret));
        } else if (!unhex(rv.get("tailmark/secret"), secret, sizeof secret)) {
            fail("the store's tailmark/secret is not 32 hex digits");
        }

        // Our listener: the first free port from base_port (ranks sharing a
        // daemon each get their own).
        tm_listen_opts lo{};
        lo.secret = secret;
        int rc = -EBUSY;
        for (uint32_t p = opt.base_port; p < opt.base_port + 256u && p <= 65535; p++) {
            rc = tm_listen(ch_, static_cast<uint16_t>(p), &lo);
            if (rc == 0) {
                port_ = static_cast<uint16_t>(p);
                break;
            }
            if (rc != -EBUSY)
                fail("listen on port " + std::to_string(p));
        }
        if (rc != 0)
            fail("no free port in " + std::to_string(opt.base_port) + ".." + std::to_string(opt.base_port + 255));
        const uint32_t ip = tm_local_ipv4(ch_);
        if (ip == 0)
            fail("the daemon did not say its address (a tailmarkd older than this library)");
        char ipbuf[INET_ADDRSTRLEN];
        const uint32_t nip = htonl(ip);
        inet_ntop(AF_INET, &nip, ipbuf, sizeof ipbuf);
        endpoints_[rank_] = std::string(ipbuf) + ":" + std::to_string(port_);
        rv.set("tailmark/ep/" + std::to_string(rank_), endpoints_[rank_]);

        // Connect to everyone (only their daemons need to answer), then
        // accept everyone; each connection's first message names its rank.
        for (int p = 0; p < size_; p++) {
            if (p == rank_)
                continue;
            endpoints_[p] = rv.get("tailmark/ep/" + std::to_string(p));
            const auto colon = endpoints_[p].rfind(':');
            if (colon == std::string::npos)
                fail("rank " + std::to_string(p) + "'s endpoint '" + endpoints_[p] + "' is not ip:port");
            const std::string pip = endpoints_[p].substr(0, colon);
            const auto pport = static_cast<uint16_t>(std::stoul(endpoints_[p].substr(colon + 1)));
            tm_connect_opts co{};
            co.nflows = 1;
            co.ring_size = opt.ring_size;
            co.max_msg = opt.max_msg;
            co.timeout_ms = static_cast<uint32_t>(std::max(1000, std::min(ms_left(deadline), 600000)));
            co.secret = secret;
            if (tm_connect(ch_, pip.c_str(), pport, &co, &out_[p]) < 0)
                fail("connect to rank " + std::to_string(p) + " at " + endpoints_[p]);
        }
        exchange_hellos(opt);
        group_hosts();
        share_segments(rv);
    } catch (...) {
        tm_detach(ch_);
        ch_ = nullptr;
        throw;
    }
}

void Mesh::group_hosts() {
    auto host = [&](int p) { return endpoints_[p].substr(0, endpoints_[p].rfind(':')); };
    const std::string mine = host(rank_);
    std::vector<std::string> seen;
    for (int p = 0; p < size_; p++) {
        const std::string h = host(p);
        if (h == mine)
            local_.push_back(p);
        if (std::find(seen.begin(), seen.end(), h) == seen.end()) {
            seen.push_back(h);
            firsts_.push_back(p);
        }
    }
}

namespace {
// A peer's offer, "pid:fd:bytes:token" (tokens are 16 bytes in hex), mapped
// read-only; nullptr where it cannot be (another pid namespace, no /proc, a
// token that is not the one offered: another file at that number).
const unsigned char* map_offer(const std::string& offer, size_t* bytes) {
    unsigned long pid = 0, fd = 0;
    unsigned long long len = 0;
    char tok[33] = {};
    if (std::sscanf(offer.c_str(), "%lu:%lu:%llu:%32s", &pid, &fd, &len, tok) != 4 || len < Mesh::kSegHead)
        return nullptr;
    uint8_t token[16];
    if (!unhex(tok, token, sizeof token))
        return nullptr;
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const int f = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return nullptr;
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(f, &st) == 0 && static_cast<unsigned long long>(st.st_size) == len)
        p = mmap(nullptr, len, PROT_READ, MAP_SHARED, f, 0);
    close(f);
    if (p == MAP_FAILED)
        return nullptr;
    if (std::memcmp(p, token, sizeof token) != 0) {
        munmap(p, len);
        return nullptr;
    }
    *bytes = len;
    return static_cast<const unsigned char*>(p);
}
} // namespace

void Mesh::share_segments(const Rendezvous& rv) {
    if (local_.size() < 2)
        return;
    const char* env = std::getenv("TAILMARK_TORCH_DIRECT");
    const bool want = env == nullptr || std::strcmp(env, "0") != 0;
    const std::string me = std::to_string(rank_);
    // Every rank of the host offers its segment, or says "none", so that
    // its peers' gets return either way.
    std::string offer = "none", heap_offer = "none";
    int fd = -1;
    if (want) {
        seg_bytes_ = kSegHead + static_cast<size_t>(nslots_) * slot_bytes_;
        uint8_t token[16];
        seg_ = sealed_memfd("tailmark-torch-slots", seg_bytes_, &fd, token);
        if (seg_ != nullptr) {
            offer = std::to_string(getpid()) + ":" + std::to_string(fd) + ":" + std::to_string(seg_bytes_) + ":" +
                    hex(token, sizeof token);
            // Large tensors in shared memory too (tensor_heap.h), read in
            // place: only beside a segment, which every piece's header needs.
            heap_ = TensorHeap::get(env_u64("TAILMARK_TORCH_HEAP_MB", 1024, 0, 1 << 20) << 20);
            if (heap_ != nullptr)
                heap_offer = std::to_string(getpid()) + ":" + std::to_string(heap_->fd()) + ":" +
                             std::to_string(heap_->bytes()) + ":" + hex(heap_->token(), 16);
        }
    }
    rv.set("tailmark/seg/" + me, offer);
    rv.set("tailmark/heap/" + me, heap_offer);
    for (int p : local_) {
        if (p == rank_)
            continue;
        const std::string o = rv.get("tailmark/seg/" + std::to_string(p));
        if (want && o != "none")
            peer_seg_[p] = map_offer(o, &peer_seg_bytes_[p]);
        const std::string h = rv.get("tailmark/heap/" + std::to_string(p));
        if (peer_seg_[p] != nullptr && h != "none")
            peer_heap_[p] = map_offer(h, &peer_heap_bytes_[p]);
        rv.set("tailmark/direct/" + std::to_string(p) + "/" + me,
               peer_seg_[p] == nullptr ? "0" : peer_heap_[p] == nullptr ? "1" : "2");
    }
    bool any = false;
    for (int p : local_) {
        if (p == rank_)
            continue;
        const std::string d = seg_ != nullptr ? rv.get("tailmark/direct/" + me + "/" + std::to_string(p)) : "0";
        direct_out_[p] = d == "1" || d == "2";
        heap_out_[p] = d == "2" && heap_ != nullptr;
        any |= direct_out_[p];
    }
    if (fd >= 0)
        close(fd); // every peer has opened it, or said it could not
    if (!any && seg_ != nullptr) {
        munmap(seg_, seg_bytes_);
        seg_ = nullptr;
    }
}

void Mesh::exchange_hellos(const MeshOptions& opt) {
    const auto deadline = Clock::now() + opt.timeout;
    int slot = 0;
    for (int p = 0; p < size_; p++) {
        if (p == rank_)
            continue;
        auto* h = reinterpret_cast<PieceHeader*>(this->slot(slot));
        *h = PieceHeader{};
        h->magic = PieceHeader::kMagic;
        h->kind = static_cast<uint8_t>(Kind::Hello);
        h->index = static_cast<uint32_t>(rank_);
        h->count = static_cast<uint32_t>(size_);
        if (tm_send(ch_, out_[p], 0, h, sizeof *h, static_cast<uint64_t>(p)) < 0)
            fail("hello to rank " + std::to_string(p));
        slot++;
    }
    int accepted = 0, delivered = 0;
    std::vector<bool> have(size_, false);
    while (accepted < size_ - 1 || delivered < size_ - 1) {
        if (Clock::now() > deadline)
            fail("timed out meeting the other ranks (" + std::to_string(accepted) + " of " +
                 std::to_string(size_ - 1) + " connected to us, " + std::to_string(delivered) + " took our hello)");
        tm_completion c[8];
        const int n = tm_poll_completions(ch_, c, 8);
        if (n < 0)
            fail("waiting for the other ranks");
        for (int i = 0; i < n; i++) {
            if (c[i].status != TM_DELIVERED)
                fail("hello to rank " + std::to_string(c[i].cookie) + " failed (" +
                     tm_fail_reason_name(c[i].reason) + ")");
            delivered++;
        }
        if (accepted < size_ - 1) {
            tm_session_info info{};
            const int a = tm_accept(ch_, 0, &info);
            if (a < 0)
                fail("accept");
            if (a == 1) {
                tm_message m{};
                int r = 0;
                while ((r = tm_recv(ch_, info.session, 0, &m)) == 0) {
                    if (Clock::now() > deadline)
                        fail("a session was accepted but never said its rank");
                    if (tm_session_state(ch_, info.session) != 0)
                        fail("a session ended before saying its rank");
                    tm_wait(ch_, 10);
                }
                if (r < 0)
                    fail("receive a hello");
                PieceHeader h{};
                if (m.len != sizeof h)
                    fail("a first message of " + std::to_string(m.len) + " bytes is not a hello");
                std::memcpy(&h, m.data, sizeof h);
                tm_release(ch_, &m);
                if (h.magic != PieceHeader::kMagic || h.kind != static_cast<uint8_t>(Kind::Hello) ||
                    h.count != static_cast<uint32_t>(size_) || h.index >= h.count ||
                    h.index == static_cast<uint32_t>(rank_) || have[h.index])
                    fail("a bad hello (rank " + std::to_string(h.index) + " of " + std::to_string(h.count) + ")");
                in_[h.index] = info.session;
                have[h.index] = true;
                accepted++;
                continue;
            }
        }
        if (n == 0)
            tm_wait(ch_, 10);
    }
}

std::string Mesh::describe() const {
    std::string s = "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
    if (!endpoints_.empty() && !endpoints_[rank_].empty())
        s += " at " + endpoints_[rank_];
    return s;
}

Mesh::~Mesh() {
    if (seg_ != nullptr)
        munmap(seg_, seg_bytes_);
    for (size_t p = 0; p < peer_seg_.size(); p++)
        if (peer_seg_[p] != nullptr)
            munmap(const_cast<unsigned char*>(peer_seg_[p]), peer_seg_bytes_[p]);
    for (size_t p = 0; p < peer_heap_.size(); p++)
        if (peer_heap_[p] != nullptr)
            munmap(const_cast<unsigned char*>(peer_heap_[p]), peer_heap_bytes_[p]);
    if (ch_ != nullptr) {
        if (slots_ != nullptr)
            tm_buf_free(ch_, slots_);
        if (note_ != nullptr)
            tm_buf_free(ch_, note_);
        tm_detach(ch_);
    }
}

} // namespace tailmark::torch_backend
