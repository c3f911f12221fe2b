// The application's arena: the memory its send buffers come from, shared
// with the daemon, which registers it with DPDK and transmits from it
// zero-copy. A memfd on 2 MiB hugepages where the kernel has them to give,
// else on normal pages; the daemon maps the memfd the HELLO carries.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fd.h"
#include "first_fit.h"
#include "last_error.h"
#include "mapping.h"

namespace tailmark::client {

class Arena {
public:
    static constexpr uint64_t kHugePage = 2ull << 20;
    static constexpr uint64_t kPage = 4096;

    // bytes rounded up to the page size. allow_hugetlb false: normal pages
    // straight away (TAILMARK_NO_HUGETLB, and the tests of the fallback).
    // 0 or a negative errno.
    int create(uint64_t bytes, bool allow_hugetlb, LastError& err);

    // A 64-byte aligned buffer of at least len bytes; nullptr (err says why)
    // when the arena has no free block that large.
    void* alloc(size_t len, LastError& err);
    // 0, or -EINVAL when p is no buffer of this arena (or was freed).
    int free(const void* p, LastError& err);

    bool contains(const void* p, size_t len) const {
        const auto a = reinterpret_cast<uintptr_t>(p);
        const auto b = reinterpret_cast<uintptr_t>(map_.data());
        return a >= b && a - b <= map_.size() && len <= map_.size() - (a - b);
    }
    uint64_t offset_of(const void* p) const { return static_cast<const uint8_t*>(p) - map_.data(); }

    int fd() const { return fd_.get(); }
    uint8_t* base() const { return map_.data(); }
    uint64_t size() const { return map_.size(); }
    uint32_t page_size() const { return page_size_; }
    bool hugetlb() const { return page_size_ == kHugePage; }
    const FirstFit& blocks() const { return blocks_; }

private:
    int try_create(uint64_t bytes, bool huge, LastError& err);

    Fd fd_;
    Mapping map_;
    uint32_t page_size_ = 0;
    FirstFit blocks_;
};

} // namespace tailmark::client
