"""The discovery proxy (RFC 8766) on the DNS stub: a link's mDNS services served as unicast DNS under a domain,
to clients on another network (host r, linked to host A only, see Scripts/lab).

A daemon of its own runs in dlab-a with `[discovery-proxy] domain = proxy.lab.test` and its stub on host A's
address on the second network; host b publishes a service with avahi-publish; queries come from dlab-r."""

import uuid

import pytest

from stubkit import StubDaemon, ask, lab_popen, stop, wait_until

DOMAIN = "proxy.lab.test"
REMOTE_SERVER = "198.51.100.1"   # host A on the second network
PORT = 5305
WINDOW_TIMEOUT = 5


@pytest.fixture(scope="module")
def proxy(lab, workdir):
    config = f"""
[stub]
allow = 198.51.100.0/24
[discovery-proxy]
domain = {DOMAIN}
"""
    daemon = StubDaemon(workdir / "proxy", [f"{REMOTE_SERVER}:{PORT}", f"127.0.0.1:{PORT}"], config)
    daemon.start()
    yield daemon
    alive = daemon.alive()
    tail = daemon.log_tail()
    daemon.stop()
    assert alive, f"the proxy daemon died:\n{tail}"


@pytest.fixture(scope="module")
def service(lab):
    """`Proxy Game <id>` (_tictactoe._tcp, port 4242, TXT board=3x3 flag) published on host b."""
    name = f"Proxy Game {uuid.uuid4().hex[:6]}"
    proc = lab_popen("b", "avahi-publish", "-s", name, "_tictactoe._tcp", "4242", "board=3x3", "flag")
    yield name
    stop(proc)


def remote(name, rtype="A", **kw):
    return ask(name, rtype, server=REMOTE_SERVER, port=PORT, ns="dlab-r", timeout=WINDOW_TIMEOUT, **kw)


def escaped(instance: str) -> str:
    return instance.replace(" ", "\\032")


def test_proxy_browse_from_another_network(proxy, service):
    ptr = f"_tictactoe._tcp.{DOMAIN}."
    # The browse PTR is shared: the proxy collects answers for its window, then answers.
    assert wait_until(lambda: any(escaped(service) in t for t in remote(ptr, "PTR").texts("PTR")), timeout=10), \
        remote(ptr, "PTR").msg
    r = remote(ptr, "PTR")
    assert r.rcode == "NOERROR"
    instance = f"{escaped(service)}._tictactoe._tcp.{DOMAIN}."
    # The instance name keeps its case (RFC 6763 §4.1.1), rewritten from .local to the proxy domain.
    assert instance in r.texts("PTR"), r.texts("PTR")
    assert all(0 < ttl <= 10 for ttl in r.ttls()), r.ttls()
    assert not r.msg.flags & 0x0400, "AA must not be set"

    srv = remote(instance, "SRV")
    assert srv.rcode == "NOERROR", srv.msg
    (priority, weight, port, target) = srv.texts("SRV")[0].split()
    assert port == "4242" and target == f"lab-b.{DOMAIN}.", srv.texts("SRV")
    txt = remote(instance, "TXT")
    assert '"board=3x3"' in txt.texts("TXT")[0] and '"flag"' in txt.texts("TXT")[0], txt.texts("TXT")

    a = remote(f"lab-b.{DOMAIN}", "A")
    assert a.texts("A") == ["192.0.2.2"], a.msg
    aaaa = remote(f"lab-b.{DOMAIN}", "AAAA")
    # Link-local and loopback addresses never leave the link (RFC 8766 §5.5.2).
    assert aaaa.texts("AAAA") and all(not t.startswith("fe80") for t in aaaa.texts("AAAA")), aaaa.texts("AAAA")


def test_proxy_service_types_and_browse_domains(proxy, service):
    types = f"_services._dns-sd._udp.{DOMAIN}."
    assert wait_until(
        lambda: f"_tictactoe._tcp.{DOMAIN}." in remote(types, "PTR").texts("PTR"), timeout=10), \
        remote(types, "PTR").texts("PTR")
    for label in ("b", "db", "lb"):
        r = remote(f"{label}._dns-sd._udp.{DOMAIN}", "PTR")
        assert r.texts("PTR") == [f"{DOMAIN}."], r.msg


def test_proxy_synthesizes_soa_and_ns_and_nxdomain(proxy):
    soa = remote(DOMAIN, "SOA")
    assert soa.rcode == "NOERROR"
    assert soa.texts("SOA")[0].startswith(f"ns.{DOMAIN}. hostmaster.{DOMAIN}."), soa.texts("SOA")
    ns = remote(DOMAIN, "NS")
    assert ns.texts("NS") == [f"ns.{DOMAIN}."], ns.msg
    missing = remote(f"nobody-{uuid.uuid4().hex[:6]}.{DOMAIN}", "A")
    assert missing.rcode == "NXDOMAIN", missing.msg
    authority = missing.rrs("authority")
    assert [rr[2] for rr in authority] == ["SOA"], missing.msg   # RFC 2308 §3: SOA in authority
    assert authority[0][1] <= 10


def test_proxy_refuses_networks_not_allowed(proxy):
    allowed = proxy.config
    proxy.reload("[discovery-proxy]\ndomain = " + DOMAIN + "\n")
    try:
        r = remote(DOMAIN, "SOA")
        assert r.rcode == "REFUSED", r.msg
    finally:
        proxy.reload(allowed)
    restored = f"""
[stub]
allow = 198.51.100.0/24
[discovery-proxy]
domain = {DOMAIN}
"""
    proxy.reload(restored)
    assert remote(DOMAIN, "SOA").rcode == "NOERROR"


def test_proxy_burst_is_bounded_and_no_amplifier(proxy):
    """Many distinct queries at once: every one is answered (or refused as busy) with a small reply, and the
    daemon keeps serving."""
    from stubkit import make_query, udp_exchange, parallel
    names = [f"burst-{i}-{uuid.uuid4().hex[:4]}.{DOMAIN}" for i in range(300)]
    queries = [make_query(n, "A").to_wire() for n in names]
    replies = parallel(*[lambda q=q: udp_exchange(q, REMOTE_SERVER, PORT, ns="dlab-r", timeout=10) for q in queries])
    answered = [r for r in replies if r]
    assert len(answered) >= len(queries) * 0.9, f"{len(answered)} of {len(queries)} answered"
    for query, reply in zip(queries, replies):
        if reply:
            assert len(reply) <= len(query) + 120, "reply far larger than the query"
    import dns.message
    import dns.rcode
    rcodes = [dns.rcode.to_text(dns.message.from_wire(r).rcode()) for r in answered]
    # Each name is looked up on the link (NXDOMAIN: nobody has it) unless the proxy already runs its maximum of
    # concurrent look-ups, then it says SERVFAIL at once: the work per burst is bounded.
    assert set(rcodes) <= {"NXDOMAIN", "SERVFAIL"}, set(rcodes)
    assert rcodes.count("NXDOMAIN") >= 100, rcodes.count("NXDOMAIN")
    assert remote(DOMAIN, "SOA").rcode == "NOERROR"
    status = proxy.varlink().status()
    assert status["stub"]["local"] >= rcodes.count("NXDOMAIN")


def test_remote_discoverd_browses_the_link_through_the_proxy(proxy, workdir):
    """A second discoverd on host r (another network) whose upstream is the proxy's stub finds a python-zeroconf
    peer on host A's link with `discover browse TYPE --domain DOMAIN`: unicast DNS-SD end to end."""
    import json
    import time

    from stubkit import DISCOVERD_BIN, LAB_SCRIPT, REPO, Varlink, run

    name = f"ZC Remote {uuid.uuid4().hex[:6]}"
    peer = lab_popen("b", REPO / ".venv" / "bin" / "python", REPO / "lab" / "zcpeer.py", "publish", "--name", name,
                     "--type", "_tictactoe._tcp", "--port", "4243", "--txt", "board=3x3")
    remote_daemon = f"proxy-remote-{uuid.uuid4().hex[:4]}"
    socket_path = workdir / f"{remote_daemon}.sock"
    try:
        assert peer.stdout.readline().startswith("ready"), "python-zeroconf peer did not come up"
        run([LAB_SCRIPT, "spawn", "r", remote_daemon, DISCOVERD_BIN, "--socket", socket_path, "--state-dir",
             workdir / f"{remote_daemon}-state", "--upstream", f"{REMOTE_SERVER}:{PORT}", "--stub-listen", "none"],
            timeout=30)
        assert wait_until(lambda: socket_path.exists(), timeout=15), "remote discoverd did not start"
        discover = DISCOVERD_BIN.parent / "discover"
        found = []

        def browse_finds():
            cp = run([discover, "--socket", socket_path, "browse", "_tictactoe._tcp", "--domain", DOMAIN,
                      "--resolve", "--once", "--json"], check=False, timeout=30)
            events = [json.loads(line) for line in cp.stdout.splitlines() if line.startswith("{")]
            found[:] = [e for e in events if e.get("service", {}).get("name") == name]
            return bool(found)

        assert wait_until(browse_finds, timeout=20), "the remote discoverd did not find the peer through the proxy"
        service = found[-1]["service"]
        assert service["domain"].rstrip(".") == DOMAIN
        assert service.get("port") == 4243, service
        assert "192.0.2.2" in service.get("addresses", []), service
        assert service.get("txt", {}).get("board") == "3x3", service
    finally:
        run([LAB_SCRIPT, "kill", remote_daemon], check=False, timeout=30)
        stop(peer)
