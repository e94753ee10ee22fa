"""DDR (RFC 9462) beyond a resolver designating itself: designations at other addresses (hints and TargetNames),
opportunistic discovery for a private/local upstream (§4.3), and re-discovery when the TTL runs out and on Reload.

Each test runs its own Unbound in dlab-a on loopback (127.77.3.x, "local" in RFC 9462's sense): plain DNS on
127.77.3.1 answering `_dns.resolver.arpa SVCB` with the designation the test writes, and DoT/DoH on the
designated address with a certificate of the lab CA made here for the case. lab.test questions go to Knot.
The capture runs on dlab-a's loopback, where everything between discoverd and these servers travels.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from stubkit import EDE_NETWORK_ERROR, LAB_DIR, LAB_SCRIPT, ask, lab_exec, run, uniq, wait_until
from test_stub_encrypted import CA, DISCOVER, GOOD, daemon, read_pcap, tls_lab, upstream_status, wire_name  # noqa: F401

PLAIN, OTHER = "127.77.3.1", "127.77.3.2"
KNOT = "192.0.2.53"


def make_cert(work: Path, name: str, san: str) -> tuple[Path, Path]:
    """A server certificate of the lab CA for SAN (openssl), valid 2 days; the CA's serial file is left alone."""
    work = work / f"cert-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    key, csr, ext, pem = (work / f"{name}.{s}" for s in ("key", "csr", "ext", "pem"))
    run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
         "-subj", f"/CN={name}", "-out", csr])
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                   f"subjectAltName={san}\n")
    run(["openssl", "x509", "-req", "-in", csr, "-CA", CA, "-CAkey", LAB_DIR / "ca" / "ca.key",
         "-set_serial", str(int(time.time() * 1000)), "-days", "2", "-sha256", "-extfile", ext, "-out", pem])
    return key, pem


class DesignatingUnbound:
    """Unbound in dlab-a: plain DNS on 127.77.3.1 with DESIGNATION as `_dns.resolver.arpa` SVCB data, DoT (853)
    and DoH (443) on ENCRYPTED with CERT; designations change live through unbound-control."""

    def __init__(self, work: Path, designations: list[str], cert: tuple[Path, Path], encrypted: str = PLAIN,
                 extra: list[str] = ()):
        self.name = f"ddr-unbound-{uuid.uuid4().hex[:8]}"
        self.dir = work / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf = self.dir / "unbound.conf"
        lines = [f"    local-data: '{d}'" for d in [*designations, *extra]]
        interfaces = [f"    interface: {PLAIN}@53"] + [f"    interface: {encrypted}@{p}" for p in (853, 443)]
        self.conf.write_text("\n".join([
            "server:", '    username: ""', '    chroot: ""', '    pidfile: ""', f'    directory: "{self.dir}"',
            "    use-syslog: no", '    logfile: ""', "    verbosity: 1", "    num-threads: 1", "    do-daemonize: no",
            "    port: 53", "    tls-port: 853", "    https-port: 443", '    http-endpoint: "/dns-query"',
            f'    tls-service-key: "{cert[0]}"', f'    tls-service-pem: "{cert[1]}"', *interfaces,
            "    access-control: 127.0.0.0/8 allow", '    module-config: "iterator"', "    do-not-query-localhost: no",
            '    local-zone: "resolver.arpa." static', '    local-zone: "ddr.test." static', *lines,
            "stub-zone:", '    name: "lab.test."', f"    stub-addr: {KNOT}",
            "remote-control:", "    control-enable: yes", f'    control-interface: "{self.dir}/control.sock"',
            "    control-use-cert: no", ""]))

    def __enter__(self):
        run([LAB_SCRIPT, "spawn", "a", self.name, "unbound", "-d", "-c", self.conf], timeout=30)
        if not wait_until(lambda: self._answers(), 10):
            self.__exit__()
            pytest.fail(f"the designating Unbound did not answer on {PLAIN}")
        return self

    def _answers(self) -> bool:
        try:
            return ask("_dns.resolver.arpa", "SVCB", server=PLAIN, port=53, timeout=1).rcode == "NOERROR"
        except Exception:  # noqa: BLE001 (not up yet)
            return False

    def designate(self, designations: list[str]) -> None:
        """Replaces the designation, live."""
        ctl = ["unbound-control", "-c", str(self.conf)]
        lab_exec("a", *ctl, "local_data_remove", "_dns.resolver.arpa")
        for d in designations:
            lab_exec("a", *ctl, "local_data", d)

    def __exit__(self, *exc):
        run([LAB_SCRIPT, "kill", self.name], check=False, timeout=30)


class LoopbackCapture:
    """tcpdump on dlab-a's loopback (discoverd ↔ the designating Unbound) into a pcap file."""

    def __init__(self, path: Path, bpf: str = "host 127.77.3.1 or host 127.77.3.2"):
        self.path = path
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "dlab-a", "tcpdump", "--immediate-mode", "-i", "lo", "-U", "-s", "0", "-w",
             str(path), bpf], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        line = b""
        while time.monotonic() < deadline and b"listening" not in line:
            line = self.proc.stderr.readline()
        assert b"listening" in line, "tcpdump did not start"

    def stop(self):
        time.sleep(0.3)
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=10)
        return read_pcap(self.path)


def svcb(priority: int, target: str, params: str, ttl: int = 300) -> str:
    return f"_dns.resolver.arpa. {ttl} IN SVCB {priority} {target} {params}"


def assert_private(packets, names, encrypted: str, port: int = 853):
    """No name asked is on the wire in clear text, and the queries went to ENCRYPTED:PORT over TCP."""
    for n in names:
        assert not [p for p in packets if wire_name(n) in p[4]], n
    assert [p for p in packets if p[2] == encrypted and p[3] == port and p[4]], "nothing sent to the designation"


@pytest.mark.parametrize("addressing", ["ipv4hint", "target-name"])
def test_designation_at_another_address_is_verified_for_the_original_address(tls_lab, workdir, addressing):
    cert = make_cert(workdir, "other", f"DNS:dot.ddr.test,IP:{PLAIN}")
    if addressing == "ipv4hint":
        records, extra = [svcb(1, "dot.ddr.test.", f'alpn="dot" ipv4hint={OTHER}')], []
    else:  # no hints: the address of the TargetName, asked of the plain upstream
        records, extra = [svcb(1, "dot.ddr.test.", 'alpn="dot"')], [f"dot.ddr.test. 300 IN A {OTHER}"]
    with DesignatingUnbound(workdir, records, cert, encrypted=OTHER, extra=extra):
        d = daemon(workdir, PLAIN, encryption="strict")
        names = [uniq("ddrother") for _ in range(4)]
        cap = LoopbackCapture(workdir / f"other-{addressing}.pcap")
        try:
            for n in names:
                assert ask(n, "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
            [up] = upstream_status(d)
            assert up["transport"] == "tls" and up["origin"] == "ddr-verified", up
            assert up["verifiedName"] == PLAIN, up  # the certificate proved the ORIGINAL address (§4.2)
            assert f"tls://{OTHER}:853 for {PLAIN}" in up["note"], up
        finally:
            packets = cap.stop()
            d.stop()
    assert_private(packets, names, OTHER)


@pytest.mark.parametrize("encryption", ["strict", "opportunistic"])
def test_designation_at_another_address_whose_certificate_lacks_the_original_is_not_used(tls_lab, workdir, encryption):
    # unbound-tls's certificate names 192.0.2.63 and dns.lab.test, not the plain upstream's 127.77.3.1.
    cert = make_cert(workdir, "plain", f"IP:{PLAIN}")
    with DesignatingUnbound(workdir, [svcb(1, "dns.lab.test.", f'alpn="dot" ipv4hint={GOOD}')], cert):
        d = daemon(workdir, PLAIN, encryption=encryption)
        try:
            r = ask(uniq("ddrlack"), "A", server="127.0.0.1", port=d.port, timeout=6)
            if encryption == "opportunistic":
                assert wait_until(lambda: "not done yet" not in (upstream_status(d)[0]["note"] or ""), 5)
                r = ask(uniq("ddrlack"), "A", server="127.0.0.1", port=d.port, timeout=6)
            [up] = upstream_status(d)
            why = f"does not name the plain upstream's address {PLAIN}"
            if encryption == "strict":
                assert r.rcode == "SERVFAIL"
                assert any(c == EDE_NETWORK_ERROR and why in t for c, t in r.ede), r.ede
                assert up["origin"] == "configured" and up["transport"] == "none" and why in up["note"], up
            else:
                assert r.rcode == "NXDOMAIN"  # over plain DNS, as opportunistic allows
                assert up["transport"] == "udp" and up["origin"] == "configured" and why in up["note"], up
        finally:
            d.stop()


@pytest.mark.parametrize("encryption", ["opportunistic", "strict"])
def test_private_upstream_designating_its_own_address_is_opportunistic_only(tls_lab, workdir, encryption):
    # A certificate nobody can verify for 127.77.3.1 (only wrong.example): §4.3 allows TLS without authentication
    # for a private/local upstream designating its own address, in opportunistic mode only.
    cert = make_cert(workdir, "unverifiable", "DNS:wrong.example")
    with DesignatingUnbound(workdir, [svcb(1, "dot.ddr.test.", f'alpn="dot" ipv4hint={PLAIN}')], cert):
        d = daemon(workdir, PLAIN, encryption=encryption)
        names = [uniq("ddropp") for _ in range(4)]
        cap = LoopbackCapture(workdir / f"opp-{encryption}.pcap")
        try:
            if encryption == "strict":
                r = ask(names[0], "A", server="127.0.0.1", port=d.port, timeout=6)
                assert r.rcode == "SERVFAIL" and EDE_NETWORK_ERROR in r.ede_codes(), r.ede
                [up] = upstream_status(d)
                assert up["transport"] == "none" and up["origin"] == "configured", up
                assert "certificate does not match" in up["note"], up
                return
            ask(uniq("ddropp-first"), "A", server="127.0.0.1", port=d.port, timeout=6)  # starts discovery
            assert wait_until(lambda: upstream_status(d)[0]["origin"] == "ddr-opportunistic", 5), upstream_status(d)
            for n in names:
                assert ask(n, "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
            [up] = upstream_status(d)
            assert up["transport"] == "tls" and up.get("verifiedName") is None and up["handshakes"] >= 1, up
            assert "opportunistic" in up["note"], up
            text = run([DISCOVER, "--socket", d.socket_path, "status"]).stdout
            assert f"{PLAIN}:53: tls (ddr-opportunistic)" in text and "not authenticated" in text, text
        finally:
            packets = cap.stop()
            d.stop()
    assert_private(packets, names, PLAIN)


def test_rediscovery_when_the_ttl_runs_out_and_on_reload_without_interrupting_queries(tls_lab, workdir):
    cert = make_cert(workdir, "self", f"IP:{PLAIN}")
    dot = svcb(1, "dot.ddr.test.", f'alpn="dot" ipv4hint={PLAIN}', ttl=5)
    doh = svcb(1, "doh.ddr.test.", f'alpn="h2" key7="/dns-query{{?dns}}" ipv4hint={PLAIN}', ttl=300)
    with DesignatingUnbound(workdir, [dot], cert) as unbound:
        d = daemon(workdir, PLAIN, encryption="strict")
        try:
            assert ask(uniq("ddrttl"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
            assert upstream_status(d)[0]["transport"] == "tls", upstream_status(d)
            # The designation changes; after 80% of its 5 s TTL a query starts discovery again, and every query
            # meanwhile is answered (over the old designation until the new one is in place).
            unbound.designate([doh])
            deadline = time.monotonic() + 10
            rcodes = []
            while time.monotonic() < deadline and upstream_status(d)[0]["transport"] != "https":
                rcodes.append(ask(uniq("ddrttl"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode)
                time.sleep(0.2)
            [up] = upstream_status(d)
            assert up["transport"] == "https" and up["origin"] == "ddr-verified", up
            assert f"https://{PLAIN}:443/dns-query" in up["note"], up
            assert rcodes and set(rcodes) == {"NXDOMAIN"}, rcodes
            # Reload asks again at once (the DoH designation's TTL is 300 s).
            unbound.designate([svcb(1, "dot.ddr.test.", f'alpn="dot" ipv4hint={PLAIN}', ttl=300)])
            d.reload(d.config)
            rcodes = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and upstream_status(d)[0]["transport"] != "tls":
                rcodes.append(ask(uniq("ddrreload"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode)
                time.sleep(0.2)
            assert upstream_status(d)[0]["transport"] == "tls", upstream_status(d)
            # Reload may have finished discovery before the first query here (its DNSSEC probe asks the upstream
            # at once): every query asked meanwhile, and one more after, is answered.
            rcodes.append(ask(uniq("ddrreload"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode)
            assert set(rcodes) == {"NXDOMAIN"}, rcodes
        finally:
            d.stop()


@pytest.mark.parametrize("own, overall", [("no", "strict"), ("strict", "no")])
def test_per_upstream_encryption_mode_overrides_the_global_one(tls_lab, workdir, own, overall):
    # unbound-tls (192.0.2.63) designates itself with a certificate naming its address: DDR upgrades it unless its
    # own mode says no.
    d = daemon(workdir, f"{GOOD} encryption={own}", encryption=overall)
    try:
        r = ask(uniq("ddrown"), "A", server="127.0.0.1", port=d.port, timeout=6)
        assert r.rcode == "NXDOMAIN", r.ede
        [up] = upstream_status(d)
        assert up["server"] == f"{GOOD}:53 encryption={own}", up
        if own == "no":
            assert up["transport"] == "udp" and up["note"] == "clear text: encryption = no", up
        else:
            assert up["transport"] == "tls" and up["origin"] == "ddr-verified", up
    finally:
        d.stop()


def test_designations_a_server_got_wrong_are_passed_over_with_their_reasons(tls_lab, workdir):
    # RFC 9461 §5: a dohpath must be a path template naming `dns`; an unspecified address designates no server.
    # Each wrong record is passed over with its reason in Status (and in strict mode's refusal), never used.
    cert = make_cert(workdir, "self", f"IP:{PLAIN}")
    wrong = [
        svcb(1, "doh.ddr.test.", f'alpn="h2" key7="/dns-query" ipv4hint={PLAIN}'),
        svcb(2, "doh.ddr.test.", f'alpn="h2" key7="dns-query{{?dns}}" ipv4hint={PLAIN}'),
        svcb(3, "dot.ddr.test.", 'alpn="dot" ipv4hint=0.0.0.0'),
    ]
    reasons = ["without the dns variable", "must start with '/'", "no unicast address (0.0.0.0)"]
    good = svcb(4, "doh.ddr.test.", f'alpn="h2" key7="/dns-query{{?dns}}" ipv4hint={PLAIN}')
    with DesignatingUnbound(workdir, wrong, cert) as unbound:
        d = daemon(workdir, PLAIN, encryption="strict")
        try:
            r = ask(uniq("ddrwrong"), "A", server="127.0.0.1", port=d.port, timeout=6)
            assert r.rcode == "SERVFAIL", r.msg
            assert any(c == EDE_NETWORK_ERROR and all(w in t for w in reasons) for c, t in r.ede), r.ede
            [up] = upstream_status(d)
            assert up["transport"] == "none" and all(w in up["note"] for w in reasons), up
            # The same records with a usable one after them: that one is used.
            unbound.designate([*wrong, good])
            d.reload(d.config)
            assert wait_until(lambda: upstream_status(d)[0]["transport"] == "https", 5), upstream_status(d)
            r = ask(uniq("ddrwrong"), "A", server="127.0.0.1", port=d.port, timeout=6)
            assert r.rcode == "NXDOMAIN", r.ede
            [up] = upstream_status(d)
            assert up["origin"] == "ddr-verified" and f"https://{PLAIN}:443/dns-query{{?dns}}" in up["note"], up
        finally:
            d.stop()


@pytest.mark.parametrize("encryption", ["opportunistic", "strict"])
def test_a_designated_resolver_that_cannot_be_reached(tls_lab, workdir, encryption):
    # A designation at a port nobody listens on (a firewall, a wrong port): strict refuses every query with the
    # reason; opportunistic answers over plain DNS meanwhile and says so, in Status and in one log line, until the
    # upstream designates something that answers.
    cert = make_cert(workdir, "self", f"IP:{PLAIN}")
    closed = svcb(1, "dot.ddr.test.", f'alpn="dot" port=8853 ipv4hint={PLAIN}')
    with DesignatingUnbound(workdir, [closed], cert) as unbound:
        # Strict: captured from the daemon's start (its first look-up, the DNSSEC probe, already connects).
        cap = LoopbackCapture(workdir / "closed-strict.pcap") if encryption == "strict" else None
        try:
            d = daemon(workdir, PLAIN, encryption=encryption)
        except BaseException:
            if cap:
                cap.stop()
            raise
        try:
            if cap:
                names = [uniq("ddrclosed") for _ in range(3)]
                try:
                    for n in names:
                        r = ask(n, "A", server="127.0.0.1", port=d.port, timeout=6)
                        assert r.rcode == "SERVFAIL", r.msg
                        assert any(c == EDE_NETWORK_ERROR and "Connection refused" in t for c, t in r.ede), r.ede
                finally:
                    packets = cap.stop()
                # Nothing in clear text: no name asked is on the wire, only the refused connects to 8853.
                for n in names:
                    assert not [p for p in packets if wire_name(n) in p[4]], n
                assert [p for p in packets if p[2] == PLAIN and p[3] == 8853], "no connect to the designation"
                [up] = upstream_status(d)
                assert up["origin"] == "configured" and "Connection refused" in up["lastFailure"], up
                assert "not verified yet" in up["note"], up
                return
            ask(uniq("ddrclosed-first"), "A", server="127.0.0.1", port=d.port, timeout=6)  # starts discovery
            assert wait_until(lambda: "not done yet" not in (upstream_status(d)[0]["note"] or ""), 5)
            for _ in range(5):
                assert ask(uniq("ddrclosed"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode == "NXDOMAIN"
            [up] = upstream_status(d)
            assert up["transport"] == "udp" and up["origin"] == "configured", up
            assert "clear text while the designation fails" in up["note"] and "Connection refused" in up["note"], up
            line = "DDR designation not reachable; using plain DNS until it answers again"
            assert d.log_tail(200).count(line) == 1, d.log_tail(50)
            # The upstream designates its listening port: upgraded, and Status says tls again.
            unbound.designate([svcb(1, "dot.ddr.test.", f'alpn="dot" ipv4hint={PLAIN}')])
            d.reload(d.config)
            assert wait_until(lambda: ask(uniq("ddrclosed"), "A", server="127.0.0.1", port=d.port, timeout=6).rcode
                              == "NXDOMAIN" and upstream_status(d)[0]["transport"] == "tls", 6), upstream_status(d)
            [up] = upstream_status(d)
            assert up["origin"] == "ddr-opportunistic" and "clear text" not in up["note"], up
        finally:
            d.stop()
