#include "arena.h"

#include <fcntl.h>
#include <linux/memfd.h> // MFD_HUGE_2MB: glibc's sys/mman.h has MFD_HUGETLB only
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tailmark::client {

int Arena::create(uint64_t bytes, bool allow_hugetlb, LastError& err) {
    if (bytes == 0 || bytes > (1ull << 40))
        return err.set(EINVAL, "arena: %llu bytes is out of range (1 B .. 1 TiB)",
                       static_cast<unsigned long long>(bytes));
    // Hugepages fail in three places: no hugetlbfs memfd, a refused size,
    // or (most often) no free pages to reserve, which mmap reports.
    if (allow_hugetlb && try_create(bytes, true, err) == 0)
        return 0;
    return try_create(bytes, false, err);
}

int Arena::try_create(uint64_t bytes, bool huge, LastError& err) {
    const uint64_t page = huge ? kHugePage : kPage;
    const uint64_t len = (bytes + page - 1) / page * page;
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    if (huge)
        flags |= MFD_HUGETLB | MFD_HUGE_2MB;
    Fd fd(memfd_create("tailmark-arena", flags));
    if (!fd)
        return err.set(errno, "arena: memfd_create%s: %s", huge ? " (hugetlb)" : "", strerror(errno));
    if (ftruncate(fd.get(), static_cast<off_t>(len)) != 0)
        return err.set(errno, "arena: ftruncate to %llu bytes: %s", static_cast<unsigned long long>(len),
                       strerror(errno));
    Mapping map;
    if (int rc = Mapping::map(fd.get(), len, map); rc < 0)
        return err.set(-rc, "arena: mmap of %llu bytes%s: %s", static_cast<unsigned long long>(len),
                       huge ? " (hugetlb)" : "", strerror(-rc));
    // The daemon maps it too: a size that cannot change under it means no
    // SIGBUS there, and a daemon refuses an arena without F_SEAL_SHRINK.
    // (hugetlbfs has seals since Linux 4.16; without them, normal pages.)
    if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        return err.set(errno, "arena: sealing its size (F_ADD_SEALS%s): %s", huge ? ", hugetlb" : "",
                       strerror(errno));
    fd_ = std::move(fd);
    map_ = std::move(map);
    page_size_ = static_cast<uint32_t>(page);
    blocks_.reset(len);
    return 0;
}

void* Arena::alloc(size_t len, LastError& err) {
    const auto off = blocks_.alloc(len);
    if (!off) {
        err.set(ENOMEM, "arena: no free block of %zu bytes (arena %llu bytes, %llu free, largest free block %llu)",
                len, static_cast<unsigned long long>(blocks_.capacity()),
                static_cast<unsigned long long>(blocks_.free_bytes()),
                static_cast<unsigned long long>(blocks_.largest_free()));
        return nullptr;
    }
    return map_.data() + *off;
}

int Arena::free(const void* p, LastError& err) {
    if (!contains(p, 0) || blocks_.free(offset_of(p)) == 0)
        return err.set(EINVAL, "tm_buf_free: %p is no allocated buffer of this channel's arena", p);
    return 0;
}

} // namespace tailmark::client
