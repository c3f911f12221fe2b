// Version 2's keyed tag on every data packet (wire-format.md): SipHash-2-4
// under the session's key for that direction (derived at the handshake from
// the secret and both ends' nonces; it never travels), over the header's 16
// bytes as on the wire and, on a LAST packet, its 32-byte trailer. Written
// big-endian right after the header. A packet whose tag does not verify
// places nothing, and nothing it carries is learnt from.
//
// Without --data-auth the payload is not covered: a forger that cannot make
// a tag cannot place a byte, and the trailer's CRC32C, tagged with the
// header, says whether the placed bytes are the sender's in transit (CRC32C
// has no key, so an on-path host that rewrites a payload and its CRC goes
// unseen: that is --data-auth's business).
//
// With --data-auth (agreed in the handshake, control.h kDataAuth) the tag is
// SipHash-2-4 over the header, the trailer (LAST) and the 16-byte POLYVAL of
// the payload (polyval.h, under a second per-direction key): a universal
// hash under a secret key, then a PRF, so a forger must find two payloads
// whose POLYVALs collide without knowing H (probability about blocks / 2^128
// per try). Hashing first keeps the PRF's input short (64 bytes at most), and
// needs nothing unique per packet: a retransmission, whose bytes are the
// same, has the same tag.
#pragma once

#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>

#include "tailmark/mbuf_pieces.h"
#include "tailmark/packet_parser.h"
#include "tailmark/polyval.h"
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

// --data-auth: the same, with the payload's POLYVAL (polyval.h's MAC form:
// padded, with its length) after the header and trailer.
inline uint64_t data_tag(const SipKey& key, const void* hdr, const void* trailer, const uint64_t poly[2]) {
    uint8_t b[kHeaderLen + kTrailerLen + 16];
    memcpy(b, hdr, kHeaderLen);
    size_t n = kHeaderLen;
    if (trailer != nullptr) {
        memcpy(b + n, trailer, kTrailerLen);
        n += kTrailerLen;
    }
    const rte_le64_t le[2] = {rte_cpu_to_le_64(poly[0]), rte_cpu_to_le_64(poly[1])}; // RFC 8452's byte order
    memcpy(b + n, le, 16);
    return siphash24(key, {b, n + 16});
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

// Version 2: the packet's tag under `key`, over its header and (LAST) its
// trailer as they were on the wire (encode() is decode()'s exact inverse),
// and with --data-auth (`auth` not null) over the payload's POLYVAL: the
// whole packet is checked before a byte of it is placed.
inline bool data_tag_ok(const SipKey& key, const PolyvalKey* auth, const ParsedPacket& p, const rte_mbuf* m) {
    WireHeader wh;
    encode(p.hdr, &wh);
    WireTrailer wt;
    const void* trailer = nullptr;
    if (p.is_last()) {
        encode(p.trailer, &wt);
        trailer = &wt;
    }
    if (auth == nullptr)
        return mac_equal(data_tag(key, &wh, trailer), p.tag);
    Polyval h;
    h.init();
    for_each_piece(m, p.payload_off, p.hdr.pay_len,
                   [&](const uint8_t* src, uint32_t n) { h.update(*auth, src, n); });
    uint64_t poly[2];
    h.final(*auth, poly);
    return mac_equal(data_tag(key, &wh, trailer, poly), p.tag);
}

} // namespace tailmark
