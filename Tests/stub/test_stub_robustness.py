"""Bad input: malformed messages get FORMERR (or NOTIMP, or silence), never a crash; stalled and greedy TCP
clients do not keep others from being served.

The first test opens a TCP connection that announces a 65535-byte message and sends nothing; a later one checks
that the daemon closed it after its idle timeout (10 s). The tests between them run inside that window and
show that everyone else is served meanwhile.
"""

import random
import socket
import struct
import threading
import time
from collections import Counter

import dns.message
import pytest

from stubkit import (STUB_V4, ask, header, make_query, netns_socket, stub_counters, tcp_connect, tcp_exchange,
                     tcp_recv, tcp_send, udp_exchange)

IDLE_TIMEOUT = 10.0
FORMERR, NOTIMP = 1, 4


@pytest.fixture(scope="module")
def stalled_tcp(stub):
    """A connection that announced 65535 bytes and sent none; a thread notes when the daemon closes it."""
    s = tcp_connect(timeout=IDLE_TIMEOUT + 10)
    s.sendall(b"\xff\xff")
    watch = {"opened": time.monotonic()}

    def wait_for_close():
        try:
            watch["data"] = s.recv(10)
        except OSError as e:  # reset, or the timeout
            watch["error"] = e
        watch["closed"] = time.monotonic()

    thread = threading.Thread(target=wait_for_close, daemon=True)
    thread.start()
    yield watch, thread
    s.close()


def assert_served(tcp_too: bool = True, limit_ms: float = 1500) -> None:
    """A cached name is answered over UDP (and TCP), within LIMIT_MS (generous: a debug build on a busy
    machine; a client kept waiting would time out)."""
    for tcp in (False, True) if tcp_too else (False,):
        r = ask("h3.lab.test", "A", tcp=tcp, timeout=2)
        assert r.wire is not None and r.texts("A") == ["192.0.2.10"], f"not served over {'TCP' if tcp else 'UDP'}"
        assert r.ms < limit_ms, f"answer took {r.ms:.0f} ms"


def test_tcp_huge_length_prefix_others_served(stalled_tcp):
    watch, _ = stalled_tcp
    assert_served()
    time.sleep(0.3)
    assert "closed" not in watch, f"closed at once: {watch}"  # an incomplete message is no reason to hang up


# ------------------------------------------------------------------ malformed messages

Q_WIRE = make_query("h3.lab.test", "A", edns=None, qid=0x4242).to_wire()
QUESTION = Q_WIRE[12:]                # h3.lab.test A IN
HDR = struct.Struct("!HHHHHH")


def hdr(qd=1, an=0, ns=0, ar=0, flags=0x0100, qid=0x4242) -> bytes:
    return HDR.pack(qid, flags, qd, an, ns, ar)


OPT = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)


def opt_with(rdata: bytes) -> bytes:
    return b"\x00" + struct.pack("!HHIH", 41, 1232, 0, len(rdata)) + rdata


# (id, message, expected): expected is "silence", or (rcode, question echoed)
MALFORMED = [
    ("empty", b"", "silence"),
    ("five-bytes", b"\x12\x34\x01\x00\x00", "silence"),
    ("eleven-bytes", hdr()[:11], "silence"),
    ("qr-set", hdr(flags=0x8100) + QUESTION, "silence"),
    ("qr-set-garbage", b"\x12\x34\x80" + bytes(40), "silence"),
    ("header-only-qd1", hdr(), (FORMERR, False)),
    ("qdcount-0", hdr(qd=0), (FORMERR, False)),
    ("qdcount-2", hdr(qd=2) + QUESTION + QUESTION, (FORMERR, False)),
    ("question-name-cut", hdr() + QUESTION[:5], (FORMERR, False)),
    ("question-type-cut", hdr() + QUESTION[:-2], (FORMERR, False)),
    ("ancount-lies", hdr(an=1) + QUESTION, (FORMERR, True)),
    ("nscount-lies", hdr(ns=3) + QUESTION, (FORMERR, True)),
    ("arcount-lies", hdr(ar=1) + QUESTION, (FORMERR, True)),
    ("opt-rdata-overrun", hdr(ar=1) + QUESTION + OPT[:-2] + b"\x00\x20", (FORMERR, True)),
    ("opt-option-overrun", hdr(ar=1) + QUESTION + opt_with(b"\xfd\xe9\x00\x10ab"), (FORMERR, True)),
    ("two-opt", hdr(ar=2) + QUESTION + OPT + OPT, (FORMERR, True)),
    ("opt-not-root", hdr(ar=1) + QUESTION + b"\x01x" + OPT[1:], (FORMERR, True)),
    ("compression-loop", hdr() + b"\xc0\x0c" + b"\x00\x01\x00\x01", (FORMERR, False)),
    ("compression-loop-2", hdr() + b"\x01a\xc0\x0c\x00\x01\x00\x01", (FORMERR, False)),
    ("pointer-forward", hdr() + b"\xc0\x20" + b"\x00\x01\x00\x01" + bytes(30), (FORMERR, False)),
    ("pointer-past-end", hdr() + b"\xc3\xff\x00\x01\x00\x01", (FORMERR, False)),
    ("label-64", hdr() + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01", (FORMERR, False)),
    ("name-over-255", hdr() + (b"\x3f" + b"a" * 63) * 4 + b"\x00\x00\x01\x00\x01", (FORMERR, False)),
    ("extended-label", hdr() + b"\x41abc\x00\x00\x01\x00\x01", (FORMERR, False)),
    ("qtype-opt", hdr() + b"\x02h3\x03lab\x04test\x00\x00\x29\x00\x01", (FORMERR, True)),
    ("opcode-status", hdr(flags=0x1100) + QUESTION, (NOTIMP, False)),
    ("opcode-notify", hdr(flags=0x2100) + QUESTION, (NOTIMP, False)),
    ("opcode-update", hdr(flags=0x2900) + QUESTION, (NOTIMP, False)),
    ("opcode-15", hdr(flags=0x7900), (NOTIMP, False)),
]


def check_reply(label, msg, resp, expected):
    if expected == "silence":
        assert resp is None, f"{label}: expected silence, got {resp.hex()}"
        return
    rcode, echoed = expected
    assert resp is not None, f"{label}: no reply, expected rcode {rcode}"
    h = header(resp)
    assert h["qr"] and h["id"] == struct.unpack("!H", msg[:2])[0], (label, h)
    assert h["rcode"] == rcode, (label, h)
    assert h["an"] == 0 and h["ns"] == 0, (label, h)
    if echoed:
        end = 12
        while msg[end]:
            end += 1 + msg[end]
        question = msg[12:end + 5]  # QNAME, QTYPE, QCLASS
        assert h["qd"] == 1 and resp[12:].startswith(question), (label, resp.hex())


@pytest.mark.parametrize("label,msg,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_udp(stub, label, msg, expected):
    timeout = 0.3 if expected == "silence" else 2
    check_reply(label, msg, udp_exchange(msg, timeout=timeout), expected)


@pytest.mark.parametrize("label,msg,expected", [m for m in MALFORMED if m[1]], ids=[m[0] for m in MALFORMED if m[1]])
def test_malformed_tcp(stub, label, msg, expected):
    timeout = 0.3 if expected == "silence" else 2
    check_reply(label, msg, tcp_exchange(msg, timeout=timeout), expected)


def test_formerr_counter_and_service_after_malformed(stub, api):
    before = stub_counters(api.status())
    for label, msg, expected in MALFORMED:
        if expected != "silence" and expected[0] == FORMERR:
            udp_exchange(msg, timeout=1)
    after = stub_counters(api.status())
    expected_formerr = sum(1 for m in MALFORMED if m[2] != "silence" and m[2][0] == FORMERR)
    assert after["formatErrors"] - before["formatErrors"] >= expected_formerr
    assert_served()


def test_tcp_zero_length_frame_then_query(stub):
    """An empty frame is skipped; the connection goes on serving."""
    s = tcp_connect()
    try:
        s.sendall(b"\x00\x00")
        tcp_send(s, make_query("h3.lab.test", "A", qid=7).to_wire())
        r = dns.message.from_wire(tcp_recv(s))
        assert r.id == 7 and r.rcode() == 0
    finally:
        s.close()


def test_tcp_query_dribbled_byte_by_byte(stub):
    """Frames split anywhere (here: one byte per segment) are reassembled."""
    s = tcp_connect()
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire = make_query("h2only.lab.test", "A", qid=9).to_wire()
        for b in struct.pack("!H", len(wire)) + wire:
            s.send(bytes([b]))
            time.sleep(0.002)
        r = dns.message.from_wire(tcp_recv(s))
        assert r.id == 9 and r.rcode() == 0 and [rd.to_text() for rrset in r.answer for rd in rrset] == ["192.0.2.11"]
    finally:
        s.close()


def test_meta_types_not_implemented(stub):
    for rtype in ("AXFR", "IXFR"):
        r = ask("lab.test", rtype)
        assert r.rcode == "NOTIMP", r.msg


# ------------------------------------------------------------------ greedy and random clients


def test_tcp_client_that_never_reads(stub, txt):
    """Pipelines thousands of queries for a 2.7 KB answer and never reads: the daemon stops reading from it
    (RFC 7766 §6.2.2: bounded resources per connection) and serves everyone else meanwhile."""
    big, _ = txt["big"]
    ask(big, "TXT", tcp=True)  # cached
    s = netns_socket("dlab-a", socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(3)
    s.connect((STUB_V4, 53))
    wire = make_query(big, "TXT").to_wire()
    frame = struct.pack("!H", len(wire)) + wire
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + 3
    try:
        while sent < 20000 and time.monotonic() < deadline:
            try:
                s.send(frame * 50)
                sent += 50
            except BlockingIOError:
                time.sleep(0.01)
        assert sent >= 200, f"only {sent} queries went out"
        assert_served()
        t0 = time.monotonic()
        assert_served()
        print(f"never-reading client pushed {sent} queries; others served in {1000 * (time.monotonic() - t0):.1f} ms")
    finally:
        s.close()
    assert_served()


def test_ten_thousand_random_datagrams(stub, api):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    before = stub_counters(api.status())
    s = netns_socket("dlab-a", socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setblocking(False)
    s.connect((STUB_V4, 53))
    ids = set()
    replies = []

    def drain():
        while True:
            try:
                replies.append(s.recv(65535))
            except BlockingIOError:
                return

    try:
        for i in range(10000):
            kind = i % 3
            if kind == 0:      # anything at all (QR clear, so the daemon may answer)
                msg = bytearray(rng.randbytes(rng.randrange(0, 300)))
                if len(msg) > 2:
                    msg[2] &= 0x7F
            elif kind == 1:    # a query header (opcode 0, one question) and random bytes after it
                msg = bytearray(hdr(qd=1, an=rng.randrange(2, 65536), ns=rng.randrange(65536),
                                    ar=rng.randrange(65536), qid=rng.randrange(65536)))
                msg += rng.randbytes(rng.randrange(0, 200))
            else:              # a real query with a few bytes flipped, cut and lying counts
                msg = bytearray(Q_WIRE + OPT)
                msg[2:4] = b"\x01\x00"
                msg[6:8] = struct.pack("!H", rng.randrange(1, 65536))
                for _ in range(rng.randrange(1, 6)):
                    msg[rng.randrange(12, len(msg))] = rng.randrange(256)
                msg = msg[:rng.randrange(12, len(msg) + 1)]
            if len(msg) >= 2:
                ids.add(bytes(msg[:2]))
            try:
                s.send(bytes(msg))
            except (BlockingIOError, ConnectionRefusedError):
                time.sleep(0.001)
            if i % 200 == 0:
                drain()
        quiet = time.monotonic()
        while time.monotonic() - quiet < 0.5:
            n = len(replies)
            drain()
            if len(replies) != n:
                quiet = time.monotonic()
            time.sleep(0.02)
    finally:
        s.close()
    rcodes = Counter()
    for resp in replies:
        h = header(resp)
        assert h["qr"] and resp[:2] in ids, f"seed {seed}: stray reply {resp[:16].hex()}"
        rcodes[h["rcode"]] += 1
        assert len(resp) <= 512, f"seed {seed}: {len(resp)}-byte reply to a message without EDNS"
    print(f"seed {seed}: 10000 datagrams, {len(replies)} replies, rcodes {dict(rcodes)}")
    assert set(rcodes) <= {FORMERR, NOTIMP}, f"seed {seed}: rcodes {dict(rcodes)}"
    assert rcodes[FORMERR] > 1000, f"seed {seed}: only {rcodes[FORMERR]} FORMERR"
    assert stub.alive(), f"discoverd died:\n{stub.log_tail()}"
    assert_served()
    after = stub_counters(api.status())
    assert after["udp"] - before["udp"] >= len(replies)
    assert after["formatErrors"] - before["formatErrors"] >= rcodes[FORMERR]


def test_tcp_huge_length_prefix_closed_after_idle_timeout(stalled_tcp):
    watch, thread = stalled_tcp
    thread.join(max(0.0, watch["opened"] + IDLE_TIMEOUT + 5 - time.monotonic()))
    assert "closed" in watch, f"connection still open {time.monotonic() - watch['opened']:.1f} s after it went idle"
    assert watch.get("data", b"") == b"" and not isinstance(watch.get("error"), socket.timeout), watch
    closed_after = watch["closed"] - watch["opened"]
    assert IDLE_TIMEOUT - 1 <= closed_after <= IDLE_TIMEOUT + 5, f"closed after {closed_after:.1f} s"
    assert_served()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_tcp_never_reading_clients_memory_bounded(stub, txt):
    """Replies a client does not read are bounded per connection (the write watermark, 64 KiB), not by how many
    queries the daemon already read: 16 such clients must not cost the daemon more than about 1 MiB each."""
    big, _ = txt["big"]
    ask(big, "TXT", tcp=True)  # cached
    wire = make_query(big, "TXT").to_wire()
    frame = struct.pack("!H", len(wire)) + wire
    before = rss_kb(stub.pid)
    socks = []
    try:
        for _ in range(16):
            s = netns_socket("dlab-a", socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(3)
            s.connect((STUB_V4, 53))
            s.setblocking(False)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:
                try:
                    s.send(frame * 100)
                except BlockingIOError:
                    time.sleep(0.01)
        time.sleep(0.5)
        assert_served()
        grown = rss_kb(stub.pid) - before
        print(f"16 never-reading TCP clients: daemon RSS grew by {grown / 1024:.1f} MiB")
        assert grown < 16 * 1024, f"daemon RSS grew by {grown / 1024:.1f} MiB for 16 clients that never read"
    finally:
        for s in socks:
            s.close()
