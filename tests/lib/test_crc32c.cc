#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "fixtures.h"
#include "tailmark/crc32c.h"

using namespace tailmark;

TEST_CASE("crc32c matches the Castagnoli check value", "[crc32c]") {
    const char* s = "123456789";
    CHECK(crc32c({reinterpret_cast<const uint8_t*>(s), 9}) == 0xE3069283u);
    CHECK(crc32c({}) == 0u);
    // RFC 3720 B.4: 32 bytes of zeros, and of 0xFF.
    std::vector<uint8_t> z(32, 0), f(32, 0xFF);
    CHECK(crc32c(z) == 0x8A9136AAu);
    CHECK(crc32c(f) == 0x62A8AB43u);
}

TEST_CASE("crc32c running form equals one shot at every split", "[crc32c]") {
    auto data = tmtest::pattern(4099, 5);
    const uint32_t whole = crc32c(data);
    for (size_t cut = 0; cut <= data.size(); cut += 13) {
        uint32_t st = crc32c_update(kCrc32cInit, {data.data(), cut});
        st = crc32c_update(st, {data.data() + cut, data.size() - cut});
        REQUIRE(crc32c_finish(st) == whole);
    }
}

namespace {
// Bit-at-a-time reference: slow, obviously right.
uint32_t crc32c_reference(const uint8_t* p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}
} // namespace

TEST_CASE("crc32c agrees with a bitwise reference across block sizes and alignments", "[crc32c]") {
    auto data = tmtest::pattern(3 * 8192 * 2 + 3 * 256 + 100, 99);
    // Around the 3x256 and 3x8192 interleave thresholds, at odd alignments.
    const size_t lens[] = {0, 1, 7, 8, 9, 255, 767, 768, 769, 1456, 4096, 24575, 24576, 24577,
                           3 * 8192 + 3 * 256 + 13, 65536 - 24, data.size() - 7};
    for (size_t align = 0; align < 8; align += 3) {
        for (size_t len : lens) {
            if (align + len > data.size())
                continue;
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c({data.data() + align, len}) == crc32c_reference(data.data() + align, len));
        }
    }
}
