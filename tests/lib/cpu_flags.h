// What the CPU offers, read from CPUID and XCR0 here rather than through
// __builtin_cpu_supports as the library does, so the library's selection of
// a kernel is checked against an independent reading.
#pragma once

#include <cpuid.h>

namespace tmtest {

struct CpuFlags {
    bool sse42 = false, pclmul = false;
    bool avx512f = false; // AVX-512F with the OS saving the zmm state
    bool avx512 = false;  // ... and BW, VL and VPCLMULQDQ (the CRC kernel's set)
};

inline CpuFlags cpu_flags() {
    CpuFlags f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    f.sse42 = c & bit_SSE4_2;
    f.pclmul = c & bit_PCLMUL;
    const bool osxsave = c & bit_OSXSAVE;
    if (!osxsave || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return f;
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    const bool zmm_state = (xcr0_lo & 0xE6) == 0xE6; // SSE, AVX, opmask, both zmm halves
    f.avx512f = zmm_state && (b & bit_AVX512F);
    f.avx512 = f.avx512f && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_VPCLMULQDQ);
    return f;
}

} // namespace tmtest
