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
