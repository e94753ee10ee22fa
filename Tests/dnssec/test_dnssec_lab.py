"""The lab's DNSSEC side proven against real peers (issue #17): Knot signs, the fault server tampers, the
lab's validating Unbound gives the verdict lab/DNSSEC.md promises for every name, kdig and drill agree.

Scripts/lab up && .venv/bin/pytest -q Tests/dnssec   (CI=true: a missing lab is a failure)
"""

import base64
import json
import re
import subprocess

import dns.dnssec
import dns.exception
import dns.message
import dns.name
import dns.rdatatype
import pytest

import dnsseclab
from dnsseclab import BOGUS, CASES, FAULT, INSECURE, KNOT, SECURE, UNBOUND, UNBOUND6

def lab_exec(*cmd, timeout=30):
    """CMD inside the lab namespace the queries come from (dlab-a), like `Scripts/lab exec a CMD`."""
    return subprocess.run(["ip", "netns", "exec", dnsseclab.CLIENT_NS, *map(str, cmd)], capture_output=True,
                          text=True, timeout=timeout)


def kdig(*args):
    cp = lab_exec("kdig", "+time=3", "+retry=1", *args)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


# ------------------------------------------------------------------ the reference validator agrees with the table

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_unbound_verdict_matches_table(clean, case):
    dnsseclab.apply_fault(case)
    got = dnsseclab.unbound_verdict(case.name, case.rdtype)
    assert (got.verdict, got.rcode) == (case.verdict, case.rcode), (case.why, got)
    if case.verdict == BOGUS:
        assert case.expected_unbound_ede in got.ede, (case.why, got.ede, got.ede_text)
        assert not got.answer
    else:
        has = any(f" {case.rdtype} " in f" {rr} " or f"IN {case.rdtype}" in rr for rr in got.answer)
        assert has == case.answer, (case.why, got.answer)
        assert not got.ede, got.ede_text


def test_table_covers_the_issue():
    """Every kind of name the issue asks for is in the table, each verdict with its reason."""
    names = {(c.name, c.rdtype, c.verdict) for c in CASES}
    for needed in [("www.dnssec.test", "A", SECURE), ("www.dnssec.test", "AAAA", SECURE),
                   ("svc.dnssec.test", "HTTPS", SECURE), ("alias.dnssec.test", "A", SECURE),
                   ("foo.wild.dnssec.test", "A", SECURE), ("nothere.dnssec.test", "A", SECURE),
                   ("www.dnssec.test", "TXT", SECURE), ("www.rsa.dnssec.test", "A", SECURE),
                   ("www.deep.rsa.dnssec.test", "A", SECURE), ("www.unsigned.dnssec.test", "A", INSECURE),
                   ("www.badds.dnssec.test", "A", BOGUS), ("www.expired.dnssec.test", "A", BOGUS),
                   ("www.future.dnssec.test", "A", BOGUS), ("nothere.nsec3iter.dnssec.test", "A", INSECURE),
                   ("tampered.dnssec.test", "A", BOGUS)]:
        assert needed in names, needed
    assert {c.ede for c in CASES if c.verdict == BOGUS} == {6, 7, 8, 9, 10, 12}
    assert len({c.id for c in CASES}) == len(CASES)


def test_verdict_over_ipv6_and_tcp(clean):
    assert dnsseclab.unbound_verdict("www.deep.rsa.dnssec.test", "A", server=UNBOUND6).verdict == SECURE
    assert dnsseclab.unbound_verdict("www.rsa.dnssec.test", "A", tcp=True).verdict == SECURE
    assert dnsseclab.unbound_verdict("www.unsigned.dnssec.test", "A", tcp=True).verdict == INSECURE


def test_cd_bit_gets_the_bogus_records(clean):
    """Checking Disabled: Unbound hands out what it got, without AD (what a stub must do with CD too)."""
    got = dnsseclab.unbound_verdict("www.expired.dnssec.test", "A", cd=True)
    assert got.rcode == "NOERROR" and not got.ad
    assert any("192.0.2.88" in rr for rr in got.answer)


# ------------------------------------------------------------------ anchors and the signer

def test_anchor_files_match_the_served_key(lab):
    files = dnsseclab.anchor_files()
    assert lab["LAB_DNSSEC_POSITIVE"] == str(files["positive"])
    assert lab["LAB_DNSSEC_UNBOUND_ANCHOR"] == str(files["unbound"])
    positive = [ln for ln in files["positive"].read_text().splitlines() if ln and not ln.startswith(";")]
    assert len(positive) == 1
    m = re.fullmatch(r"dnssec\.test\. IN DS (\d+) 13 2 ([0-9a-f]{64})", positive[0])
    assert m, positive
    assert files["unbound"].read_text().split() == positive[0].split()
    assert [p.name for p in files["dir"].iterdir()] == ["dnssec.test.positive"]
    # The DS is the digest of the KSK Knot serves (asked straight from Knot, no validator in between).
    reply = dnsseclab.ask(KNOT, "dnssec.test", "DNSKEY")
    keys = reply.find_rrset(reply.answer, dns.name.from_text("dnssec.test"), 1, dns.rdatatype.DNSKEY)
    ksks = [k for k in keys if k.flags == 257]
    assert len(ksks) == 1 and len(keys) == 2
    ds = dns.dnssec.make_ds("dnssec.test.", ksks[0], "SHA256")
    assert (ds.key_tag, ds.digest.hex()) == (int(m.group(1)), m.group(2))
    dnskey = files["dnskey"].read_text().split()
    assert dnskey[:5] == ["dnssec.test.", "DNSKEY", "257", "3", "13"]
    assert "".join(dnskey[5:]) == base64.b64encode(ksks[0].key).decode()


@pytest.mark.parametrize("name,alg,denial", [("www.dnssec.test", 13, "NSEC"), ("www.rsa.dnssec.test", 8, "NSEC3 0"),
                                             ("www.deep.rsa.dnssec.test", 15, "NSEC"),
                                             ("www.nsec3iter.dnssec.test", 13, "NSEC3 200"),
                                             ("www.badds.dnssec.test", 13, "NSEC")])
def test_knot_signs_each_zone(lab, name, alg, denial):
    out = kdig("+dnssec", "+norec", f"@{KNOT}", name, "A")
    assert re.search(rf"RRSIG\s+A {alg} \d+ 300 ", out), out
    out = kdig("+dnssec", "+norec", f"@{KNOT}", "nothere." + name.split(".", 1)[1], "A")
    assert "status: NXDOMAIN" in out
    if denial == "NSEC":
        assert re.search(r"\sNSEC\s", out) and "NSEC3" not in out, out
    else:
        iterations = denial.split()[1]
        assert re.search(rf"\sNSEC3\s+1 0 {iterations} ", out), out


def test_unsigned_delegation_has_no_ds_and_nsec_proves_it(lab):
    out = kdig("+dnssec", "+norec", f"@{KNOT}", "unsigned.dnssec.test", "DS")
    assert "status: NOERROR" in out and re.search(r"unsigned\.dnssec\.test\.\s+\d+\s+IN\s+NSEC\s+\S+ NS RRSIG NSEC", out), out


# ------------------------------------------------------------------ the fault server's DNSSEC rules

def rrsig_of(msg):
    return [rr for rrset in msg.answer if rrset.rdtype == dns.rdatatype.RRSIG for rr in rrset]


def test_badsig_flips_one_byte_of_the_signature(clean):
    plain = rrsig_of(dnsseclab.ask(FAULT, "tampered.dnssec.test", "A"))
    dnsseclab.faultctl("set", "tampered.dnssec.test", "badsig")
    bad = rrsig_of(dnsseclab.ask(FAULT, "tampered.dnssec.test", "A"))
    assert len(plain) == len(bad) == 1
    a, b = plain[0].signature, bad[0].signature
    assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1
    assert (plain[0].key_tag, plain[0].expiration) == (bad[0].key_tag, bad[0].expiration)


@pytest.mark.parametrize("tcp", [False, True])
def test_strip_removes_dnssec_records_only(clean, tcp):
    dnsseclab.faultctl("set", "*.dnssec.test", "strip")
    msg = dnsseclab.ask(FAULT, "www.dnssec.test", "A", tcp=tcp)
    assert [rrset.rdtype for rrset in msg.answer] == [dns.rdatatype.A]
    msg = dnsseclab.ask(FAULT, "nothere.dnssec.test", "A", tcp=tcp)
    assert msg.rcode() == 3 and [rrset.rdtype for rrset in msg.authority] == [dns.rdatatype.SOA]
    msg = dnsseclab.ask(FAULT, "dnssec.test", "DNSKEY", tcp=tcp)   # still answered, unsigned
    assert [rrset.rdtype for rrset in msg.answer] == [dns.rdatatype.DNSKEY]
    dnsseclab.faultctl("set", "*.dnssec.test", "strip", "--types", "dnssec")
    msg = dnsseclab.ask(FAULT, "dnssec.test", "DNSKEY", tcp=tcp)
    assert msg.answer == [] and msg.rcode() == 0
    # other zones untouched
    msg = dnsseclab.ask(FAULT, "h3.lab.test", "HTTPS", tcp=tcp)
    assert msg.answer and msg.answer[0].rdtype == dns.rdatatype.HTTPS


def test_strip_keeps_a_referral_and_cname_chain_readable(clean):
    dnsseclab.faultctl("set", "*", "strip")
    msg = dnsseclab.ask(FAULT, "alias.dnssec.test", "A")
    assert [rrset.rdtype for rrset in msg.answer] == [dns.rdatatype.CNAME, dns.rdatatype.A]
    assert msg.answer[0][0].target == dns.name.from_text("www.dnssec.test")


def test_drop_percent_and_one_garbage_reply(clean):
    """The no-flapping test's upstream: 50% of replies dropped, and one garbage reply stacked on top."""
    dnsseclab.faultctl("set", "*", "drop", "--percent", "50")
    dnsseclab.faultctl("set", "*", "garbage", "--times", "1", "--stack")
    with pytest.raises((dns.exception.DNSException, ValueError)):
        dnsseclab.ask(FAULT, "www.dnssec.test", "A", timeout=1)
    answered = 0
    for _ in range(40):
        try:
            assert dnsseclab.ask(FAULT, "www.dnssec.test", "A", timeout=0.3).rcode() == 0
            answered += 1
        except dns.exception.Timeout:
            pass
    assert 5 <= answered <= 35, answered   # binomial(40, 0.5): outside this with probability < 1e-6
    assert [r["mode"] for r in json.loads(dnsseclab.faultctl("rules"))["rules"]] == ["drop"]
    dnsseclab.faultctl("reset", "rules")
    assert dnsseclab.ask(FAULT, "www.dnssec.test", "A", timeout=2).rcode() == 0


# ------------------------------------------------------------------ kdig and drill

def test_kdig_sees_ad_and_ede_from_the_validator(clean):
    out = kdig("+dnssec", f"@{UNBOUND}", "www.dnssec.test", "A")
    assert re.search(r";; Flags:[^;]* ad;", out) and "RRSIG" in out, out
    out = kdig("+dnssec", f"@{UNBOUND}", "www.unsigned.dnssec.test", "A")
    assert "status: NOERROR" in out and not re.search(r";; Flags:[^;]* ad;", out), out
    out = kdig("+dnssec", f"@{UNBOUND}", "www.expired.dnssec.test", "A")
    assert "status: SERVFAIL" in out and "EDE: 7 (Signature Expired)" in out, out


@pytest.mark.parametrize("name,ok,text", [("www.deep.rsa.dnssec.test", True, None),
                                          ("nothere.rsa.dnssec.test", True, "Existence is denied by"),
                                          ("www.badds.dnssec.test", False, None),
                                          ("www.expired.dnssec.test", False, "signature has expired")])
@pytest.mark.parametrize("anchor", ["dnskey", "unbound"])
def test_drill_chases_signatures_to_the_lab_anchor(lab, name, ok, text, anchor):
    cp = lab_exec("drill", "-S", "-k", dnsseclab.anchor_files()[anchor], f"@{FAULT}", name, "A")
    out = cp.stdout + cp.stderr
    assert ("Chase successful" in out) == ok and ("Chase failed" in out) == (not ok), out
    if text:
        assert text in out, out


def test_drill_dnssec_query_through_the_validator(clean):
    cp = lab_exec("drill", "-D", f"@{UNBOUND}", "svc.dnssec.test", "HTTPS")
    assert re.search(r"flags: qr rd ra ad ", cp.stdout) and "RRSIG\tHTTPS 13" in cp.stdout, cp.stdout
