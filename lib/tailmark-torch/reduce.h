// The element-wise reductions a collective applies to an incoming piece,
// straight from where its bytes are (the completed receive region, or the
// sender's segment for a rank of the same host) into the destination
// tensor, or into the send slot that forwards the result: no copy between.
#pragma once

#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tailmark::torch_backend {

enum class DType : uint8_t { F32, F64, BF16, I32, I64, U8 };
enum class RedOp : uint8_t { Sum, Avg, Min, Max };

inline size_t dtype_size(DType t) {
    switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
    }
    return 1;
}

namespace detail {
// dst[i] = a[i] (op) in[i] (InLeft: in[i] (op) a[i]); dst may equal a.
// `in` need not be aligned (it follows a 64-byte header in the receive
// slot), so it is read by memcpy, which the compiler turns into plain loads.
template <bool InLeft, typename T>
void reduce_typed(RedOp op, T* dst, const T* a, const unsigned char* in, size_t n) {
    constexpr size_t kBlock = 256;
    T tmp[kBlock];
    for (size_t i = 0; i < n; i += kBlock) {
        const size_t m = std::min(kBlock, n - i);
        std::memcpy(tmp, in + i * sizeof(T), m * sizeof(T));
        switch (op) {
        case RedOp::Min:
            for (size_t j = 0; j < m; j++)
                dst[i + j] = InLeft ? std::min(tmp[j], a[i + j]) : std::min(a[i + j], tmp[j]);
            break;
        case RedOp::Max:
            for (size_t j = 0; j < m; j++)
                dst[i + j] = InLeft ? std::max(tmp[j], a[i + j]) : std::max(a[i + j], tmp[j]);
            break;
        default:
            for (size_t j = 0; j < m; j++)
                dst[i + j] = static_cast<T>(InLeft ? tmp[j] + a[i + j] : a[i + j] + tmp[j]);
            break;
        }
    }
}

template <typename T>
void divide_typed(T* dst, size_t n, int by) {
    for (size_t i = 0; i < n; i++) dst[i] = static_cast<T>(dst[i] / static_cast<T>(by));
}
} // namespace detail

namespace detail {
template <bool InLeft>
void reduce_dispatch(DType t, RedOp op, void* dst, const void* a, const void* in, size_t bytes) {
    const auto* src = static_cast<const unsigned char*>(in);
    switch (t) {
    case DType::F32:
        reduce_typed<InLeft>(op, static_cast<float*>(dst), static_cast<const float*>(a), src, bytes / 4);
        break;
    case DType::F64:
        reduce_typed<InLeft>(op, static_cast<double*>(dst), static_cast<const double*>(a), src, bytes / 8);
        break;
    case DType::BF16:
        reduce_typed<InLeft>(op, static_cast<c10::BFloat16*>(dst), static_cast<const c10::BFloat16*>(a), src,
                             bytes / 2);
        break;
    case DType::I32:
        reduce_typed<InLeft>(op, static_cast<int32_t*>(dst), static_cast<const int32_t*>(a), src, bytes / 4);
        break;
    case DType::I64:
        reduce_typed<InLeft>(op, static_cast<int64_t*>(dst), static_cast<const int64_t*>(a), src, bytes / 8);
        break;
    case DType::U8: // torch's ByteTensor: the *_object collectives' bytes; sums wrap, as gloo's
        reduce_typed<InLeft>(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a), src, bytes);
        break;
    }
}
} // namespace detail

// dst = a (op) in (in_left: in (op) a), over `bytes` bytes of elements of
// type t.
inline void reduce_into(DType t, RedOp op, void* dst, const void* a, const void* in, size_t bytes,
                        bool in_left = false) {
    if (in_left)
        detail::reduce_dispatch<true>(t, op, dst, a, in, bytes);
    else
        detail::reduce_dispatch<false>(t, op, dst, a, in, bytes);
}

// A received piece taken straight into the send slot that forwards it
// (out = a (op) in; in alone where a is null), and into dst too where the
// plan keeps it. Block by block, so dst is written from the block just
// made, still in cache, instead of reading the piece a second time.
inline void take_forward(DType t, RedOp op, void* out, void* dst, const void* a, const void* in, size_t bytes,
                         bool in_left, bool keep) {
    constexpr size_t kBlock = 32u << 10; // a multiple of every element's size
    auto* o = static_cast<unsigned char*>(out);
    auto* d = static_cast<unsigned char*>(dst);
    const auto* x = static_cast<const unsigned char*>(a);
    const auto* y = static_cast<const unsigned char*>(in);
    for (size_t off = 0; off < bytes; off += kBlock) {
        const size_t m = std::min(kBlock, bytes - off);
        if (x != nullptr)
            reduce_into(t, op, o + off, x + off, y + off, m, in_left);
        else
            std::memcpy(o + off, y + off, m);
        if (keep)
            std::memcpy(d + off, o + off, m);
    }
}

// The average's one division (integers truncate, as torch's `//` would not:
// callers that want exact averages pass sums divisible by the world size).
inline void divide(DType t, void* dst, size_t bytes, int by) {
    switch (t) {
    case DType::F32: detail::divide_typed(static_cast<float*>(dst), bytes / 4, by); break;
    case DType::F64: detail::divide_typed(static_cast<double*>(dst), bytes / 8, by); break;
    case DType::BF16: detail::divide_typed(static_cast<c10::BFloat16*>(dst), bytes / 2, by); break;
    case DType::I32: detail::divide_typed(static_cast<int32_t*>(dst), bytes / 4, by); break;
    case DType::I64: detail::divide_typed(static_cast<int64_t*>(dst), bytes / 8, by); break;
    case DType::U8: detail::divide_typed(static_cast<uint8_t*>(dst), bytes, by); break;
    }
}

} // namespace tailmark::torch_backend
