"""EDNS(0) (RFC 6891) probes with dnspython and kdig: version, options, flag bits, payload sizes, truncation."""

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest

from stubkit import ask, header, kdig

def opt_codes(r) -> list[int]:
    return [o.otype for o in r.msg.options]


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_version_1_gets_badvers(stub, tcp):
    r = ask("h3.lab.test", "A", edns=1, tcp=tcp)
    assert r.msg.rcode() == dns.rcode.BADVERS, r.msg
    assert r.msg.edns == 0, "the reply's OPT says the version we speak"
    assert not r.msg.answer


def test_unknown_options_ignored_not_echoed(stub):
    options = [dns.edns.GenericOption(65001, b"private"), dns.edns.GenericOption(dns.edns.NSID, b""),
               dns.edns.GenericOption(dns.edns.COOKIE, bytes(range(8)))]
    r = ask("h3.lab.test", "A", options=options)
    assert r.rcode == "NOERROR" and r.texts("A") == ["192.0.2.10"]
    # The session's stub listens beyond loopback (192.0.2.1), so DNS Cookies are on (RFC 7873): the client cookie
    # comes back with a 16-byte server cookie (RFC 9018); nothing else is echoed.
    assert opt_codes(r) == [dns.edns.COOKIE], f"options echoed: {r.msg.options}"
    cookie = r.msg.options[0]
    assert cookie.client == bytes(range(8)) and len(cookie.server) == 16 and cookie.server[0] == 1
    assert r.msg.payload == 1232


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize("size", [128, 129, 300, 512, 1232, 1400, 4000])
def test_query_sizes(stub, size, tcp):
    """Queries of any size a client may send (here made large by an unknown option, as padding would) are
    answered, the option not echoed. A UDP query is not limited to 128 bytes."""
    q_len = len(ask("h3.lab.test", "A").query_wire)
    pad = dns.edns.GenericOption(65002, bytes(size - q_len - 4))
    r = ask("h3.lab.test", "A", options=[pad], tcp=tcp)
    assert len(r.query_wire) == size
    assert r.rcode == "NOERROR", f"{size}-byte query over {'TCP' if tcp else 'UDP'}: {r.rcode}"
    assert r.texts("A") == ["192.0.2.10"] and opt_codes(r) == []


def test_unknown_flag_bits_ignored_not_echoed(stub):
    r = ask("h3.lab.test", "A", ednsflags=0x4000 | 0x0001)
    assert r.rcode == "NOERROR" and r.texts("A") == ["192.0.2.10"]
    assert r.msg.ednsflags == 0, hex(r.msg.ednsflags)


def test_do_bit_copied(stub):
    r = ask("h3.lab.test", "AAAA", ednsflags=dns.flags.DO | 0x2000)
    assert r.rcode == "NOERROR" and r.texts("AAAA") == ["2001:db8::10"]
    assert r.msg.ednsflags == dns.flags.DO, hex(r.msg.ednsflags)
    assert not ask("h3.lab.test", "AAAA").msg.ednsflags & dns.flags.DO


def test_no_opt_without_edns(stub):
    r = ask("h3.lab.test", "A", edns=None)
    assert r.msg.edns == -1 and header(r.wire)["ar"] == 0


@pytest.mark.parametrize("payload", [512, 0, 100, 511])
def test_small_payloads_count_as_512(stub, txt, payload):
    """RFC 6891 §6.2.5: a payload below 512 is treated as 512: a 300-byte answer fits, a 900-byte one does not."""
    small, n = txt["small"]
    r = ask(small, "TXT", payload=payload)
    assert not r.msg.flags & dns.flags.TC and len(r.texts("TXT")) == n
    assert 300 < len(r.wire) <= 512
    medium, _ = txt["medium"]
    r = ask(medium, "TXT", payload=payload)
    h = header(r.wire)
    assert h["tc"] and h["an"] == 0 and h["ns"] == 0, h
    assert len(r.wire) <= 512 and r.msg.edns == 0, "a truncated reply keeps its OPT"


def test_no_edns_large_answer_truncated_then_tcp(stub, txt):
    name, n = txt["medium"]
    r = ask(name, "TXT", edns=None)
    h = header(r.wire)
    assert h["tc"] and h["an"] == 0 and h["ns"] == 0 and h["ar"] == 0, h
    assert len(r.wire) <= 512
    full = ask(name, "TXT", edns=None, tcp=True)
    assert not full.msg.flags & dns.flags.TC and len(full.texts("TXT")) == n
    assert len(full.wire) > 512


@pytest.mark.parametrize("payload", [512, 600, 1000, 1232, 1400, 4096, 65535])
def test_udp_reply_never_larger_than_advertised(stub, txt, payload):
    limit = min(max(payload, 512), 1232)
    for size in ("small", "medium", "big"):
        name, n = txt[size]
        r = ask(name, "TXT", payload=payload)
        assert len(r.wire) <= limit, (size, payload, len(r.wire))
        full = ask(name, "TXT", tcp=True)
        fits = len(full.wire) <= limit
        assert bool(r.msg.flags & dns.flags.TC) != fits, (size, payload, len(full.wire))
        assert len(r.texts("TXT")) == (n if fits else 0)
    big, n = txt["big"]
    assert len(ask(big, "TXT", tcp=True, payload=payload).texts("TXT")) == n, "TCP carries all of it"


def test_kdig_bufsize(stub, txt):
    medium, n = txt["medium"]
    out = kdig("@127.0.0.1", medium, "TXT", "+bufsize=512", "+ignore")
    assert "tc" in out.flags and out.counts["ANSWER"] == 0, out.text
    out = kdig("@127.0.0.1", medium, "TXT", "+bufsize=1232", "+ignore")
    assert "tc" not in out.flags and len(out.records("ANSWER", "TXT")) == n, out.text
    big, n = txt["big"]
    out = kdig("@127.0.0.1", big, "TXT", "+bufsize=4096")  # truncated, kdig retries over TCP
    assert "@53(TCP)" in out.text and len(out.records("ANSWER", "TXT")) == n, out.text


def test_truncated_counter(stub, api, txt):
    before = api.status()["stub"]["truncated"]
    ask(txt["big"][0], "TXT")
    assert api.status()["stub"]["truncated"] == before + 1
