// crc32c_update and crc32c_copy: the fastest kernel the CPU has, picked once.
// The kernels live in crc32c_chains.cc, crc32c_fold128.cc and crc32c_avx512.cc.
#include "tailmark/crc32c.h"

#include <atomic>

#include "tailmark/crc32c_kernels.h"

namespace tailmark {

namespace {

using namespace crc32c_detail;

struct Kernel {
    const char* name;
    UpdateFn update;
    CopyFn copy;
};
// Indexed by Crc32cKernel.
constexpr Kernel kKernels[] = {
    {"table", update_table, copy_table},
    {"chains", update_chains, copy_chains},
    {"fold128", update_fold128, copy_fold128},
    {"fold512", update_fold512, copy_fold512},
};
constexpr size_t index(Crc32cKernel k) { return static_cast<size_t>(k); }
static_assert(std::size(kKernels) == index(Crc32cKernel::Fold512) + 1);

// What each kernel's instructions need. __builtin_cpu_supports also checks
// that the OS saves the zmm state (XCR0), not only CPUID. __builtin_cpu_init
// because the first call may come from another file's static initializer,
// before libgcc's own constructor has filled the flags in.
bool cpu_has(Crc32cKernel k) {
    __builtin_cpu_init();
    switch (k) {
    case Crc32cKernel::Table:
        return true;
    case Crc32cKernel::Chains:
        return __builtin_cpu_supports("sse4.2");
    case Crc32cKernel::Fold128:
        return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    case Crc32cKernel::Fold512:
        return cpu_has(Crc32cKernel::Fold128) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("vpclmulqdq");
    }
    return false;
}

// Asked once: CPUID is slow, and crc32c_kernel_supported may be called often.
const std::array<bool, std::size(kKernels)>& supported() {
    static const auto s = [] {
        std::array<bool, std::size(kKernels)> r{};
        for (size_t i = 0; i < r.size(); i++)
            r[i] = cpu_has(static_cast<Crc32cKernel>(i));
        return r;
    }();
    return s;
}

Crc32cKernel best() {
    for (auto k : {Crc32cKernel::Fold512, Crc32cKernel::Fold128, Crc32cKernel::Chains})
        if (supported()[index(k)])
            return k;
    return Crc32cKernel::Table;
}

// The dispatch: two pointers that start at resolvers and are replaced by the
// chosen kernel on the first call, so no call after it asks the CPU again,
// and a call from a static initializer in another file still works (the
// pointers are constant-initialized). Relaxed: every thread that races the
// first call resolves to the same kernel.
uint32_t resolve_update(uint32_t state, std::span<const uint8_t> bytes);
uint32_t resolve_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);
constinit std::atomic<UpdateFn> g_update{resolve_update};
constinit std::atomic<CopyFn> g_copy{resolve_copy};

const Kernel& install() {
    const Kernel& k = kKernels[index(crc32c_kernel())];
    g_update.store(k.update, std::memory_order_relaxed);
    g_copy.store(k.copy, std::memory_order_relaxed);
    return k;
}
uint32_t resolve_update(uint32_t state, std::span<const uint8_t> bytes) { return install().update(state, bytes); }
uint32_t resolve_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    return install().copy(state, dst, src);
}

} // namespace

uint32_t crc32c_update(uint32_t state, std::span<const uint8_t> bytes) {
    return g_update.load(std::memory_order_relaxed)(state, bytes);
}

uint32_t crc32c_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    return g_copy.load(std::memory_order_relaxed)(state, dst, src);
}

Crc32cKernel crc32c_kernel() {
    static const Crc32cKernel k = best();
    return k;
}

const char* crc32c_kernel_name(Crc32cKernel k) {
    return index(k) < std::size(kKernels) ? kKernels[index(k)].name : "unknown";
}

bool crc32c_kernel_supported(Crc32cKernel k) { return index(k) < std::size(kKernels) && supported()[index(k)]; }

namespace {

// What each Crc32cKernel runs (itself, or the picked one where the CPU lacks
// it), filled at the first _with call. The bench times these calls beside
// the dispatched ones, so the hot path is a load and a jump like theirs; the
// first call goes through a separate function so that its set-up does not
// weigh on the others.
constinit std::atomic<const Kernel*> g_with[std::size(kKernels)] = {};

const Kernel& resolve_with(Crc32cKernel k) {
    for (size_t i = 0; i < std::size(kKernels); i++)
        g_with[i].store(&kKernels[supported()[i] ? i : index(crc32c_kernel())], std::memory_order_relaxed);
    return index(k) < std::size(kKernels) ? *g_with[index(k)].load(std::memory_order_relaxed)
                                          : kKernels[index(crc32c_kernel())];
}
[[gnu::noinline]] uint32_t first_update_with(Crc32cKernel k, uint32_t state, std::span<const uint8_t> bytes) {
    return resolve_with(k).update(state, bytes);
}
[[gnu::noinline]] uint32_t first_copy_with(Crc32cKernel k, uint32_t state, uint8_t* dst,
                                           std::span<const uint8_t> src) {
    return resolve_with(k).copy(state, dst, src);
}
inline const Kernel* with(Crc32cKernel k) {
    return index(k) < std::size(kKernels) ? g_with[index(k)].load(std::memory_order_relaxed) : nullptr;
}

} // namespace

uint32_t crc32c_update_with(Crc32cKernel k, uint32_t state, std::span<const uint8_t> bytes) {
    if (const Kernel* e = with(k)) [[likely]]
        return e->update(state, bytes);
    return first_update_with(k, state, bytes);
}

uint32_t crc32c_copy_with(Crc32cKernel k, uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    if (const Kernel* e = with(k)) [[likely]]
        return e->copy(state, dst, src);
    return first_copy_with(k, state, dst, src);
}

} // namespace tailmark
