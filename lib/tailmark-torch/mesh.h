// Every rank's sessions with every other rank, through the local tailmarkd
// (--mode service): rank r connects one session to each peer's listener
// (what it sends) and accepts one from each (what it receives). Endpoints
// and the job's session secret travel through the c10d store, so nothing
// else needs configuring.
#pragma once

#include "tensor_heap.h"

#include <tailmark/client.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tailmark::torch_backend {

// The store, as the mesh needs it (torch-free, so this file is too).
struct Rendezvous {
    std::function<void(const std::string& key, const std::string& value)> set;
    std::function<std::string(const std::string& key)> get; // blocks until set
};

struct MeshOptions {
    uint16_t base_port = 7300;  // the first port tried for this rank's listener
    uint32_t max_msg = 1 << 20; // a message: header + payload
    uint32_t ring_size = 16;    // messages in flight per session
    std::chrono::milliseconds timeout{std::chrono::minutes(30)};
    static MeshOptions from_env(); // TAILMARK_TORCH_PORT, _MSG, _RING
};

class Mesh {
public:
    // Throws std::runtime_error naming what failed (the daemon, a peer, ...).
    Mesh(int rank, int size, const Rendezvous& rv, const MeshOptions& opt);
    ~Mesh();
    Mesh(const Mesh&) = delete;
    Mesh& operator=(const Mesh&) = delete;

    tm_channel* channel() const { return ch_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    // The hosts: ranks whose daemon has the same address share it, and
    // their messages go through its memory. local(): this rank's host's
    // ranks, in rank order; firsts(): each host's first rank, in order.
    // Fixed once the mesh is made.
    const std::vector<int>& local() const { return local_; }
    const std::vector<int>& firsts() const { return firsts_; }
    tm_session out(int peer) const { return out_[peer]; }
    tm_session in(int peer) const { return in_[peer]; }
    // Bytes of tensor data a message carries (max_msg less the header).
    size_t payload() const { return payload_; }
    // Send slots in the arena: header + payload each.
    int nslots() const { return nslots_; }
    unsigned char* slot(int i) const { return slots_ + static_cast<size_t>(i) * slot_bytes_; }
    // Pieces to a rank of this host go by reference (direct(peer)): their
    // bytes in slot s of this rank's segment (seg_slot), a memfd that the
    // host's other ranks map read-only, and only the header through the
    // daemon; the receiver reads them in place, and its release (the
    // sender's TM_DELIVERED) frees the slot. The daemon copies none of
    // them. TAILMARK_TORCH_DIRECT=0, or a peer that cannot map it (another
    // pid namespace), keeps them inline.
    bool direct(int peer) const { return direct_out_[peer]; }
    size_t seg_offset(int i) const { return kSegHead + static_cast<size_t>(i) * slot_bytes_; }
    unsigned char* seg_slot(int i) const { return seg_ + seg_offset(i); }
    static constexpr size_t kSegHead = 4096; // the segment's token, then the slots
    // A peer's segment, as this rank maps it (nullptr: none), and its size.
    const unsigned char* peer_seg(int peer) const { return peer_seg_[peer]; }
    size_t peer_seg_bytes(int peer) const { return peer_seg_bytes_[peer]; }
    // A piece's bytes that lie in this process's TensorHeap, to a rank that
    // maps it: their offset there (the peer reads them in place), else 0.
    size_t heap_ref(int peer, const void* p, size_t len) const {
        return heap_out_[peer] ? heap_->offset_of(p, len) : 0;
    }
    const unsigned char* peer_heap(int peer) const { return peer_heap_[peer]; }
    size_t peer_heap_bytes(int peer) const { return peer_heap_bytes_[peer]; }
    // The abort note's own buffer (kNoteBytes), apart from the slots: a
    // broken engine sends it to every peer while its slots may all be out.
    static constexpr size_t kNoteBytes = 1024;
    unsigned char* note() const { return note_; }
    std::string describe() const;

private:
    [[noreturn]] void fail(const std::string& what) const;
    void exchange_hellos(const MeshOptions& opt);
    void group_hosts();
    void share_segments(const Rendezvous& rv); // the host's ranks map each other's segments

    int rank_, size_;
    tm_channel* ch_ = nullptr;
    std::vector<tm_session> out_, in_;
    std::vector<std::string> endpoints_;
    std::vector<int> local_, firsts_;
    uint16_t port_ = 0;
    size_t payload_ = 0, slot_bytes_ = 0;
    int nslots_ = 0;
    unsigned char* slots_ = nullptr;
    unsigned char* note_ = nullptr;
    unsigned char* seg_ = nullptr; // this rank's segment (mapped read-write)
    size_t seg_bytes_ = 0;
    std::vector<bool> direct_out_;
    std::vector<const unsigned char*> peer_seg_;
    std::vector<size_t> peer_seg_bytes_;
    const TensorHeap* heap_ = nullptr; // the process's, when its ranks share a host
    std::vector<bool> heap_out_;       // the peer maps it
    std::vector<const unsigned char*> peer_heap_;
    std::vector<size_t> peer_heap_bytes_;
};

} // namespace tailmark::torch_backend
