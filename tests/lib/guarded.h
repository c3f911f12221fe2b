// A buffer between two guard pages (no access): any load or store outside
// [begin, begin + n) is a fault, masked and streaming ones included.
#pragma once

#include <cstddef>
#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace tmtest {

struct Guarded {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t span = 0;
    uint8_t* base = nullptr;
    explicit Guarded(size_t n) {
        span = (n + page - 1) / page * page;
        void* m = mmap(nullptr, span + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(m != MAP_FAILED);
        base = static_cast<uint8_t*>(m);
        REQUIRE(mprotect(base, page, PROT_NONE) == 0);
        REQUIRE(mprotect(base + page + span, page, PROT_NONE) == 0);
    }
    ~Guarded() { munmap(base, span + 2 * page); }
    uint8_t* begin() { return base + page; }
    uint8_t* end() { return base + page + span; }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
};

} // namespace tmtest
