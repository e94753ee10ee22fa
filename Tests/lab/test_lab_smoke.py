"""Smoke tests of the discoverd network lab (Scripts/lab).

Assume the lab is up: Scripts/lab up && .venv/bin/pytest -q Tests/lab
With CI=true a missing lab is a failure, not a skip. The last test takes the
lab down and brings it up again.
"""

import os
import socket
import subprocess
import time
import uuid

import pytest

from conftest import (LAB_DIR, LAB_SCRIPT, REPO, VENV_PY, avahi_resolved, lab_exec, lab_popen, probe, run,
                      stop)

REQUIRED_KEYS = ["LAB_DIR", "LAB_NS_A", "LAB_NS_B", "LAB_NS_DNS", "LAB_A_DBUS", "LAB_B_DBUS", "LAB_A_IP4",
                 "LAB_B_IP4", "LAB_KNOT", "LAB_KNOT6", "LAB_FAULT", "LAB_FAULT_CTL", "LAB_IFNAME", "LAB_ZONE"]


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ------------------------------------------------------------------ layout


def test_env_file(lab):
    for k in REQUIRED_KEYS:
        assert lab.get(k), f"{k} missing from {LAB_DIR}/env"
    assert lab["LAB_KNOT"] == "192.0.2.53" and lab["LAB_FAULT"] == "192.0.2.54"
    assert lab["LAB_A_DBUS"] == f"unix:path={LAB_DIR}/a/bus.sock"
    assert run([LAB_SCRIPT, "env"]).stdout == (LAB_DIR / "env").read_text()


def test_status_healthy(lab):
    out = run([LAB_SCRIPT, "status"]).stdout
    for p in ("dbus-a", "avahi-a", "dbus-b", "avahi-b", "knot", "dnsfault"):
        assert any(line.split()[1] == p and "alive" in line for line in out.splitlines() if line.startswith("proc")), out


@pytest.mark.parametrize("host,addrs", [("a", ["192.0.2.1/24", "2001:db8::1/64"]),
                                        ("b", ["192.0.2.2/24", "2001:db8::2/64"]),
                                        ("dns", ["192.0.2.53/24", "192.0.2.54/24", "2001:db8::53/64"])])
def test_addresses_and_no_way_out(lab, host, addrs):
    out = lab_exec(host, "ip", "-br", "addr", "show", "dev", "eth0").stdout
    for a in addrs:
        assert a in out
    assert "fe80::" in out, "link-local address missing (avahi needs it)"
    assert lab_exec(host, "ip", "-4", "route", "show", "default").stdout.strip() == ""
    assert lab_exec(host, "ip", "-6", "route", "show", "default").stdout.strip() == ""
    # The machine's own resolver (and anything else off the lab link) is unroutable
    # from inside the lab; `ip route get` asks the kernel without sending anything.
    for dst in ("10.255.255.53", "8.8.8.8", "2001:4860:4860::8888"):
        cp = lab_exec(host, "ip", "route", "get", dst, check=False)
        assert cp.returncode != 0 and "unreachable" in cp.stderr.lower(), (dst, cp.stdout, cp.stderr)
    # lo and the lab link; host a also has remote0, its own link to host r (the second network).
    expected = ["lo", "eth0", "remote0"] if host == "a" else ["lo", "eth0"]
    lines = [ln for ln in lab_exec(host, "ip", "-br", "link").stdout.splitlines() if ln.strip()]
    assert [ln.split()[0].split("@")[0] for ln in lines] == expected


def test_second_network_reaches_only_host_a(lab):
    out = lab_exec("r", "ip", "-br", "addr", "show", "dev", "eth0").stdout
    assert "198.51.100.2/24" in out and "2001:db8:1::2/64" in out
    assert lab_exec("r", "ip", "-4", "route", "show", "default").stdout.strip() == ""
    # Host r has no route to the lab link: only host A (198.51.100.1) is reachable from there.
    cp = lab_exec("r", "ip", "route", "get", "192.0.2.53", check=False)
    assert cp.returncode != 0 and "unreachable" in cp.stderr.lower(), (cp.stdout, cp.stderr)
    assert lab_exec("r", "ip", "route", "get", "198.51.100.1").returncode == 0


@pytest.mark.parametrize("listen,connect", [("TCP4-LISTEN:9799,bind=192.0.2.2", "TCP4:192.0.2.2:9799"),
                                             ("TCP6-LISTEN:9798,bind=[2001:db8::2]", "TCP6:[2001:db8::2]:9798")])
def test_hosts_reach_each_other(lab, listen, connect):
    srv = lab_popen("b", "socat", listen, "SYSTEM:echo hello-from-b")
    try:
        deadline = time.monotonic() + 5
        while True:
            cp = lab_exec("a", "socat", "-T2", "-", connect, check=False, stdin=subprocess.DEVNULL)
            if cp.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert cp.stdout.strip() == "hello-from-b", cp.stderr
    finally:
        stop(srv)


def test_unix_socket_crosses_namespaces(lab, tmp_path):
    path = f"/tmp/dlab-smoke-{uuid.uuid4().hex[:8]}.sock"
    srv = lab_popen("a", "socat", f"UNIX-LISTEN:{path},fork", "SYSTEM:echo hello-from-a")
    try:
        deadline = time.monotonic() + 5
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        data = s.recv(100)
        s.close()
        assert data.strip() == b"hello-from-a"
    finally:
        stop(srv)
        if os.path.exists(path):
            os.unlink(path)


# ------------------------------------------------------------------ avahi / dbus


def dbus_avahi(bus: str, method: str, *, as_nobody=False) -> str:
    cmd = ["dbus-send", "--system", "--print-reply", "--reply-timeout=3000", "--dest=org.freedesktop.Avahi", "/",
           f"org.freedesktop.Avahi.Server.{method}"]
    if as_nobody:
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd]
    return run(cmd, env={**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": bus}).stdout


@pytest.mark.parametrize("host", ["a", "b"])
def test_avahi_answers_on_own_bus(lab, host):
    bus = lab[f"LAB_{host.upper()}_DBUS"]
    assert '"avahi 0.' in dbus_avahi(bus, "GetVersionString")
    assert f'"lab-{host}"' in dbus_avahi(bus, "GetHostName")
    assert "int32 2" in dbus_avahi(bus, "GetState")  # AVAHI_SERVER_RUNNING


def test_avahi_bus_usable_by_nobody(lab):
    assert '"lab-a"' in dbus_avahi(lab["LAB_A_DBUS"], "GetHostName", as_nobody=True)


def test_avahi_a_sees_service_published_on_b(lab):
    name = uniq("Smoke B")
    pub = lab_popen("b", "avahi-publish", "-s", name, "_dlabsmoke._tcp", "4242", "k=v", "hello=world")
    try:
        rows = avahi_resolved("_dlabsmoke._tcp", want=lambda r: r[3] == name)
        mine = [r for r in rows if r[3] == name]
        assert mine, f"service {name!r} from B not seen in A: {rows}"
        # =;iface;proto;name;type;domain;host;address;port;txt
        r4 = [r for r in mine if r[2] == "IPv4"]
        assert r4 and r4[0][1] == "eth0" and r4[0][6] == "lab-b.local" and r4[0][7] == "192.0.2.2"
        assert all(r[8] == "4242" for r in mine)
        assert all('"k=v"' in r[9] and '"hello=world"' in r[9] for r in mine)
    finally:
        stop(pub)


def test_root_namespace_client_uses_lab_avahi(lab):
    """A client outside the namespaces talks to A's avahi over its bus socket."""
    name = uniq("Smoke RootNS")
    pub = lab_popen("b", "avahi-publish", "-s", name, "_dlabroot._tcp", "4343")
    try:
        env = {**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": lab["LAB_A_DBUS"]}
        rows = avahi_resolved("_dlabroot._tcp", host=None, env=env, want=lambda r: r[3] == name)
        assert any(r[3] == name and r[8] == "4343" for r in rows), rows
    finally:
        stop(pub)


def test_zeroconf_peer_in_b_visible_to_avahi_in_a(lab):
    name = uniq("ZC Peer")
    pub = lab_popen("b", VENV_PY, REPO / "lab" / "zcpeer.py", "publish", "--name", name, "--type", "_dlabzc._tcp",
                    "--port", "8080", "--txt", "path=/x", "--txt", "v=1")
    try:
        line = pub.stdout.readline()
        assert line.startswith("ready"), (line, pub.stderr.read() if pub.poll() is not None else "")
        rows = avahi_resolved("_dlabzc._tcp", want=lambda r: r[3] == name)
        mine = [r for r in rows if r[3] == name]
        assert mine, f"zeroconf service {name!r} not seen by avahi in A: {rows}"
        assert all(r[8] == "8080" and '"path=/x"' in r[9] and '"v=1"' in r[9] for r in mine)
        assert any(r[7] == "192.0.2.2" for r in mine)
    finally:
        stop(pub)


def test_avahi_stop_and_start(lab):
    bus = lab["LAB_B_DBUS"]
    run([LAB_SCRIPT, "avahi", "stop", "b"])
    assert run([LAB_SCRIPT, "avahi", "status", "b"], check=False).returncode != 0
    cp = run(["dbus-send", "--system", "--print-reply", "--reply-timeout=1000", "--dest=org.freedesktop.Avahi",
              "/", "org.freedesktop.Avahi.Server.GetState"], check=False,
             env={**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": bus})
    assert cp.returncode != 0, "avahi-b still answers after stop"
    run([LAB_SCRIPT, "avahi", "start", "b"], timeout=40)
    assert "int32 2" in dbus_avahi(bus, "GetState")
    assert "alive" in run([LAB_SCRIPT, "avahi", "status", "b"]).stdout


# ------------------------------------------------------------------ Knot


@pytest.mark.parametrize("server", ["192.0.2.53", "2001:db8::53"])
def test_knot_answers_https(lab, server):
    out = lab_exec("a", "kdig", "+short", "+time=2", "+retry=0", f"@{server}", "h3.lab.test", "HTTPS").stdout
    assert out.strip() == "1 . alpn=h3,h2"


ZONE_EXPECT = {
    ("h2only", "HTTPS"): ["1 . alpn=h2"],
    ("plain", "HTTPS"): [],
    ("plain", "A"): ["192.0.2.12"],
    ("alias", "HTTPS"): ["0 h3.lab.test."],
    ("alias2", "HTTPS"): ["0 alias.lab.test."],
    ("aliasloop1", "HTTPS"): ["0 aliasloop2.lab.test."],
    ("aliasloop2", "HTTPS"): ["0 aliasloop1.lab.test."],
    ("cname", "HTTPS"): ["h3.lab.test.", "1 . alpn=h3,h2"],
    ("_8443._https.port", "HTTPS"): ["1 port.lab.test. alpn=h3 port=8443"],
    ("_9443._https.port", "HTTPS"): ["1 . alpn=h3"],
    ("prio", "HTTPS"): ["1 prio-1.lab.test. alpn=h3,h2", "2 prio-2.lab.test. alpn=h3", "3 prio-3.lab.test. alpn=h2"],
    ("mandatory", "HTTPS"): ["1 . mandatory=alpn,port alpn=h3 port=8443"],
    ("hints", "HTTPS"): ["1 . alpn=h3 ipv4hint=192.0.2.80 ipv6hint=2001:db8::80"],
    ("hints", "A"): [],
    ("hintsplus", "A"): ["192.0.2.82"],
    ("nodefault", "HTTPS"): ["1 . alpn=h3 no-default-alpn"],
    ("unknownkey", "HTTPS"): ['1 . alpn=h3 key667="hello"'],
    ("svcb", "SVCB"): ["1 . alpn=h2"],
    ("doh", "HTTPS"): ['1 . alpn=h2,h3 key7="/dns-query{?dns}"'],
    ("slow", "HTTPS"): ["1 . alpn=h3"],
}


def test_zone_records(lab):
    bad = []
    for (name, qtype), want in ZONE_EXPECT.items():
        out = lab_exec("a", "kdig", "+short", "+time=2", "+retry=0", "@192.0.2.53", f"{name}.lab.test", qtype).stdout
        got = sorted(line.strip() for line in out.splitlines() if line.strip())
        if got != sorted(want):
            bad.append((name, qtype, got, want))
    ech = lab_exec("a", "kdig", "+short", "@192.0.2.53", "ech.lab.test", "HTTPS").stdout
    if "ech=" not in ech:
        bad.append(("ech", "HTTPS", ech, "ech=..."))
    ttl = lab_exec("a", "kdig", "+noall", "+answer", "@192.0.2.53", "stale.lab.test", "HTTPS").stdout.split()
    if ttl[1:2] != ["2"]:
        bad.append(("stale", "TTL", ttl, 2))
    nx = lab_exec("a", "kdig", "@192.0.2.53", "nx.lab.test", "A").stdout
    if "NXDOMAIN" not in nx:
        bad.append(("nx", "A", nx, "NXDOMAIN"))
    assert not bad, bad


# ------------------------------------------------------------------ fault server

FAULT = "192.0.2.54"


def test_fault_pass_relays_knot(fault):
    r = probe(FAULT, "h3.lab.test", "HTTPS")
    assert r["result"] == "answer" and r["rcode"] == "NOERROR" and r["id_match"]
    assert any('alpn="h3,h2"' in a for a in r["answers"]), r
    r6 = probe("2001:db8::54", "h3.lab.test", "A", tcp=True)
    assert any("192.0.2.10" in a for a in r6["answers"])


def test_fault_delay(fault):
    base = probe(FAULT, "slow.lab.test", "HTTPS")
    fault("set", "slow.lab.test", "delay", "300")
    slow = probe(FAULT, "slow.lab.test", "HTTPS")
    assert slow["result"] == "answer" and slow["ms"] >= 290, slow
    assert base["ms"] < 200, base
    other = probe(FAULT, "h3.lab.test", "HTTPS")
    assert other["ms"] < 200, "delay must only affect its own name"


def test_fault_drop(fault):
    fault("set", "h3.lab.test", "drop")
    assert probe(FAULT, "h3.lab.test", "A", timeout=0.7)["result"] == "timeout"
    assert probe(FAULT, "h3.lab.test", "A", tcp=True, timeout=0.7)["result"] == "timeout"
    assert int(fault("count", "h3.lab.test").strip()) == 2


@pytest.mark.parametrize("mode,rcode", [("servfail", "SERVFAIL"), ("refused", "REFUSED"), ("nxdomain", "NXDOMAIN")])
def test_fault_rcodes(fault, mode, rcode):
    fault("set", "h3.lab.test", mode)
    r = probe(FAULT, "h3.lab.test", "HTTPS")
    assert r["result"] == "answer" and r["rcode"] == rcode and r["answers"] == [] and r["id_match"]


def test_fault_truncate(fault):
    fault("set", "h3.lab.test", "truncate")
    udp = probe(FAULT, "h3.lab.test", "HTTPS")
    assert udp["tc"] is True and udp["answers"] == [] and udp["rcode"] == "NOERROR"
    tcp = probe(FAULT, "h3.lab.test", "HTTPS", tcp=True)
    assert tcp["tc"] is False and any('alpn="h3,h2"' in a for a in tcp["answers"]), tcp


def test_fault_garbage(fault):
    fault("set", "h3.lab.test", "garbage", "5")
    r = probe(FAULT, "h3.lab.test", "A")
    assert r["result"] == "garbage" and len(r["raw_hex"]) == 10


def test_fault_wrongid(fault):
    fault("set", "h3.lab.test", "wrongid")
    r = probe(FAULT, "h3.lab.test", "A")
    assert r["result"] == "answer" and r["id_match"] is False


def test_fault_wrongname(fault):
    fault("set", "h3.lab.test", "wrongname")
    r = probe(FAULT, "h3.lab.test", "A")
    assert r["qname"] == "h2only.lab.test." and any("192.0.2.11" in a for a in r["answers"])


def test_fault_raw(fault):
    good = "00010000010003026833"  # 1 . alpn=h3
    fault("set", "raw.lab.test", "raw", good, "--qtype", "HTTPS")
    r = probe(FAULT, "raw.lab.test", "HTTPS")
    assert r["result"] == "answer" and r["rdata_hex"] == [good] and 'alpn="h3"' in r["answers"][0]
    # Malformed SvcParams (keys out of order: port before alpn) go out byte for byte.
    bad = "0001000003000201bb0001000302" "6833"
    fault("set", "raw.lab.test", "raw", bad, "--qtype", "HTTPS")
    r = probe(FAULT, "raw.lab.test", "HTTPS")
    assert r["raw_hex"].endswith(bad)


def test_fault_qtype_rule_times_and_delay_combined(fault):
    fault("set", "h3.lab.test", "servfail", "--qtype", "HTTPS", "--times", "1", "--delay", "200")
    a = probe(FAULT, "h3.lab.test", "A")
    assert a["rcode"] == "NOERROR" and a["ms"] < 150
    first = probe(FAULT, "h3.lab.test", "HTTPS")
    assert first["rcode"] == "SERVFAIL" and first["ms"] >= 190
    second = probe(FAULT, "h3.lab.test", "HTTPS")
    assert second["rcode"] == "NOERROR" and second["ms"] < 150


def test_fault_wildcard_and_count(fault):
    fault("set", "*", "refused")
    assert probe(FAULT, "plain.lab.test", "A")["rcode"] == "REFUSED"
    fault("set", "plain.lab.test", "pass")
    assert probe(FAULT, "plain.lab.test", "A")["rcode"] == "NOERROR"
    probe(FAULT, "PLAIN.lab.test", "A", tcp=True)
    assert int(fault("count", "plain.lab.test")) == 3
    assert int(fault("count", "plain.lab.test", "--transport", "tcp")) == 1
    fault("reset")
    assert int(fault("count")) == 0


# ------------------------------------------------------------------ lifecycle (keep last)


def test_down_then_up(lab):
    run([LAB_SCRIPT, "down"], timeout=60)
    out = run(["ip", "netns", "list"]).stdout
    assert "dlab-" not in out
    assert not (LAB_DIR / "env").exists()
    run([LAB_SCRIPT, "up"], timeout=90)
    assert run([LAB_SCRIPT, "status"]).returncode == 0
    assert (LAB_DIR / "env").exists()
    cp = run([LAB_SCRIPT, "up"])  # already up: just reports
    assert "already up" in cp.stderr
