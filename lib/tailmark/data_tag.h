// Version 2's keyed tag on every data packet (wire-format.md): SipHash-2-4
// under the session's key for that direction (derived at the handshake from
// the secret and both ends' nonces; it never travels), over the header's 16
// bytes as on the wire and, on a LAST packet, its 32-byte trailer. Written
// big-endian right after the header. A packet whose tag does not verify
// places nothing, and nothing it carries is learnt from.
//
// The payload is not covered: a forger that cannot make a tag cannot place
// a byte, and the trailer's CRC32C, tagged with the header, says whether the
// placed bytes are the sender's in transit (an on-path host that rewrites
// payloads is --data-auth's business, not this tag's).
#pragma once

#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>

#include "tailmark/siphash.h"
#include "tailmark/wire.h"

namespace tailmark {

// hdr: the 16 header bytes as on the wire; trailer: the 32 trailer bytes as
// on the wire (a LAST packet), or nullptr.
inline uint64_t data_tag(const SipKey& key, const void* hdr, const void* trailer) {
    uint8_t b[kHeaderLen + kTrailerLen];
    memcpy(b, hdr, kHeaderLen);
    if (trailer == nullptr)
        return siphash24(key, {b, kHeaderLen});
    memcpy(b + kHeaderLen, trailer, kTrailerLen);
    return siphash24(key, {b, sizeof(b)});
}

inline void put_tag(void* at, uint64_t tag) {
    const rte_be64_t be = rte_cpu_to_be_64(tag);
    memcpy(at, &be, sizeof(be));
}

inline uint64_t get_tag(const void* at) {
    rte_be64_t be;
    memcpy(&be, at, sizeof(be));
    return rte_be_to_cpu_64(be);
}

} // namespace tailmark
