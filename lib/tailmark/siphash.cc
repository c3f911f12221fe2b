#include "tailmark/siphash.h"

#include <cstdio>

namespace tailmark {

SipKey sip_key_from_bytes(const uint8_t bytes[kSipKeyBytes]) {
    return SipKey{sip_detail::load_le64(bytes), sip_detail::load_le64(bytes + 8)};
}

void sip_key_to_bytes(const SipKey& key, uint8_t bytes[kSipKeyBytes]) {
    for (int i = 0; i < 8; i++) {
        bytes[i] = static_cast<uint8_t>(key.k0 >> (8 * i));
        bytes[8 + i] = static_cast<uint8_t>(key.k1 >> (8 * i));
    }
}

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

} // namespace

bool parse_secret_hex(std::string_view hex, SipKey& key, std::string& err) {
    const size_t prefix =
        hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X') ? 2 : 0;
    const std::string_view digits = hex.substr(prefix);
    constexpr size_t kDigits = 2 * kSipKeyBytes;
    if (digits.size() != kDigits) {
        err = "--secret: expected 32 hex digits (128 bits), got " + std::to_string(digits.size());
        return false;
    }
    uint8_t bytes[kSipKeyBytes];
    for (size_t i = 0; i < kDigits; i += 2) {
        const int hi = hex_value(digits[i]);
        const int lo = hex_value(digits[i + 1]);
        if (hi < 0 || lo < 0) {
            const size_t at = prefix + i + (hi < 0 ? 0 : 1);
            const auto c = static_cast<unsigned char>(hex[at]);
            char shown[8];
            if (c >= 0x21 && c < 0x7f)
                snprintf(shown, sizeof shown, "'%c'", c);
            else
                snprintf(shown, sizeof shown, "0x%02x", c); // a space, a newline, a UTF-8 byte
            err = "--secret: expected 32 hex digits (128 bits), got " + std::string(shown) +
                  " at position " + std::to_string(at);
            return false;
        }
        bytes[i / 2] = static_cast<uint8_t>(hi << 4 | lo);
    }
    key = sip_key_from_bytes(bytes);
    return true;
}

std::string format_secret_hex(const SipKey& key) {
    static constexpr char kHex[] = "0123456789abcdef";
    uint8_t bytes[kSipKeyBytes];
    sip_key_to_bytes(key, bytes);
    std::string s(2 * kSipKeyBytes, '0');
    for (size_t i = 0; i < kSipKeyBytes; i++) {
        s[2 * i] = kHex[bytes[i] >> 4];
        s[2 * i + 1] = kHex[bytes[i] & 15];
    }
    return s;
}

} // namespace tailmark
