// The engine thread's reduction rate on this CPU (docs/torch.md, "Is one engine
// thread's reduction the bottleneck?"):
//   g++ -O3 -std=c++17 -Ilib/tailmark-torch -I/usr/include/torch/csrc/api/include \
//       scripts/lib/torch_reduce_rate.cc -o /tmp/rr && /tmp/rr
#include "reduce.h"
#include <chrono>
#include <cstdio>
#include <vector>
using namespace tailmark::torch_backend;
int main() {
    const size_t N = 8 << 20; // 32 MiB of float32: one rank's share of a 64 MiB all_reduce at 2 ranks
    std::vector<float> dst(N, 1.0f);
    std::vector<unsigned char> in(N * 4 + 64 + 64, 0);
    const size_t piece = (1 << 20) - 64;  // a message's payload
    double best = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        auto t0 = std::chrono::steady_clock::now();
        for (size_t off = 0; off < N * 4; off += piece) {
            size_t len = std::min(piece, N * 4 - off) / 4 * 4;
            // the receive slot: the payload 64 bytes past a slot start, a different 1 MiB region each time
            reduce_into(DType::F32, RedOp::Sum, (unsigned char*)dst.data() + off, (unsigned char*)dst.data() + off, in.data() + 64 + (off % (N * 4 - piece)), len);
        }
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
    }
    std::printf("reduce_into float32 sum, 32 MiB in 1 MiB pieces: %.2f ms best of 7 (%.2f GB/s of input)\n", best * 1e3, N * 4 / best / 1e9);
}
