#include "service/status.h"

#include <cmath>
#include <cstdio>

namespace tailmark::app {

namespace {

class Json {
public:
    std::string out;
    void str(const std::string& s) {
        out.push_back('"');
        for (const unsigned char c : s) {
            if (c == '"' || c == '\\') {
                out.push_back('\\');
                out.push_back(static_cast<char>(c));
            } else if (c < 0x20 || c >= 0x7f) { // names are the apps': ASCII only, the rest escaped
                char b[8];
                snprintf(b, sizeof(b), "\\u%04x", c);
                out.append(b);
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
        out.push_back('"');
    }
    void key(const char* k) {
        comma();
        str(k);
        out.push_back(':');
        fresh_ = true;
    }
    void open(char c) {
        comma();
        out.push_back(c);
        fresh_ = true;
    }
    void close(char c) {
        out.push_back(c);
        fresh_ = false;
    }
    void u(uint64_t v) {
        comma();
        out.append(std::to_string(v));
    }
    void d(double v) {
        comma();
        if (!std::isfinite(v))
            v = 0;
        char b[32];
        snprintf(b, sizeof(b), "%.3f", v);
        out.append(b);
    }
    void b(bool v) {
        comma();
        out.append(v ? "true" : "false");
    }
    void s(const std::string& v) {
        comma();
        str(v);
    }
    template <class F>
    void obj(const char* k, F f) {
        key(k);
        open('{');
        f();
        close('}');
    }

private:
    void comma() {
        if (!fresh_ && !out.empty() && out.back() != '{' && out.back() != '[' && out.back() != ':')
            out.push_back(',');
        fresh_ = false;
    }
    bool fresh_ = true;
};

} // namespace

std::string status_json(const StatusSnapshot& s) {
    Json j;
    j.open('{');
    j.key("schema"), j.u(kStatusSchema);
    j.obj("daemon", [&] {
        j.key("pid"), j.u(s.pid);
        j.key("version"), j.s(s.version);
        j.key("abi"), j.u(s.abi);
        j.key("abi_minor"), j.u(s.abi_minor);
        j.key("mode"), j.s(s.mode);
        j.key("uptime_s"), j.d(s.uptime_s);
        j.key("control_socket"), j.s(s.control_socket);
        j.key("local_ip"), j.s(s.local_ip);
        j.key("udp_port"), j.u(s.udp_port);
        j.key("mtu"), j.u(s.mtu);
        j.key("zero_copy"), j.b(s.zero_copy);
    });
    j.key("ports");
    j.open('[');
    for (const StatusPort& p : s.ports) {
        j.open('{');
        j.key("port"), j.u(p.id);
        j.key("name"), j.s(p.name);
        j.key("driver"), j.s(p.driver);
        j.key("role"), j.s(p.role);
        j.key("link_up"), j.b(p.link_up);
        j.key("speed_mbps"), j.u(p.speed_mbps);
        j.key("rx_packets"), j.u(p.rx_packets);
        j.key("tx_packets"), j.u(p.tx_packets);
        j.key("rx_bytes"), j.u(p.rx_bytes);
        j.key("tx_bytes"), j.u(p.tx_bytes);
        j.key("rx_missed"), j.u(p.rx_missed);
        j.key("rx_errors"), j.u(p.rx_errors);
        j.key("tx_errors"), j.u(p.tx_errors);
        j.key("rx_nombuf"), j.u(p.rx_nombuf);
        j.close('}');
    }
    j.close(']');
    j.key("apps");
    j.open('[');
    for (const StatusApp& a : s.apps) {
        j.open('{');
        j.key("id"), j.u(a.id);
        j.key("name"), j.s(a.name);
        j.key("pid"), j.u(a.pid);
        j.key("uid"), j.u(a.uid);
        j.key("gid"), j.u(a.gid);
        j.key("sessions"), j.u(a.sessions);
        j.key("listening");
        j.open('[');
        for (uint16_t p : a.listening)
            j.u(p);
        j.close(']');
        j.key("zero_copy"), j.b(a.zero_copy);
        j.key("arena_bytes"), j.u(a.arena_bytes);
        j.key("wakes"), j.u(a.wakes);
        j.close('}');
    }
    j.close(']');
    j.key("sessions");
    j.open('[');
    for (const StatusSession& x : s.sessions) {
        j.open('{');
        j.key("id"), j.u(x.id);
        j.key("app"), j.u(x.app);
        j.key("role"), j.s(x.role);
        j.key("peer"), j.s(x.peer);
        j.key("service"), j.u(x.service);
        j.key("state"), j.s(x.state);
        j.key("end"), j.s(x.end);
        j.key("flows"), j.u(x.flows);
        j.key("ring_size"), j.u(x.ring_size);
        j.key("max_msg"), j.u(x.max_msg);
        j.key("up_s"), j.d(x.up_s);
        j.key("rate_mbps"), j.d(x.rate_mbps);
        j.key("msgs_per_s"), j.d(x.msgs_per_s);
        j.key("srtt_us"), j.d(x.srtt_us);
        j.key("base_rtt_us"), j.d(x.base_rtt_us);
        j.key("retransmitted"), j.u(x.retransmitted);
        j.key("sent"), j.u(x.sent);
        j.key("acked"), j.u(x.acked);
        j.key("released"), j.u(x.released);
        j.key("delivered"), j.u(x.delivered);
        j.key("failed"), j.u(x.failed);
        j.close('}');
    }
    j.close(']');
    j.obj("drops", [&] {
        j.key("total"), j.u(s.drops_total);
        j.key("tx_dropped"), j.u(s.tx_dropped);
        j.obj("by_reason", [&] {
            for (const auto& [k, v] : s.drops)
                j.key(k.c_str()), j.u(v);
        });
    });
    j.obj("service", [&] {
        for (const auto& [k, v] : s.service)
            j.key(k.c_str()), j.u(v);
    });
    j.close('}');
    j.out.push_back('\n');
    return j.out;
}

} // namespace tailmark::app
