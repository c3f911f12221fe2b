-- Wireshark/tshark dissector for tailmark wire format versions 1 and 2
-- (shared/spec/wire-format.md; docs/protocol.md; lib/tailmark/wire.h,
-- control.h).
--
--   tshark -X lua_script:scripts/tailmark.lua -r capture.pcapng -Y tailmark \
--          -T fields -e tailmark.msg_id -e tailmark.flag ...
--   wireshark -X lua_script:scripts/tailmark.lua capture.pcapng
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- Registered on UDP port 47474 (change it under Preferences > Protocols >
-- TAILMARK, or with -o tailmark.udp_port:N). Every multi-byte field is
-- big-endian. Field names (stable; tests read them with -T fields):
--
--   header (16 B, every packet): tailmark.version, tailmark.flags (bits
--     tailmark.flags.last 0x01, .ack 0x02, .nack 0x04, .retx 0x08,
--     .session 0x10), tailmark.flow, tailmark.msg_id, tailmark.pkt_idx,
--     tailmark.pay_len, tailmark.offset; a version 2 data packet then
--     tailmark.tag (u64, hex: keyed by the session's data key, which the
--     dissector does not have, so shown without checking)
--   data: tailmark.payload
--   trailer (32 B, LAST packets: the final 32 bytes of the UDP payload, found
--     from the UDP length): tailmark.trailer, tailmark.flag (u64),
--     tailmark.slot, tailmark.key, tailmark.msg_len, tailmark.pkt_count,
--     tailmark.reserved, tailmark.crc32c, tailmark.magic (0x544D4B31 "TMK1")
--   ACK (0x02) / NACK (0x04) body: tailmark.released_upto,
--     tailmark.acked_upto, tailmark.sender_epoch, tailmark.receiver_epoch,
--     tailmark.nranges, tailmark.echo (a data packet's send stamp, its IPv4
--     ID), tailmark.hold_ns (0xFFFFFFFF: no echo), tailmark.seq (u64: the
--     flow's control packets numbered, each taken once), then nranges x
--     tailmark.nack.range {tailmark.nack.first, tailmark.nack.count}
--   SESSION (0x10) body: tailmark.session.type (CONNECT 1, ACCEPT 2,
--     REFUSE 3, KEEPALIVE 4, RESET 5, CLOSE 6, RETRY 7), tailmark.session.flags (bits
--     tailmark.session.flags.ask 0x01, .answer 0x02), tailmark.session.service,
--     tailmark.session.src_session, tailmark.session.dst_session (the
--     header's flow), tailmark.session.reserved, tailmark.session.src_epoch,
--     tailmark.session.dst_epoch, tailmark.session.nonce (u64, hex),
--     tailmark.session.seq (u64);
--     CONNECT, ACCEPT: tailmark.session.cookie (u64, hex: the RETRY token a
--     CONNECT echoes), tailmark.session.nflows, tailmark.session.flow_base,
--     tailmark.session.mtu, tailmark.session.ring_size,
--     tailmark.session.max_msg, tailmark.session.key,
--     tailmark.session.key_flags (bit tailmark.session.key_flags.given 0x01),
--     tailmark.session.noverrides, tailmark.session.data_version,
--     tailmark.session.data_flags (bit tailmark.session.data_flags.auth
--     0x0001: --data-auth, the tag covers the payload too),
--     tailmark.session.data_reserved, tailmark.session.key_nonce (u64, hex),
--     then noverrides x tailmark.session.override
--     {tailmark.session.override.index, tailmark.session.override.reserved,
--     tailmark.session.override.key};
--     REFUSE, RESET: tailmark.session.reason (RefuseReason: none 0,
--     no_listener 1, flows 2, msg_size 3, ring_size 4, mtu 5, key 6,
--     no_room 7, unknown_session 8, closed 9, busy 10, version 11),
--     tailmark.session.index, tailmark.session.reason_reserved,
--     tailmark.session.expected (u64), tailmark.session.got (u64);
--     RETRY: tailmark.session.cookie
--   every control packet (ACK, NACK, SESSION) ends in tailmark.mac: the
--     SipHash-2-4 MAC (u64, hex) over the header and the body before it. The
--     dissector has no secret, so it shows the MAC without checking it.
--
-- Numeric fields print as numbers with -T fields (-e tailmark.session.type
-- gives 1); the names are in the tree and the Info column, e.g.
-- "CONNECT sess 1 -> svc 47474 4 flows ring 64 max 4096",
-- "REFUSE msg_size expected 4096 got 8192", "KEEPALIVE ask nonce 0x...",
-- "ACK flow 3 released 77 acked 80".
-- Malformed packets get expert info instead of an error.

local p = Proto("tailmark", "tailmark completion-signalled transport")

local flag_names = { [0x01] = "LAST", [0x02] = "ACK", [0x04] = "NACK", [0x08] = "RETX", [0x10] = "SESSION" }
local session_types = { [1] = "CONNECT", [2] = "ACCEPT", [3] = "REFUSE", [4] = "KEEPALIVE", [5] = "RESET",
                        [6] = "CLOSE", [7] = "RETRY" }
local reasons = { [0] = "none", [1] = "no_listener", [2] = "flows", [3] = "msg_size", [4] = "ring_size",
                  [5] = "mtu", [6] = "key", [7] = "no_room", [8] = "unknown_session", [9] = "closed",
                  [10] = "busy", [11] = "version" }
local T_CONNECT, T_ACCEPT, T_REFUSE, T_KEEPALIVE, T_RESET, T_RETRY = 1, 2, 3, 4, 5, 7
local R_KEY = 6

local f = p.fields
f.version   = ProtoField.uint8("tailmark.version", "Version", base.DEC)
f.flags     = ProtoField.uint8("tailmark.flags", "Flags", base.HEX)
f.f_last    = ProtoField.bool("tailmark.flags.last", "LAST", 8, nil, 0x01)
f.f_ack     = ProtoField.bool("tailmark.flags.ack", "ACK", 8, nil, 0x02)
f.f_nack    = ProtoField.bool("tailmark.flags.nack", "NACK", 8, nil, 0x04)
f.f_retx    = ProtoField.bool("tailmark.flags.retx", "RETX", 8, nil, 0x08)
f.f_session = ProtoField.bool("tailmark.flags.session", "SESSION", 8, nil, 0x10)
f.flow      = ProtoField.uint16("tailmark.flow", "Flow", base.DEC)
f.msg_id    = ProtoField.uint32("tailmark.msg_id", "Message id", base.DEC)
f.pkt_idx   = ProtoField.uint16("tailmark.pkt_idx", "Packet index", base.DEC)
f.pay_len   = ProtoField.uint16("tailmark.pay_len", "Payload length", base.DEC)
f.offset    = ProtoField.uint32("tailmark.offset", "Offset", base.DEC)
f.tag       = ProtoField.uint64("tailmark.tag", "Tag (version 2)", base.HEX)
f.payload   = ProtoField.bytes("tailmark.payload", "Payload")
f.trailer   = ProtoField.none("tailmark.trailer", "Trailer")
f.flag      = ProtoField.uint64("tailmark.flag", "Completion flag", base.DEC)
f.slot      = ProtoField.uint32("tailmark.slot", "Slot", base.DEC)
f.key       = ProtoField.uint32("tailmark.key", "Key", base.HEX)
f.msg_len   = ProtoField.uint32("tailmark.msg_len", "Message length", base.DEC)
f.pkt_count = ProtoField.uint16("tailmark.pkt_count", "Packet count", base.DEC)
f.reserved  = ProtoField.uint16("tailmark.reserved", "Reserved", base.HEX)
f.crc32c    = ProtoField.uint32("tailmark.crc32c", "CRC32C", base.HEX)
f.magic     = ProtoField.uint32("tailmark.magic", "Magic", base.HEX)
-- ACK / NACK
f.released  = ProtoField.uint32("tailmark.released_upto", "Released up to", base.DEC)
f.acked     = ProtoField.uint32("tailmark.acked_upto", "Acknowledged up to", base.DEC)
f.s_epoch   = ProtoField.uint32("tailmark.sender_epoch", "Sender epoch", base.HEX)
f.r_epoch   = ProtoField.uint32("tailmark.receiver_epoch", "Receiver epoch", base.HEX)
f.nranges   = ProtoField.uint16("tailmark.nranges", "Missing ranges", base.DEC)
f.echo      = ProtoField.uint16("tailmark.echo", "Echoed send stamp", base.DEC)
f.hold      = ProtoField.uint32("tailmark.hold_ns", "Echo held (ns)", base.DEC)
f.seq       = ProtoField.uint64("tailmark.seq", "Number (each taken once: the replay window's)", base.DEC)
f.range     = ProtoField.none("tailmark.nack.range", "Missing range")
f.r_first   = ProtoField.uint16("tailmark.nack.first", "First missing packet", base.DEC)
f.r_count   = ProtoField.uint16("tailmark.nack.count", "Missing packets (0: to the end)", base.DEC)
-- SESSION
f.s_type    = ProtoField.uint8("tailmark.session.type", "Session type", base.DEC, session_types)
f.s_flags   = ProtoField.uint8("tailmark.session.flags", "Session flags", base.HEX)
f.s_ask     = ProtoField.bool("tailmark.session.flags.ask", "Answer me (KEEPALIVE)", 8, nil, 0x01)
f.s_answer  = ProtoField.bool("tailmark.session.flags.answer", "An answer (KEEPALIVE)", 8, nil, 0x02)
f.s_service = ProtoField.uint16("tailmark.session.service", "Service", base.DEC)
f.s_src     = ProtoField.uint16("tailmark.session.src_session", "Source session", base.DEC)
f.s_dst     = ProtoField.uint16("tailmark.session.dst_session", "Destination session", base.DEC)
f.s_rsv     = ProtoField.uint16("tailmark.session.reserved", "Reserved", base.HEX)
f.s_sepoch  = ProtoField.uint32("tailmark.session.src_epoch", "Source epoch", base.HEX)
f.s_depoch  = ProtoField.uint32("tailmark.session.dst_epoch", "Destination epoch", base.HEX)
f.s_nonce   = ProtoField.uint64("tailmark.session.nonce", "Nonce", base.HEX)
f.s_seq     = ProtoField.uint64("tailmark.session.seq", "Number (each taken once: the replay window's)", base.DEC)
f.s_cookie  = ProtoField.uint64("tailmark.session.cookie", "RETRY token (CONNECT: echoed)", base.HEX)
f.s_nflows  = ProtoField.uint16("tailmark.session.nflows", "Flows", base.DEC)
f.s_fbase   = ProtoField.uint16("tailmark.session.flow_base", "First flow id", base.DEC)
f.s_mtu     = ProtoField.uint32("tailmark.session.mtu", "MTU", base.DEC)
f.s_ring    = ProtoField.uint32("tailmark.session.ring_size", "Ring size (slots per flow)", base.DEC)
f.s_maxmsg  = ProtoField.uint32("tailmark.session.max_msg", "Largest message", base.DEC)
f.s_key     = ProtoField.uint32("tailmark.session.key", "Completion key", base.HEX)
f.s_kflags  = ProtoField.uint16("tailmark.session.key_flags", "Key flags", base.HEX)
f.s_kgiven  = ProtoField.bool("tailmark.session.key_flags.given", "Keys given", 16, nil, 0x0001)
f.s_nover   = ProtoField.uint16("tailmark.session.noverrides", "Key overrides", base.DEC)
f.s_dver    = ProtoField.uint16("tailmark.session.data_version", "Data version (CONNECT: the highest offered; ACCEPT: taken)", base.DEC)
f.s_dflags  = ProtoField.uint16("tailmark.session.data_flags", "Data flags", base.HEX)
f.s_dauth   = ProtoField.bool("tailmark.session.data_flags.auth", "Data authentication (the tag covers the payload)", 16, nil, 0x0001)
f.s_drsv    = ProtoField.uint32("tailmark.session.data_reserved", "Reserved", base.HEX)
f.s_knonce  = ProtoField.uint64("tailmark.session.key_nonce", "Data key nonce (ACCEPT)", base.HEX)
f.s_over    = ProtoField.none("tailmark.session.override", "Key override")
f.s_oindex  = ProtoField.uint16("tailmark.session.override.index", "Flow index", base.DEC)
f.s_orsv    = ProtoField.uint16("tailmark.session.override.reserved", "Reserved", base.HEX)
f.s_okey    = ProtoField.uint32("tailmark.session.override.key", "Key", base.HEX)
f.s_reason  = ProtoField.uint16("tailmark.session.reason", "Reason", base.DEC, reasons)
f.s_index   = ProtoField.uint16("tailmark.session.index", "Flow index (key mismatch)", base.DEC)
f.s_rrsv    = ProtoField.uint32("tailmark.session.reason_reserved", "Reserved", base.HEX)
f.s_expect  = ProtoField.uint64("tailmark.session.expected", "Expected (the refuser's value)", base.DEC)
f.s_got     = ProtoField.uint64("tailmark.session.got", "Got (the value offered)", base.DEC)
-- every control packet
f.mac       = ProtoField.uint64("tailmark.mac", "MAC", base.HEX)

local e_short = ProtoExpert.new("tailmark.short", "Shorter than a tailmark header", expert.group.MALFORMED, expert.severity.ERROR)
local e_len   = ProtoExpert.new("tailmark.pay_len_mismatch", "pay_len does not match the UDP length", expert.group.MALFORMED, expert.severity.WARN)
local e_magic = ProtoExpert.new("tailmark.bad_magic", "Trailer magic is not TMK1", expert.group.MALFORMED, expert.severity.WARN)
local e_flag  = ProtoExpert.new("tailmark.bad_flag", "Trailer flag is not msg_id + 1", expert.group.PROTOCOL, expert.severity.WARN)
local e_ctl   = ProtoExpert.new("tailmark.control_malformed", "Control packet body does not match its fields", expert.group.MALFORMED, expert.severity.WARN)
local e_cflag = ProtoExpert.new("tailmark.control_flags", "Control flags are not exactly one of ACK, NACK, SESSION (without LAST, RETX)", expert.group.MALFORMED, expert.severity.WARN)
local e_stype = ProtoExpert.new("tailmark.session.bad_type", "Unknown session packet type", expert.group.MALFORMED, expert.severity.WARN)
p.experts = { e_short, e_len, e_magic, e_flag, e_ctl, e_cflag, e_stype }

p.prefs.udp_port = Pref.uint("UDP port", 47474, "UDP destination port of tailmark packets")

local HDR, TRL, MAC, TAG = 16, 32, 8, 8
-- Fixed parts: an ACK's before its ranges; a session packet's common part;
-- CONNECT's and ACCEPT's parameters (before the overrides); REFUSE's and
-- RESET's reason; RETRY's token.
local ACK_FIXED, SESSION_FIXED, PARAMS, REASON, COOKIE = 32, 32, 48, 24, 8

local function flag_string(v)
    local s = {}
    for _, bit in ipairs({ 0x01, 0x02, 0x04, 0x08, 0x10 }) do
        if bit32.band(v, bit) ~= 0 then s[#s + 1] = flag_names[bit] end
    end
    local unknown = bit32.band(v, 0xE0)
    if unknown ~= 0 then s[#s + 1] = string.format("0x%02x", unknown) end
    return #s > 0 and table.concat(s, "|") or "DATA"
end

local function hex64(v)
    return "0x" .. v:tohex()
end

-- The MAC: the last 8 bytes of a control packet's body.
local function add_mac(t, tvb, len)
    local item = t:add(f.mac, tvb(len - MAC, MAC))
    item:append_text(" (not checked: needs the session secret)")
end

-- ACK / NACK body at HDR, `body` bytes (MAC included). Returns the Info text.
local function dissect_ack(tvb, t, len, body, flow, msg_id, nack)
    local name = nack and "NACK" or "ACK"
    if body < ACK_FIXED + MAC then
        t:add_proto_expert_info(e_ctl)
        if body >= 4 then t:add(f.released, tvb(HDR, 4)) end
        return string.format("%s flow %u msg %u (short: %u bytes)", name, flow, msg_id, body)
    end
    local b = HDR
    t:add(f.released, tvb(b, 4))
    t:add(f.acked, tvb(b + 4, 4))
    t:add(f.s_epoch, tvb(b + 8, 4))
    t:add(f.r_epoch, tvb(b + 12, 4))
    t:add(f.nranges, tvb(b + 16, 2))
    t:add(f.echo, tvb(b + 18, 2))
    t:add(f.hold, tvb(b + 20, 4))
    t:add(f.seq, tvb(b + 24, 8))
    local nr = tvb(b + 16, 2):uint()
    local ranges = {}
    for i = 0, nr - 1 do
        local o = b + ACK_FIXED + 4 * i
        if o + 4 > len - MAC then break end
        local rt = t:add(f.range, tvb(o, 4))
        rt:add(f.r_first, tvb(o, 2))
        rt:add(f.r_count, tvb(o + 2, 2))
        rt:append_text(string.format(": {%u, %u}", tvb(o, 2):uint(), tvb(o + 2, 2):uint()))
        ranges[#ranges + 1] = string.format("{%u,%u}", tvb(o, 2):uint(), tvb(o + 2, 2):uint())
    end
    if body ~= ACK_FIXED + 4 * nr + MAC or (nack and nr == 0) or (not nack and nr ~= 0) then
        t:add_proto_expert_info(e_ctl)
    end
    add_mac(t, tvb, len)
    local released, acked = tvb(b, 4):uint(), tvb(b + 4, 4):uint()
    if nack then
        return string.format("NACK flow %u msg %u released %u acked %u ranges %s", flow, msg_id, released, acked,
                             table.concat(ranges, " "))
    end
    return string.format("ACK flow %u released %u acked %u", flow, released, acked)
end

-- SESSION body at HDR, `body` bytes (MAC included). Returns the Info text.
local function dissect_session(tvb, t, len, body, dst)
    if body < SESSION_FIXED + MAC then
        t:add_proto_expert_info(e_ctl)
        return string.format("SESSION (short: %u bytes)", body)
    end
    local b = HDR
    local typ = tvb(b, 1):uint()
    local name = session_types[typ]
    local ti = t:add(f.s_type, tvb(b, 1))
    if name == nil then
        ti:add_proto_expert_info(e_stype)
        name = string.format("SESSION type %u", typ)
    end
    local sflags = tvb(b + 1, 1):uint()
    local ft = t:add(f.s_flags, tvb(b + 1, 1))
    ft:add(f.s_ask, tvb(b + 1, 1))
    ft:add(f.s_answer, tvb(b + 1, 1))
    t:add(f.s_service, tvb(b + 2, 2))
    t:add(f.s_src, tvb(b + 4, 2))
    t:add(f.s_dst, tvb(2, 2)):append_text(" (the header's flow)")
    t:add(f.s_rsv, tvb(b + 6, 2))
    t:add(f.s_sepoch, tvb(b + 8, 4))
    t:add(f.s_depoch, tvb(b + 12, 4))
    t:add(f.s_nonce, tvb(b + 16, 8))
    t:add(f.s_seq, tvb(b + 24, 8))
    local service, src = tvb(b + 2, 2):uint(), tvb(b + 4, 2):uint()
    local nonce = hex64(tvb(b + 16, 8):uint64())
    local want = SESSION_FIXED + MAC
    local info
    if typ == T_CONNECT or typ == T_ACCEPT then
        local c = b + SESSION_FIXED
        if body < SESSION_FIXED + PARAMS + MAC then
            t:add_proto_expert_info(e_ctl)
            add_mac(t, tvb, len)
            return string.format("%s sess %u (short: %u bytes)", name, src, body)
        end
        t:add(f.s_cookie, tvb(c, 8))
        local o = c + 8
        t:add(f.s_nflows, tvb(o, 2))
        t:add(f.s_fbase, tvb(o + 2, 2))
        t:add(f.s_mtu, tvb(o + 4, 4))
        t:add(f.s_ring, tvb(o + 8, 4))
        t:add(f.s_maxmsg, tvb(o + 12, 4))
        t:add(f.s_key, tvb(o + 16, 4))
        local kt = t:add(f.s_kflags, tvb(o + 20, 2))
        kt:add(f.s_kgiven, tvb(o + 20, 2))
        t:add(f.s_nover, tvb(o + 22, 2))
        t:add(f.s_dver, tvb(o + 24, 2))
        local dt = t:add(f.s_dflags, tvb(o + 26, 2))
        dt:add(f.s_dauth, tvb(o + 26, 2))
        t:add(f.s_drsv, tvb(o + 28, 4))
        t:add(f.s_knonce, tvb(o + 32, 8))
        local nover = tvb(o + 22, 2):uint()
        want = SESSION_FIXED + PARAMS + 8 * nover + MAC
        for i = 0, nover - 1 do
            local r = c + PARAMS + 8 * i
            if r + 8 > len - MAC then break end
            local ot = t:add(f.s_over, tvb(r, 8))
            ot:add(f.s_oindex, tvb(r, 2))
            ot:add(f.s_orsv, tvb(r + 2, 2))
            ot:add(f.s_okey, tvb(r + 4, 4))
            ot:append_text(string.format(": flow %u key 0x%08x", tvb(r, 2):uint(), tvb(r + 4, 4):uint()))
        end
        local nflows, fbase = tvb(o, 2):uint(), tvb(o + 2, 2):uint()
        local mtu, ring, maxmsg = tvb(o + 4, 4):uint(), tvb(o + 8, 4):uint(), tvb(o + 12, 4):uint()
        local dver = tvb(o + 24, 2):uint()
        local dauth = bit32.band(tvb(o + 26, 2):uint(), 0x0001) ~= 0 and " auth" or ""
        if typ == T_CONNECT then
            info = string.format("CONNECT sess %u -> svc %u %u flows ring %u max %u data v%u%s", src, service, nflows,
                                 ring, maxmsg, dver, dauth)
        else
            info = string.format("ACCEPT sess %u -> sess %u %u flows @ %u mtu %u ring %u max %u data v%u%s", src, dst,
                                 nflows, fbase, mtu, ring, maxmsg, dver, dauth)
        end
    elseif typ == T_REFUSE or typ == T_RESET then
        local o = b + SESSION_FIXED
        want = SESSION_FIXED + REASON + MAC
        if body < want then
            t:add_proto_expert_info(e_ctl)
            add_mac(t, tvb, len)
            return string.format("%s sess %u -> sess %u (short: %u bytes)", name, src, dst, body)
        end
        t:add(f.s_reason, tvb(o, 2))
        t:add(f.s_index, tvb(o + 2, 2))
        t:add(f.s_rrsv, tvb(o + 4, 4))
        t:add(f.s_expect, tvb(o + 8, 8))
        t:add(f.s_got, tvb(o + 16, 8))
        local reason = tvb(o, 2):uint()
        local rname = reasons[reason] or string.format("reason %u", reason)
        local expected, got = tvb(o + 8, 8):uint64(), tvb(o + 16, 8):uint64()
        info = name .. " " .. rname
        if reason == R_KEY then
            info = info .. string.format(" index %u", tvb(o + 2, 2):uint())
        end
        if typ == T_REFUSE or expected ~= UInt64(0) or got ~= UInt64(0) then
            info = info .. " expected " .. tostring(expected) .. " got " .. tostring(got)
        end
    elseif typ == T_KEEPALIVE then
        local kind = ({ [0] = "confirm", [1] = "ask", [2] = "answer" })[sflags] or string.format("flags 0x%02x", sflags)
        info = string.format("KEEPALIVE %s nonce %s", kind, nonce)
    elseif typ == T_RETRY then
        want = SESSION_FIXED + COOKIE + MAC
        if body < want then
            t:add_proto_expert_info(e_ctl)
            add_mac(t, tvb, len)
            return string.format("RETRY -> sess %u (short: %u bytes)", dst, body)
        end
        t:add(f.s_cookie, tvb(b + SESSION_FIXED, 8))
        info = string.format("RETRY -> sess %u nonce %s token %s", dst, nonce, hex64(tvb(b + SESSION_FIXED, 8):uint64()))
    else
        info = string.format("%s sess %u -> sess %u", name, src, dst)
    end
    if body ~= want then
        t:add_proto_expert_info(e_ctl)
    end
    add_mac(t, tvb, len)
    return info
end

function p.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    pinfo.cols.protocol = "TAILMARK"
    local t = tree:add(p, tvb(), "tailmark")
    if len < HDR then
        t:add_proto_expert_info(e_short)
        return
    end
    local flags = tvb(1, 1):uint()
    local flow, msg_id = tvb(2, 2):uint(), tvb(4, 4):uint()
    local pkt_idx, pay_len, offset = tvb(8, 2):uint(), tvb(10, 2):uint(), tvb(12, 4):uint()
    t:add(f.version, tvb(0, 1))
    local ft = t:add(f.flags, tvb(1, 1))
    ft:append_text(" (" .. flag_string(flags) .. ")")
    ft:add(f.f_last, tvb(1, 1))
    ft:add(f.f_ack, tvb(1, 1))
    ft:add(f.f_nack, tvb(1, 1))
    ft:add(f.f_retx, tvb(1, 1))
    ft:add(f.f_session, tvb(1, 1))
    t:add(f.flow, tvb(2, 2))
    t:add(f.msg_id, tvb(4, 4))
    t:add(f.pkt_idx, tvb(8, 2))
    t:add(f.pay_len, tvb(10, 2))
    t:add(f.offset, tvb(12, 4))

    local last = bit32.band(flags, 0x01) ~= 0
    local ack = bit32.band(flags, 0x02) ~= 0
    local nack = bit32.band(flags, 0x04) ~= 0
    local session = bit32.band(flags, 0x10) ~= 0
    if ack or nack or session then
        -- A control packet: no trailer, pay_len = the body, MAC included.
        local body = len - HDR
        if body ~= pay_len then
            t:add_proto_expert_info(e_len)
        end
        local n = (ack and 1 or 0) + (nack and 1 or 0) + (session and 1 or 0)
        if n ~= 1 or bit32.band(flags, 0x09) ~= 0 then
            ft:add_proto_expert_info(e_cflag)
        end
        if session then
            pinfo.cols.info = dissect_session(tvb, t, len, body, flow)
        else
            pinfo.cols.info = dissect_ack(tvb, t, len, body, flow, msg_id, nack)
        end
        return
    end

    -- Version 2 data: the tag follows the 16 bytes of version 1.
    local hdr = HDR
    if tvb(0, 1):uint() == 2 then
        if len < HDR + TAG then
            t:add_proto_expert_info(e_short)
            return
        end
        t:add(f.tag, tvb(HDR, TAG)):append_text(" (not checked: needs the session's data key)")
        hdr = HDR + TAG
    end
    local body = len - hdr - (last and TRL or 0)
    if body ~= pay_len then
        t:add_proto_expert_info(e_len)
    end
    if body > 0 then
        t:add(f.payload, tvb(hdr, body))
    end
    local info = string.format("flow %u msg %u pkt %u %s len %u off %u", flow, msg_id, pkt_idx,
                               flag_string(flags), pay_len, offset)
    if last and len >= hdr + TRL then
        local o = len - TRL
        local tt = t:add(f.trailer, tvb(o, TRL))
        tt:add(f.flag, tvb(o, 8))
        tt:add(f.slot, tvb(o + 8, 4))
        tt:add(f.key, tvb(o + 12, 4))
        tt:add(f.msg_len, tvb(o + 16, 4))
        tt:add(f.pkt_count, tvb(o + 20, 2))
        tt:add(f.reserved, tvb(o + 22, 2))
        tt:add(f.crc32c, tvb(o + 24, 4))
        local mt = tt:add(f.magic, tvb(o + 28, 4))
        if tvb(o + 28, 4):uint() ~= 0x544D4B31 then
            mt:add_proto_expert_info(e_magic)
        end
        if tvb(o, 8):uint64() ~= UInt64(msg_id) + 1 then
            tt:add_proto_expert_info(e_flag)
        end
        info = info .. string.format(" | flag %s slot %u msg_len %u pkts %u crc32c 0x%08x",
                                     tostring(tvb(o, 8):uint64()), tvb(o + 8, 4):uint(), tvb(o + 16, 4):uint(),
                                     tvb(o + 20, 2):uint(), tvb(o + 24, 4):uint())
    end
    pinfo.cols.info = info
end

local registered_port = nil
function p.init()
    local udp = DissectorTable.get("udp.port")
    if registered_port ~= nil then
        udp:remove(registered_port, p)
    end
    registered_port = p.prefs.udp_port
    udp:add(registered_port, p)
end
