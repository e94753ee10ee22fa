"""Encrypted upstreams (#16) with real servers: Unbound 1.17 serving DoT (853) and DoH (443, HTTP/2) in dlab-dns
with certificates of the lab CA ($LAB/ca), dnsdist 1.7 as a second implementation of both (OpenSSL for DoT, h2o
for DoH; the core cases run against each: the `server` fixture), a Python DoH server that misbehaves on purpose
(lab/dohfault.py), kdig and dnspython as independent clients of the same servers, and tcpdump in dlab-dns proving
what is on the wire. discoverd runs in dlab-a; its stub listens on 127.0.0.1 ports of its own.

Nothing here touches the machine's trust store: discoverd is given the lab CA with `ca-file`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest

from stubkit import (EDE_NETWORK_ERROR, EDE_STALE, LAB_DIR, LAB_SCRIPT, REPO, UPSTREAM, FaultServer, StubDaemon, ask,
                     kdig, lab_exec, make_query, missing, netns_socket, parallel, parse_dig, run, uniq, wait_until)

CA = LAB_DIR / "ca" / "ca.pem"
NAME = "dns.lab.test"
GOOD, EXPIRED, ROGUE, WRONG, FAULT = "192.0.2.63", "192.0.2.64", "192.0.2.65", "192.0.2.66", "192.0.2.67"
DNSDIST = "192.0.2.68"
# Two implementations of DoT and DoH with the same certificate name, the same backend (the fault server, relaying
# Knot) and the lab CA: unbound-tls and dnsdist (lab/encrypted.sh).
SERVERS = {"unbound": GOOD, "dnsdist": DNSDIST}
DISCOVER = Path(os.environ.get("DISCOVERD_BIN_DIR", REPO / ".build" / "debug")) / "discover"


@pytest.fixture(scope="module")
def tls_lab(lab):
    if not CA.exists():
        missing(f"{CA} missing: the lab has no CA (Scripts/lab up)")
    for tool in ("tcpdump", "openssl"):
        if shutil.which(tool) is None:
            missing(f"{tool} not installed (run Scripts/bootstrap)")
    if not wait_until(lambda: _dot_ok(GOOD), 10):
        missing("unbound-tls does not answer DoT on 192.0.2.63 (Scripts/lab status)")
    return lab


@pytest.fixture(params=list(SERVERS))
def server(request, tls_lab):
    """The address of a good DoT/DoH server, once each implementation: Unbound 1.17, dnsdist 1.7."""
    address = SERVERS[request.param]
    if not wait_until(lambda: _dot_ok(address), 10):
        missing(f"{request.param} does not answer DoT on {address} (Scripts/lab status)")
    return address


def _dot_ok(server: str, port: int = 853) -> bool:
    out = lab_exec("a", "kdig", "+time=1", "+retry=0", f"+tls-ca={CA}", f"+tls-hostname={NAME}", "-p", str(port),
                   f"@{server}", "lab.test", "SOA", check=False, timeout=10).stdout
    return "status: NOERROR" in out


_ports = iter(range(5301, 5400))


def daemon(workdir: Path, upstream: str | list[str], *, encryption: str = "strict", extra: str = "",
           attempts: int = 1) -> StubDaemon:
    port = next(_ports)
    upstreams = [upstream] if isinstance(upstream, str) else upstream
    config = (f"[resolver]\ntimeout-ms = 1500\nattempts = {attempts}\nencryption = {encryption}\n"
              f"ca-file = {CA}\n" + "".join(f"upstream = {u}\n" for u in upstreams[1:]) + extra
              + "[stub]\nlocal = no\n")
    d = StubDaemon(workdir / f"enc{port}", [f"127.0.0.1:{port}"], config, upstream=upstreams[0])
    d.start()
    d.port = port
    return d


def upstream_status(d: StubDaemon) -> list[dict]:
    v = d.varlink()
    try:
        return v.status().get("upstreamServers") or []
    finally:
        v.close()


class Capture:
    """tcpdump on dlab-dns's eth0 (every packet between the lab hosts and the DNS servers) into a pcap file."""

    def __init__(self, path: Path, bpf: str = "tcp or udp"):
        self.path = path
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "dlab-dns", "tcpdump", "--immediate-mode", "-i", "eth0", "-U", "-s", "0", "-w", str(path), bpf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # tcpdump says "listening on" once the capture runs.
        deadline = time.monotonic() + 10
        line = b""
        while time.monotonic() < deadline and b"listening" not in line:
            line = self.proc.stderr.readline()
        assert b"listening" in line, "tcpdump did not start"

    def stop(self) -> list[tuple[str, int, str, int, bytes]]:
        time.sleep(0.3)
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=10)
        return read_pcap(self.path)


def read_pcap(path: Path) -> list[tuple[str, int, str, int, bytes, int, float]]:
    """(src, sport, dst, dport, payload, TCP flags (0 for UDP), time) of every IPv4 TCP/UDP packet in an Ethernet
    pcap file."""
    data = path.read_bytes()
    out = []
    offset = 24
    while offset + 16 <= len(data):
        sec, usec, incl = struct.unpack("<III", data[offset:offset + 12])
        frame = data[offset + 16:offset + 16 + incl]
        offset += 16 + incl
        if len(frame) < 34 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        proto = ip[9]
        src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
        total = struct.unpack("!H", ip[2:4])[0]
        l4 = ip[ihl:total]
        sport, dport = struct.unpack("!HH", l4[:4])
        flags = 0
        if proto == 6:
            payload = l4[(l4[12] >> 4) * 4:]
            flags = l4[13]
        elif proto == 17:
            payload = l4[8:]
        else:
            continue
        out.append((src, sport, dst, dport, payload, flags, sec + usec / 1e6))
    return out


def tcp_connections(packets: list[tuple], client: str, server: str) -> list[list[tuple]]:
    """The packets between CLIENT and SERVER split into TCP connections, in the order they were opened, each from
    the client's SYN on: ephemeral ports are not handed out in order, and a port may be used again once the side
    that closed first holds the old connection's TIME_WAIT."""
    conns: list[list[tuple]] = []
    current: dict[int, list[tuple]] = {}
    for p in packets:
        if (p[0], p[2]) not in ((client, server), (server, client)):
            continue
        port = p[1] if p[0] == client else p[3]
        # A SYN opens a connection, unless it repeats one the server has not answered yet.
        syn = p[0] == client and p[5] & 0x12 == 0x02
        if syn and (port not in current or any(q[0] == server for q in current[port])):
            current[port] = []
            conns.append(current[port])
        if port in current:
            current[port].append(p)
    return conns


def test_tcp_connections_splits_at_each_syn_also_on_a_port_used_again():
    # The capture's reading, on packets made up here: a repeated SYN is one connection, a SYN after the server
    # answered on the same port is a new one (the port handed out again), another port is another.
    c, s = "192.0.2.1", "192.0.2.68"
    packets = [(c, 5, s, 853, b"", 0x02, 0.0), (c, 5, s, 853, b"", 0x02, 1.0), (s, 853, c, 5, b"", 0x12, 2.0),
               (c, 5, s, 853, b"q", 0x18, 3.0), (s, 853, c, 5, b"", 0x11, 4.0), (c, 9, "192.0.2.9", 53, b"", 0, 4.5),
               (c, 5, s, 853, b"", 0x02, 5.0), (s, 853, c, 5, b"", 0x12, 6.0),
               (c, 7, s, 853, b"", 0x02, 7.0), (s, 853, c, 7, b"", 0x12, 8.0)]
    conns = tcp_connections(packets, c, s)
    assert [[p[6] for p in conn] for conn in conns] == [[0.0, 1.0, 2.0, 3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]


def key_pin(leaf: str) -> str:
    """The pin of a lab certificate's key ($LAB/ca/LEAF.pem) as RFC 7469 §2.4 and kdig's +tls-pin take it: base64 of
    the SHA-256 of its SubjectPublicKeyInfo in DER, made here with openssl and hashlib, not by discoverd."""
    pem = subprocess.run(["openssl", "x509", "-in", str(CA.parent / f"{leaf}.pem"), "-pubkey", "-noout"],
                         capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pem, capture_output=True,
                         check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


# The certificate each lab server presents.
LEAVES = {GOOD: "good", EXPIRED: "expired", ROGUE: "rogue-leaf", WRONG: "wrong", DNSDIST: "dnsdist"}


def wire_name(name: str) -> bytes:
    return b"".join(bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")) + b"\x00"


def clear_text_from_a(packets: list[tuple]) -> list[tuple]:
    """The port-53 packets host A (dlab-a, 192.0.2.1) sent in a capture, but for those to the fault server
    (UPSTREAM): the session's stub (conftest.py) lives in dlab-a too, with the fault server as its plain upstream, and
    its DNSSEC probe (`. DNSKEY`, which the fault server's Knot refuses) asks again every 30 s for ten minutes
    (allow-downgrade, docs/DNSSEC.md). The tests that call this never give their own daemon the fault server as its
    upstream, so what is left is everything their daemon sent in clear text."""
    return [p for p in packets if p[0] == "192.0.2.1" and 53 in (p[1], p[3]) and p[2] != UPSTREAM]


def tls_records(stream: bytes) -> list[tuple[int, int]]:
    """(content type, length) of each TLS record in one direction of a connection."""
    records = []
    i = 0
    while i + 5 <= len(stream):
        ctype, length = stream[i], struct.unpack("!H", stream[i + 3:i + 5])[0]
        records.append((ctype, length))
        i += 5 + length
    return records


# ---------------------------------------------------------------- DoT


def test_dot_strict_answers_and_status_says_tls(server, workdir):
    d = daemon(workdir, f"{server}#{NAME}")
    try:
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port)
        assert r.rcode == "NOERROR" and r.texts("A"), r.msg
        # The stub answers as a recursive resolver (RA, no AA) whichever flags the upstream's answer had: Unbound's
        # are a recursive's, dnsdist relays Knot's (AA, no RA).
        assert r.flags & 0x0080 and not r.flags & 0x0400, hex(r.flags)
        [up] = upstream_status(d)
        assert up["server"] == f"tls://{server}:853#{NAME}"
        assert up["transport"] == "tls" and up["origin"] == "configured"
        assert up["tlsVersion"] == "TLSv1.3" and up["verifiedName"] == NAME
        assert up["connectionsOpened"] == 1 and up["handshakes"] == 1 and up["queries"] >= 1
        assert up["p50Ms"] is not None and up["failures"] == 0
        # The pin of the key the server presented, for pin-sha256=; the CA and the name verified it, not a pin.
        assert up["keyPin"] == key_pin(LEAVES[server]) and up["keyPinned"] is False, up
        text = run([DISCOVER, "--socket", d.socket_path, "status"]).stdout
        assert f"tls://{server}:853#{NAME}: tls (configured), TLSv1.3 verified {NAME}" in text, text
    finally:
        d.stop()


@pytest.mark.parametrize("upstream,port", [(f"{GOOD}#{NAME}", 853), (f"https://{NAME}/dns-query#{GOOD}", 443)],
                         ids=["dot", "doh"])
def test_reconnect_after_idle_close_resumes_the_tls_session(tls_lab, workdir, upstream, port):
    # discoverd closes the connection after 1 s without queries; the next query reconnects and offers the session
    # ticket Unbound gave on the first connection (TLS 1.3, RFC 8446 §2.2): a resumed handshake, so the server's
    # flight carries no certificate chain and no CertificateVerify.
    # The capture starts first: the daemon's first connection (its start-up DNSSEC probe) is the full handshake.
    cap = Capture(workdir / "resume.pcap", f"tcp port {port}")
    try:
        d = daemon(workdir, upstream, extra="idle-timeout = 1\n")
    except BaseException:
        cap.stop()
        raise
    try:
        # Two reconnects after idle closes (the start-up probe's connection may still be open for the first query).
        for i in range(2):
            assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 10), upstream_status(d)
            assert ask(uniq(f"resume{i}"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        # One full handshake, the first; every later one resumed.
        assert up["connectionsOpened"] >= 2 and up["handshakes"] == up["connectionsOpened"], json.dumps(up)
        assert up["resumptions"] == up["handshakes"] - 1, json.dumps(up)
        assert up["tlsVersion"] == "TLSv1.3" and up["verifiedName"] == NAME and up["failures"] == 0, json.dumps(up)
        text = run([DISCOVER, "--socket", d.socket_path, "status"]).stdout
        assert f"{up['handshakes']} handshakes ({up['resumptions']} resumed)" in text, text
    finally:
        packets = cap.stop()
        d.stop()
    # Bytes the server sent on each connection, in the order the connections opened.
    received = [sum(len(p[4]) for p in conn if p[0] == GOOD and p[1] == port)
                for conn in tcp_connections(packets, "192.0.2.1", GOOD)]
    assert len(received) == up["connectionsOpened"], received
    full, *resumed = received
    print(f"server bytes per connection: full handshake {full}, resumed {resumed}")
    # The lab's certificate (one P-256 leaf) and its CertificateVerify are about 550 bytes.
    assert all(r < full - 300 for r in resumed), received


def test_dot_without_name_verifies_the_ip_san(server, workdir):
    d = daemon(workdir, f"tls://{server}")
    try:
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port)
        assert r.rcode == "NOERROR", r.msg
        assert upstream_status(d)[0]["verifiedName"] == server
    finally:
        d.stop()


def test_privacy_no_lab_name_on_port_53_and_queries_padded_to_128(server, workdir):
    # From before the daemon starts: what it sends at start-up (DDR, the DNSSEC probe) is seen too.
    cap = Capture(workdir / "dot.pcap")
    try:
        d = daemon(workdir, f"{server}#{NAME}")
    except BaseException:
        cap.stop()
        raise
    names = [uniq("private") for _ in range(20)]
    try:
        for n in names:
            ask(n, "A", server="127.0.0.1", port=d.port)
    finally:
        packets = cap.stop()
        d.stop()
    # Nothing of ours in clear text: no port-53 packet from host A, and no name anywhere on the wire.
    assert not clear_text_from_a(packets)
    for n in names:
        assert not [p for p in packets if wire_name(n) in p[4] or n.encode() in p[4]], n
    streams: dict[int, bytes] = {}
    replies: dict[int, bytes] = {}
    for p in packets:
        if p[0] == "192.0.2.1" and p[3] == 853:
            streams[p[1]] = streams.get(p[1], b"") + p[4]
        elif p[2] == "192.0.2.1" and p[1] == 853:
            replies[p[3]] = replies.get(p[3], b"") + p[4]
    assert len(streams) == 1, "one kept connection"
    records = tls_records(next(iter(streams.values())))
    app = [length for ctype, length in records if ctype == 23]
    # TLS 1.3: the client's first application-data record is its Finished; every later one is one DNS query:
    # 2 bytes of length, the padded message, 1 byte of content type, 16 bytes of AEAD tag (RFC 8446 §5.2).
    queries = app[1:]
    assert len(queries) >= len(names), records
    assert all((n - 2 - 1 - 16) % 128 == 0 for n in queries), queries
    # The answers' padding is the server's choice (RFC 8467 §4.1: SHOULD, block 468): Unbound pads every answer to a
    # multiple of 468 (pad-responses); dnsdist adds none of its own and relays the backend's answer, which Knot over
    # TCP leaves unpadded. discoverd takes both alike (it never asks for more than a padded query).
    # The server's last records are the answers to our names (its handshake and tickets come before them).
    answers = [length - 2 - 1 - 16 for ctype, length in tls_records(next(iter(replies.values()))) if ctype == 23]
    answers = answers[-len(names):]
    if server == GOOD:
        assert all(n % 468 == 0 for n in answers), answers
    else:
        assert not [n for n in answers if n % 468 == 0 or n % 128 == 0], answers


def test_a_burst_leaves_together_a_tls_record_per_padded_query(server, workdir):
    # Queries that reach the connection in one event-loop turn leave with one write, fewer TCP segments than
    # queries, but each in a TLS record of its own holding exactly one padded query (2 bytes of length + a multiple
    # of 128): dnsdist 1.7 reads only the first query of a record and leaves the rest unanswered until its read
    # timeout closes the connection (see test_a_server_closing_after_so_many_queries_loses_none). Every query is
    # answered.
    d = daemon(workdir, f"{server}#{NAME}")
    try:
        assert ask("warm.lab.test", "A", server="127.0.0.1", port=d.port).rcode in ("NOERROR", "NXDOMAIN")
        cap = Capture(workdir / "burst.pcap")
        names = [uniq("burst") for _ in range(64)]
        s = netns_socket("dlab-a", socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.settimeout(5)
            queries = {}
            for i, n in enumerate(names):
                q = make_query(n, "A", qid=1000 + i)
                queries[q.id] = n
                s.sendto(q.to_wire(), ("127.0.0.1", d.port))
            answered = {}
            while len(answered) < len(names):
                r = dns.message.from_wire(s.recv(65535))
                answered[r.id] = dns.rcode.to_text(r.rcode())
        finally:
            s.close()
            packets = cap.stop()
        assert set(answered.values()) == {"NXDOMAIN"}, answered
        sent = [p for p in packets if p[0] == "192.0.2.1" and p[3] == 853 and p[4]]
        records = [length - 16 - 1 for ctype, length in tls_records(b"".join(p[4] for p in sent)) if ctype == 23]
        assert len(records) == len(names), records
        assert all(n >= 130 and (n - 2) % 128 == 0 for n in records), records
        assert len(sent) < len(names), f"{len(sent)} segments for {len(names)} queries"
    finally:
        d.stop()


def test_thousand_queries_one_connection_one_handshake(server, workdir):
    d = daemon(workdir, f"{server}#{NAME}")
    try:
        names = [uniq("many") for _ in range(1000)]

        def batch(part):
            return [ask(n, "A", server="127.0.0.1", port=d.port, timeout=5).rcode for n in part]

        results = parallel(*[lambda p=names[i::8]: batch(p) for i in range(8)])
        codes = [c for part in results for c in part]
        assert len(codes) == 1000 and set(codes) == {"NXDOMAIN"}, set(codes)
        [up] = upstream_status(d)
        assert up["connectionsOpened"] == 1 and up["handshakes"] == 1, up
        assert up["queries"] >= 1000 and up["failures"] == 0, up
    finally:
        d.stop()


def _spawn_own_unbound(name: str, settings: list[str]) -> int:
    """Starts an Unbound of a test's own in dlab-dns: unbound-tls's configuration with the fault address's
    certificate (192.0.2.67 and dns.lab.test) and `settings` (its interfaces and ports, and more) in place of
    unbound-tls's interfaces and ports; its PID."""
    conf_dir = LAB_DIR / "tls" / name
    conf_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for line in (LAB_DIR / "tls" / "unbound-tls" / "unbound.conf").read_text().splitlines():
        if line.strip().startswith(("interface:", "tls-port:", "https-port:")):
            continue
        line = line.replace(str(LAB_DIR / "tls" / "unbound-tls"), str(conf_dir))
        line = line.replace("/good.key", "/dohfault.key").replace("/good.pem", "/dohfault.pem")
        lines.append(line)
        if line.strip() == "server:":
            lines += [f"    {setting}" for setting in settings]
    (conf_dir / "unbound.conf").write_text("\n".join(lines) + "\n")
    run([LAB_SCRIPT, "spawn", "dns", name, "unbound", "-d", "-c", str(conf_dir / "unbound.conf")], timeout=30)
    return int((LAB_DIR / "pids" / f"{name}.pid").read_text().split()[0])


@pytest.fixture(scope="module")
def keepalive_unbound(tls_lab):
    """A second Unbound, DoT only on 192.0.2.67:853, whose edns-tcp-keepalive says 1.5 s (RFC 7828)."""
    name = f"unbound-keepalive-{os.getpid()}"
    _spawn_own_unbound(name, [f"interface: {FAULT}@853", "tls-port: 853", "edns-tcp-keepalive-timeout: 1500"])
    try:
        if not wait_until(lambda: _dot_ok(FAULT), 10):
            missing(f"the keepalive Unbound did not come up: {(LAB_DIR / 'logs' / f'{name}.log').read_text()[-2000:]}")
        yield FAULT
    finally:
        run([LAB_SCRIPT, "kill", name], check=False, timeout=30)


@pytest.fixture
def stoppable_unbound(tls_lab):
    """An Unbound of the test's own, DoT on 192.0.2.67:8853 and DoH on 192.0.2.67:8443 (the fault address's
    certificate), and its PID, for the test to stop with SIGSTOP: the kernel then keeps its connections and takes
    what is written to them, and nothing is answered, as with a server that hung or a path that lost its state
    without a reset."""
    name = f"unbound-stoppable-{os.getpid()}"
    pid = _spawn_own_unbound(name, [f"interface: {FAULT}@8853", "tls-port: 8853", f"interface: {FAULT}@8443",
                                    "https-port: 8443"])
    try:
        if not wait_until(lambda: _dot_ok(FAULT, 8853), 10):
            missing(f"the stoppable Unbound did not come up: {(LAB_DIR / 'logs' / f'{name}.log').read_text()[-2000:]}")
        yield FAULT, pid
    finally:
        try:
            os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on the SIGTERM that ends it
        except ProcessLookupError:
            pass  # it ended already; the log says why
        run([LAB_SCRIPT, "kill", name], check=False, timeout=30)


STOPPABLE = {"dot": f"{FAULT}:8853#{NAME}", "doh": f"https://{NAME}:8443/dns-query#{FAULT}"}


@pytest.mark.parametrize("transport", list(STOPPABLE))
def test_a_server_that_stops_answering_is_let_go_and_the_log_says_why(stoppable_unbound, workdir, transport):
    # A server that hangs with the connection up (or a path that drops it without a reset) answers nothing, and
    # the kernel still takes every query written. After a query has had no reply, and nothing else came on its
    # connection, for as long as its timeout, the connection is presumed dead and closed (Unbound closes such a
    # stream too): the next query opens a new one instead of waiting on the dead one, whose handshake then times
    # out and starts the back-off, so that later queries fail at once with the reason and stale answers are served.
    _, pid = stoppable_unbound
    d = daemon(workdir, STOPPABLE[transport])
    try:
        first = ask("stale.lab.test", "A", server="127.0.0.1", port=d.port)
        assert first.rcode == "NOERROR" and first.texts("A")
        assert upstream_status(d)[0]["connectionsOpen"] == 1
        os.kill(pid, signal.SIGSTOP)
        r = ask(uniq("silent"), "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "SERVFAIL", r
        # Closed as dead, and the log says why (Status may already hold a later try's reason: the handshake's, below).
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 5), upstream_status(d)
        log = d.log_tail(200)
        assert "closing a connection the server stopped answering on" in log, log
        assert "no reply on the connection for 3000 ms" in log, log
        # The next query opens a new connection, whose handshake the stopped server never finishes: the back-off.
        r = ask(uniq("silent"), "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "SERVFAIL", r
        up = upstream_status(d)[0]
        assert up["connectionsOpened"] == 2, up
        assert "TLS handshake not finished" in (up.get("lastFailure") or ""), up
        # Meanwhile a name whose answer expired is answered stale, the refresh failing at once with the reason.
        time.sleep(2.5)  # the 2 s TTL runs out
        r = ask("stale.lab.test", "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "NOERROR" and r.texts("A") == first.texts("A") and EDE_STALE in r.ede_codes(), r
        # The server comes back: once the back-off allows, a new connection answers.
        os.kill(pid, signal.SIGCONT)

        def fresh():
            return ask(uniq("back"), "A", server="127.0.0.1", port=d.port, timeout=4).rcode == "NXDOMAIN"
        assert wait_until(fresh, 20, interval=0.5), d.log_tail()
        assert upstream_status(d)[0]["connectionsOpen"] == 1
    finally:
        d.stop()


@pytest.mark.parametrize("transport", list(STOPPABLE))
def test_queries_waiting_on_a_connection_let_go_as_dead_are_sent_again_not_lost(stoppable_unbound, workdir,
                                                                                transport):
    # The server is only slow (stopped for 3.8 s): the first query times out after 3 s and its connection is let go;
    # the second, written a second later, is sent again on a new connection, whose handshake the server finishes
    # when it resumes, and is answered.
    _, pid = stoppable_unbound
    d = daemon(workdir, STOPPABLE[transport])
    try:
        assert ask(uniq("slow"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        os.kill(pid, signal.SIGSTOP)
        answers: dict[str, str] = {}

        def asking(key: str) -> None:
            answers[key] = ask(uniq("slow"), "A", server="127.0.0.1", port=d.port, timeout=10).rcode
        first = threading.Thread(target=asking, args=("first",))
        second = threading.Thread(target=asking, args=("second",))
        first.start()
        time.sleep(1)
        second.start()
        time.sleep(2.8)
        os.kill(pid, signal.SIGCONT)
        first.join(12)
        second.join(12)
        assert answers == {"first": "SERVFAIL", "second": "NXDOMAIN"}, (answers, d.log_tail())
        up = upstream_status(d)[0]
        assert up["connectionsOpened"] == 2 and up["connectionsOpen"] == 1, up
        # Status says why the tries on the first connection failed: the server stopped answering on it (the
        # reason of the timed-out try's connection, or of a try it ended), not a bare "timeout".
        last = up.get("lastFailure") or ""
        assert "no reply on the connection" in last or "the server stopped answering on it" in last, up
    finally:
        d.stop()


@pytest.mark.parametrize("transport", list(STOPPABLE))
def test_status_names_why_a_connection_was_let_go_not_a_bare_timeout(stoppable_unbound, workdir, transport):
    # One query on a connection whose server went silent: its try times out and the connection is let go. What
    # `discover status` gives as the last failure is why (the connection's reason), not the try's bare "timeout".
    # No DNSSEC probe (dnssec = no): nothing else is asked, so no later try's failure replaces it.
    _, pid = stoppable_unbound
    d = daemon(workdir, STOPPABLE[transport], extra="dnssec = no\n")
    try:
        assert ask(uniq("why"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        os.kill(pid, signal.SIGSTOP)  # the fixture resumes it when the test ends
        assert ask(uniq("why"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "SERVFAIL"
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 5), upstream_status(d)
        up = upstream_status(d)[0]
        assert up["failures"] == 1 and up["lastFailure"] == "no reply on the connection for 3000 ms", up
    finally:
        d.stop()


@pytest.mark.parametrize("whose", ["server-keepalive", "own-idle-timeout"])
def test_dot_idle_connection_is_closed_by_us_in_time(tls_lab, workdir, request, whose):
    # RFC 7828 §3.3.2: the client closes an idle connection before the server's keepalive runs out (1.5 s: we
    # close at 90%, 1.35 s, although our own idle timeout is 30 s). Without a short keepalive (unbound-tls says
    # 120 s) our own idle timeout applies (2 s here). Either way the first FIN comes from us, not from Unbound.
    if whose == "server-keepalive":
        server, extra, lo, hi = request.getfixturevalue("keepalive_unbound"), "", 1.0, 1.5
    else:
        server, extra, lo, hi = GOOD, "idle-timeout = 2\n", 1.8, 3.0
    d = daemon(workdir, f"{server}#{NAME}", extra=extra)
    cap = Capture(workdir / "idle.pcap", "tcp port 853")
    try:
        assert ask(uniq("idle"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        assert upstream_status(d)[0]["connectionsOpen"] == 1
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 6), upstream_status(d)
    finally:
        packets = cap.stop()
        d.stop()
    conn = [p for p in packets if (p[0] == "192.0.2.1" and p[2] == server) or (p[0] == server and p[2] == "192.0.2.1")]
    # The first sign of closing: a FIN, or a TLS 1.3 close_notify (an encrypted alert: one record of 2 bytes of
    # alert, 1 of content type and 16 of AEAD tag; a DNS message is never that short). Ours comes first; Unbound
    # answers it with its own.
    closing = [p for p in conn if p[5] & 0x01 or (23, 19) in tls_records(p[4])]
    replies = [p for p in conn if p[0] == server and p[4] and p[6] < closing[0][6]] if closing else []
    assert replies and closing, conn
    assert closing[0][0] == "192.0.2.1", f"the server closed first: {closing[0]}"
    idle = closing[0][6] - replies[-1][6]
    assert lo <= idle <= hi, idle


def test_dnsdist_closes_an_idle_dot_connection_after_2s_and_we_reconnect_without_a_failure(tls_lab, workdir):
    # dnsdist's tcpRecvTimeout (2 s by default) closes a DoT connection it has read nothing on for 2 s, with a
    # close_notify and a FIN; it sends no EDNS keepalive that would have said so (RFC 7828), so here the server
    # closes first, unlike with Unbound. discoverd must see the close at once (the connection no longer counts as
    # open) and open a new one for the next query, with no failure and no query lost. No DNSSEC: allow-downgrade's
    # probe (and its retries, dnsdist's backend being no validator) would open connections of its own in between.
    d = daemon(workdir, f"{DNSDIST}#{NAME}", extra="dnssec = no\n")
    cap = Capture(workdir / "dnsdist-idle.pcap", "tcp port 853")
    try:
        assert ask(uniq("ddidle"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        assert upstream_status(d)[0]["connectionsOpen"] == 1
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 6), upstream_status(d)
        assert ask(uniq("ddidle"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["connectionsOpened"] == 2 and up["handshakes"] == 2 and up["connectionsOpen"] == 1, up
        assert up["failures"] == 0, up
        assert d.alive()
    finally:
        packets = cap.stop()
        d.stop()
    # dnsdist closed first, so the TIME_WAIT is on its side and Linux may hand discoverd the same port again.
    conns = tcp_connections(packets, "192.0.2.1", DNSDIST)
    assert len(conns) == 2, [(c[0][1], c[0][6]) for c in conns]
    first = conns[0]
    closing = [p for p in first if p[5] & 0x01 or (23, 19) in tls_records(p[4])]
    replies = [p for p in first if p[0] == DNSDIST and p[4] and p[6] < closing[0][6]] if closing else []
    assert replies and closing, first
    assert closing[0][0] == DNSDIST, f"discoverd closed first: {closing[0]}"
    assert 1.5 <= closing[0][6] - replies[-1][6] <= 3.0, closing[0][6] - replies[-1][6]


def sequential_then_bursts(d: StubDaemon, prefix: str, *, sequential: int, bursts: int, width: int,
                           timeout: float) -> None:
    """SEQUENTIAL unique names one at a time, then BURSTS of WIDTH at once: every one answered NXDOMAIN."""
    for _ in range(sequential):
        assert ask(uniq(prefix), "A", server="127.0.0.1", port=d.port, timeout=timeout).rcode == "NXDOMAIN"
    for _ in range(bursts):
        names = [uniq(prefix) for _ in range(width)]
        replies = parallel(*[lambda n=n: ask(n, "A", server="127.0.0.1", port=d.port, timeout=timeout) for n in names])
        assert [r.rcode for r in replies] == ["NXDOMAIN"] * width, [(r.rcode, r.ede) for r in replies
                                                                    if r.rcode != "NXDOMAIN"]


@pytest.fixture
def dnsdist_max_queries(tls_lab):
    """A second dnsdist, DoT only on 192.0.2.67:8853, that closes a connection after 50 queries
    (setMaxTCPQueriesPerConnection): queries a client pipelined beyond those are unread, and the kernel resets."""
    name = f"dnsdist-max-{os.getpid()}"
    conf_dir = LAB_DIR / "tls" / name
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "dnsdist.conf").write_text("\n".join([
        'setSecurityPollSuffix("")', 'setACL({"192.0.2.0/24"})', "setMaxTCPQueriesPerConnection(50)",
        f'addTLSLocal("{FAULT}:8853", "{LAB_DIR}/ca/dohfault.pem", "{LAB_DIR}/ca/dohfault.key",'
        ' {provider="openssl"})',
        'newServer({address="192.0.2.54:53", name="dnsfault"}):setUp()', ""]))
    run([LAB_SCRIPT, "spawn", "dns", name, "dnsdist", "--supervised", "--disable-syslog", "-C",
         str(conf_dir / "dnsdist.conf")], timeout=30)
    try:
        if not wait_until(lambda: _dot_ok(FAULT, 8853), 10):
            log = (LAB_DIR / "logs" / f"{name}.log").read_text()[-2000:]
            missing(f"dnsdist with a query limit did not come up: {log}")
        yield FAULT
    finally:
        run([LAB_SCRIPT, "kill", name], check=False, timeout=30)


def test_a_server_closing_after_so_many_queries_loses_none(dnsdist_max_queries, workdir):
    # dnsdist's setMaxTCPQueriesPerConnection(50): after 50 queries it reads no more on the connection and closes
    # it; queries sent beyond the 50 are lost with it (reset unread: a write then fails with EPIPE, a read with
    # ECONNRESET; or ended by its close_notify). RFC 7766 §6.2.3: they go out again on the next connection (up to
    # three times), so none is lost. Before, each such query was a SERVFAIL. The replies that came with the
    # close_notify end their tries (they are not thrown away and asked again), and each query has a TLS record of
    # its own: dnsdist 1.7 reads only the first query of a record, so that with several queries in one record it
    # left the others unanswered until its 2 s read timeout closed the connection with them, and a query could be
    # caught that way four times in a row (a SERVFAIL, seen in CI with the 4 bursts this test had then).
    d = daemon(workdir, f"tls://{dnsdist_max_queries}:8853#{NAME}", extra="dnssec = no\n")
    sequential, bursts, width = 60, 30, 32
    total = sequential + bursts * width
    try:
        sequential_then_bursts(d, "maxq", sequential=sequential, bursts=bursts, width=width, timeout=15)
        [up] = upstream_status(d)
        # One try answered each name; every other try failed (and was sent again).
        assert up["queries"] - up["failures"] == total, up
        # Each connection answered its 50 (or 51): one left waiting for dnsdist's read timeout leaves its
        # connection with fewer, and more connections are opened.
        assert math.ceil(total / 51) <= up["connectionsOpened"] <= math.ceil(total / 50) + 1, up
        # The tries the close ended were sent again; they say so (with the socket's error after a reset).
        assert up["lastFailure"].startswith("failed: the server closed the connection"), up
        assert d.alive()
    finally:
        d.stop()


def test_dnsdist_listens_only_on_its_lab_sockets(tls_lab):
    # lab/encrypted.sh gives dnsdist DoT and DoH on 192.0.2.68 and 2001:db8::68 and nothing else: no plain DNS, no
    # console, no webserver, and never the machine's own namespace (Scripts/bootstrap also disables the Debian
    # service it installs).
    pid = int((LAB_DIR / "pids" / "dnsdist.pid").read_text().split()[0])
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/run/netns/dlab-dns").st_ino
    listening = run(["ip", "netns", "exec", "dlab-dns", "ss", "-H", "-lntup"]).stdout
    mine = sorted(line.split()[4] for line in listening.splitlines() if f"pid={pid}," in line)
    assert mine == sorted(["192.0.2.68:853", "192.0.2.68:443", "[2001:db8::68]:853", "[2001:db8::68]:443"]), listening
    assert "dnsdist" not in run(["ss", "-H", "-lntup"]).stdout
    six = kdig(f"+tls-ca={CA}", "+tls-hostname=2001:db8::68", "@2001:db8::68", "h3.lab.test", "A")
    assert six.status == "NOERROR" and six.records("ANSWER", "A"), six.text


def burst(port: int, name: str, n: int) -> int:
    """N queries for NAME, each of another type (random unknown types: NODATA from Knot, never in a cache yet),
    sent 1 ms apart on one UDP socket in dlab-a; returns how many were answered within 8 s."""
    s = netns_socket("dlab-a", socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # The replies wait unread while we send: room for all of them (root may exceed rmem_max).
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
        s.settimeout(8)
        base = random.randrange(1000, 60000 - n)
        for i in range(n):
            s.sendto(make_query(name, f"TYPE{base + i}").to_wire(), ("127.0.0.1", port))
            time.sleep(0.001)
        answered = 0
        try:
            while answered < n:
                s.recvfrom(65535)
                answered += 1
        except socket.timeout:
            pass
        return answered
    finally:
        s.close()


def test_dot_burst_opens_more_connections_but_at_most_four(tls_lab, workdir):
    # Every query of the burst waits 600 ms behind the fault server, so hundreds are in flight at once: once 100
    # wait on every open connection another opens, never more than 4 at a time (TLSPoolPolicy.dot); when the
    # burst is over the extra ones close after 2 s without queries and one connection stays. A 5 s try timeout
    # keeps the fault server's own queueing from turning into retries.
    d = daemon(workdir, f"{GOOD}#{NAME}", extra="[limits]\nupstream-queries-per-client = 1000\nupstream-queries = 1000\n"
               "[resolver]\ntimeout-ms = 5000\n")
    fault = FaultServer()
    name = "multi.lab.test"
    fault.set(name, "delay", delay_ms=600)
    most_open = []
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            try:
                most_open.append(upstream_status(d)[0]["connectionsOpen"])
            except Exception:
                pass
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        assert ask(uniq("warm"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        sampler.start()
        assert burst(d.port, name, 400) == 400
        sampling.set()
        sampler.join(5)
        [up] = upstream_status(d)
        assert most_open and max(most_open) <= 4, (max(most_open or [0]), up)
        assert up["connectionsOpened"] >= 2 and up["handshakes"] == up["connectionsOpened"], up
        fault.clear(name)
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 1, 8), upstream_status(d)
        opened = upstream_status(d)[0]["connectionsOpened"]
        # Back to sequential queries: they all go on the one connection left.
        for _ in range(20):
            assert ask(uniq("after"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["connectionsOpened"] == opened and up["connectionsOpen"] == 1, up
    finally:
        sampling.set()
        fault.clear(name)
        d.stop()


@pytest.mark.parametrize("upstream,reason", [
    (f"{EXPIRED}#{NAME}", "certificate expired"),
    # A server no trusted CA vouches for: the reason gives its key's pin, what pin-sha256= would take.
    (f"{ROGUE}#{NAME}", "not signed by a trusted CA (CN=rogue-leaf, key pin-sha256=<rogue>)"),
    (f"{WRONG}#{NAME}", "does not match"),
    (f"tls://{WRONG}", "does not match"),
    (f"https://{NAME}/dns-query#{EXPIRED}", "certificate expired"),
    # A key pinned that is not the server's (here the rogue server's, on the good server): the reason names the
    # key the server has, so an operator sees what changed.
    (f"{GOOD}#{NAME} pin-sha256=<rogue>", "certificate key matches no pin-sha256 (the server's key: pin-sha256=<good>"),
    (f"https://{NAME}/dns-query#{GOOD} pin-sha256=<rogue>",
     "matches no pin-sha256 (the server's key: pin-sha256=<good>"),
], ids=["expired", "unknown-ca", "wrong-name", "no-ip-san", "doh-expired", "wrong-pin", "doh-wrong-pin"])
def test_strict_certificate_failures_servfail_ede_log_and_nothing_in_clear(tls_lab, workdir, upstream, reason):
    pins = {"<rogue>": key_pin("rogue-leaf"), "<good>": key_pin("good")}
    for mark, pin in pins.items():
        upstream, reason = upstream.replace(mark, pin), reason.replace(mark, pin)
    d = daemon(workdir, upstream)
    name = uniq("strictfail")
    cap = Capture(workdir / "fail.pcap")
    try:
        r = ask(name, "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "SERVFAIL"
        [(code, text)] = [e for e in r.ede if e[0] == EDE_NETWORK_ERROR]
        assert reason in text, text
        assert wait_until(lambda: "encrypted upstream not reachable" in d.log_tail(50) and reason in d.log_tail(50), 5)
        [up] = upstream_status(d)
        assert up["failures"] >= 1 and reason in up["lastFailure"], up
        assert d.alive()
    finally:
        packets = cap.stop()
        d.stop()
    assert not clear_text_from_a(packets)
    assert not [p for p in packets if wire_name(name) in p[4]]


@pytest.mark.parametrize("upstream,leaf", [
    (f"tls://{ROGUE}", "rogue-leaf"),
    (f"https://{NAME}/dns-query#{ROGUE}", "rogue-leaf"),
    (f"{EXPIRED}#{NAME}", "expired"),
], ids=["dot-unknown-ca", "doh-unknown-ca", "dot-expired"])
def test_a_pinned_key_authenticates_a_server_no_trusted_ca_vouches_for(tls_lab, workdir, upstream, leaf):
    """RFC 7858 §4.2, as stubby's tls_pubkey_pinset and kdig's +tls-pin: with pin-sha256= the server's key is what
    is checked, not its chain, dates or name. The pin is made by openssl from the certificate file, and kdig (an
    independent client) accepts the server with it and refuses it with another key's pin."""
    pin, other = key_pin(leaf), key_pin("good")
    address = ROGUE if leaf == "rogue-leaf" else EXPIRED
    assert kdig(f"+tls-pin={pin}", f"@{address}", "multi.lab.test", "A").status == "NOERROR"
    refused = lab_exec("a", "kdig", "+time=2", "+retry=0", f"+tls-pin={other}", f"@{address}", "multi.lab.test",
                       check=False, timeout=15)
    assert "status: NOERROR" not in refused.stdout, refused.stdout
    # A backup pin first (a key rotation's next key); the server's own pin second.
    d = daemon(workdir, f"{upstream} pin-sha256={other} pin-sha256={pin}")
    name = uniq("pinned")
    cap = Capture(workdir / "pinned.pcap")
    try:
        r = ask("multi.lab.test", "A", server="127.0.0.1", port=d.port, timeout=6)
        want = sorted(kdig("+short", "@192.0.2.53", "multi.lab.test", "A").text.split())
        assert r.rcode == "NOERROR" and sorted(r.texts("A")) == want, r.msg
        assert ask(name, "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["tlsVersion"] == "TLSv1.3" and "verifiedName" not in up, up
        assert up["keyPin"] == pin and up["keyPinned"] is True and up["failures"] == 0, up
        assert up["server"].endswith(f" pin-sha256={other} pin-sha256={pin}"), up
        text = run([DISCOVER, "--socket", d.socket_path, "status"]).stdout
        assert f"{up['server']}: {up['transport']} (configured), TLSv1.3 verified key pin-sha256={pin}," in text, text
    finally:
        packets = cap.stop()
        d.stop()
    assert not [p for p in packets if wire_name(name) in p[4]]


@pytest.mark.parametrize("ddr", ["yes", "no"])
def test_strict_plain_upstream_is_not_used(tls_lab, workdir, ddr):
    # From before the daemon starts: what it sends at start-up (DDR, the DNSSEC probe) is seen too.
    cap = Capture(workdir / "plain.pcap", "udp port 53 or tcp port 53")
    try:
        # Knot itself as the plain upstream: the fault server is the session stub's (clear_text_from_a).
        d = daemon(workdir, "192.0.2.53", extra=f"ddr = {ddr}\n")
    except BaseException:
        cap.stop()
        raise
    name = uniq("strictplain")
    try:
        r = ask(name, "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "SERVFAIL"
        assert any(c == EDE_NETWORK_ERROR and "strict" in t for c, t in r.ede), r.ede
        [up] = upstream_status(d)
        assert up["transport"] == "none" and "strict" in up["note"], up
        if ddr == "yes":
            assert "DDR: no designation" in up["note"], up
    finally:
        packets = cap.stop()
        d.stop()
    sent = clear_text_from_a(packets)
    # At most the DDR question (RFC 9462 §4: discovery is plain by nature), never the name asked.
    assert all(wire_name("_dns.resolver.arpa") in p[4] for p in sent), sent
    assert (len(sent) > 0) == (ddr == "yes")
    assert not [p for p in packets if wire_name(name) in p[4]]


@pytest.mark.parametrize("ddr", ["yes", "no"])
def test_opportunistic_plain_upstream_falls_back_and_says_so(tls_lab, workdir, ddr):
    d = daemon(workdir, "192.0.2.54", encryption="opportunistic", extra=f"ddr = {ddr}\n")
    try:
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port)
        assert r.rcode == "NOERROR"
        if ddr == "yes":
            # Discovery runs beside the first query (opportunistic mode does not make it wait).
            assert wait_until(lambda: "DDR: no designation" in (upstream_status(d)[0]["note"] or ""), 5), \
                upstream_status(d)
        [up] = upstream_status(d)
        assert up["transport"] == "udp" and up["origin"] == "configured", up
        assert up["note"] and "clear text" in up["note"], up
    finally:
        d.stop()


# ---------------------------------------------------------------- DDR (RFC 9462)


def test_ddr_upgrades_a_plain_upstream_verified_and_strict_accepts_it(tls_lab, workdir):
    # From before the daemon starts: what it sends at start-up (DDR, the DNSSEC probe) is seen too.
    cap = Capture(workdir / "ddr.pcap")
    try:
        d = daemon(workdir, GOOD)
    except BaseException:
        cap.stop()
        raise
    names = [uniq("ddr") for _ in range(5)]
    try:
        for n in names:
            assert ask(n, "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["server"] == f"{GOOD}:53" and up["transport"] == "tls", up
        assert up["origin"] == "ddr-verified" and up["verifiedName"] == GOOD, up
        assert f"designated tls://{GOOD}:853" in up["note"], up
    finally:
        packets = cap.stop()
        d.stop()
    clear = clear_text_from_a(packets)
    # In clear text only the discovery question itself (RFC 9462 §4), never a name being resolved.
    assert clear and all(wire_name("_dns.resolver.arpa") in p[4] for p in clear), clear
    for n in names:
        assert not [p for p in packets if wire_name(n) in p[4]], n


@pytest.mark.parametrize("encryption", ["strict", "opportunistic"])
def test_ddr_designation_failing_verification(tls_lab, workdir, encryption):
    # unbound-expired designates itself; its certificate expired in 2021.
    d = daemon(workdir, EXPIRED, encryption=encryption)
    try:
        r = ask(uniq("ddrfail"), "A", server="127.0.0.1", port=d.port, timeout=6)
        if encryption == "opportunistic":
            # The first query went plain while discovery ran; the next one tries the designation.
            assert wait_until(lambda: "not done yet" not in (upstream_status(d)[0]["note"] or ""), 5)
            r = ask(uniq("ddrfail"), "A", server="127.0.0.1", port=d.port, timeout=6)
        [up] = upstream_status(d)
        if encryption == "strict":
            assert r.rcode == "SERVFAIL"
            assert any(c == EDE_NETWORK_ERROR and "certificate expired" in t for c, t in r.ede), r.ede
            assert up["origin"] == "configured" and "not verified" in up["note"], up
        else:
            assert r.rcode == "NXDOMAIN"
            assert up["transport"] == "udp" and "DDR designation not verified: certificate expired" in up["note"], up
    finally:
        d.stop()


def test_server_killed_mid_stream_reconnects_and_serves_stale_meanwhile(server, workdir):
    d = daemon(workdir, f"{server}#{NAME}")
    try:
        first = ask("stale.lab.test", "A", server="127.0.0.1", port=d.port)
        assert first.rcode == "NOERROR" and first.texts("A")
        run([LAB_SCRIPT, "kill", {GOOD: "unbound-tls", DNSDIST: "dnsdist"}[server]], timeout=30)
        time.sleep(3)  # the 2 s TTL runs out
        r = ask("stale.lab.test", "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "NOERROR" and r.texts("A") == first.texts("A")
        assert EDE_STALE in r.ede_codes(), r.ede
        # The refresh behind the stale answer finds the server gone: a failure with its reason, no connection.
        assert wait_until(lambda: upstream_status(d)[0]["failures"] >= 1, 10), upstream_status(d)
        assert wait_until(lambda: upstream_status(d)[0]["connectionsOpen"] == 0, 10), upstream_status(d)
    finally:
        run([LAB_SCRIPT, "up"], timeout=120)
    try:
        def fresh():
            return ask(uniq("back"), "A", server="127.0.0.1", port=d.port, timeout=4).rcode == "NXDOMAIN"
        assert wait_until(fresh, 20, interval=0.5), d.log_tail()
        up = upstream_status(d)[0]
        assert up["connectionsOpened"] >= 2 and up["handshakes"] >= 2 and up["connectionsOpen"] == 1, up
    finally:
        d.stop()


# ---------------------------------------------------------------- DoH


def test_doh_strict_answers_over_http2(server, workdir):
    d = daemon(workdir, f"https://{NAME}/dns-query#{server}")
    try:
        names = [uniq("doh") for _ in range(50)]
        codes = parallel(*[lambda n=n: ask(n, "A", server="127.0.0.1", port=d.port).rcode for n in names])
        assert set(codes) == {"NXDOMAIN"}
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port)
        assert r.rcode == "NOERROR" and r.texts("A")
        [up] = upstream_status(d)
        assert up["transport"] == "https" and up["tlsVersion"] == "TLSv1.3" and up["verifiedName"] == NAME
        assert up["connectionsOpened"] == 1 and up["handshakes"] == 1 and up["queries"] >= 51, up
    finally:
        d.stop()


@pytest.fixture(scope="module")
def dohfault(tls_lab):
    name = f"dohfault-{os.getpid()}"
    run([LAB_SCRIPT, "spawn", "dns", name, str(REPO / ".venv" / "bin" / "python"), "-u", str(REPO / "lab" / "dohfault.py"),
         "--listen", FAULT, "--port", "443", "--cert", str(LAB_DIR / "ca" / "dohfault.pem"),
         "--key", str(LAB_DIR / "ca" / "dohfault.key"), "--upstream", "192.0.2.53"], timeout=30)
    try:
        assert wait_until(lambda: "ready" in (LAB_DIR / "logs" / f"{name}.log").read_text(), 10)
        yield FAULT
    finally:
        run([LAB_SCRIPT, "kill", name], check=False, timeout=30)


@pytest.mark.parametrize("path,reason", [
    ("/status500", "HTTP status 500"),
    ("/wrongtype", "content type 'text/html'"),
    ("/truncated", "unusable DoH reply"),
    ("/garbage", "unusable DoH reply"),
    ("/reset", "HTTP/2"),
])
def test_doh_server_faults_give_a_clean_error_and_the_daemon_lives(dohfault, workdir, path, reason):
    d = daemon(workdir, f"https://{NAME}{path}#{dohfault}")
    try:
        for _ in range(3):
            r = ask(uniq("dohfault"), "A", server="127.0.0.1", port=d.port, timeout=6)
            assert r.rcode == "SERVFAIL"
            assert any(c == EDE_NETWORK_ERROR and reason in t for c, t in r.ede), r.ede
        # The same server answers properly on its good path, on the same kind of connection.
        assert d.alive()
        [up] = upstream_status(d)
        assert up["failures"] >= 3 and reason in up["lastFailure"], up
    finally:
        d.stop()
    good = daemon(workdir, f"https://{NAME}/dns-query#{dohfault}")
    try:
        assert ask("h3.lab.test", "A", server="127.0.0.1", port=good.port).rcode == "NOERROR"
    finally:
        good.stop()


def _getonly_log(dohfault_log: Path, field: int = 1) -> list[str]:
    return [line.split()[field] for line in dohfault_log.read_text().splitlines() if line.startswith("getonly ")]


def test_doh_goaway_after_every_twentieth_request_loses_no_query(dohfault, workdir):
    # RFC 9113 §6.8: after GOAWAY (nginx sends one after keepalive_requests) the server processed nothing above its
    # last stream ID; those queries are sent again on a new connection, and no new stream goes to the closing one.
    d = daemon(workdir, f"https://{NAME}/goaway#{dohfault}")
    try:
        sequential_then_bursts(d, "goaway", sequential=45, bursts=3, width=16, timeout=6)
        [up] = upstream_status(d)
        # 93 questions, a GOAWAY every 20: five connections at least, each after the first resumed. A try the
        # server closed unanswered counts as failed (and its query was answered on the next connection).
        assert up["connectionsOpened"] >= 5 and up["resumptions"] >= 4, up
        assert up["failures"] == 0 or up["lastFailure"].startswith("failed: the server closed the connection"), up
    finally:
        d.stop()


def test_doh_server_resetting_the_connection_loses_no_query_and_sends_each_again_once(dohfault, workdir):
    # The 20th request on each connection is met by a TCP reset (no GOAWAY, no close_notify). Its try fails and is
    # sent again, once, on the next connection: never onto the reset one, which still counted as ready until NIO
    # completed its close a loop turn later. One query at a time, so each reset ends exactly one try.
    d = daemon(workdir, f"https://{NAME}/abort#{dohfault}", extra="dnssec = no\n")
    try:
        total = 70
        for _ in range(total):
            r = ask(uniq("abort"), "A", server="127.0.0.1", port=d.port, timeout=6)
            assert r.rcode == "NXDOMAIN", r.ede
        [up] = upstream_status(d)
        # 19 answered on each connection but the last: three resets, four connections (none resumed: OpenSSL
        # resumes no session whose connection ended without close_notify).
        assert up["connectionsOpened"] == 4 and up["handshakes"] == 4, json.dumps(up)
        assert up["queries"] == total + 3 and up["failures"] == 3, json.dumps(up)
        assert "closed the TLS connection uncleanly" in up["lastFailure"] or "reset" in up["lastFailure"], up
        assert d.alive()
    finally:
        d.stop()


def test_doh_informational_headers_before_the_reply_are_skipped(dohfault, workdir):
    # RFC 9113 §8.1: a 103 Early Hints block may come before the response's own headers; it is not the reply.
    d = daemon(workdir, f"https://{NAME}/early#{dohfault}")
    try:
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "NOERROR" and r.texts("A"), (r.msg, r.ede)
        assert ask(uniq("early"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["failures"] == 0, up
    finally:
        d.stop()


def test_doh_server_refusing_post_is_asked_with_get_and_remembered(dohfault, workdir):
    log = LAB_DIR / "logs" / f"dohfault-{os.getpid()}.log"
    before = len(_getonly_log(log))
    d = daemon(workdir, f"https://{NAME}/getonly#{dohfault}")
    try:
        # The first query is POSTed, refused with 405, and asked again with GET within the same try.
        r = ask("h3.lab.test", "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "NOERROR" and r.texts("A"), r.msg
        for _ in range(5):
            assert ask(uniq("get"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["transport"] == "https" and up["failures"] == 0, up
        assert up["note"] == "GET: the server answered POST with HTTP 405", up
        assert wait_until(lambda: "DoH server refuses POST, using GET from now on" in d.log_tail(50), 5)
    finally:
        d.stop()
    # One POST, refused; GET from then on: the six questions and whatever the daemon asked at start (the DNSSEC
    # probe of allow-downgrade).
    methods = _getonly_log(log)[before:]
    assert methods[0] == "POST" and set(methods[1:]) == {"GET"} and len(methods) - 1 >= 6, methods


def test_doh_get_against_unbound_dnsdist_and_the_fault_server(dohfault):
    want = sorted(kdig("+short", "@192.0.2.53", "multi.lab.test", "A").text.split())
    log = LAB_DIR / "logs" / f"dohfault-{os.getpid()}.log"
    before = len(_getonly_log(log))
    # RFC 8484 §4.1 URI templates as operators copy them, and a plain path (dnsproxy's form).
    for upstream in (f"https://{NAME}/dns-query{{?dns}}#{GOOD}", f"https://{NAME}/dns-query#{DNSDIST}",
                     f"https://{NAME}/getonly?v=2{{&dns}}#{dohfault}"):
        text = lab_exec("a", str(DISCOVER), "query", "multi.lab.test", "A", "--upstream", upstream, "--https-get",
                        "--ca-file", str(CA), timeout=30).stdout
        assert "status: NOERROR" in text, text
        assert sorted(r[4] for r in parse_dig(text).records("ANSWER", "A")) == want, text
    # GET from the first query: the fault server saw no POST, and the template expanded after its own parameter.
    assert _getonly_log(log)[before:] == ["GET"]
    [path] = _getonly_log(log, 2)[before:]
    assert path.startswith("/getonly?v=2&dns=") and "{" not in path, path


# ---------------------------------------------------------------- peers on the same servers


def test_peers_kdig_and_dnspython_agree_with_discover_query(server):
    want = sorted(kdig("+short", f"@192.0.2.53", "multi.lab.test", "A").text.split())
    assert want
    dot = kdig(f"+tls-ca={CA}", f"+tls-hostname={NAME}", f"@{server}", "multi.lab.test", "A")
    assert dot.status == "NOERROR" and sorted(r[4] for r in dot.records("ANSWER", "A")) == want
    doh = kdig(f"+https=/dns-query", f"+tls-ca={CA}", f"+tls-hostname={NAME}", f"@{server}", "multi.lab.test", "A")
    assert doh.status == "NOERROR" and sorted(r[4] for r in doh.records("ANSWER", "A")) == want
    script = f"""
import ssl, dns.message, dns.query
ctx = ssl.create_default_context(cafile={str(CA)!r})
q = dns.message.make_query("multi.lab.test", "A")
t = dns.query.tls(q, {server!r}, ssl_context=ctx, server_hostname={NAME!r}, timeout=5)
h = dns.query.https(q, "https://{NAME}/dns-query", bootstrap_address={server!r}, verify={str(CA)!r}, timeout=5, http_version=dns.query.HTTPVersion.H2)
for m in (t, h):
    print(" ".join(sorted(rd.address for rs in m.answer for rd in rs)))
"""
    out = lab_exec("a", str(REPO / ".venv" / "bin" / "python"), "-c", script, timeout=30).stdout.split("\n")
    assert out[0].split() == want and out[1].split() == want, out
    for upstream in (f"{server}#{NAME}", f"https://{NAME}/dns-query#{server}"):
        text = lab_exec("a", str(DISCOVER), "query", "multi.lab.test", "A", "--upstream", upstream,
                        "--ca-file", str(CA), timeout=30).stdout
        assert "TLSv1.3 verified dns.lab.test" in text and "status: NOERROR" in text, text
        assert sorted(r[4] for r in parse_dig(text).records("ANSWER", "A")) == want, text
        # --short as dig +short: the addresses alone; nothing (and success) for a name that does not exist. The
        # upstream as dig and kdig take a server, @UPSTREAM, before the name or after the type.
        short = lab_exec("a", str(DISCOVER), "query", f"@{upstream}", "multi.lab.test", "A", "--short",
                         "--ca-file", str(CA), timeout=30)
        assert sorted(short.stdout.split("\n")[:-1]) == want and short.stderr == "", short
        short = lab_exec("a", str(DISCOVER), "query", "nosuch.lab.test", "A", f"@{upstream}", "--short",
                         "--ca-file", str(CA), timeout=30)
        assert short.returncode == 0 and short.stdout == "" and short.stderr == "", short
        both = lab_exec("a", str(DISCOVER), "query", "multi.lab.test", f"@{upstream}", "--upstream", upstream,
                        timeout=30, check=False)
        assert both.returncode == 2 and "give the upstream once" in both.stderr, both
    # Every section, each record as kdig writes it (an HTTPS record's SvcParams by name, a negative answer's SOA),
    # the header's flags; and the same as JSON for scripts, the RDATA without ldns's comments.
    for qname, qtype, section in (("port.lab.test", "HTTPS", "ANSWER"), ("nosuch.lab.test", "A", "AUTHORITY"),
                                  ("lab.test", "SOA", "ANSWER")):
        ref = kdig(f"+tls-ca={CA}", f"+tls-hostname={NAME}", f"@{server}", qname, qtype)
        wanted = sorted(" ".join(r[4].split(";")[0].split()) for r in ref.records(section))
        assert wanted, ref.text
        text = lab_exec("a", str(DISCOVER), "query", qname, qtype, "--upstream", f"{server}#{NAME}",
                        "--ca-file", str(CA), timeout=30).stdout
        ours = parse_dig(text)
        assert sorted(" ".join(r[4].split(";")[0].split()) for r in ours.records(section)) == wanted, text
        flags = " ".join(f for f in ("qr", "aa", "tc", "rd", "ra", "ad", "cd") if f in ref.flags)
        assert f"status: {ref.status}, flags: {flags}," in text and ours.counts[section] == len(wanted), text
        # The header's four counts as kdig gives them (ADDITIONAL counts the OPT record), the echoed question, and
        # the OPT pseudosection with the server's UDP size.
        assert ours.counts == ref.counts and ref.counts["QUERY"] == 1, (ours.counts, ref.counts)
        assert f";{qname}.\t\tIN\t{qtype}" in text and "; EDNS: version: 0, flags:; udp: " in text, text
        # The reply's padding (RFC 7830, RFC 8467) in kdig's words, where kdig's padded query got a padded reply
        # (Unbound pads over TLS; dnsdist 1.7 relays its backend's reply as it is).
        padded = "\n; PADDING: " in text
        assert padded == (";; PADDING: " in ref.text) and padded == (server == GOOD), (text, ref.text)
        js = json.loads(lab_exec("a", str(DISCOVER), "query", qname, qtype, "--upstream", f"{server}#{NAME}",
                                 "--ca-file", str(CA), "--json", timeout=30).stdout)
        # ms is a number (a whole one is written without a fraction: 4, not 4.0).
        assert js["rcode"] == ref.status and js["flags"] == flags.split(), js
        assert js["question"] == [{"name": f"{qname}.", "class": "IN", "type": qtype}], js
        assert js["edns"]["version"] == 0 and js["edns"]["udp"] > 0 and js["edns"]["ede"] == [], js
        if padded:
            assert js["edns"]["padding"] > 0 and f"\n; PADDING: {js['edns']['padding']} B\n" in text, (js, text)
        else:
            assert "padding" not in js["edns"], js
        assert isinstance(js["ms"], (int, float)) and not isinstance(js["ms"], bool), js
        assert sorted(" ".join(r["data"].split()) for r in js[section.lower()]) == wanted, js
        assert {(r["name"], r["type"], r["class"]) for r in js[section.lower()]} == {
            (r[0], r[3], r[2]) for r in ref.records(section)}, js
    bad = lab_exec("a", str(DISCOVER), "query", "multi.lab.test", "--upstream", f"{EXPIRED}#{NAME}",
                   "--ca-file", str(CA), timeout=30, check=False)
    assert bad.returncode == 1 and "certificate expired" in bad.stdout, bad.stdout
    bad = lab_exec("a", str(DISCOVER), "query", "multi.lab.test", "--upstream", f"{EXPIRED}#{NAME}", "--short",
                   "--ca-file", str(CA), timeout=30, check=False)
    assert bad.returncode == 1 and bad.stdout == "" and "certificate expired" in bad.stderr, bad


def test_discover_query_gives_the_servers_key_pin_and_checks_one(server):
    """`discover query` prints the pin of a server's key (what pin-sha256= takes) as kdig -d prints its "SHA-256 PIN",
    and --pin-sha256 authenticates a server by it, as kdig +tls-pin does: a server whose CA nobody trusts, over DoT
    and DoH; another key's pin is refused with the server's own in the reason; a malformed pin is a usage error."""
    ref = lab_exec("a", "kdig", "-d", f"+tls-ca={CA}", f"+tls-hostname={NAME}", f"@{server}", "lab.test", "SOA",
                   timeout=30)
    [kdig_pin] = [line.split("SHA-256 PIN: ")[1] for line in (ref.stdout + ref.stderr).split("\n")
                  if "SHA-256 PIN: " in line]
    assert kdig_pin == key_pin(LEAVES[server]), ref.stdout
    text = lab_exec("a", str(DISCOVER), "query", f"@{server}#{NAME}", "lab.test", "SOA", "--ca-file", str(CA),
                    timeout=30).stdout
    assert f"\n;; server key: pin-sha256={kdig_pin}\n" in text and "status: NOERROR" in text, text
    js = json.loads(lab_exec("a", str(DISCOVER), "query", f"@{server}#{NAME}", "lab.test", "SOA", "--ca-file",
                             str(CA), "--json", timeout=30).stdout)
    assert js["keyPin"] == kdig_pin and js["keyPinned"] is False and js["verified"] == NAME, js
    rogue = key_pin("rogue-leaf")
    for upstream in (f"tls://{ROGUE}", f"https://{NAME}/dns-query#{ROGUE}"):
        # No --ca-file: neither the system store nor the lab CA vouches for the rogue server; its key does.
        ok = lab_exec("a", str(DISCOVER), "query", f"@{upstream}", "multi.lab.test", "--pin-sha256", rogue,
                      timeout=30)
        assert f" TLSv1.3 verified key pin-sha256={rogue}\n" in ok.stdout and "status: NOERROR" in ok.stdout, ok
        assert ";; server key:" not in ok.stdout, ok.stdout
        wrong = lab_exec("a", str(DISCOVER), "query", f"@{upstream}", "multi.lab.test", "--pin-sha256", kdig_pin,
                         timeout=30, check=False)
        assert wrong.returncode == 1, wrong
        assert f"certificate key matches no pin-sha256 (the server's key: pin-sha256={rogue}" in wrong.stdout, wrong
    for args, reason in ((["@tls://192.0.2.63", "--pin-sha256", "nope"], "not the base64 of a SHA-256 digest"),
                         (["@192.0.2.53", "--pin-sha256", rogue], "pin-sha256 is for DoT and DoH upstreams")):
        bad = lab_exec("a", str(DISCOVER), "query", "lab.test", *args, timeout=30, check=False)
        assert bad.returncode == 2 and reason in bad.stderr, bad


# /etc/hosts and nsswitch.conf for `discover query`'s getaddrinfo, bind-mounted in a private mount namespace
# (unshare -m), never over the machine's own files.
_QUERY_WITH_HOSTS = r"""
set -e
mount --bind "$1" /etc/hosts
mount --bind "$2" /etc/nsswitch.conf
shift 2
exec "$@"
"""


def test_discover_query_finds_a_doh_host_with_the_system_resolver_and_names_what_failed(tls_lab, tmp_path):
    """A DoH URL without #ADDR is reached where getaddrinfo says, as curl and kdig do; a name it cannot find, a
    closed plain port and a closed DoH port are each one sentence in the system's words."""
    (tmp_path / "hosts").write_text(f"127.0.0.1 localhost\n{GOOD} {NAME}\n")
    (tmp_path / "nsswitch.conf").write_text("hosts: files\n")

    def query(*args):
        return lab_exec("a", "unshare", "-m", "sh", "-c", _QUERY_WITH_HOSTS, "sh", tmp_path / "hosts",
                        tmp_path / "nsswitch.conf", str(DISCOVER), "query", *args, timeout=30, check=False)

    want = sorted(kdig("+short", "@192.0.2.53", "multi.lab.test", "A").text.split())
    found = query("multi.lab.test", "--upstream", f"https://{NAME}/dns-query", "--ca-file", str(CA))
    assert found.returncode == 0, (found.stdout, found.stderr)
    assert f";; {NAME} is {GOOD} (system resolver)" in found.stdout, found.stdout
    assert "TLSv1.3 verified dns.lab.test" in found.stdout, found.stdout
    assert sorted(r[4] for r in parse_dig(found.stdout).records("ANSWER", "A")) == want, found.stdout
    js = query("multi.lab.test", "--upstream", f"https://{NAME}/dns-query", "--ca-file", str(CA), "--json")
    assert json.loads(js.stdout)["address"] == GOOD, js.stdout

    unknown = query("multi.lab.test", "--upstream", "https://nowhere.lab.test/dns-query")
    assert unknown.returncode == 2 and unknown.stdout == "", (unknown.stdout, unknown.stderr)
    assert "cannot find an address for nowhere.lab.test" in unknown.stderr, unknown.stderr
    assert "add #ADDR to the URL" in unknown.stderr and "Usage" not in unknown.stderr, unknown.stderr

    # Nothing listens on port 9 of dlab-a's loopback: ICMP port unreachable, and a TCP reset.
    plain = query("multi.lab.test", "--upstream", "127.0.0.1:9", "--timeout", "2")
    assert plain.returncode == 1, plain.stdout
    assert "(127.0.0.1:9: receive: Connection refused)" in plain.stdout, plain.stdout
    assert "clear text" not in plain.stdout, plain.stdout
    doh = query("multi.lab.test", "--upstream", f"https://{NAME}:9/dns-query#127.0.0.1", "--timeout", "2")
    assert doh.returncode == 1, doh.stdout
    assert doh.stdout.strip() == (f";; networkError: https://{NAME}:9/dns-query#127.0.0.1: connect: Connection "
                                  "refused"), doh.stdout


def test_reload_switches_a_plain_upstream_to_encrypted(tls_lab, workdir):
    d = daemon(workdir, GOOD, encryption="no")
    try:
        assert ask(uniq("reload"), "A", server="127.0.0.1", port=d.port).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["transport"] == "udp" and "encryption = no" in up["note"], up
        d.reload(d.config.replace("encryption = no", "encryption = strict"))
        assert ask(uniq("reload"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
        [up] = upstream_status(d)
        assert up["transport"] == "tls" and up["origin"] == "ddr-verified", up
        v = d.varlink()
        try:
            assert v.status()["upstreams"] == [f"{GOOD}:53"]
        finally:
            v.close()
    finally:
        d.stop()
