// Streaming (non-temporal) copies into a receive region.
//
// The consumer of a large message reads its region on another core, so the
// rx core's next store to those lines first takes them back from that
// core's cache. Across a far cache (another CCD: ~600 ns a round trip) that
// read for ownership bounds the rx path: 64 KiB messages ran 6.9 GB/s on an
// AMD EPYC whose copy alone does 40 B/cycle. Streaming stores write whole
// lines to memory without reading them first. Where the consumer reads on
// the same core, or not at all, the lines were better left in the caches:
// the receiver streams only the flows it is told to (RxPlacer::set_stream_min).
#pragma once

#include <cstddef>
#include <cstdint>

#include <xmmintrin.h>

namespace tailmark {

// [src, src + n) to dst, which must not overlap: the whole 64-byte lines of
// dst by streaming stores, the partial lines at either end by ordinary ones
// (a partial line written around the caches costs a read-modify-write in
// memory). Picks AVX-512 or SSE2 by the CPU, once.
void stream_copy(uint8_t* dst, const uint8_t* src, size_t n);

// Streaming stores are weakly ordered: this puts every one before the
// stores that follow it (a completion's flag, release store or not).
inline void stream_fence() { _mm_sfence(); }

enum class StreamCopyKernel : uint8_t { Sse2, Avx512 };
StreamCopyKernel stream_copy_kernel(); // the one stream_copy uses
const char* stream_copy_kernel_name(StreamCopyKernel k);
bool stream_copy_kernel_supported(StreamCopyKernel k);
// A given kernel, for tests and the bench (it must be supported).
void stream_copy_with(StreamCopyKernel k, uint8_t* dst, const uint8_t* src, size_t n);

} // namespace tailmark
