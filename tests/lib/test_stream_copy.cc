#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_flags.h"
#include "fixtures.h"
#include "guarded.h"
#include "tailmark/stream_copy.h"

using namespace tailmark;

namespace {
std::vector<StreamCopyKernel> supported_kernels() {
    std::vector<StreamCopyKernel> v;
    for (StreamCopyKernel k : {StreamCopyKernel::Sse2, StreamCopyKernel::Avx512})
        if (stream_copy_kernel_supported(k))
            v.push_back(k);
    return v;
}
} // namespace

TEST_CASE("stream_copy picks AVX-512 where the CPU has it, SSE2 otherwise", "[stream]") {
    const bool avx512 = tmtest::cpu_flags().avx512f;
    INFO("avx512f (CPUID, XCR0) " << avx512 << ", picked " << stream_copy_kernel_name(stream_copy_kernel()));
    CHECK(stream_copy_kernel_supported(StreamCopyKernel::Sse2));
    CHECK(stream_copy_kernel_supported(StreamCopyKernel::Avx512) == avx512);
    CHECK(stream_copy_kernel() == (avx512 ? StreamCopyKernel::Avx512 : StreamCopyKernel::Sse2));
    CHECK(std::string(stream_copy_kernel_name(StreamCopyKernel::Sse2)) != stream_copy_kernel_name(StreamCopyKernel::Avx512));
}

// Every length through two lines at every destination alignment of a line
// (head, body and tail each empty or not), and a packet's and a message's
// sizes, from sources at several alignments: the bytes exact, and nothing
// written around them (a guard pattern before and after).
TEST_CASE("every stream_copy kernel copies exactly and writes nothing around", "[stream]") {
    const auto src = tmtest::pattern(70000 + 64, 7);
    std::vector<uint8_t> dst(70000 + 3 * 64);
    uint8_t* const line = dst.data() + ((64 - (reinterpret_cast<uintptr_t>(dst.data()) & 63)) & 63);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 200; n++)
        lens.push_back(n);
    for (size_t n : {1455ul, 1456ul, 1457ul, 4096ul, 65536ul, 65536ul + 13})
        lens.push_back(n);
    for (StreamCopyKernel k : supported_kernels()) {
        for (size_t n : lens) {
            for (size_t dof = 0; dof < 64; dof += (n <= 200 ? 1 : 7)) {
                for (size_t so : {0ul, 5ul, 16ul}) {
                    INFO(stream_copy_kernel_name(k) << " len " << n << " dst offset " << dof << " src offset " << so);
                    std::fill(dst.begin(), dst.end(), 0xEE);
                    uint8_t* d = line + dof;
                    stream_copy_with(k, d, src.data() + so, n);
                    stream_fence();
                    REQUIRE(memcmp(d, src.data() + so, n) == 0);
                    REQUIRE(std::all_of(dst.data(), d, [](uint8_t b) { return b == 0xEE; }));
                    REQUIRE(std::all_of(d + n, dst.data() + dst.size(), [](uint8_t b) { return b == 0xEE; }));
                }
            }
        }
    }
    // The dispatched entry point, the same.
    std::fill(dst.begin(), dst.end(), 0xEE);
    stream_copy(line + 16, src.data() + 3, 1456);
    stream_fence();
    CHECK(memcmp(line + 16, src.data() + 3, 1456) == 0);
    CHECK(line[15] == 0xEE);
    CHECK(line[16 + 1456] == 0xEE);
}

// Destinations that start right after, or end right before, a page nobody
// may touch, and the same for the source: a kernel that rounded a store or a
// load out to a whole line would fault.
TEST_CASE("every stream_copy kernel touches only the bytes it is given", "[stream]") {
    tmtest::Guarded in(8192), out(8192);
    const auto data = tmtest::pattern(8192, 11);
    memcpy(in.begin(), data.data(), data.size());
    for (StreamCopyKernel k : supported_kernels()) {
        for (size_t n = 0; n <= 300; n++) {
            INFO(stream_copy_kernel_name(k) << " len " << n);
            stream_copy_with(k, out.begin() + 1, in.end() - n, n); // dst one byte past a line
            stream_fence();
            REQUIRE(memcmp(out.begin() + 1, in.end() - n, n) == 0);
            stream_copy_with(k, out.end() - n, in.begin(), n);
            stream_fence();
            REQUIRE(memcmp(out.end() - n, in.begin(), n) == 0);
        }
    }
}
