// Replays inputs through the fuzz target without libFuzzer (any compiler):
//
//   fuzz_rx_replay DIR|FILE ...      run every file once (directories: sorted, not recursive)
//   fuzz_rx_replay --write-corpus DIR   write the seed corpus, checking each seed
//   fuzz_rx_replay --check-seeds DIR    check each seed's named outcome, and that DIR holds it
//
// An invariant violation aborts (the test fails). Exit status 1 when no input
// was found, so a wrong path does not pass silently.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_rx.h"

namespace fsys = std::filesystem;

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE ... | --write-corpus DIR | --check-seeds DIR\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    if (strcmp(argv[1], "--write-corpus") == 0) {
        if (argc != 3) {
            fprintf(stderr, "usage: %s --write-corpus DIR\n", argv[0]);
            return 2;
        }
        return tmfuzz::write_corpus(argv[2]);
    }
    if (strcmp(argv[1], "--check-seeds") == 0) {
        if (argc != 3) {
            fprintf(stderr, "usage: %s --check-seeds DIR\n", argv[0]);
            return 2;
        }
        return tmfuzz::check_corpus(argv[2]);
    }

    std::vector<fsys::path> files;
    for (int i = 1; i < argc; i++) {
        std::error_code ec;
        fsys::path p(argv[i]);
        if (fsys::is_directory(p, ec)) {
            for (const auto& e : fsys::directory_iterator(p, ec))
                if (e.is_regular_file())
                    files.push_back(e.path());
        } else if (fsys::is_regular_file(p, ec)) {
            files.push_back(p);
        } else {
            fprintf(stderr, "fuzz_rx_replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        fprintf(stderr, "fuzz_rx_replay: no inputs\n");
        return 1;
    }
    uint64_t frames = 0, completions = 0, placed = 0;
    for (const auto& p : files) {
        std::ifstream in(p, std::ios::binary);
        std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) {
            fprintf(stderr, "fuzz_rx_replay: cannot read %s\n", p.c_str());
            return 1;
        }
        fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), data.size());
        LLVMFuzzerTestOneInput(data.data(), data.size());
        const tmfuzz::RunStats& s = tmfuzz::last_stats();
        frames += s.frames;
        placed += s.placed;
        completions += s.completions;
    }
    printf("fuzz_rx_replay: %zu inputs, %llu frames, %llu placed, %llu completions, no invariant "
           "violated\n",
           files.size(), static_cast<unsigned long long>(frames),
           static_cast<unsigned long long>(placed), static_cast<unsigned long long>(completions));
    return 0;
}
