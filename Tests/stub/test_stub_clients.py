"""Real DNS clients (kdig, drill, dnspython) against the stub: record types, transports, header bits, the
question echoed byte for byte, CNAME chains, TCP pipelining and TCP fallback upstream."""

import random

import dns.flags
import dns.message
import dns.name
import pytest

from stubkit import (STUB_V4, ask, drill, kdig, make_query, stub_counters, tcp_connect, tcp_exchange, tcp_recv,
                     tcp_send, udp_exchange, uniq)

# Knot's zone data (lab/zones/lab.test.zone): (name, type, text the answer's RDATA must contain).
KNOT = {
    "A": ("h3.lab.test", "192.0.2.10"),
    "AAAA": ("h3.lab.test", "2001:db8::10"),
    "HTTPS": ("h3.lab.test", "alpn=h3,h2"),
    "SVCB": ("svcb.lab.test", "alpn=h2"),
    "CNAME": ("cname.lab.test", "h3.lab.test."),
    "NS": ("lab.test", "ns.lab.test."),
    "SOA": ("lab.test", "hostmaster.lab.test."),
}
# Synthesized by the fault server (Knot's zone has none of these types).
SYNTH = {
    "MX": "10 mail.lab.test.",
    "TXT": '"hello stub" "second string"',
    "SRV": "0 5 443 target-a.lab.test.",
    "PTR": "ptr-target.lab.test.",
}
TYPES = list(KNOT) + list(SYNTH)


@pytest.fixture(scope="session")
def records(session_fault):
    """type -> (name, expected rdata text) for every type the clients ask."""
    table = dict(KNOT)
    for rtype, text in SYNTH.items():
        if rtype == "PTR":
            name = f"{random.randrange(1, 255)}.{random.randrange(1, 255)}.2.0.192.in-addr.arpa"
        else:
            name = uniq(rtype.lower())
        session_fault.raw(name, rtype, text)
        table[rtype] = (name, text)
    return table


def run_client(tool: str, server: str, name: str, rtype: str, tcp: bool, *extra):
    if tool == "kdig":
        return kdig(f"@{server}", name, rtype, *(["+tcp"] if tcp else []), *extra)
    return drill(*(["-t"] if tcp else []), *extra, name, f"@{server}", rtype)


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize("tool", ["kdig", "drill"])
@pytest.mark.parametrize("rtype", TYPES)
def test_record_types(stub, api, records, tool, rtype, tcp):
    name, expected = records[rtype]
    before = stub_counters(api.status())
    out = run_client(tool, STUB_V4, name, rtype, tcp)
    after = stub_counters(api.status())
    assert out.status == "NOERROR", out.text
    assert {"qr", "rd", "ra"} <= out.flags and "aa" not in out.flags, out.text
    answers = out.records("ANSWER", rtype)
    assert any(expected in r[4] for r in answers), f"{expected!r} not in the {rtype} answer:\n{out.text}"
    assert all(0 < r[1] <= 300 for r in out.records("ANSWER")), out.text
    if rtype == "CNAME":
        assert [r[3] for r in out.records("ANSWER")] == ["CNAME"], "a CNAME query gets the CNAME only"
    transport = "tcp" if tcp else "udp"
    assert after[transport] - before[transport] == 1, (before, after)
    if tool == "kdig":
        assert f"@53({transport.upper()})" in out.text, out.text


def test_ipv6_listener(stub):
    out = kdig("@::1", "h3.lab.test", "AAAA")
    assert out.status == "NOERROR" and any("2001:db8::10" in r[4] for r in out.records("ANSWER")), out.text


def test_lab_address_listener_serves_own_host(stub):
    """dlab-a's own address 192.0.2.1 is allowed by default (the machine's own addresses)."""
    out = kdig("@192.0.2.1", "h3.lab.test", "A", "+tcp")
    assert out.status == "NOERROR" and any("192.0.2.10" in r[4] for r in out.records("ANSWER")), out.text


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_long_name(stub, fault, tcp):
    """A legal name of about 200 octets: the query is over 128 bytes."""
    name = uniq(".".join(["long" + "x" * 50] * 3))  # the last label gets 9 more: 63
    fault.raw(name, "A", "192.0.2.155")
    out = kdig("@127.0.0.1", name, "A", *(["+tcp"] if tcp else []))
    assert out.status == "NOERROR", out.text
    assert [r[4] for r in out.records("ANSWER", "A")] == ["192.0.2.155"], out.text


def test_kdig_nord_is_copied(stub):
    out = kdig("@127.0.0.1", "h2only.lab.test", "A", "+nord")
    assert out.status == "NOERROR", out.text
    assert "rd" not in out.flags and {"qr", "ra"} <= out.flags, out.text
    assert any("192.0.2.11" in r[4] for r in out.records("ANSWER")), out.text


def test_kdig_nsid_is_ignored_not_echoed(stub):
    out = kdig("@127.0.0.1", "multi.lab.test", "A", "+nsid")
    assert out.status == "NOERROR", out.text
    assert "EDNS PSEUDOSECTION" in out.text and "UDP size: 1232 B" in out.text, out.text
    assert "NSID" not in out.text, "the stub has no NSID: the option must not come back"
    assert sorted(r[4] for r in out.records("ANSWER", "A")) == ["192.0.2.26", "192.0.2.27"], out.text


def test_drill_edns_bufsize(stub):
    """drill -b sets an EDNS buffer size; the reply's OPT says ours (1232)."""
    out = drill("-b", "1400", "-o", "rd", "ech.lab.test", "@127.0.0.1", "HTTPS")
    assert out.status == "NOERROR" and out.records("ANSWER", "HTTPS"), out.text


def test_id_and_mixed_case_question_echoed(stub, fault):
    name = uniq("Mixed-Case")
    fault.raw(name.lower(), "A", "192.0.2.150")
    shouty = "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(name))
    for tcp in (False, True, False):  # a miss, then hits over both transports
        for qid in (0, 0xBEEF, 0xFFFF):
            r = ask(shouty, "A", tcp=tcp, qid=qid)
            assert r.wire is not None
            qlen = len(dns.name.from_text(shouty).to_wire()) + 4  # QNAME, QTYPE, QCLASS
            assert r.wire[:2] == r.query_wire[:2], "ID not echoed"
            assert r.wire[12:12 + qlen] == r.query_wire[12:12 + qlen], (r.wire[12:12 + qlen], r.query_wire)
            assert r.texts("A") == ["192.0.2.150"]
    assert fault.count(name, "A") == 1


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_header_bits(stub, fault, tcp):
    """QR and RA set, RD and CD copied, AA never, even though the upstream (the fault server) set AA."""
    name = uniq("hdr")
    fault.raw(name, "A", "192.0.2.151")
    for rd in (True, False, True):
        q = make_query(name, "A", rd=rd)
        q.flags |= dns.flags.CD
        wire = (tcp_exchange if tcp else udp_exchange)(q.to_wire())
        r = dns.message.from_wire(wire)
        assert r.flags & dns.flags.QR and r.flags & dns.flags.RA
        assert bool(r.flags & dns.flags.RD) == rd
        assert r.flags & dns.flags.CD, "CD not copied"
        assert not r.flags & dns.flags.AA, "AA set on forwarded data"
        assert not r.flags & dns.flags.AD, "AD set without validation"
        assert r.rcode() == 0 and [rd.to_text() for rrset in r.answer for rd in rrset] == ["192.0.2.151"]


def test_cname_chain_across_answers(stub, fault):
    """c1 CNAME c2 (one upstream answer), c2 CNAME c3 (another), c3 A: the reply carries the whole chain."""
    c1, c2, c3 = uniq("chain1"), uniq("chain2"), uniq("chain3")
    fault.raw(c1, "A", f"{c2}.", rtype="CNAME")
    fault.raw(c2, "A", f"{c3}.", rtype="CNAME")
    fault.raw(c3, "A", "192.0.2.152", ttl=120)
    for tcp in (False, True):  # miss, then from cache
        r = ask(c1, "A", tcp=tcp)
        assert r.rcode == "NOERROR"
        got = [(n, t, d) for n, _, t, d in r.rrs()]
        want = [(f"{c1}.", "CNAME", f"{c2}."), (f"{c2}.", "CNAME", f"{c3}."), (f"{c3}.", "A", "192.0.2.152")]
        assert got == want, got
    assert [fault.count(n, "A") for n in (c1, c2, c3)] == [1, 1, 1]


def test_knot_cname_chain(stub):
    out = kdig("@127.0.0.1", "cnamealias.lab.test", "HTTPS")
    assert out.status == "NOERROR", out.text
    rows = [(r[0], r[3], r[4]) for r in out.records("ANSWER")]
    assert ("cnamealias.lab.test.", "CNAME", "alias.lab.test.") in rows, out.text
    assert any(r[0] == "alias.lab.test." and r[1] == "HTTPS" and "h3.lab.test." in r[2] for r in rows), out.text


def test_tcp_pipelining_out_of_order(stub, fault):
    """RFC 7766 §6.2.1.1: queries on one connection are answered as they complete: a slow miss sent first
    does not hold back the cached answers sent after it."""
    slow, fast = uniq("pipe-slow"), uniq("pipe-fast")
    fault.raw(slow, "A", "192.0.2.153", delay_ms=600)
    fault.raw(fast, "A", "192.0.2.154")
    assert ask(fast, "A").texts("A") == ["192.0.2.154"]  # cached now
    s = tcp_connect()
    try:
        queries = [make_query(slow, "A", qid=1), make_query(fast, "A", qid=2), make_query(fast, "AAAA", qid=3),
                   make_query(fast, "A", qid=4)]
        s.sendall(b"".join(len(w).to_bytes(2, "big") + w for w in (q.to_wire() for q in queries)))
        order = []
        for _ in queries:
            r = dns.message.from_wire(tcp_recv(s))
            order.append(r.id)
        assert sorted(order) == [1, 2, 3, 4]
        assert order[-1] == 1 or order.index(1) > order.index(2), f"slow query answered first: {order}"
        assert order.index(2) < order.index(1) and order.index(4) < order.index(1), order
    finally:
        s.close()


def test_tcp_fallback_upstream(stub, fault):
    """The upstream truncates over UDP: the daemon asks again over TCP and relays that answer."""
    name = uniq("tcfall")
    fault.set(name, "truncate", qtype="TXT")  # TCP goes on to Knot: NXDOMAIN with the SOA
    r = ask(name, "TXT")
    assert r.rcode == "NXDOMAIN", r.msg
    assert [t for _, _, t, _ in r.rrs("authority")] == ["SOA"]
    assert fault.count(name, "TXT", "udp") == 1 and fault.count(name, "TXT", "tcp") == 1


def test_any_rfc8482(stub):
    for tcp in (False, True):
        r = ask("h3.lab.test", "ANY", tcp=tcp)
        assert r.rcode == "NOERROR"
        assert [(t, d) for _, _, t, d in r.rrs()] == [("HINFO", '"RFC8482" ""')], r.msg


def test_tcp_connection_serves_many_queries(stub):
    s = tcp_connect()
    try:
        for i in range(20):
            q = make_query("h3.lab.test" if i % 2 else "h2only.lab.test", "A", qid=i)
            tcp_send(s, q.to_wire())
            r = dns.message.from_wire(tcp_recv(s))
            assert r.id == i and r.rcode() == 0 and len(r.answer) == 1
    finally:
        s.close()
