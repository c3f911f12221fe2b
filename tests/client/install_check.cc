// The C++ header, installed: compiles on its own with pkg-config's flags
// (C++20) and fails the same way through tailmark::Channel.
#include <cerrno>
#include <cstdio>
#include <string>

#include <tailmark/client.hpp>

int main() {
    tailmark::Channel ch;
    tailmark::AttachOptions o;
    o.socket_path = "/nonexistent/tailmarkd.sock";
    o.arena_bytes = 1 << 20;
    const int rc = ch.attach(o);
    if (rc != -ENOENT || ch.error().find(o.socket_path) == std::string_view::npos) {
        std::fprintf(stderr, "install_check_cpp: %d, '%s'\n", rc, std::string(ch.error()).c_str());
        return 1;
    }
    std::printf("install_check_cpp: %d, %s\n", rc, std::string(ch.error()).c_str());
    return 0;
}
