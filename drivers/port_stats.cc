#include "drivers/port_stats.h"

#include <dirent.h>
#include <linux/if_packet.h>
#include <mutex>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace tailmark::drivers {

namespace {

std::mutex g_mu;
uint64_t g_drops[RTE_MAX_ETHPORTS];

bool is_af_packet(uint16_t port, unsigned* ifindex) {
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == nullptr ||
        std::strcmp(info.driver_name, "net_af_packet") != 0 || info.if_index == 0)
        return false;
    *ifindex = info.if_index;
    return true;
}

// Adds the PACKET_STATISTICS drops of every AF_PACKET socket of this process
// bound to `ifindex` (read-and-clear) to *drops.
void read_drops(unsigned ifindex, uint64_t* drops) {
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr)
        return;
    const int self = dirfd(d);
    while (const dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == self)
            continue;
        struct stat sb{};
        if (fstat(static_cast<int>(fd), &sb) != 0 || !S_ISSOCK(sb.st_mode))
            continue;
        int domain = 0;
        socklen_t len = sizeof(domain);
        if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
            continue;
        sockaddr_ll sll{};
        len = sizeof(sll);
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&sll), &len) != 0 ||
            static_cast<unsigned>(sll.sll_ifindex) != ifindex)
            continue;
        tpacket_stats ts{}; // TPACKET_V2's (the PMD's version); clears them
        len = sizeof(ts);
        if (getsockopt(static_cast<int>(fd), SOL_PACKET, PACKET_STATISTICS, &ts, &len) == 0)
            *drops += ts.tp_drops;
    }
    closedir(d);
}

// The port's kernel drops so far (0 but for net_af_packet): what its
// sockets hold now, added to what earlier reads took from them. `restart`:
// counted from zero after this read.
uint64_t kernel_drops(uint16_t port, bool restart) {
    unsigned ifindex = 0;
    if (port >= RTE_MAX_ETHPORTS || !is_af_packet(port, &ifindex))
        return 0;
    std::lock_guard<std::mutex> lk(g_mu);
    read_drops(ifindex, &g_drops[port]);
    const uint64_t n = g_drops[port];
    if (restart)
        g_drops[port] = 0;
    return n;
}

} // namespace

int port_stats(uint16_t port, rte_eth_stats* st) {
    const int rc = rte_eth_stats_get(port, st);
    if (rc == 0)
        st->imissed += kernel_drops(port, false);
    return rc;
}

int port_stats_reset(uint16_t port) {
    const int rc = rte_eth_stats_reset(port);
    if (rc == 0)
        kernel_drops(port, true); // what the sockets hold now is before the reset
    return rc;
}

} // namespace tailmark::drivers
