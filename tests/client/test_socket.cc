// tm_attach's failures, through the public path-based API: no socket, no
// listener, a peer that does not speak the protocol. A tiny server thread
// plays the daemon where one is needed.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <functional>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "tailmark/client.h"

using tmtest::DaemonEnd;
using tmtest::Fd;
namespace abi = tailmark::channel;

namespace {

Fd bound_socket(const std::string& path, bool listening) {
    Fd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path.c_str());
    REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    if (listening)
        REQUIRE(listen(fd.get(), 4) == 0);
    return fd;
}

// Accepts one connection and hands it to `serve` on its own thread.
struct Server {
    tmtest::TempDir tmp;
    std::string path = tmp.path("d.sock");
    Fd lfd = bound_socket(path, true);
    std::thread t;
    explicit Server(std::function<void(DaemonEnd&)> serve) {
        t = std::thread([this, serve] {
            pollfd p{lfd.get(), POLLIN, 0};
            if (poll(&p, 1, 10000) != 1)
                return;
            DaemonEnd d;
            d.fd.reset(accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
            serve(d);
        });
    }
    ~Server() { t.join(); }
};

int attach(const std::string& path, tm_channel** ch) {
    tm_attach_opts o{};
    o.socket_path = path.c_str();
    o.arena_bytes = 1u << 20;
    return tm_attach(&o, ch);
}

} // namespace

TEST_CASE("attach: no such socket is -ENOENT, the message names the path", "[socket]") {
    tmtest::TempDir tmp;
    const std::string path = tmp.path("nobody.sock");
    tm_channel* ch = nullptr;
    CHECK(attach(path, &ch) == -ENOENT);
    REQUIRE(ch != nullptr); // a failed channel, for its message
    CHECK_THAT(tm_last_error(ch), Catch::Contains(path) && Catch::Contains("No such file"));
    // Every later call says it is not attached, with the reason.
    tm_session s = 0;
    CHECK(tm_connect(ch, "10.0.0.1", 7000, nullptr, &s) == -ENOTCONN);
    CHECK_THAT(tm_last_error(ch), Catch::StartsWith("not attached: connect to " + path));
    CHECK(tm_wait(ch, 0) == -ENOTCONN);
    CHECK(tm_buf_alloc(ch, 64) == nullptr);
    tm_detach(ch);
}

TEST_CASE("attach: a socket nobody listens on is -ECONNREFUSED", "[socket]") {
    tmtest::TempDir tmp;
    const std::string path = tmp.path("dead.sock");
    Fd fd = bound_socket(path, false); // bound, never listening: a daemon that died
    tm_channel* ch = nullptr;
    CHECK(attach(path, &ch) == -ECONNREFUSED);
    CHECK_THAT(tm_last_error(ch), Catch::Contains(path) && Catch::Contains("refused"));
    tm_detach(ch);
}

TEST_CASE("attach: TAILMARK_SOCKET when no path is given", "[socket]") {
    tmtest::TempDir tmp;
    const std::string path = tmp.path("from-env.sock");
    setenv("TAILMARK_SOCKET", path.c_str(), 1);
    tm_channel* ch = nullptr;
    CHECK(tm_attach(nullptr, &ch) == -ENOENT);
    unsetenv("TAILMARK_SOCKET");
    CHECK_THAT(tm_last_error(ch), Catch::Contains(path));
    tm_detach(ch);
    ch = nullptr;
    CHECK(tm_attach(nullptr, &ch) < 0); // unset: the default path (no daemon there in a test)
    CHECK_THAT(tm_last_error(ch), Catch::Contains(TM_DEFAULT_SOCKET));
    tm_detach(ch);
}

TEST_CASE("attach: a path too long for a Unix socket", "[socket]") {
    tm_channel* ch = nullptr;
    CHECK(attach("/tmp/" + std::string(200, 'x'), &ch) == -ENAMETOOLONG);
    CHECK_THAT(tm_last_error(ch), Catch::Contains("longer than"));
    tm_detach(ch);
    CHECK(tm_attach(nullptr, nullptr) == -EINVAL);
    CHECK_THAT(tm_last_error(nullptr), Catch::Contains("no channel"));
}

TEST_CASE("attach: a peer that answers garbage is -EPROTO", "[socket]") {
    abi::tm_msg_hello hello{};
    size_t hello_fds = 0;
    const char* garbage = GENERATE("hello?", "a longer line of text that is no header at all");
    {
        Server srv([&](DaemonEnd& d) {
            tmtest::Msg m = d.recv();
            hello = m.as<abi::tm_msg_hello>();
            hello_fds = m.fds.size();
            d.send_raw(garbage, strlen(garbage));
            d.recv(); // until the library hangs up
        });
        tm_channel* ch = nullptr;
        CHECK(attach(srv.path, &ch) == -EPROTO);
        CHECK_THAT(tm_last_error(ch), Catch::Contains("the daemon sent"));
        tm_detach(ch);
    }
    // What the library sent first, as channel_abi.h says.
    CHECK(hello.h.type == abi::TM_MSG_HELLO);
    CHECK(hello.h.len == sizeof(abi::tm_msg_hello));
    CHECK(hello.h.req_id == 1);
    CHECK(hello.abi == abi::kChannelAbi);
    CHECK(hello.pid == static_cast<uint32_t>(getpid()));
    CHECK(hello_fds == 1); // the arena memfd alone: the wake fd is the daemon's (WELCOME)
    CHECK(hello.arena_bytes >= 1u << 20);
    CHECK((hello.page_size == 4096 || hello.page_size == 2u << 20));
}

TEST_CASE("attach: a well-framed reply that is not WELCOME is -EPROTO", "[socket]") {
    const int variant = GENERATE(0, 1, 2, 3, 4, 5);
    Server srv([&](DaemonEnd& d) {
        tmtest::Msg m = d.recv();
        const uint64_t req = m.header().req_id;
        if (variant == 0) {
            d.ok(req); // the wrong type
        } else if (variant == 1) {
            abi::tm_msg_welcome w{}; // WELCOME without its control memfd
            w.control_bytes = 4096;
            d.send(w, abi::TM_MSG_WELCOME, req);
        } else if (variant == 2) {
            abi::tm_msg_header h{abi::TM_MSG_WELCOME, 999, req}; // len lies
            d.send_raw(&h, sizeof(h));
        } else if (variant == 3) {
            auto ctl = tmtest::Memfd::make(64); // smaller than the doorbell
            abi::tm_msg_welcome w{};
            w.control_bytes = 64;
            d.welcome(req, w, ctl, nullptr);
        } else if (variant == 4) {
            auto ctl = tmtest::Memfd::make(4096); // the control block, no wake fd (ABI 1's WELCOME)
            abi::tm_msg_welcome w{};
            w.control_bytes = 4096;
            d.send(w, abi::TM_MSG_WELCOME, req, ctl.fd.get());
        } else {
            auto ctl = tmtest::Memfd::make(4096); // a wake fd that is no pipe
            abi::tm_msg_welcome w{};
            w.control_bytes = 4096;
            d.send(w, abi::TM_MSG_WELCOME, req, ctl.fd.get(), ctl.fd.get());
        }
        d.recv();
    });
    tm_channel* ch = nullptr;
    CHECK(attach(srv.path, &ch) == -EPROTO);
    INFO(tm_last_error(ch));
    CHECK(std::string(tm_last_error(ch)).size() > 10);
    if (variant == 4)
        CHECK_THAT(tm_last_error(ch), Catch::Contains("1 fds") && Catch::Contains("wake fd"));
    if (variant == 5)
        CHECK_THAT(tm_last_error(ch), Catch::Contains("not the daemon's wake pipe"));
    tm_detach(ch);
}

TEST_CASE("attach: the daemon's ERROR is its errno and its text", "[socket]") {
    Server srv([](DaemonEnd& d) {
        tmtest::Msg m = d.recv();
        d.error(m.header().req_id, EPROTONOSUPPORT, "channel ABI 1 is not 2\nsecond line");
        d.recv();
    });
    tm_channel* ch = nullptr;
    CHECK(attach(srv.path, &ch) == -EPROTONOSUPPORT);
    CHECK(std::string(tm_last_error(ch)) == "HELLO: channel ABI 1 is not 2 second line"); // one line
    tm_detach(ch);
}

TEST_CASE("attach: a peer that hangs up is -ECONNRESET", "[socket]") {
    Server srv([](DaemonEnd& d) { d.recv(); /* and close */ });
    tm_channel* ch = nullptr;
    CHECK(attach(srv.path, &ch) == -ECONNRESET);
    CHECK_THAT(tm_last_error(ch), Catch::Contains("closed the connection") && Catch::Contains(srv.path));
    tm_detach(ch);
}

TEST_CASE("attach: WELCOME, then BYE on detach", "[socket]") {
    uint32_t bye = 0, mtu = 0, flows = 0;
    {
        Server srv([&](DaemonEnd& d) {
            tmtest::Msg m = d.recv();
            auto ctl = tmtest::Memfd::make(4096);
            abi::tm_msg_welcome w{};
            w.app_id = 3;
            w.max_flows = 16;
            w.mtu = 9000;
            w.control_bytes = 4096;
            d.welcome(m.header().req_id, w, ctl, nullptr);
            bye = d.recv().type();
        });
        tm_channel* ch = nullptr;
        REQUIRE(attach(srv.path, &ch) == 0);
        CHECK(std::string(tm_last_error(ch)).empty());
        mtu = tm_mtu(ch);
        flows = tm_max_flows(ch);
        tm_detach(ch);
    }
    CHECK(mtu == 9000);
    CHECK(flows == 16);
    CHECK(bye == abi::TM_MSG_BYE);
}
