"""Helpers for the DNS stub suite (Tests/stub): the daemon under test, DNS clients inside the lab's
namespaces, the fault server's control socket and a varlink client.

The lab helpers of Tests/lab/conftest.py (lab_exec, netns_socket, missing, ...) are loaded from there under the
module name `labkit`, so this suite and the lab smoke tests share one implementation and can run in one pytest
invocation without their two conftest modules clashing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdatatype

_LAB_CONFTEST = Path(__file__).resolve().parents[1] / "lab" / "conftest.py"
if "labkit" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("labkit", _LAB_CONFTEST)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["labkit"] = _module
    _spec.loader.exec_module(_module)
import labkit  # noqa: E402  (loaded just above)
from labkit import LAB_DIR, LAB_SCRIPT, REPO, lab_exec, lab_popen, missing, netns_socket, run, stop  # noqa: E402,F401

DISCOVERD_BIN = Path(os.environ.get("DISCOVERD_BIN", REPO / ".build" / "debug" / "discoverd"))
FAULT_CTL = Path(os.environ.get("LAB_FAULT_CTL", LAB_DIR / "dns" / "fault.ctl"))
UPSTREAM = "192.0.2.54"      # the lab's fault server (relays Knot, 192.0.2.53)
STUB_V4 = "127.0.0.1"
STUB_V6 = "::1"
STUB_LAB = "192.0.2.1"       # dlab-a's lab address
ZONE = "lab.test"
STALE_TTL = 30               # [resolver] stale-ttl (the default)
TIMEOUT_MS = 1000            # [resolver] timeout-ms of the daemons under test (attempts = 1)
NO_OPTIMISTIC = f"noopt.{ZONE}"

EDE_STALE, EDE_PROHIBITED, EDE_NO_REACHABLE_AUTHORITY, EDE_NETWORK_ERROR = 3, 18, 22, 23


def uniq(prefix: str, parent: str = ZONE) -> str:
    """A name no other test (or helper sharing the lab) uses, so caches and fault counts start at zero."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}.{parent}"


def rdata_hex(rtype: str, text: str) -> str:
    """RDATA in wire form (names uncompressed) for a fault-server raw rule, e.g. rdata_hex("MX", "10 mx.lab.test.")."""
    return dns.rdata.from_text("IN", rtype, text).to_wire().hex()


# ---------------------------------------------------------------- the fault server


class FaultServer:
    """The lab fault server's control socket (JSON lines, see lab/dnsfault.py).

    The fault server is shared by everyone using the lab: rules are set on names this suite made up (uniq) and
    cleared one by one by `clear_all`, never with a global reset; counts are read per name.
    """

    def __init__(self, path: Path = FAULT_CTL):
        self.path = path
        self.rules: set[tuple[str, str | None]] = set()

    def request(self, req: dict) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.path))
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        resp = json.loads(buf)
        if not resp.get("ok"):
            raise AssertionError(f"fault server refused {req}: {resp}")
        return resp

    def set(self, name: str, mode: str, *, qtype: str | None = None, **opts) -> None:
        """A rule for NAME (and QTYPE): mode raw takes rdata=[hex...], ttl=, rtype=, wire=; any mode delay_ms=."""
        self.request({"cmd": "set", "name": name, "qtype": qtype, "mode": mode, **opts})
        self.rules.add((name, qtype))

    def raw(self, name: str, qtype: str, *texts: str, ttl: int = 300, rtype: str | None = None, **opts) -> None:
        """Answer NAME/QTYPE with records of RTYPE (default QTYPE) given in presentation form."""
        rt = rtype or qtype
        self.set(name, "raw", qtype=qtype, rdata=[rdata_hex(rt, t) for t in texts], ttl=ttl, rtype=rt, **opts)

    def clear(self, name: str, qtype: str | None = None) -> None:
        self.request({"cmd": "clear", "name": name, "qtype": qtype})
        self.rules.discard((name, qtype))

    def clear_all(self) -> None:
        for name, qtype in list(self.rules):
            self.clear(name, qtype)

    def count(self, name: str, qtype: str | None = None, transport: str | None = None) -> int:
        """Queries the fault server received for NAME (lowercased), optionally by type and transport."""
        return self.request({"cmd": "count", "name": name, "qtype": qtype, "transport": transport})["total"]

    def wait_count(self, name: str, qtype: str | None, at_least: int, timeout: float = 5.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            n = self.count(name, qtype)
            if n >= at_least or time.monotonic() > deadline:
                return n
            time.sleep(0.02)


# ---------------------------------------------------------------- varlink


# The client itself lives in Scripts/lib (the benchmarks use it too, without this kit's dependencies).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Scripts" / "lib"))
from varlinkclient import Varlink  # noqa: E402,F401


def stub_counters(status: dict) -> dict:
    """Status' stub object flattened: listen, udp, tcp, cacheAnswers, ... (queries split by transport)."""
    stub = dict(status["stub"])
    queries = stub.pop("queries")
    return {**stub, "udp": queries["udp"], "tcp": queries["tcp"]}


# ---------------------------------------------------------------- the daemon under test


@dataclass
class StubDaemon:
    """A discoverd started inside a lab namespace with `Scripts/lab spawn` (so `Scripts/lab down` would stop it
    too) and stopped by its recorded PID with `Scripts/lab kill`."""

    workdir: Path
    listen: list[str]
    config: str = ""
    host: str = "a"
    upstream: str | list[str] = UPSTREAM     # one, or several in failover order
    name: str = field(default_factory=lambda: f"stubtest-{os.getpid()}-{uuid.uuid4().hex[:4]}")
    binary: str | None = None                # another discoverd than DISCOVERD_BIN (a bench's baseline build)

    @property
    def socket_path(self) -> str:
        return str(self.workdir / "io.discoverd")

    @property
    def config_path(self) -> Path:
        return self.workdir / "discoverd.conf"

    @property
    def log_path(self) -> Path:
        return LAB_DIR / "logs" / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        try:
            return int((LAB_DIR / "pids" / f"{self.name}.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def alive(self) -> bool:
        pid = self.pid
        if pid is None:
            return False
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def start(self, timeout: float = 20.0) -> None:
        wait_for_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config)
        cmd = [self.binary or DISCOVERD_BIN, "--config", self.config_path, "--socket", self.socket_path,
               "--state-dir", self.workdir / "state"]
        for upstream in [self.upstream] if isinstance(self.upstream, str) else self.upstream:
            cmd += ["--upstream", upstream]
        for address in self.listen:
            cmd += ["--stub-listen", address]
        run([LAB_SCRIPT, "spawn", self.host, self.name, *cmd], timeout=30)
        deadline = time.monotonic() + timeout
        want = {f"{t} {a}" for a in self.listen for t in ("udp", "tcp")}
        last = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"discoverd exited during start-up:\n{self.log_tail()}")
            try:
                v = Varlink(self.socket_path, timeout=2)
                try:
                    last = v.status()
                finally:
                    v.close()
                if want <= set(last.get("stub", {}).get("listen", [])):
                    return
            except (OSError, ConnectionError, ValueError):
                pass
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"stub not listening on {sorted(want)} within {timeout}s; status {last}\n"
                             f"{self.log_tail()}")

    def varlink(self) -> Varlink:
        return Varlink(self.socket_path)

    def reload(self, config: str) -> dict:
        self.config = config
        self.config_path.write_text(config)
        v = self.varlink()
        try:
            return v.call("io.discoverd.Daemon.Reload")
        finally:
            v.close()

    def stop(self) -> None:
        if self.pid is not None:
            run([LAB_SCRIPT, "kill", self.name], check=False, timeout=30)

    def stop_alive(self, what: str = "discoverd") -> None:
        """Stops the daemon, which must still have been running: one that died on the way fails the test, with the
        tail of its log."""
        crashed = not self.alive()
        tail = self.log_tail()
        self.stop()
        if crashed:
            import pytest
            pytest.fail(f"{what} died:\n{tail}", pytrace=False)


class ScriptedUpstream:
    """A DNS server for one test on a UDP port inside a lab namespace: every query is kept (`queries`) and given to
    ANSWER, which returns the reply message, or None to stay silent."""

    def __init__(self, port: int, answer, *, host: str = "127.0.0.1", ns: str = "dlab-a"):
        self.answer = answer
        self.sock = netns_socket(ns, socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.settimeout(0.2)
        self.queries: list[dns.message.Message] = []
        self.silent = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                wire, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                query = dns.message.from_wire(wire)
            except Exception:
                continue
            self.queries.append(query)
            reply = self.answer(query)
            if reply is None:
                self.silent += 1
                continue
            self.sock.sendto(reply.to_wire(), peer)

    def seen(self, name: str) -> list[dns.message.Message]:
        return [q for q in self.queries if q.question[0].name.to_text().lower() == name.lower() + "."]

    def close(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()


def wait_for_binary(timeout: float = 120.0) -> None:
    """The integrator rebuilds the binary now and then: wait until it exists and has stopped changing."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            st = DISCOVERD_BIN.stat()
            if time.time() - st.st_mtime > 3 and os.access(DISCOVERD_BIN, os.X_OK):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            missing(f"discoverd binary {DISCOVERD_BIN} missing or still being written")
        time.sleep(1)


def port_in_use(host: str, port: int, ns: str = "a") -> bool:
    out = lab_exec(ns, "ss", "-Hlnu", f"sport = :{port}", check=False).stdout
    return any(line.split()[3].rsplit(":", 1)[0].strip("[]") in (host, "0.0.0.0", "*", "::")
               for line in out.splitlines() if len(line.split()) > 3)


# ---------------------------------------------------------------- DNS over sockets in the lab


def _family(server: str) -> int:
    return socket.AF_INET6 if ":" in server else socket.AF_INET


def udp_exchange(wire: bytes, server: str = STUB_V4, port: int = 53, *, ns: str = "dlab-a",
                 timeout: float = 2.0) -> bytes | None:
    """Sends one datagram and returns the first reply, or None on silence."""
    s = netns_socket(ns, _family(server), socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.sendto(wire, (server, port))
        try:
            return s.recvfrom(65535)[0]
        except socket.timeout:
            return None
    finally:
        s.close()


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def tcp_connect(server: str = STUB_V4, port: int = 53, *, ns: str = "dlab-a", timeout: float = 3.0) -> socket.socket:
    s = netns_socket(ns, _family(server), socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((server, port))
    return s


def tcp_send(s: socket.socket, wire: bytes) -> None:
    s.sendall(struct.pack("!H", len(wire)) + wire)


def tcp_recv(s: socket.socket) -> bytes:
    return recv_exact(s, struct.unpack("!H", recv_exact(s, 2))[0])


def tcp_exchange(wire: bytes, server: str = STUB_V4, port: int = 53, *, ns: str = "dlab-a",
                 timeout: float = 3.0) -> bytes | None:
    s = tcp_connect(server, port, ns=ns, timeout=timeout)
    try:
        tcp_send(s, wire)
        try:
            return tcp_recv(s)
        except (socket.timeout, ConnectionError):
            return None
    finally:
        s.close()


@dataclass
class Reply:
    query: dns.message.Message
    query_wire: bytes
    wire: bytes | None
    ms: float

    @property
    def msg(self) -> dns.message.Message:
        assert self.wire is not None, f"no reply to {self.query.question}"
        return dns.message.from_wire(self.wire)

    @property
    def rcode(self) -> str:
        return dns.rcode.to_text(self.msg.rcode())

    def rrs(self, section: str = "answer", rtype: str | None = None) -> list:
        out = []
        for rrset in getattr(self.msg, section):
            if rtype is None or dns.rdatatype.to_text(rrset.rdtype) == rtype:
                out += [(rrset.name.to_text(), rrset.ttl, dns.rdatatype.to_text(rrset.rdtype), rd.to_text())
                        for rd in rrset]
        return out

    def texts(self, rtype: str | None = None) -> list[str]:
        return [r[3] for r in self.rrs("answer", rtype)]

    def ttls(self) -> list[int]:
        return [r[1] for r in self.rrs("answer")]

    @property
    def ede(self) -> list[tuple[int, str]]:
        return [(o.code, o.text or "") for o in self.msg.options if o.otype == dns.edns.EDE]

    def ede_codes(self) -> list[int]:
        return [c for c, _ in self.ede]

    @property
    def flags(self) -> int:
        return self.msg.flags


def make_query(name: str, rtype: str = "A", *, edns: int | None = 0, payload: int = 1232, options=None,
               ednsflags: int = 0, rd: bool = True, qid: int | None = None) -> dns.message.Message:
    q = dns.message.make_query(name, rtype, use_edns=edns if edns is not None else False, payload=payload,
                               options=options, ednsflags=ednsflags)
    if not rd:
        q.flags &= ~dns.flags.RD
    q.id = random.randrange(1 << 16) if qid is None else qid
    return q


def ask(name: str, rtype: str = "A", *, tcp: bool = False, server: str = STUB_V4, port: int = 53,
        ns: str = "dlab-a", timeout: float = 3.0, **qopts) -> Reply:
    """One query from inside NS to the stub; see make_query for EDNS and flag options."""
    q = make_query(name, rtype, **qopts)
    wire = q.to_wire(max_size=65535)
    t0 = time.monotonic()
    xchg = tcp_exchange if tcp else udp_exchange
    resp = xchg(wire, server, port, ns=ns, timeout=timeout)
    return Reply(q, wire, resp, (time.monotonic() - t0) * 1000)


def ask_many(n: int, name: str, rtype: str = "A", **kw) -> list[Reply]:
    """N identical queries from N sockets at (nearly) the same moment."""
    return parallel(*[lambda: ask(name, rtype, **kw)] * n)


def header(wire: bytes) -> dict:
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", wire[:12])
    return {"id": qid, "qr": bool(flags & 0x8000), "opcode": flags >> 11 & 0xF, "aa": bool(flags & 0x0400),
            "tc": bool(flags & 0x0200), "rd": bool(flags & 0x0100), "ra": bool(flags & 0x0080),
            "rcode": flags & 0xF, "qd": qd, "an": an, "ns": ns, "ar": ar}


# ---------------------------------------------------------------- kdig and drill output


@dataclass
class DigOutput:
    """What kdig or drill printed: status, flags, id, counts, sections as (name, ttl, class, type, rdata)."""
    text: str
    status: str = ""
    id: int = -1
    flags: set = field(default_factory=set)
    counts: dict = field(default_factory=dict)
    sections: dict = field(default_factory=dict)

    def records(self, section: str = "ANSWER", rtype: str | None = None) -> list[tuple]:
        return [r for r in self.sections.get(section, []) if rtype is None or r[3] == rtype]


def parse_dig(text: str) -> DigOutput:
    """Parses kdig (3.x) and drill (1.8) text output; both follow dig's layout closely enough."""
    import re

    out = DigOutput(text)
    if m := re.search(r"(?:status|rcode): (\w+)[,;] id: (\d+)", text):
        out.status, out.id = m.group(1), int(m.group(2))
    if m := re.search(r";; [Ff]lags: ([a-z ]*?)\s*;", text):
        out.flags = set(m.group(1).split())
    for key in ("QUERY", "ANSWER", "AUTHORITY", "ADDITIONAL"):
        if m := re.search(rf"{key}: (\d+)", text):
            out.counts[key] = int(m.group(1))
    section = None
    for line in text.splitlines():
        if m := re.match(r";; (\w+) SECTION:", line):
            section = m.group(1)
            out.sections.setdefault(section, [])
            continue
        if not line.strip() or line.startswith(";"):
            if not line.strip():
                section = None
            continue
        if section:
            parts = line.split(None, 4)
            if len(parts) >= 4:
                out.sections[section].append((parts[0], int(parts[1]), parts[2], parts[3],
                                              parts[4] if len(parts) > 4 else ""))
    return out


def kdig(*args, host: str = "a", timeout: float = 10, check: bool = True) -> DigOutput:
    return parse_dig(lab_exec(host, "kdig", *args, timeout=timeout, check=check).stdout)


def drill(*args, host: str = "a", timeout: float = 10) -> DigOutput:
    return parse_dig(lab_exec(host, "drill", *args, timeout=timeout).stdout)


def parallel(*fns):
    """Runs the callables at once in threads; returns their results in order (exceptions re-raised)."""
    results: list = [None] * len(fns)
    errors: list = []

    def wrap(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def sleep_until(t: float) -> None:
    """Waits for a monotonic deadline (used only where the wait is the point: a TTL running out)."""
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Polls PREDICATE until it holds (True) or TIMEOUT seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
