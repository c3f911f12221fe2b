// An owned shared mapping of a memfd: unmapped when it goes.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace tailmark::client {

class Mapping {
public:
    Mapping() = default;
    Mapping(Mapping&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
    Mapping& operator=(Mapping&& o) noexcept {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            len_ = std::exchange(o.len_, 0);
        }
        return *this;
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() { reset(); }

    // Maps len bytes of fd shared, read-write. 0 or a negative errno.
    static int map(int fd, size_t len, Mapping& out) {
        void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            return -errno;
        out.reset();
        out.addr_ = static_cast<uint8_t*>(p);
        out.len_ = len;
        return 0;
    }

    uint8_t* data() const { return addr_; }
    size_t size() const { return len_; }
    explicit operator bool() const { return addr_ != nullptr; }
    void reset() {
        if (addr_ != nullptr)
            ::munmap(addr_, len_);
        addr_ = nullptr;
        len_ = 0;
    }

private:
    uint8_t* addr_ = nullptr;
    size_t len_ = 0;
};

// The size of the file behind fd, or a negative errno. A peer's memfd must
// be at least as large as it says before we map it: touching a mapping past
// the end of its file is SIGBUS.
inline int64_t fd_size(int fd) {
    struct stat st;
    if (::fstat(fd, &st) != 0)
        return -errno;
    return st.st_size;
}

} // namespace tailmark::client
