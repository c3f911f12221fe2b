// Replays inputs through a fuzz target without libFuzzer (any compiler); each
// target's replay binary (fuzz_rx_replay, fuzz_ctl_replay) is this main() with
// the target and its corpus generator (replay.h):
//
//   fuzz_X_replay DIR|FILE ...      run every file once (directories: sorted, not recursive)
//   fuzz_X_replay --write-corpus DIR   write the seed corpus, checking each seed
//   fuzz_X_replay --check-seeds DIR    check each seed's named outcome, and that DIR holds it
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

#include "replay.h"

namespace fsys = std::filesystem;

int main(int argc, char** argv) {
    const std::string tool = fsys::path(argv[0]).filename().string();
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
            fprintf(stderr, "%s: %s: no such file or directory\n", tool.c_str(), argv[i]);
            return 1;
        }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        fprintf(stderr, "%s: no inputs\n", tool.c_str());
        return 1;
    }
    for (const auto& p : files) {
        std::ifstream in(p, std::ios::binary);
        std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) {
            fprintf(stderr, "%s: cannot read %s\n", tool.c_str(), p.c_str());
            return 1;
        }
        fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), data.size());
        LLVMFuzzerTestOneInput(data.data(), data.size());
        tmfuzz::tally();
    }
    printf("%s: %zu inputs, %s, no invariant violated\n", tool.c_str(), files.size(), tmfuzz::totals().c_str());
    return 0;
}
