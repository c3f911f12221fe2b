-- Wireshark/tshark dissector for tailmark wire format version 1
-- (shared/spec/wire-format.md; README "Wire format, version 1").
--
--   tshark -X lua_script:scripts/tailmark.lua -r capture.pcapng -Y tailmark \
--          -T fields -e tailmark.msg_id -e tailmark.flag ...
--   wireshark -X lua_script:scripts/tailmark.lua capture.pcapng
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- Registered on UDP port 47474 (change it under Preferences > Protocols >
-- TAILMARK, or with -o tailmark.udp_port:N). Every multi-byte field is
-- big-endian.
--   header (16 B, every packet): version, flags (LAST 0x01, ACK 0x02,
--     NACK 0x04, RETX 0x08), flow, msg_id, pkt_idx, pay_len, offset
--   trailer (32 B, LAST packets: the final 32 bytes of the UDP payload, found
--     from the UDP length): flag (u64), slot, key, msg_len, pkt_count,
--     reserved, crc32c, magic 0x544D4B31 "TMK1"
--   ACK/NACK body (lib/tailmark/control.h): u32 released_upto, u32 acked_upto,
--     u32 epoch, u16 nranges, u16 reserved, nranges x {u16 first, u16 count},
--     u32 crc32c (of header and body before it)
-- Malformed packets get expert info instead of an error.

local p = Proto("tailmark", "tailmark completion-signalled transport")

local flag_names = { [0x01] = "LAST", [0x02] = "ACK", [0x04] = "NACK", [0x08] = "RETX" }

local f = p.fields
f.version   = ProtoField.uint8("tailmark.version", "Version", base.DEC)
f.flags     = ProtoField.uint8("tailmark.flags", "Flags", base.HEX)
f.f_last    = ProtoField.bool("tailmark.flags.last", "LAST", 8, nil, 0x01)
f.f_ack     = ProtoField.bool("tailmark.flags.ack", "ACK", 8, nil, 0x02)
f.f_nack    = ProtoField.bool("tailmark.flags.nack", "NACK", 8, nil, 0x04)
f.f_retx    = ProtoField.bool("tailmark.flags.retx", "RETX", 8, nil, 0x08)
f.flow      = ProtoField.uint16("tailmark.flow", "Flow", base.DEC)
f.msg_id    = ProtoField.uint32("tailmark.msg_id", "Message id", base.DEC)
f.pkt_idx   = ProtoField.uint16("tailmark.pkt_idx", "Packet index", base.DEC)
f.pay_len   = ProtoField.uint16("tailmark.pay_len", "Payload length", base.DEC)
f.offset    = ProtoField.uint32("tailmark.offset", "Offset", base.DEC)
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
f.released  = ProtoField.uint32("tailmark.released_upto", "Released up to", base.DEC)
f.acked     = ProtoField.uint32("tailmark.acked_upto", "Acknowledged up to", base.DEC)
f.epoch     = ProtoField.uint32("tailmark.epoch", "Receiver epoch", base.HEX)
f.nranges   = ProtoField.uint16("tailmark.nranges", "Missing ranges", base.DEC)
f.r_first   = ProtoField.uint16("tailmark.nack.first", "First missing packet", base.DEC)
f.r_count   = ProtoField.uint16("tailmark.nack.count", "Missing packets (0: to the end)", base.DEC)
f.ctl_crc   = ProtoField.uint32("tailmark.control_crc32c", "Control CRC32C", base.HEX)

local e_short = ProtoExpert.new("tailmark.short", "Shorter than a tailmark header", expert.group.MALFORMED, expert.severity.ERROR)
local e_len   = ProtoExpert.new("tailmark.pay_len_mismatch", "pay_len does not match the UDP length", expert.group.MALFORMED, expert.severity.WARN)
local e_magic = ProtoExpert.new("tailmark.bad_magic", "Trailer magic is not TMK1", expert.group.MALFORMED, expert.severity.WARN)
local e_flag  = ProtoExpert.new("tailmark.bad_flag", "Trailer flag is not msg_id + 1", expert.group.PROTOCOL, expert.severity.WARN)
p.experts = { e_short, e_len, e_magic, e_flag }

p.prefs.udp_port = Pref.uint("UDP port", 47474, "UDP destination port of tailmark packets")

local HDR, TRL = 16, 32

local function flag_string(v)
    local s = {}
    for _, bit in ipairs({ 0x01, 0x02, 0x04, 0x08 }) do
        if bit32.band(v, bit) ~= 0 then s[#s + 1] = flag_names[bit] end
    end
    local unknown = bit32.band(v, 0xF0)
    if unknown ~= 0 then s[#s + 1] = string.format("0x%02x", unknown) end
    return #s > 0 and table.concat(s, "|") or "DATA"
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
    t:add(f.flow, tvb(2, 2))
    t:add(f.msg_id, tvb(4, 4))
    t:add(f.pkt_idx, tvb(8, 2))
    t:add(f.pay_len, tvb(10, 2))
    t:add(f.offset, tvb(12, 4))

    local last = bit32.band(flags, 0x01) ~= 0
    local ack = bit32.band(flags, 0x02) ~= 0
    local nack = bit32.band(flags, 0x04) ~= 0
    local body = len - HDR - (last and TRL or 0)
    if body ~= pay_len then
        t:add_proto_expert_info(e_len)
    end
    if body > 0 then
        if (ack or nack) and body >= 4 then
            t:add(f.released, tvb(HDR, 4))
            if body >= 20 then
                t:add(f.acked, tvb(HDR + 4, 4))
                t:add(f.epoch, tvb(HDR + 8, 4))
                t:add(f.nranges, tvb(HDR + 12, 2))
                local nr = tvb(HDR + 12, 2):uint()
                for i = 0, nr - 1 do
                    if HDR + 16 + 4 * i + 4 <= len - 4 then
                        t:add(f.r_first, tvb(HDR + 16 + 4 * i, 2))
                        t:add(f.r_count, tvb(HDR + 18 + 4 * i, 2))
                    end
                end
                t:add(f.ctl_crc, tvb(HDR + body - 4, 4))
            end
        else
            t:add(f.payload, tvb(HDR, body))
        end
    end
    local info = string.format("flow %u msg %u pkt %u %s len %u off %u", flow, msg_id, pkt_idx,
                               flag_string(flags), pay_len, offset)
    if ack and not nack and body >= 4 then
        info = string.format("flow %u %s released_upto %u", flow, flag_string(flags), tvb(HDR, 4):uint())
    end
    if last and len >= HDR + TRL then
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
