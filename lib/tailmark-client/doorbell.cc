#include "doorbell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tailmark::client {

int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int Doorbell::map_control(Fd control, uint64_t control_bytes, Fd wake, LastError& err) {
    if (control_bytes < sizeof(channel::tm_doorbell) || control_bytes > (1u << 20))
        return err.set(EPROTO, "WELCOME: a control block of %llu bytes (the doorbell takes %zu)",
                       static_cast<unsigned long long>(control_bytes), sizeof(channel::tm_doorbell));
    const int64_t have = fd_size(control.get());
    if (have < 0 || static_cast<uint64_t>(have) < control_bytes)
        return err.set(EPROTO, "WELCOME: the control memfd holds %lld bytes, not the %llu announced",
                       static_cast<long long>(have), static_cast<unsigned long long>(control_bytes));
    struct stat st;
    if (!wake || fstat(wake.get(), &st) != 0 || !S_ISFIFO(st.st_mode))
        return err.set(EPROTO, "WELCOME: its second fd is not the daemon's wake pipe");
    // Ours to drain without blocking, whatever flags it came with (its
    // flags are this end's alone: the daemon's write end is its own).
    const int fl = fcntl(wake.get(), F_GETFL);
    if (fl < 0 || fcntl(wake.get(), F_SETFL, fl | O_NONBLOCK) != 0)
        return err.set(errno, "WELCOME: the wake pipe: %s", strerror(errno));
    Mapping m;
    if (int rc = Mapping::map(control.get(), control_bytes, m); rc < 0)
        return err.set(-rc, "WELCOME: mmap of the control block: %s", strerror(-rc));
    control_ = std::move(m);
    control_fd_ = std::move(control);
    wake_ = std::move(wake);
    db_ = reinterpret_cast<channel::tm_doorbell*>(control_.data());
    return 0;
}

void Doorbell::arm(uint64_t want) {
    if (db_ == nullptr)
        return;
    // `want` before `sleeping`: the daemon reads it after it sees us asleep.
    std::atomic_ref<uint64_t>(db_->want).store(want, std::memory_order_relaxed);
    // seq_cst: ordered before our re-check of the rings, as the daemon's swap is after its writes
    std::atomic_ref<uint32_t>(db_->sleeping).store(1, std::memory_order_seq_cst);
}

void Doorbell::disarm() {
    if (db_ != nullptr)
        std::atomic_ref<uint32_t>(db_->sleeping).store(0, std::memory_order_seq_cst);
}

int Doorbell::sleep(int sock, int timeout_ms, LastError& err) {
    pollfd p[2] = {{sock, POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const int n = ::poll(p, wake_ ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR)
        return err.set(errno, "tm_wait: poll: %s", strerror(errno));
    if (wake_) { // drain: the next sleep must not wake on this ring
        uint8_t buf[64];
        while (::read(wake_.get(), buf, sizeof(buf)) > 0) {
        }
    }
    return n > 0 ? p[0].revents : 0;
}

} // namespace tailmark::client
