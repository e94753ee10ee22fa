"""`.local` names through the daemon's Avahi client (dlab-a's avahi-daemon, host lab-a; its peer lab-b in
dlab-b). `.local` and link-local reverse names never go to the unicast upstream (RFC 6762 §22).

Every test here is named test_local_avahi_*: they need the lab's avahi-daemons and the daemon's D-Bus
connection to host a's bus (Scripts/lab spawn sets DBUS_SYSTEM_BUS_ADDRESS)."""

import ipaddress
import re
import uuid

import pytest

from stubkit import ask, kdig, lab_exec, lab_popen, stop, wait_until

LOCAL_TIMEOUT = 5


def no_upstream(fault, *names):
    for name in names:
        assert fault.count(name) == 0, f"{name} reached the unicast upstream"


def test_local_avahi_peer_address(stub, fault):
    r = ask("lab-b.local", "A", timeout=LOCAL_TIMEOUT)
    assert r.rcode == "NOERROR", r.msg
    assert r.texts("A") == ["192.0.2.2"], r.msg
    assert all(0 < ttl <= 10 for ttl in r.ttls()), r.ttls()
    r = ask("lab-b.local", "AAAA", tcp=True, timeout=LOCAL_TIMEOUT)
    assert r.rcode == "NOERROR" and "2001:db8::2" in r.texts("AAAA"), r.msg
    no_upstream(fault, "lab-b.local")


def test_local_avahi_kdig_and_case(stub, fault):
    out = kdig("@127.0.0.1", "LAB-B.Local", "A", "+timeout=5")
    assert out.status == "NOERROR" and [r[4] for r in out.records("ANSWER", "A")] == ["192.0.2.2"], out.text
    r = ask("LAB-B.Local", "A", timeout=LOCAL_TIMEOUT)
    question = r.query_wire[12:12 + len("LAB-B.Local") + 2 + 4]
    assert r.wire[12:12 + len(question)] == question, "question not echoed byte for byte"


def test_local_avahi_unknown_name_nxdomain(stub, api, fault):
    name = f"nope-{uuid.uuid4().hex[:6]}.local"
    before = api.status()["stub"]["local"]
    r = ask(name, "A", timeout=LOCAL_TIMEOUT)
    assert r.rcode == "NXDOMAIN", r.msg
    assert api.status()["stub"]["local"] == before + 1
    no_upstream(fault, name)


def test_local_avahi_link_local_reverse(stub, fault):
    """PTR of lab-b's IPv6 link-local address (ip6.arpa under fe80::/10) is asked through mDNS, never upstream.
    The lab's avahi-daemons do not publish reverse records for link-local addresses (`avahi-resolve -a` times
    out too), so NXDOMAIN is the right answer here; lab-b.local. when they do."""
    out = lab_exec("b", "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link").stdout
    m = re.search(r"inet6 (fe80::[0-9a-f:]+)/", out)
    assert m, out
    rev = ipaddress.ip_address(m.group(1)).reverse_pointer
    r = ask(rev, "PTR", timeout=LOCAL_TIMEOUT)
    assert (r.rcode, r.texts("PTR")) in (("NOERROR", ["lab-b.local."]), ("NXDOMAIN", [])), r.msg
    no_upstream(fault, rev)


@pytest.fixture
def published_service():
    """A DNS-SD service published by lab-b's avahi-daemon (avahi-publish inside dlab-b)."""
    instance = f"Stub Test {uuid.uuid4().hex[:6]}"
    proc = lab_popen("b", "avahi-publish", "-s", instance, "_dstub._tcp", "4242", "path=/stub", "v=1")
    yield instance
    stop(proc)


def test_local_avahi_dns_sd(stub, fault, published_service):
    instance = published_service
    fqdn = f"{instance}._dstub._tcp.local."
    browse = {}

    def found():
        browse["r"] = ask("_dstub._tcp.local", "PTR", timeout=LOCAL_TIMEOUT)
        return fqdn.replace(" ", "\\032") in browse["r"].texts("PTR")

    assert wait_until(found, 10, interval=0.2), browse["r"].msg
    srv = ask(fqdn, "SRV", timeout=LOCAL_TIMEOUT)
    assert srv.texts("SRV") == ["0 0 4242 lab-b.local."], srv.msg
    txt = ask(fqdn, "TXT", tcp=True, timeout=LOCAL_TIMEOUT)
    assert sorted(txt.texts("TXT")[0].split()) == ['"path=/stub"', '"v=1"'], txt.msg
    no_upstream(fault, "_dstub._tcp.local", fqdn.rstrip("."))
