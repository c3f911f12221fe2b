// The arena: its first-fit allocator (offsets only) and the memfd under it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "arena.h"
#include "first_fit.h"
#include "tailmark/client.h"
#include "fake_daemon.h"

using tailmark::client::Arena;
using tailmark::client::FirstFit;
using tailmark::client::LastError;

TEST_CASE("first fit: lowest block that fits, 64-byte granules", "[arena]") {
    FirstFit f(1024);
    CHECK(f.capacity() == 1024);
    CHECK(f.alloc(1) == 0u);     // one granule
    CHECK(f.alloc(64) == 64u);
    CHECK(f.alloc(65) == 128u);  // two granules
    CHECK(f.alloc(0) == 256u);   // len 0 still takes a granule: a 0-byte message needs an address
    CHECK(f.free_bytes() == 1024 - 320);
    CHECK(f.used_blocks() == 4);
}

TEST_CASE("first fit: free coalesces with both neighbours", "[arena]") {
    FirstFit f(640);
    std::vector<uint64_t> o;
    for (int i = 0; i < 10; ++i)
        o.push_back(*f.alloc(64));
    CHECK(o.back() == 576u);
    CHECK(!f.alloc(1));
    CHECK(f.free(o[1]) == 64);
    CHECK(f.free(o[3]) == 64);
    CHECK(f.free_blocks() == 2);
    CHECK(f.free(o[2]) == 64);     // between two free blocks: one block [64, 256)
    CHECK(f.free_blocks() == 1);
    CHECK(f.largest_free() == 192);
    CHECK(f.alloc(192) == 64u);    // fits exactly where the three were
    CHECK(f.free_blocks() == 0);
    for (int i : {0, 4, 5, 6, 7, 8, 9})
        f.free(o[static_cast<size_t>(i)]);
    CHECK(f.free_blocks() == 2);   // [0,64) and [256,640)
    CHECK(f.largest_free() == 384);
    f.free(64);
    CHECK(f.free_blocks() == 1);
    CHECK(f.free_bytes() == 640);
    CHECK(f.largest_free() == 640);
}

TEST_CASE("first fit: first fit, not best fit; a split leaves the rest free", "[arena]") {
    FirstFit f(64 * 8);
    const uint64_t a = *f.alloc(64 * 3), b = *f.alloc(64), c = *f.alloc(64), d = *f.alloc(64 * 3);
    CHECK((a == 0 && b == 192 && c == 256 && d == 320));
    f.free(a);             // a hole of 3 granules at 0
    f.free(c);             // a hole of 1 at 256
    CHECK(f.alloc(64) == 0u);   // first fit takes the low hole, not the exact one at 256
    CHECK(f.alloc(128) == 64u); // the rest of it
    CHECK(f.alloc(64) == 256u);
    CHECK(!f.alloc(1));
}

TEST_CASE("first fit: freeing what is not a block", "[arena]") {
    FirstFit f(1024);
    const uint64_t a = *f.alloc(128);
    CHECK(f.free(a + 64) == 0); // inside a block, not its start
    CHECK(f.free(512) == 0);    // free space
    CHECK(f.free(a) == 128);
    CHECK(f.free(a) == 0);      // twice
    CHECK(f.free_bytes() == 1024);
}

TEST_CASE("first fit: a pattern of allocations and frees keeps its books", "[arena]") {
    FirstFit f(64 * 1000);
    std::vector<std::pair<uint64_t, uint64_t>> live;
    uint32_t x = 12345;
    auto rnd = [&x] { return x = x * 1103515245 + 12345, (x >> 8) & 0xffff; };
    for (int i = 0; i < 5000; ++i) {
        if (live.empty() || rnd() % 3 != 0) {
            const uint64_t len = rnd() % 2000;
            if (auto o = f.alloc(len)) {
                REQUIRE(*o % 64 == 0);
                bool overlap = false; // never overlapping a live block
                for (auto& [off, l] : live)
                    overlap |= !(*o + std::max<uint64_t>(64, len) <= off || off + l <= *o);
                REQUIRE(!overlap);
                live.emplace_back(*o, std::max<uint64_t>(64, (len + 63) / 64 * 64));
            }
        } else {
            const size_t k = rnd() % live.size();
            REQUIRE(f.free(live[k].first) == live[k].second);
            live.erase(live.begin() + static_cast<long>(k));
        }
        uint64_t used = 0;
        for (auto& b : live)
            used += b.second;
        REQUIRE(f.free_bytes() == f.capacity() - used);
    }
    for (auto& b : live)
        f.free(b.first);
    CHECK(f.free_blocks() == 1); // everything coalesced back into one
    CHECK(f.largest_free() == 64 * 1000);
}

TEST_CASE("arena: normal pages when hugetlb is not allowed (the fallback)", "[arena]") {
    Arena a;
    LastError err;
    REQUIRE(a.create(10000, false, err) == 0);
    CHECK(a.page_size() == 4096);
    CHECK(!a.hugetlb());
    CHECK(a.size() == 12288); // rounded up to pages
    struct stat st;
    REQUIRE(fstat(a.fd(), &st) == 0);
    CHECK(st.st_size == 12288);
    CHECK((fcntl(a.fd(), F_GETFD) & FD_CLOEXEC) != 0);
    // The size is sealed: the daemon that maps it never sees it shrink
    // (it refuses an arena without F_SEAL_SHRINK), nor grow, and the seals
    // stay.
    CHECK(fcntl(a.fd(), F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    CHECK(ftruncate(a.fd(), 0) == -1);
    CHECK(errno == EPERM);
    CHECK(ftruncate(a.fd(), 2 * 12288) == -1);
    CHECK(errno == EPERM);
    CHECK(fcntl(a.fd(), F_ADD_SEALS, F_SEAL_WRITE) == -1); // F_SEAL_SEAL: nothing more
    memset(a.base(), 0xab, a.size()); // it is ours to write
}

TEST_CASE("arena: hugetlb when the kernel gives it, else the fallback, consistent either way", "[arena]") {
    Arena a;
    LastError err;
    REQUIRE(a.create(3u << 20, true, err) == 0);
    if (a.hugetlb()) {
        CHECK(a.page_size() == 2u << 20);
        CHECK(a.size() == 4u << 20); // two 2 MiB pages
    } else {
        CHECK(a.page_size() == 4096);
        CHECK(a.size() == 3u << 20);
    }
    struct stat st;
    REQUIRE(fstat(a.fd(), &st) == 0);
    CHECK(static_cast<uint64_t>(st.st_size) == a.size());
    CHECK(fcntl(a.fd(), F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)); // hugetlb too
    CHECK(ftruncate(a.fd(), 0) == -1);
    WARN("arena on " << (a.hugetlb() ? "hugetlb" : "normal pages") << " here");
}

TEST_CASE("arena: buffers are 64-byte aligned, inside it, and reused after free", "[arena]") {
    Arena a;
    LastError err;
    REQUIRE(a.create(1u << 20, false, err) == 0);
    void* p = a.alloc(100, err);
    void* q = a.alloc(1, err);
    REQUIRE(p != nullptr);
    REQUIRE(q != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(q) % 64 == 0);
    CHECK(static_cast<uint8_t*>(q) - static_cast<uint8_t*>(p) == 128);
    CHECK(a.contains(p, 100));
    CHECK(a.contains(a.base(), a.size()));
    CHECK(!a.contains(a.base(), a.size() + 1));
    CHECK(!a.contains(a.base() + a.size(), 1));
    CHECK(!a.contains(a.base() - 1, 1));
    CHECK(a.free(p, err) == 0);
    CHECK(a.alloc(64, err) == p);
}

TEST_CASE("arena: exhaustion is NULL with a message; a bad free is -EINVAL", "[arena]") {
    Arena a;
    LastError err;
    REQUIRE(a.create(8192, false, err) == 0);
    void* p = a.alloc(8192, err);
    REQUIRE(p != nullptr);
    CHECK(a.alloc(1, err) == nullptr);
    CHECK_THAT(err.get(), Catch::Contains("no free block of 1 bytes") && Catch::Contains("arena 8192 bytes, 0 free"));
    CHECK(a.alloc(8193, err) == nullptr);
    int x;
    CHECK(a.free(&x, err) == -EINVAL);
    CHECK_THAT(err.get(), Catch::Contains("no allocated buffer"));
    CHECK(a.free(static_cast<uint8_t*>(p) + 64, err) == -EINVAL);
    CHECK(a.free(p, err) == 0);
    CHECK(a.free(p, err) == -EINVAL);
}

TEST_CASE("arena: TAILMARK_NO_HUGETLB forces normal pages, and HELLO says so", "[arena]") {
    setenv("TAILMARK_NO_HUGETLB", "1", 1);
    tmtest::Attached a = tmtest::attach_fake(3u << 20);
    unsetenv("TAILMARK_NO_HUGETLB");
    REQUIRE(a.rc == 0);
    REQUIRE(a.hello.type() == tmtest::abi::TM_MSG_HELLO);
    const auto h = a.hello.as<tmtest::abi::tm_msg_hello>();
    CHECK(h.page_size == 4096);
    CHECK(h.arena_bytes == 3u << 20);
    REQUIRE(a.hello.fds.size() == 1);
    struct stat st;
    REQUIRE(fstat(a.hello.fds[0].get(), &st) == 0);
    CHECK(static_cast<uint64_t>(st.st_size) == h.arena_bytes);
    CHECK((fcntl(a.hello.fds[0].get(), F_GET_SEALS) & F_SEAL_SHRINK) != 0); // what the daemon checks
}

TEST_CASE("arena: tm_buf_alloc / tm_buf_free through the C API", "[arena]") {
    tmtest::Attached a = tmtest::attach_fake(1u << 20);
    REQUIRE(a.rc == 0);
    std::vector<void*> bufs;
    for (void* p; (p = tm_buf_alloc(a.ch, 64 * 1024)) != nullptr;)
        bufs.push_back(p);
    CHECK(bufs.size() == (a.ch->arena.size() >> 16)); // every byte used, nothing lost to headers
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("no free block of 65536 bytes"));
    for (void* p : bufs)
        tm_buf_free(a.ch, p);
    CHECK(a.ch->arena.blocks().free_blocks() == 1);
    tm_buf_free(a.ch, nullptr); // nothing
}
