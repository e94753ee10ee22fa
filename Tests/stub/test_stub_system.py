"""The stub as other programs' resolver: glibc (getent ahosts) through a private /etc/resolv.conf, Unbound
forwarding a zone to it, and access control ([stub] allow) for clients on another lab host."""

import time

import pytest

from stubkit import (STUB_LAB, StubDaemon, ask, kdig, lab_exec, lab_popen, sleep_until, stop, stub_counters,
                     tcp_connect, udp_exchange, uniq, wait_until)

# ------------------------------------------------------------------ glibc

GETENT = r"""
set -e
mount --bind "$1" /etc/resolv.conf
mount --bind "$2" /etc/nsswitch.conf
mount --bind "$3" /etc/hosts
start=$(date +%s%N)
set +e
getent ahosts "$4"
rc=$?
end=$(date +%s%N)
echo "ELAPSED_NS $((end - start))"
exit $rc
"""


@pytest.fixture(scope="module")
def etc(tmp_path_factory):
    """resolv.conf naming the stub, and nsswitch/hosts that make glibc ask DNS: bind-mounted in a private mount
    namespace (unshare -m), never over the machine's own files."""
    d = tmp_path_factory.mktemp("etc")
    (d / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:2 attempts:1\n")
    (d / "nsswitch.conf").write_text("hosts: files dns\n")
    (d / "hosts").write_text("127.0.0.1 localhost\n")
    return d


def getent_ahosts(etc, name: str) -> tuple[set[str], float]:
    """Addresses glibc's getaddrinfo returned for NAME inside dlab-a, and getent's wall time in ms."""
    cp = lab_exec("a", "unshare", "-m", "sh", "-c", GETENT, "sh", etc / "resolv.conf", etc / "nsswitch.conf",
                  etc / "hosts", name, check=False)
    lines = cp.stdout.splitlines()
    assert lines and lines[-1].startswith("ELAPSED_NS "), (cp.stdout, cp.stderr)
    ms = int(lines[-1].split()[1]) / 1e6
    assert cp.returncode == 0, f"getent ahosts {name} exited {cp.returncode}: {cp.stdout} {cp.stderr}"
    return {line.split()[0] for line in lines[:-1]}, ms


def test_getent_ahosts_through_stub(stub, fault, etc):
    name = uniq("glibc")
    fault.raw(name, "A", "192.0.2.130")
    fault.raw(name, "AAAA", "2001:db8::130")
    addrs, _ = getent_ahosts(etc, name)
    assert addrs == {"192.0.2.130", "2001:db8::130"}
    assert fault.count(name, "A") == 1 and fault.count(name, "AAAA") == 1


def test_getent_cname_and_nxdomain(stub, etc):
    addrs, _ = getent_ahosts(etc, "cname.lab.test")
    assert addrs == {"192.0.2.10", "2001:db8::10"}
    cp = lab_exec("a", "unshare", "-m", "sh", "-c", GETENT, "sh", etc / "resolv.conf", etc / "nsswitch.conf",
                  etc / "hosts", uniq("glibc-nx"), check=False)
    assert cp.returncode == 2, f"getent exit code for an unknown name: {cp.returncode} {cp.stdout} {cp.stderr}"


def test_getent_expired_name_answered_at_once(stub, fault, etc, record_property):
    """The issue's benchmark: an expired name through glibc while the upstream takes 300 ms."""
    name = uniq("glibc-stale")
    fault.raw(name, "A", "192.0.2.131", ttl=1)
    fault.raw(name, "AAAA", "2001:db8::131", ttl=1)
    assert getent_ahosts(etc, name)[0] == {"192.0.2.131", "2001:db8::131"}
    sleep_until(time.monotonic() + 1.3)
    fault.raw(name, "A", "192.0.2.132", delay_ms=300)
    fault.raw(name, "AAAA", "2001:db8::132", delay_ms=300)
    addrs, ms = getent_ahosts(etc, name)
    record_property("getent_expired_ms", round(ms, 2))
    print(f"getent ahosts of an expired name with a 300 ms upstream: {ms:.2f} ms")
    assert addrs == {"192.0.2.131", "2001:db8::131"}, "the stale addresses, at once"
    assert ms < 300, f"getent took {ms:.1f} ms: it waited for the upstream"
    assert wait_until(lambda: getent_ahosts(etc, name)[0] == {"192.0.2.132", "2001:db8::132"}, 3)
    assert fault.count(name, "A") == 2 and fault.count(name, "AAAA") == 2


# ------------------------------------------------------------------ Unbound

UNBOUND_PORT = 5399
UNBOUND_CONF = """\
server:
    interface: 127.0.0.1
    port: {port}
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{dir}"
    pidfile: "{dir}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 1
    num-threads: 1
    so-reuseport: no
    do-ip6: no
    do-not-query-localhost: no
    module-config: "iterator"
    # Randomised query-name case (draft-vixie-dnsext-dns0x20): Unbound checks the stub echoes it exactly.
    use-caps-for-id: yes
    qname-minimisation: no
    prefetch: no
    access-control: 127.0.0.0/8 allow
    # Nothing but lab.test is resolved (and nothing leaves the lab anyway: dlab-a has no default route).
    local-zone: "." refuse
    local-zone: "lab.test." transparent
    domain-insecure: "lab.test."
remote-control:
    control-enable: no
forward-zone:
    name: "lab.test."
    forward-addr: 127.0.0.1@53
"""


@pytest.fixture(scope="module")
def unbound(stub, tmp_path_factory):
    d = tmp_path_factory.mktemp("unbound")
    conf = d / "unbound.conf"
    conf.write_text(UNBOUND_CONF.format(port=UNBOUND_PORT, dir=d))
    lab_exec("a", "unbound-checkconf", conf)
    proc = lab_popen("a", "unbound", "-d", "-c", conf)
    def ready():
        out = kdig("@127.0.0.1", "-p", str(UNBOUND_PORT), "+timeout=1", "+retry=0", "lab.test", "SOA", check=False)
        return proc.poll() is None and out.status == "NOERROR"

    try:
        ok = wait_until(ready, 15)
        if not ok:
            stop(proc)
            pytest.fail(f"unbound did not come up: {proc.stderr.read() if proc.stderr else ''}")
        yield proc
    finally:
        stop(proc)


def test_unbound_forwards_zone_to_stub(stub, api, fault, unbound):
    name = uniq("unbound")
    fault.raw(name, "A", "192.0.2.140")
    before = stub_counters(api.status())
    out = kdig("@127.0.0.1", "-p", str(UNBOUND_PORT), name, "A")
    assert out.status == "NOERROR", out.text
    assert [r[4] for r in out.records("ANSWER", "A")] == ["192.0.2.140"], out.text
    assert fault.count(name, "A") == 1
    after = stub_counters(api.status())
    assert after["udp"] + after["tcp"] > before["udp"] + before["tcp"], "the query did not go through the stub"


def test_unbound_through_stub_nxdomain_and_https(stub, unbound):
    out = kdig("@127.0.0.1", "-p", str(UNBOUND_PORT), uniq("unbound-nx"), "A")
    assert out.status == "NXDOMAIN", out.text
    out = kdig("@127.0.0.1", "-p", str(UNBOUND_PORT), "h3.lab.test", "HTTPS")
    assert out.status == "NOERROR" and any("alpn=h3,h2" in r[4] for r in out.records("ANSWER", "HTTPS")), out.text


# ------------------------------------------------------------------ access control


def test_other_lab_host_refused(stub, api):
    """A stranger gets a bare REFUSED over UDP: header and question, no OPT and no EDE, never more bytes than it
    sent (rate-limited per prefix, so a spoofed flood cannot turn the stub into a reflector)."""
    before = stub_counters(api.status())
    r = ask("h3.lab.test", "A", server=STUB_LAB, ns="dlab-b")
    assert r.rcode == "REFUSED" and not r.msg.answer and not r.msg.authority
    assert r.msg.edns == -1 and not r.ede_codes(), r.msg
    assert len(r.wire) <= len(r.query_wire)
    r = ask("h3.lab.test", "A", server=STUB_LAB, ns="dlab-b", edns=None)
    assert r.rcode == "REFUSED" and r.msg.edns == -1
    assert len(r.wire) == len(r.query_wire)
    assert stub_counters(api.status())["refused"] == before["refused"] + 2


def test_other_lab_host_tcp_closed_at_accept(stub, api):
    """The access list is checked at accept: a stranger's TCP connection is closed before anything is read."""
    before = stub_counters(api.status())
    s = tcp_connect(STUB_LAB, ns="dlab-b")
    try:
        s.settimeout(3)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    finally:
        s.close()
    assert stub_counters(api.status())["refused"] == before["refused"] + 1


def test_other_lab_host_refused_kdig(stub):
    out = kdig("@192.0.2.1", "h3.lab.test", "A", host="b")
    assert out.status == "REFUSED" and not out.records("ANSWER"), out.text


def test_other_lab_host_malformed_gets_silence(stub):
    """A client that may not use the stub gets no FORMERR either (nothing to reflect at a spoofed source)."""
    assert udp_exchange(b"\x12\x34\x00\x00\x00\x02" + bytes(6), STUB_LAB, ns="dlab-b", timeout=0.5) is None


ALLOW_PORT = 5302


def allow_config(allow: list[str]) -> str:
    return "[resolver]\ntimeout-ms = 1000\nattempts = 1\n[stub]\n" + "".join(f"allow = {a}\n" for a in allow)


@pytest.fixture(scope="module")
def allow_daemon(lab, workdir):
    """A second daemon in dlab-a whose [stub] allow lets the lab's prefixes in."""
    d = StubDaemon(workdir / "allow", [f"{STUB_LAB}:{ALLOW_PORT}", f"[2001:db8::1]:{ALLOW_PORT}"],
                   allow_config(["192.0.2.0/24", "2001:db8::/64"]))
    d.start()
    yield d
    alive = d.alive()
    d.stop()
    assert alive, f"the second daemon died:\n{d.log_tail()}"


@pytest.mark.parametrize("server", [STUB_LAB, "2001:db8::1"])
def test_allow_cidr_lets_lab_host_in(allow_daemon, server):
    for tcp in (False, True):
        r = ask("h3.lab.test", "A", server=server, port=ALLOW_PORT, ns="dlab-b", tcp=tcp)
        assert r.rcode == "NOERROR" and r.texts("A") == ["192.0.2.10"], r.msg
        assert not r.ede_codes()


def test_reload_applies_stub_allow(allow_daemon):
    """Reload (io.discoverd.Daemon.Reload) re-reads [stub] allow: dropping the lab prefix refuses dlab-b."""
    try:
        allow_daemon.reload(allow_config(["198.51.100.0/24"]))
        r = ask("h2only.lab.test", "A", server=STUB_LAB, port=ALLOW_PORT, ns="dlab-b")
        assert r.rcode == "REFUSED", f"still {r.rcode} after Reload removed 192.0.2.0/24 from [stub] allow"
    finally:
        allow_daemon.reload(allow_config(["192.0.2.0/24", "2001:db8::/64"]))
