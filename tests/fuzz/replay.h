// What each fuzz target's replay binary (replay_main.cc, any compiler)
// needs of the target besides libFuzzer's entry points: its seed corpus
// (the target's corpus generator) and a tally of what the inputs did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tmfuzz {

// Writes the seed corpus into `dir` and checks that every seed does what its
// name says. Returns 0 when all do.
int write_corpus(const char* dir);
// Runs every seed the generator makes, checking that it does what its name
// says, and that `dir` holds exactly those bytes (and no seed_* file besides).
// Returns 0 when all do.
int check_corpus(const char* dir);
// After each replayed input: adds what it did to the totals.
void tally();
// The totals, for the replay's closing line ("12 frames, 3 placed, ...").
std::string totals();

} // namespace tmfuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
