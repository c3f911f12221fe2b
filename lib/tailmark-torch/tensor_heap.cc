#include "tensor_heap.h"

#include <c10/core/CPUAllocator.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>

namespace tailmark::torch_backend {

unsigned char* sealed_memfd(const char* name, size_t bytes, int* fd, uint8_t (&token)[16]) {
    const int f = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0)
        return nullptr;
    void* p = MAP_FAILED;
    if (ftruncate(f, static_cast<off_t>(bytes)) == 0)
        p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    bool ok = p != MAP_FAILED && getrandom(token, sizeof token, 0) == sizeof token;
    if (ok) {
        std::memcpy(p, token, sizeof token);
        ok = fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0;
    }
    if (!ok) {
        if (p != MAP_FAILED)
            munmap(p, bytes);
        close(f);
        return nullptr;
    }
    *fd = f;
    return static_cast<unsigned char*>(p);
}

namespace {

// torch's CPU allocator: the heap for large tensors, in front of the
// allocator it replaced. One deleter for both (raw_deleter must be one
// function): a block of the heap goes back to it, anything else to the
// replaced allocator's deleter.
class HeapAllocator final : public c10::Allocator {
public:
    HeapAllocator(TensorHeap* heap, c10::Allocator* next)
        : heap_(heap), next_(next), next_delete_(next->raw_deleter()) {}
    c10::DataPtr allocate(size_t n) const override {
        void* p = n >= TensorHeap::kMinBytes ? heap_->alloc(n) : nullptr;
        if (p == nullptr)
            p = next_->raw_allocate(n);
        return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
    }
    c10::DeleterFnPtr raw_deleter() const override { return &release; }
    static void release(void* p);

private:
    TensorHeap* heap_;
    c10::Allocator* next_;
    c10::DeleterFnPtr next_delete_;
};

HeapAllocator* g_alloc = nullptr; // set once, before the first allocation from it

void HeapAllocator::release(void* p) {
    if (p == nullptr)
        return;
    if (g_alloc->heap_->owns(p))
        g_alloc->heap_->free(p);
    else
        g_alloc->next_delete_(p);
}

} // namespace

TensorHeap::TensorHeap(unsigned char* base, size_t bytes, int fd, const uint8_t (&token)[16])
    : base_(base), bytes_(bytes), fd_(fd), owner_(getpid()) {
    std::memcpy(token_, token, sizeof token_);
    free_[kHead] = bytes - kHead;
}

TensorHeap* TensorHeap::get(size_t bytes) {
    static std::mutex mu;
    static TensorHeap* heap = nullptr;
    static bool tried = false;
    std::lock_guard<std::mutex> lock(mu);
    if (tried || bytes == 0)
        return heap;
    tried = true;
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    if (bytes <= kHead)
        return nullptr;
    c10::Allocator* next = c10::GetCPUAllocator();
    if (next == nullptr || next->raw_deleter() == nullptr)
        return nullptr; // one deleter for both would not do
    int fd = -1;
    uint8_t token[16];
    unsigned char* base = sealed_memfd("tailmark-torch-tensors", bytes, &fd, token);
    if (base == nullptr)
        return nullptr;
    auto* h = new TensorHeap(base, bytes, fd, token); // the process's, never freed: tensors outlive groups
    g_alloc = new HeapAllocator(h, next);
    c10::SetCPUAllocator(g_alloc, 1); // over the default's priority 0
    if (c10::GetCPUAllocator() != g_alloc)
        return nullptr; // another allocator ranks higher: no tensor will live here
    heap = h;
    return heap;
}

void* TensorHeap::alloc(size_t n) {
    if (getpid() != owner_)
        return nullptr; // a forked child: these books are a copy
    n = (n + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < n)
            continue;
        const size_t at = it->first, len = it->second;
        free_.erase(it);
        if (len > n)
            free_[at + n] = len - n;
        used_[at] = n;
        used_bytes_.fetch_add(n, std::memory_order_relaxed);
        return base_ + at;
    }
    return nullptr;
}

void TensorHeap::free(void* p) {
    // A forked child's: the books are a copy, and their lock may have been
    // held by another of the parent's threads at the fork.
    if (getpid() != owner_)
        return;
    const size_t at = static_cast<size_t>(static_cast<unsigned char*>(p) - base_);
    std::lock_guard<std::mutex> lock(mu_);
    auto u = used_.find(at);
    if (u == used_.end())
        return;
    size_t start = at, len = u->second;
    used_.erase(u);
    used_bytes_.fetch_sub(len, std::memory_order_relaxed);
    auto next = free_.lower_bound(at);
    if (next != free_.end() && next->first == at + len) { // merge with the block after
        len += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) { // and the one before
        auto prev = std::prev(next);
        if (prev->first + prev->second == start) {
            start = prev->first;
            len += prev->second;
            free_.erase(prev);
        }
    }
    free_[start] = len;
}

} // namespace tailmark::torch_backend
