#!/usr/bin/env python3
"""A hostile local application for tests/integration/hostile_local.sh: it
speaks the channel (lib/tailmark-client/include/tailmark/channel_abi.h) by hand, as a buggy or
malicious program linked to no library would, and performs one attack on a
running `tailmarkd --mode service`. It prints one line per fact it observed
("ok: ..." or "FAIL: ...") and exits 1 when any expectation failed; the
suite then checks that the daemon is still alive and serving.

  seals SOCK PORT        ftruncate every memfd the daemon hands over
  wake SOCK PORT K       make the wake fd blocking, fill it, have the daemon
                         wake us K times
  hello-fds SOCK         HELLO with a second fd (a full pipe) as in ABI 1
  nohello SOCK           connect and say nothing: closed after kHelloTimeoutMs
  pending SOCK N M       N idle connections (refused past --max-pending),
                         one more (refused), one idle closed, then M
                         HELLOs (refused past --max-apps)
  arena SOCK KIND BYTES  HELLO with an arena: sealed, unsealed, or declared
                         larger than its memfd; prints the answer and time
  unsealed SOCK PORT     an unsealed arena; if welcomed, shrink it to 0 and
                         send from it (the daemon would fault)
  refused SOCK           connect, expect ERROR EACCES and the end
  steal SOCK PORT        another app's port: LISTEN (EBUSY), UNLISTEN
                         (ENOENT), and its sessions still go to the owner
  want SOCK PORT         tm_doorbell.want: asleep for another session's
                         flow, or for completions, not woken by our
                         message; any nonsense there wakes
"""
import errno
import fcntl
import mmap
import os
import select
import socket
import stat
import struct
import sys
import time

HELLO, WELCOME, CONNECT, CONNECTED, LISTEN, UNLISTEN, ACCEPTED, CLOSE, ENDED, OK, ERROR, BYE = range(1, 13)
ABI = 2
HELLO_TIMEOUT_S = 3.0  # kHelloTimeoutMs
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
LOCAL_IP = 0xC6120001  # 198.18.0.1, the daemon's --src-ip (default)

bad = 0


def ok(msg):
    print("ok: " + msg, flush=True)


def fail(msg):
    global bad
    bad += 1
    print("FAIL: " + msg, flush=True)


def expect(cond, msg):
    (ok if cond else fail)(msg)
    return cond


def hdr(t, length, req):
    return struct.pack("<IIQ", t, length, req)


class Chan:
    """One connection to the daemon."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.req = 0
        self.events = []

    def send(self, t, body=b"", fds=()):
        self.req += 1
        msg = hdr(t, 16 + len(body), self.req) + body
        if fds:
            socket.send_fds(self.s, [msg], list(fds))
        else:
            self.s.send(msg)
        return self.req

    def recv(self, timeout=10.0):
        """(type, req, bytes, fds), or None at the end of the connection."""
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            raise TimeoutError("no message from the daemon in %.1f s" % timeout)
        try:
            data, fds, _, _ = socket.recv_fds(self.s, 512, 4)
        except ConnectionResetError:
            return None
        if not data:
            return None
        t, _, req = struct.unpack_from("<IIQ", data)
        return t, req, data, fds

    def reply(self, req, timeout=10.0):
        while True:
            m = self.recv(timeout)
            if m is None or m[1] == req:
                return m
            self.events.append(m)

    def event(self, t, timeout=10.0):
        for i, m in enumerate(self.events):
            if m[0] == t:
                return self.events.pop(i)
        while True:
            m = self.recv(timeout)
            if m is None or m[0] == t:
                return m
            self.events.append(m)

    def close(self):
        self.s.close()


def error_of(m):
    if m is None or m[0] != ERROR:
        return None, ""
    e = struct.unpack_from("<i", m[2], 16)[0]
    text = m[2][20:220].split(b"\0")[0].decode(errors="replace")
    return e, text


def make_arena(nbytes, seal=True, size=None):
    fd = os.memfd_create("hostile-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes if size is None else size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


def hello(ch, arena_fd, nbytes, extra_fds=(), name=b"hostile", abi=ABI):
    body = struct.pack("<IIQII32s", abi, os.getpid(), nbytes, 4096, 0, name)
    return ch.reply(ch.send(HELLO, body, (arena_fd,) + tuple(extra_fds)))


class App:
    """An application attached properly (a sealed arena of 4 MiB)."""

    def __init__(self, path, name=b"hostile", arena_bytes=4 << 20):
        self.ch = Chan(path)
        self.arena_fd = make_arena(arena_bytes)
        self.arena = mmap.mmap(self.arena_fd, arena_bytes)
        m = hello(self.ch, self.arena_fd, arena_bytes, name=name)
        if m is None or m[0] != WELCOME or len(m[3]) != 2:
            raise RuntimeError("not welcomed: %r %r" % (m and m[0], error_of(m)))
        self.control_bytes = struct.unpack_from("<Q", m[2], 24)[0]
        self.control_fd, self.wake_fd = m[3]
        self.control = mmap.mmap(self.control_fd, self.control_bytes)

    def listen(self, port):
        body = struct.pack("<HHIII16s", port, 0, 0, 0, 0, b"")
        return self.ch.reply(self.ch.send(LISTEN, body))

    def connect(self, port, ring=64, max_msg=4096):
        body = struct.pack("<IHHIIII16s", LOCAL_IP, port, 1, ring, max_msg, 0, 0, b"")
        return self.ch.reply(self.ch.send(CONNECT, body), timeout=20)

    def sleeping(self):
        return struct.unpack_from("<I", self.control, 0)[0]

    def wakes(self):
        return struct.unpack_from("<Q", self.control, 64)[0]


def align64(x):
    return (x + 63) // 64 * 64


def submit(app, connected, offset, length, cookie):
    """One message of the arena into flow 0's submission ring."""
    sq_size = struct.unpack_from("<I", connected[2], 32)[0]
    send = mmap.mmap(connected[3][0], struct.unpack_from("<Q", connected[2], 40)[0])
    head = struct.unpack_from("<I", send, 0)[0]
    sqe = 192 + (head & (sq_size - 1)) * 24
    struct.pack_into("<QIIQ", send, sqe, offset, length, 0, cookie)
    struct.pack_into("<I", send, 0, head + 1)  # x86: stores stay in order
    return send


def seal_check(fd, what):
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    expect(seals & SEALS == SEALS, "%s: sealed F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL (seals 0x%x)" % (what, seals))
    size = os.fstat(fd).st_size
    for to, how in ((0, "shrink to 0"), (size + (2 << 20), "grow")):
        try:
            os.ftruncate(fd, to)
            fail("%s: ftruncate (%s) succeeded: the daemon's mapping is past the end of its file" % (what, how))
        except OSError as e:
            expect(e.errno == errno.EPERM, "%s: ftruncate (%s) refused: %s" % (what, how, os.strerror(e.errno)))
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        fail("%s: more seals could be added (no F_SEAL_SEAL)" % what)
    except OSError:
        ok("%s: no more seals can be added" % what)


def cmd_seals(path, port):
    app = App(path, b"seals")
    seal_check(app.control_fd, "control memfd (WELCOME)")
    expect(app.listen(port)[0] == OK, "LISTEN %d" % port)
    c = app.connect(port)
    if not expect(c is not None and c[0] == CONNECTED and len(c[3]) == 1, "CONNECTED with the send memfd"):
        return
    a = app.ch.event(ACCEPTED)
    if not expect(a is not None and len(a[3]) == 1, "ACCEPTED with the receive memfd"):
        return
    seal_check(c[3][0], "send memfd (CONNECTED)")
    seal_check(a[3][0], "receive memfd (ACCEPTED)")
    # The daemon reads the control block every loop: give it time to fault.
    time.sleep(0.5)
    app.ch.close()


def sleep_rounds(app, port, rounds):
    """Something for the daemon to wake us for (a message of ours placed in
    our own receive ring, never released), then `rounds` sleeps: each must
    be answered (`sleeping` swapped to 0), none of the wake-ups written."""
    expect(app.listen(port)[0] == OK, "LISTEN %d" % port)
    c = app.connect(port)
    if not expect(c is not None and c[0] == CONNECTED, "CONNECTED to ourselves"):
        return
    app.arena[0:64] = b"w" * 64
    submit(app, c, 0, 64, 1)
    woken = 0
    for _ in range(rounds):
        struct.pack_into("<I", app.control, 0, 1)  # asleep
        t = time.monotonic() + 5
        while app.sleeping() != 0 and time.monotonic() < t:
            time.sleep(0.001)
        woken += app.sleeping() == 0
    expect(woken == rounds, "the daemon answered %d of %d sleeps (swapped `sleeping` to 0)" % (woken, rounds))
    expect(app.wakes() == 0, "none of its wake-ups could be written (wakes %d)" % app.wakes())
    app.ch.close()


WANT_FLOW = 1 << 63
WANT_SENT = 1 << 62


def cmd_want(path, port):
    """tm_doorbell.want (channel ABI minor 2 and 3), the app's word in the
    daemon's wake-ups: two sessions to ourselves, a message in the first
    only. Asleep wanting the second's flow 0, the daemon leaves us asleep
    (it woke us on every round for the first's message before: tm_wait_flow's
    reason to be); so it does wanting completions (kWantSent, tm_wait_sent),
    alone or with the second's flow, until we release the message and its
    completion comes. Wanting the first's flow, or nonsense (a flow out of
    range, no such session, no flag), it wakes us, and nothing worse."""
    app = App(path, b"want")
    expect(app.listen(port)[0] == OK, "LISTEN %d" % port)
    sids = []
    conns = []
    accepted = []
    for _ in range(2):
        c = app.connect(port)
        a = app.ch.event(ACCEPTED)
        if not expect(c is not None and c[0] == CONNECTED and a is not None, "a session to ourselves"):
            return
        conns.append(c)
        accepted.append(a)
        sids.append(struct.unpack_from("<I", a[2], 16)[0])
    app.arena[0:64] = b"w" * 64
    submit(app, conns[0], 0, 64, 1)

    def woken(want, secs):
        struct.pack_into("<Q", app.control, 8, want)
        struct.pack_into("<I", app.control, 0, 1)  # asleep (after `want`: x86 keeps stores in order)
        t = time.monotonic() + secs
        while app.sleeping() != 0 and time.monotonic() < t:
            time.sleep(0.001)
        w = app.sleeping() == 0
        struct.pack_into("<I", app.control, 0, 0)
        return w

    expect(woken(0, 5), "want 0 (any): woken for the message in session %d" % sids[0])
    expect(not woken(WANT_FLOW | sids[1] << 16, 0.5), "asleep 0.5 s wanting session %d's flow 0, which has none" % sids[1])
    expect(not woken(WANT_SENT, 0.5), "asleep 0.5 s wanting completions, with none (a message in session %d)" % sids[0])
    expect(not woken(WANT_SENT | WANT_FLOW | sids[1] << 16, 0.5),
           "asleep 0.5 s wanting completions or session %d's flow 0" % sids[1])
    expect(woken(WANT_FLOW | sids[0] << 16, 5), "woken wanting session %d's flow 0" % sids[0])
    expect(woken(WANT_SENT | WANT_FLOW | sids[0] << 16, 5), "woken wanting completions or session %d's flow 0" % sids[0])
    expect(woken(WANT_FLOW | sids[1] << 16 | 7, 5), "a flow out of range: woken")
    expect(woken(WANT_FLOW | 0xFFFF << 16, 5), "no such session: woken")
    expect(woken(WANT_SENT | WANT_FLOW | 0xFFFF << 16, 5), "completions or no such session: woken")
    expect(woken((1 << 62) - 1, 5), "no flag: anything, woken")
    # Released (flow 0's cursor, after the ring's 64-byte header), the
    # message is delivered: its completion wakes an app that wants those.
    recv = mmap.mmap(accepted[0][3][0], struct.unpack_from("<Q", accepted[0][2], 40)[0])
    struct.pack_into("<I", recv, 64, 1)
    expect(woken(WANT_SENT, 5), "woken wanting completions, once the message was released (delivered)")
    app.ch.close()


def cmd_wake(path, port, rounds):
    app = App(path, b"wake")
    fd = app.wake_fd
    st = os.fstat(fd)
    kind = "pipe" if stat.S_ISFIFO(st.st_mode) else os.readlink("/proc/self/fd/%d" % fd)
    print("info: the wake fd is a %s" % kind, flush=True)
    # Make it blocking: on a shared open file description (an eventfd handed
    # over) that would make the daemon's own writes block too.
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    if kind == "pipe":
        w = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_NONBLOCK)
        n = 0
        try:
            while True:
                n += os.write(w, b"\0" * 4096)
        except BlockingIOError:
            pass
        ok("the wake pipe is full (%d bytes written through a second write end)" % n)
    else:
        os.write(fd, struct.pack("<Q", 0xFFFFFFFFFFFFFFFE))
        ok("the wake eventfd's counter is at its maximum")
    sleep_rounds(app, port, rounds)


def cmd_wake_closed(path, port, rounds):
    """The application closes its end of the wake pipe, then asks to be
    woken: the daemon's write finds no reader (EPIPE; before the fix, a
    SIGPIPE that ended the daemon). Each sleep is still answered."""
    app = App(path, b"wake-closed")
    os.close(app.wake_fd)
    ok("closed our end of the wake fd")
    sleep_rounds(app, port, rounds)


def cmd_hello_fds(path):
    ch = Chan(path)
    r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        while True:
            os.write(w, b"\0" * 4096)
    except BlockingIOError:
        pass
    arena = make_arena(4 << 20)
    m = hello(ch, arena, 4 << 20, extra_fds=(w,))
    e, text = error_of(m)
    expect(e == errno.EINVAL and "one fd" in text, "HELLO with a full pipe as wake fd: ERROR %s (%s)" % (e, text))
    m = hello(ch, arena, 4 << 20, abi=1)
    e, text = error_of(m)
    expect(e == errno.EPROTO and "ABI 1" in text, "an ABI 1 HELLO: ERROR %s (%s)" % (e, text))
    ch.close()


def cmd_nohello(path):
    t0 = time.monotonic()
    ch = Chan(path)
    m = ch.recv(timeout=HELLO_TIMEOUT_S + 10)
    e, text = error_of(m)
    expect(e == errno.ETIMEDOUT, "ERROR %s (%s) after %.2f s" % (e, text, time.monotonic() - t0))
    end = ch.recv(timeout=5)
    dt = time.monotonic() - t0
    expect(end is None, "then the daemon closed the connection")
    expect(HELLO_TIMEOUT_S <= dt <= HELLO_TIMEOUT_S + 1.5, "closed %.2f s after connecting (3 s allowed)" % dt)


def cmd_pending(path, idle, hellos):
    t0 = time.monotonic()
    conns = [Chan(path) for _ in range(idle)]
    # A connection refused at accept gets its ERROR at once; the others none.
    time.sleep(0.3)
    ready, _, _ = select.select([c.s for c in conns], [], [], 0)
    refused, waiting = 0, []
    for c in conns:
        if c.s in ready:
            e, text = error_of(c.recv())
            expect(e == errno.EBUSY and "--max-pending" in text, "refused: ERROR %s (%s)" % (e, text))
            refused += 1
        else:
            waiting.append(c)
    print("pending=%d refused=%d" % (len(waiting), refused), flush=True)
    # While they wait, a new connection is refused too: the bound holds.
    ch = Chan(path)
    e, text = error_of(ch.recv(timeout=2))
    expect(e == errno.EBUSY and "--max-pending" in text, "one more connection: ERROR %s (%s)" % (e, text))
    ch.close()
    # One of them goes: its slot is free for an application, and
    # --max-apps counts only applications, not the connections waiting.
    waiting.pop().close()
    time.sleep(0.1)
    apps, busy = [], 0
    for i in range(hellos):
        ch = Chan(path)
        arena = make_arena(4 << 20)
        m = hello(ch, arena, 4 << 20, name=b"app%d" % i)
        if m is not None and m[0] == WELCOME:
            apps.append(ch)
        else:
            e, text = error_of(m)
            expect(e == errno.EBUSY and "--max-apps" in text, "HELLO refused: ERROR %s (%s)" % (e, text))
            busy += 1
            ch.close()
    print("welcomed=%d busy=%d" % (len(apps), busy), flush=True)
    expect(time.monotonic() - t0 < HELLO_TIMEOUT_S, "all of it while the idle connections still wait")
    for c in waiting:
        m = c.recv(timeout=HELLO_TIMEOUT_S + 10)
        e, _ = error_of(m)
        expect(e == errno.ETIMEDOUT and c.recv(timeout=5) is None, "an idle connection was closed for no HELLO")
    dt = time.monotonic() - t0
    expect(dt <= HELLO_TIMEOUT_S + 1.5, "every idle connection closed within %.2f s" % dt)
    for ch in apps:
        ch.close()


def cmd_arena(path, kind, nbytes):
    ch = Chan(path)
    if kind == "sealed":
        fd = make_arena(nbytes)
    elif kind == "unsealed":
        fd = make_arena(nbytes, seal=False)
    elif kind == "short":  # declared larger than the file
        fd = make_arena(4096, size=4096)
    else:
        raise SystemExit("arena: kind sealed|unsealed|short")
    t0 = time.monotonic()
    m = hello(ch, fd, nbytes)
    dt = time.monotonic() - t0
    if m is not None and m[0] == WELCOME:
        print("answer=WELCOME ms=%.1f" % (dt * 1000), flush=True)
    else:
        e, text = error_of(m)
        print("answer=%s ms=%.1f text=%s" % (errno.errorcode.get(e, e), dt * 1000, text), flush=True)
    ch.close()


def cmd_unsealed(path, port):
    ch = Chan(path)
    nbytes = 4 << 20
    fd = make_arena(nbytes, seal=False)
    arena = mmap.mmap(fd, nbytes)
    arena[0:4096] = b"u" * 4096
    m = hello(ch, fd, nbytes)
    if m is not None and m[0] != WELCOME:
        e, text = error_of(m)
        expect(e == errno.EINVAL and "F_SEAL_SHRINK" in text, "an unsealed arena: ERROR %s (%s)" % (e, text))
        return
    fail("an unsealed arena was welcomed: shrinking it under the daemon and sending from it")
    app_ch = ch
    body = struct.pack("<HHIII16s", port, 0, 0, 0, 0, b"")
    app_ch.reply(app_ch.send(LISTEN, body))
    body = struct.pack("<IHHIIII16s", LOCAL_IP, port, 1, 64, 4096, 0, 0, b"")
    c = app_ch.reply(app_ch.send(CONNECT, body), timeout=20)
    if c is None or c[0] != CONNECTED:
        return
    arena.close()
    os.ftruncate(fd, 0)
    sq_size = struct.unpack_from("<I", c[2], 32)[0]
    send = mmap.mmap(c[3][0], struct.unpack_from("<Q", c[2], 40)[0])
    struct.pack_into("<QIIQ", send, 192, 0, 4096, 0, 1)
    struct.pack_into("<I", send, 0, 1)
    del sq_size
    time.sleep(1)


def cmd_refused(path):
    try:
        ch = Chan(path)
    except OSError as e:
        fail("connect: %s (the file's permissions refused it before the daemon could)" % os.strerror(e.errno))
        return
    m = ch.recv(timeout=5)
    e, text = error_of(m)
    expect(e == errno.EACCES and "may not attach" in text, "uid %d: ERROR %s (%s)" % (os.getuid(), e, text))
    expect(ch.recv(timeout=5) is None, "then the daemon closed the connection")


def cmd_steal(path, port):
    owner = App(path, b"owner")
    thief = App(path, b"thief")
    expect(owner.listen(port)[0] == OK, "the owner listens on %d" % port)
    e, text = error_of(thief.listen(port))
    expect(e == errno.EBUSY, "another app's LISTEN %d: ERROR %s (%s)" % (port, e, text))
    body = struct.pack("<HHIII16s", port, 0, 0, 0, 0, b"")
    e, text = error_of(thief.ch.reply(thief.ch.send(UNLISTEN, body)))
    expect(e == errno.ENOENT, "another app's UNLISTEN %d: ERROR %s (%s)" % (port, e, text))
    e, text = error_of(thief.listen(port))
    expect(e == errno.EBUSY, "and its LISTEN after that: ERROR %s (%s)" % (e, text))
    # A session to the port: the owner's, not the thief's.
    c = thief.connect(port)
    expect(c is not None and c[0] == CONNECTED, "a session to port %d opened" % port)
    a = owner.ch.event(ACCEPTED, timeout=10)
    expect(a is not None and struct.unpack_from("<H", a[2], 20)[0] == port, "the owner got its ACCEPTED")
    r, _, _ = select.select([thief.ch.s], [], [], 0.2)
    stolen = [m for m in thief.ch.events if m[0] == ACCEPTED]
    expect(not stolen and not r, "the thief got none")
    thief.ch.close()
    owner.ch.close()


def main():
    a = sys.argv[1:]
    if not a:
        raise SystemExit(__doc__)
    cmd = a[0]
    if cmd == "seals":
        cmd_seals(a[1], int(a[2]))
    elif cmd == "wake":
        cmd_wake(a[1], int(a[2]), int(a[3]))
    elif cmd == "wake-closed":
        cmd_wake_closed(a[1], int(a[2]), int(a[3]))
    elif cmd == "hello-fds":
        cmd_hello_fds(a[1])
    elif cmd == "nohello":
        cmd_nohello(a[1])
    elif cmd == "pending":
        cmd_pending(a[1], int(a[2]), int(a[3]))
    elif cmd == "arena":
        cmd_arena(a[1], a[2], int(a[3]))
    elif cmd == "unsealed":
        cmd_unsealed(a[1], int(a[2]))
    elif cmd == "refused":
        cmd_refused(a[1])
    elif cmd == "steal":
        cmd_steal(a[1], int(a[2]))
    elif cmd == "want":
        cmd_want(a[1], int(a[2]))
    else:
        raise SystemExit(__doc__)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
