// The UDP checksum of an IPv4 packet in a chained mbuf, to fill (tx) and to
// verify (rx). DPDK 22.11's rte_raw_cksum_mbuf, behind
// rte_ipv4_udptcp_cksum_mbuf and its _verify, byte-swaps the sum of a
// segment that starts at an odd offset after cutting it to 16 bits, which
// drops its carries. So a chain with an odd-length segment before the last
// (a zero-copy payload of odd length, then the trailer's mbuf) had a wrong
// checksum on nearly every packet: tailmark.torch's send of 1455 uint8
// bytes was dropped as udp_bad_checksum at every copy until the retry limit.
// Here each piece's sum is folded before the swap.
#pragma once

#include <cstdint>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "tailmark/mbuf_pieces.h"

namespace tailmark {

// The ones' complement sum of bytes [off, off + len) of m, folded to 16 bits
// (as rte_raw_cksum of the bytes laid end to end).
inline uint16_t raw_cksum_chain(const rte_mbuf* m, uint32_t off, uint32_t len) {
    uint32_t sum = 0, done = 0;
    for_each_piece(m, off, len, [&](const uint8_t* p, uint32_t n) {
        uint16_t s = __rte_raw_cksum_reduce(__rte_raw_cksum(p, n, 0));
        if (done & 1) // its bytes sit one place over in the 16-bit words
            s = rte_bswap16(s);
        sum += s;
        done += n;
    });
    return __rte_raw_cksum_reduce(sum);
}

// The pseudo-header's sum plus the UDP header's and payload's (the field as
// it is), for the UDP header at l4_off, folded to 16 bits.
inline uint16_t udp4_sum(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
    const uint32_t l4_len = rte_be_to_cpu_16(ip->total_length) - rte_ipv4_hdr_len(ip);
    const uint32_t c = uint32_t(raw_cksum_chain(m, l4_off, l4_len)) + rte_ipv4_phdr_cksum(ip, 0);
    return static_cast<uint16_t>((c & 0xffff) + (c >> 16)); // two 16-bit terms: one fold
}

// The field's value to send, summed with the field 0 (0 goes as 0xffff).
inline uint16_t udp4_cksum(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
    const uint16_t c = static_cast<uint16_t>(~udp4_sum(m, ip, l4_off));
    return c == 0 ? 0xffff : c;
}

// The field as received checks out: the sum with it is all ones.
inline bool udp4_cksum_ok(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
    return udp4_sum(m, ip, l4_off) == 0xffff;
}

} // namespace tailmark
