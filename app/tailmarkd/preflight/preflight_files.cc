// The files a run makes or reads: the control socket and its directory,
// the secret file, and EAL's --file-prefix lock.
#include "preflight_internal.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tailmark::app::preflight_checks {

namespace {

std::string fmt_mode(mode_t m) {
    char b[8];
    snprintf(b, sizeof(b), "%04o", static_cast<unsigned>(m & 07777));
    return b;
}

} // namespace

void check_socket(Report& r, const Options* o) {
    if (o == nullptr || o->mode != Mode::Service) {
        r.item(St::Ok, "socket", std::string("no control socket (--mode ") + (o ? to_string(o->mode) : "?") + ")");
        return;
    }
    const std::string path = o->control_socket;
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            r.item(St::Fail, "socket", path + " exists and is not a socket", "rm " + path + "   (or --control-socket another path)");
            return;
        }
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(sa.sun_path)));
        const bool live = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
        if (fd >= 0)
            close(fd);
        if (live) {
            r.item(St::Fail, "socket", path + " is in use by a running daemon",
                   "tailmark-ctl --socket " + path + " status   (what it serves)\n"
                   "systemctl stop tailmarkd@<name>, or --control-socket another path");
            return;
        }
    }
    if (stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            r.item(St::Fail, "socket", dir + " is not a directory", "--control-socket a path in a directory");
            return;
        }
        if (access(dir.c_str(), W_OK | X_OK) != 0) {
            r.item(St::Fail, "socket", dir + " is not writable by uid " + std::to_string(geteuid()) +
                                           ": the socket cannot be made there",
                   "chown " + std::to_string(geteuid()) + " " + dir + "   (systemd: RuntimeDirectory=tailmark)");
            return;
        }
        if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
            r.item(St::Warn, "socket", dir + " (mode " + fmt_mode(st.st_mode) +
                                           ") is writable by every user: any of them can replace the socket",
                   "chmod 0750 " + dir);
            return;
        }
        const group* g = getgrgid(st.st_gid);
        r.item(St::Ok, "socket", path + ": in " + dir + " (mode " + fmt_mode(st.st_mode) + ", group " +
                                     (g ? g->gr_name : std::to_string(st.st_gid)) + ")");
        return;
    }
    std::string up = dir;
    while (!up.empty() && stat(up.c_str(), &st) != 0) {
        const size_t s = up.rfind('/');
        up = s == std::string::npos || s == 0 ? (s == 0 ? "/" : ".") : up.substr(0, s);
        if (up == "/" || up == ".")
            break;
    }
    if (access(up.c_str(), W_OK | X_OK) != 0) {
        r.item(St::Fail, "socket", dir + " does not exist, and " + up + " is not writable by uid " +
                                       std::to_string(geteuid()),
               "mkdir -p " + dir + " && chmod 0750 " + dir + "   (systemd: RuntimeDirectory=tailmark)");
        return;
    }
    r.item(St::Ok, "socket", path + ": " + dir + " is made at start (mode 0750, the first --allow-group's)");
}

void check_secret(Report& r, const Options* o, const std::string& parse_error) {
    if (o == nullptr) { // the options did not parse, for the secret's sake
        std::string head = parse_error.substr(parse_error.find(": ") + 2); // "PATH is readable ..."
        const std::string path = head.substr(0, head.find(' '));
        std::string fix;
        if (parse_error.find("chmod 600") != std::string::npos)
            fix = "chmod 600 " + path + "   (and owned by the daemon's user: chown root: " + path + ")";
        else
            fix = "a file of 32 hex digits that only root reads:\n"
                  "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > FILE && chmod 600 FILE";
        r.item(St::Fail, "secret", parse_error, fix);
        return;
    }
    switch (o->secret_from) {
    case Options::SecretFrom::File: {
        struct stat st;
        if (stat(o->secret_file.c_str(), &st) == 0 && st.st_uid != geteuid()) {
            r.item(St::Warn, "secret", o->secret_file + " (mode " + fmt_mode(st.st_mode) + ") is owned by uid " +
                                           std::to_string(st.st_uid) + ", not this daemon's " + std::to_string(geteuid()),
                   "chown " + std::to_string(geteuid()) + " " + o->secret_file);
            return;
        }
        r.item(St::Ok, "secret", o->secret_file + ": mode " + fmt_mode(stat(o->secret_file.c_str(), &st) == 0 ? st.st_mode : 0) +
                                     ", its owner's alone");
        return;
    }
    case Options::SecretFrom::CommandLine:
        r.item(St::Warn, "secret", "--secret on the command line: every local user reads it in /proc/PID/cmdline "
                                   "until the daemon blanks it",
               "put it in a file only root reads (chmod 600) and pass --secret-file FILE");
        return;
    case Options::SecretFrom::Env: r.item(St::Ok, "secret", "from TAILMARK_SECRET"); return;
    case Options::SecretFrom::Config: r.item(St::Ok, "secret", "from the --config file (mode 0600)"); return;
    case Options::SecretFrom::None: break;
    }
    if (o->insecure)
        r.item(St::Warn, "secret", "--insecure: control packets carry a MAC anyone can compute",
               "a shared secret, the same file on both ends, then --secret-file /etc/tailmark/secret:\n"
               "umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > /etc/tailmark/secret");
    else
        r.item(St::Ok, "secret", std::string("none needed (--mode ") + to_string(o->mode) + ")");
}

// A primary already running with this --file-prefix holds its config's lock.
void check_prefix(Report& r, const EalView& e) {
    const std::string base = geteuid() == 0 ? "/var/run/dpdk"
                             : getenv("XDG_RUNTIME_DIR") ? std::string(getenv("XDG_RUNTIME_DIR")) + "/dpdk"
                                                         : "/tmp/dpdk";
    const std::string cfg = base + "/" + e.file_prefix + "/config";
    const int fd = open(cfg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct flock l{};
        l.l_type = F_WRLCK;
        l.l_whence = SEEK_SET;
        const bool held = fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
        close(fd);
        if (held) {
            r.item(St::Fail, "prefix", "--file-prefix " + e.file_prefix + " is in use by a running DPDK process (pid " +
                                           std::to_string(l.l_pid) + ")",
                   "--file-prefix <another>   (each tailmarkd its own)");
            return;
        }
    }
    r.item(St::Ok, "prefix", "--file-prefix " + e.file_prefix + ": free (" + base + "/" + e.file_prefix + ")");
}

} // namespace tailmark::app::preflight_checks
