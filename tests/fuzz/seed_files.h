// A target's seed corpus on disk, for its replay binary (replay.h): every
// generator (corpus_gen.cc, ctl_corpus_gen.cc) lists its seeds with a check
// of each one's named outcome, and these write or check the files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tmfuzz {

struct SeedFile {
    std::string file; // seed_<name>, or repro_<name> (a lib/ bug the fuzzer found)
    std::vector<uint8_t> bytes;
    // Runs the seed: false, having said why on stderr, when it does not do
    // what its name says.
    std::function<bool()> behaves;
};

// Writes every seed into `dir` and runs it. 0 when all behave.
int write_seed_files(const char* tool, const char* dir, const std::vector<SeedFile>& seeds);
// Runs every seed, and checks that `dir` holds exactly its bytes under its
// name and no seed_* file the generator does not write. 0 when all hold.
int check_seed_files(const char* tool, const char* dir, const std::vector<SeedFile>& seeds);

} // namespace tmfuzz
