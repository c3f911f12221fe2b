// Walks bytes [off, off + len) of a (possibly chained) mbuf one contiguous
// piece at a time: the rx placer's copies and CRCs, and the version 2 tag's
// POLYVAL at both ends (tx_marker.cc, rx_placer.cc).
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

namespace tailmark {

template <class Piece>
inline void for_each_piece(const rte_mbuf* m, uint32_t off, uint32_t len, Piece piece) {
    while (off >= m->data_len) {
        off -= m->data_len;
        m = m->next;
    }
    while (len > 0) {
        uint32_t n = m->data_len - off;
        if (n > len)
            n = len;
        piece(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), n);
        len -= n;
        off = 0;
        m = m->next;
    }
}

} // namespace tailmark
