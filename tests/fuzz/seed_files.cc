#include "seed_files.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tmfuzz {

namespace {

std::vector<uint8_t> read_file(const std::string& path, bool& found) {
    std::ifstream in(path, std::ios::binary);
    found = static_cast<bool>(in);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

} // namespace

int write_seed_files(const char* tool, const char* dir, const std::vector<SeedFile>& seeds) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        fprintf(stderr, "%s: %s: %s\n", tool, dir, ec.message().c_str());
        return 2;
    }
    int bad = 0;
    size_t total = 0;
    for (const SeedFile& sd : seeds) {
        const std::string path = std::string(dir) + "/" + sd.file;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(sd.bytes.data()), static_cast<std::streamsize>(sd.bytes.size()));
        if (!out) {
            fprintf(stderr, "%s: cannot write %s\n", tool, path.c_str());
            return 2;
        }
        total += sd.bytes.size();
        bad += !sd.behaves();
    }
    printf("wrote %zu seeds (%zu bytes) to %s; %d did not behave as named\n", seeds.size(), total, dir, bad);
    return bad == 0 ? 0 : 1;
}

int check_seed_files(const char* tool, const char* dir, const std::vector<SeedFile>& seeds) {
    int bad = 0;
    std::vector<std::string> names;
    for (const SeedFile& sd : seeds) {
        names.push_back(sd.file);
        bool found = false;
        const std::string path = std::string(dir) + "/" + sd.file;
        const std::vector<uint8_t> on_disk = read_file(path, found);
        if (!found) {
            fprintf(stderr, "seed %s: %s is missing (regenerate: %s --write-corpus %s)\n", sd.file.c_str(),
                    path.c_str(), tool, dir);
            bad++;
        } else if (on_disk != sd.bytes) {
            fprintf(stderr, "seed %s: %s differs from what the generator writes (regenerate: %s --write-corpus %s)\n",
                    sd.file.c_str(), path.c_str(), tool, dir);
            bad++;
        }
        bad += !sd.behaves();
    }
    // A seed_* file the generator no longer writes names an outcome nobody checks.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("seed_", 0) == 0 && std::find(names.begin(), names.end(), n) == names.end()) {
            fprintf(stderr, "%s/%s: no seed of that name in the generator: remove it or generate it\n", dir,
                    n.c_str());
            bad++;
        }
    }
    if (ec) {
        fprintf(stderr, "%s: %s\n", dir, ec.message().c_str());
        return 2;
    }
    printf("fuzz seeds: %zu checked against %s, %d did not behave as named or differ from the corpus\n",
           seeds.size(), dir, bad);
    return bad == 0 ? 0 : 1;
}

} // namespace tmfuzz
