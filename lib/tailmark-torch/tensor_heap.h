// The process's large CPU tensors in shared memory, so that a rank of the
// same host reads them in place. Without it a piece to such a rank is
// copied into a slot of this rank's segment and read from there by the peer
// (two copies a byte, as gloo's socket makes: all_to_all at 8 ranks on one
// host was 0.86-1.18x gloo). With it, a piece of a tensor that lives here
// goes as its 64-byte header alone, naming the tensor's offset
// (Engine::pump_out), and the peer copies once, from this heap into its own
// output: 16 MiB all_to_all at 8 ranks took 16.8-18.8 ms without the copy
// into slots against 25.2-31.3 ms with it (gloo 31.6-40.3), 2026-12-06.
//
// The heap is a memfd mapped once for the life of the process (a tensor may
// outlive every process group), sealed as the segments are (no peer maps it
// writable, it never shrinks), and installed as torch's CPU allocator for
// allocations of kMinBytes and more while there is room; smaller ones, and
// any once it is full, go to the allocator it replaced. A process forked
// from this one (a DataLoader worker) allocates elsewhere: its copy of the
// heap's books is not the owner's, and the pages are shared. Pages once
// touched stay with the process (the seals forbid punching holes), as a
// caching allocator keeps its blocks. TAILMARK_TORCH_HEAP_MB sets its size
// (default 1024; 0: no heap).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include <sys/types.h>

namespace tailmark::torch_backend {

// A memfd of `bytes`, mapped read-write here, with a random 16-byte token at
// its start and then sealed (it cannot grow or shrink under a peer's
// mapping, and no one maps it writable but this one mapping): what this
// process offers the ranks of its host. nullptr on failure (nothing left
// open); else *fd is open, for peers to map it by /proc/PID/fd.
unsigned char* sealed_memfd(const char* name, size_t bytes, int* fd, uint8_t (&token)[16]);

class TensorHeap {
public:
    static constexpr size_t kHead = 4096;          // the token (Mesh's map_offer checks it), then blocks
    static constexpr size_t kMinBytes = 256 << 10; // smaller tensors: the allocator it replaced
    static constexpr size_t kAlign = 4096;

    // The process's heap, made (`bytes` long) and installed as the CPU
    // allocator on the first call with bytes != 0 (a mesh whose ranks share
    // a host); nullptr where there is none (TAILMARK_TORCH_HEAP_MB=0, or it
    // could not be made). Later calls return the first one's.
    static TensorHeap* get(size_t bytes);

    // [p, p + len) lies wholly in the heap's blocks: its offset from the
    // heap's start, else 0 (no block starts before kHead).
    size_t offset_of(const void* p, size_t len) const {
        const auto* c = static_cast<const unsigned char*>(p);
        return c >= base_ + kHead && len <= bytes_ && c <= base_ + bytes_ - len ? static_cast<size_t>(c - base_) : 0;
    }
    // What a peer needs to map it (Mesh's offers).
    int fd() const { return fd_; }
    size_t bytes() const { return bytes_; }
    const uint8_t* token() const { return token_; }

    // Bytes in tensors now (tailmark.torch.stats: heap_bytes), as this
    // process's books say.
    size_t used() const { return used_bytes_.load(std::memory_order_relaxed); }
    void* alloc(size_t n); // nullptr: no room, or not the owner process
    void free(void* p);    // a block of alloc()'s
    bool owns(const void* p) const {
        const auto* c = static_cast<const unsigned char*>(p);
        return c >= base_ && c < base_ + bytes_;
    }

private:
    TensorHeap(unsigned char* base, size_t bytes, int fd, const uint8_t (&token)[16]);
    unsigned char* base_;
    size_t bytes_;
    int fd_; // kept open: peers of later groups open it by /proc/PID/fd
    uint8_t token_[16];
    pid_t owner_;
    std::mutex mu_;
    std::map<size_t, size_t> free_;   // offset -> length, coalesced
    std::map<size_t, size_t> used_;   // offset -> length
    std::atomic<size_t> used_bytes_{0};
};

} // namespace tailmark::torch_backend
