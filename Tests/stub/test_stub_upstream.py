"""What the stub sends upstream, seen by a capturing DNS server: the DO bit passed on (RRSIGs kept for DO
clients only), the client's own EDNS options not forwarded.

A second daemon in dlab-a (stub on 127.0.0.1:5303, `[stub] local = no`) uses a Python DNS server on
127.0.0.1:5398 in dlab-a as its upstream; that server records every query and answers A with an address, plus an RRSIG when DO is set.
"""

import dns.edns
import dns.flags
import dns.message
import dns.rdatatype
import dns.rrset
import pytest

from stubkit import ScriptedUpstream, StubDaemon, ask, uniq

CAPTURE_PORT = 5398
STUB_PORT = 5303
RRSIG = "A 13 3 300 20300101000000 20200101000000 12345 lab.test. c2lnbmF0dXJlLW5vdC12YWxpZGF0ZWQ="


def capture_answer(q: dns.message.Message) -> dns.message.Message:
    """A with an address, plus an RRSIG when DO is set."""
    r = dns.message.make_response(q)
    question = q.question[0]
    if question.rdtype == dns.rdatatype.A:
        r.answer.append(dns.rrset.from_text(question.name, 300, "IN", "A", "192.0.2.170"))
        if q.ednsflags & dns.flags.DO:
            r.answer.append(dns.rrset.from_text(question.name, 300, "IN", "RRSIG", RRSIG))
    return r


@pytest.fixture(scope="module")
def capture(lab, workdir):
    upstream = ScriptedUpstream(CAPTURE_PORT, capture_answer)
    d = StubDaemon(workdir / "capture", [f"127.0.0.1:{STUB_PORT}"],
                   "[resolver]\ntimeout-ms = 1000\nattempts = 1\n[stub]\nlocal = no\n",
                   upstream=f"127.0.0.1:{CAPTURE_PORT}")
    try:
        d.start()
        yield upstream
    finally:
        alive = d.alive()
        d.stop()
        upstream.close()
    assert alive, f"the capture daemon died:\n{d.log_tail()}"


def test_do_bit_passed_upstream_rrsig_kept(capture):
    name = uniq("dnssec")
    r = ask(name, "A", port=STUB_PORT, ednsflags=dns.flags.DO)
    assert r.rcode == "NOERROR" and r.msg.ednsflags & dns.flags.DO
    seen = capture.seen(name)
    assert len(seen) == 1 and seen[0].ednsflags & dns.flags.DO, "DO not passed to the upstream"
    assert sorted(t for _, _, t, _ in r.rrs()) == ["A", "RRSIG"], r.msg
    plain = ask(name, "A", port=STUB_PORT)
    assert [t for _, _, t, _ in plain.rrs()] == ["A"], "RRSIG given to a client that did not set DO"


def test_rrsig_from_cache_for_do_client(capture):
    name = uniq("dnssec-cache")
    ask(name, "A", port=STUB_PORT, ednsflags=dns.flags.DO)
    r = ask(name, "A", port=STUB_PORT, ednsflags=dns.flags.DO, tcp=True)
    assert sorted(t for _, _, t, _ in r.rrs()) == ["A", "RRSIG"], r.msg
    assert len(capture.seen(name)) == 1


def test_client_options_not_forwarded(capture):
    name = uniq("opts")
    r = ask(name, "A", port=STUB_PORT, options=[dns.edns.GenericOption(65001, b"secret")])
    assert r.rcode == "NOERROR"
    seen = capture.seen(name)
    assert len(seen) == 1
    assert all(o.otype != 65001 for o in seen[0].options), "a client's EDNS option went upstream"
    assert seen[0].payload <= 1232 or seen[0].edns < 0


def test_do_client_after_plain_client_gets_rrsig(capture):
    """A name first cached for a client without DO: a DO client asking next must still get the RRSIGs (a
    validating resolver behind the stub would otherwise see the answer as bogus)."""
    name = uniq("dnssec-late")
    assert [t for _, _, t, _ in ask(name, "A", port=STUB_PORT).rrs()] == ["A"]
    r = ask(name, "A", port=STUB_PORT, ednsflags=dns.flags.DO)
    assert sorted(t for _, _, t, _ in r.rrs()) == ["A", "RRSIG"], (
        f"DO client got {[t for _, _, t, _ in r.rrs()]}; upstream saw "
        f"{[bool(q.ednsflags & dns.flags.DO) for q in capture.seen(name)]} (DO per query)")


def test_local_off_never_forwarded(capture):
    """[stub] local = no: `.local` is answered NXDOMAIN and still never sent to the unicast upstream
    (RFC 6762 §22)."""
    for name in ("lab-b.local", "_http._tcp.local", "1.0.254.169.in-addr.arpa"):
        r = ask(name, "PTR" if name[0] in "_1" else "A", port=STUB_PORT)
        assert r.rcode == "NXDOMAIN" and not r.msg.answer, r.msg
        assert capture.seen(name) == [], f"{name} went upstream"
