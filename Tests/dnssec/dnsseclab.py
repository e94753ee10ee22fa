"""The lab's DNSSEC test names, the verdict a validator must give for each, and the reference validator.

Import it from any lab test (sys.path.insert(0, "Tests/dnssec")): CASES is the table of lab/DNSSEC.md,
unbound_verdict() asks the lab's validating Unbound (unbound-dnssec, 192.0.2.58) and classifies its answer:

    secure    an answer (or NXDOMAIN / NODATA) with AD set
    insecure  an answer (or NXDOMAIN / NODATA) without AD
    bogus     SERVFAIL (Unbound adds an EDE saying why)

A case with `fault` needs that fault server rule first (apply_fault(case) / faultctl set ...); flush() empties
Unbound's cache so a verdict never comes from an answer cached before a rule changed. Queries are sent from
inside a lab namespace (dlab-a by default): nothing leaves the lab.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

REPO = Path(__file__).resolve().parents[2]
LAB_DIR = Path(os.environ.get("DISCOVERD_LAB_DIR", "/tmp/discoverd-lab"))
FAULTCTL = REPO / "lab" / "faultctl"

ZONE = "dnssec.test"
UNBOUND = "192.0.2.58"          # LAB_DNSSEC_UNBOUND
UNBOUND6 = "2001:db8::58"       # LAB_DNSSEC_UNBOUND6
FAULT = "192.0.2.54"            # LAB_FAULT: the fault server in front of Knot (what validators forward to)
KNOT = "192.0.2.53"             # LAB_KNOT: Knot itself (the signer, no faults)
CLIENT_NS = os.environ.get("DNSSEC_CLIENT_NS", "dlab-a")   # where queries are sent from

SECURE, INSECURE, BOGUS = "secure", "insecure", "bogus"

# EDE codes (RFC 8914)
EDE_DNSSEC_BOGUS = 6
EDE_SIGNATURE_EXPIRED = 7
EDE_SIGNATURE_NOT_YET_VALID = 8
EDE_DNSKEY_MISSING = 9
EDE_RRSIGS_MISSING = 10
EDE_NSEC_MISSING = 12


@dataclass(frozen=True)
class Case:
    """One test name. `ede` is the code a validator should give for a bogus answer (issue #17's list);
    `unbound_ede` is what Unbound 1.17 gives with a cold cache when it differs; `fault` are faultctl `set`
    arguments to apply first (the case is bogus only with them)."""
    name: str
    rdtype: str
    verdict: str
    rcode: str = "NOERROR"       # NOERROR (with or without answer), NXDOMAIN; SERVFAIL for bogus
    answer: bool = True          # NOERROR with records of rdtype (False: NODATA)
    ede: int | None = None
    unbound_ede: int | None = None
    fault: tuple[str, ...] = ()
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.name}/{self.rdtype}" + ("+" + " ".join(self.fault[1:]) if self.fault else "")

    @property
    def expected_unbound_ede(self) -> int | None:
        return self.unbound_ede if self.unbound_ede is not None else self.ede


CASES: list[Case] = [
    # secure: the anchor zone (ECDSAP256SHA256, NSEC)
    Case("www.dnssec.test", "A", SECURE, why="signed A"),
    Case("www.dnssec.test", "AAAA", SECURE, why="signed AAAA"),
    Case("www.dnssec.test", "TXT", SECURE, answer=False, why="NODATA proven by NSEC"),
    Case("dot\\.www.dnssec.test", "A", SECURE,
         why="one label holding a dot: RRSIG labels 3, a split at every dot counts 4 (a wildcard without proof)"),
    Case("svc.dnssec.test", "HTTPS", SECURE, why="signed HTTPS 1 . alpn=h3,h2"),
    Case("ech.dnssec.test", "HTTPS", SECURE, why="signed HTTPS with ech"),
    Case("alias.dnssec.test", "A", SECURE, why="CNAME www, both links signed"),
    Case("foo.wild.dnssec.test", "A", SECURE, why="wildcard *.wild, NSEC proves no closer match"),
    Case("wild.dnssec.test", "A", SECURE, answer=False, why="empty non-terminal: NODATA by NSEC"),
    Case("nothere.dnssec.test", "A", SECURE, rcode="NXDOMAIN", answer=False, why="NXDOMAIN proven by NSEC"),
    Case("dnssec.test", "DNSKEY", SECURE, why="the anchor's keys, matched by the trust anchor"),
    Case("tampered.dnssec.test", "A", SECURE, why="as served (see the badsig case)"),
    Case("stripped.dnssec.test", "A", SECURE, why="as served (see the strip case)"),
    # secure: child RSASHA256 + NSEC3 (0 iterations, no salt) and grandchild ED25519
    Case("www.rsa.dnssec.test", "A", SECURE, why="RSASHA256 child, DS in dnssec.test"),
    Case("www.rsa.dnssec.test", "TXT", SECURE, answer=False, why="NODATA proven by NSEC3"),
    Case("nothere.rsa.dnssec.test", "A", SECURE, rcode="NXDOMAIN", answer=False, why="NXDOMAIN proven by NSEC3"),
    Case("foo.wild.rsa.dnssec.test", "A", SECURE, why="wildcard in an NSEC3 zone"),
    Case("dot\\.www.rsa.dnssec.test", "A", SECURE, why="one label holding a dot in an NSEC3 zone"),
    Case("nothere\\.www.rsa.dnssec.test", "A", SECURE, rcode="NXDOMAIN", answer=False,
         why="NXDOMAIN proven by NSEC3 for one label holding a dot"),
    Case("www.deep.rsa.dnssec.test", "A", SECURE, why="ED25519 grandchild, two delegations below the anchor"),
    Case("www.nsec3iter.dnssec.test", "A", SECURE, why="positive answers need no NSEC3"),
    # insecure
    Case("www.unsigned.dnssec.test", "A", INSECURE, why="delegation without DS, proven by NSEC in dnssec.test"),
    Case("ech.unsigned.dnssec.test", "HTTPS", INSECURE, why="HTTPS with ech in the unsigned child"),
    Case("nothere.unsigned.dnssec.test", "A", INSECURE, rcode="NXDOMAIN", answer=False, why="unsigned zone"),
    Case("alias-insecure.dnssec.test", "A", INSECURE, why="secure CNAME to an insecure name"),
    Case("nothere.nsec3iter.dnssec.test", "A", INSECURE, rcode="NXDOMAIN", answer=False,
         why="NSEC3 with 200 iterations (RFC 9276: above the limit, insecure)"),
    Case("www.nsec3iter.dnssec.test", "TXT", INSECURE, answer=False, why="NODATA by NSEC3 with 200 iterations"),
    # bogus: made by the signer
    Case("www.badds.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_DNSKEY_MISSING,
         why="the DS in dnssec.test matches no DNSKEY"),
    Case("alias-bogus.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_DNSKEY_MISSING,
         why="secure CNAME to a bogus name (www.badds)"),
    Case("www.expired.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_SIGNATURE_EXPIRED,
         why="RRSIGs expired 2020-01-01"),
    Case("www.future.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_SIGNATURE_NOT_YET_VALID,
         why="RRSIG inception a year after lab up"),
    # bogus: made by the fault server (lab/faultctl set ...)
    Case("tampered.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_DNSSEC_BOGUS,
         fault=("tampered.dnssec.test", "badsig"), why="one byte of the RRSIG flipped"),
    Case("nothere.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_DNSSEC_BOGUS,
         fault=("nothere.dnssec.test", "badsig"), why="the RRSIGs over the NSEC/SOA proof flipped"),
    Case("stripped.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_RRSIGS_MISSING,
         fault=("stripped.dnssec.test", "strip", "--qtype", "A"), why="the answer's RRSIG removed"),
    Case("www.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_RRSIGS_MISSING,
         fault=("*", "strip"), why="upstream strips RRSIG/NSEC/NSEC3 from every reply"),
    Case("www.unsigned.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_RRSIGS_MISSING,
         fault=("*", "strip"), why="a stripping upstream cannot prove the delegation insecure"),
    Case("nothere.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_NSEC_MISSING,
         fault=("nothere.dnssec.test", "strip"), why="NXDOMAIN without its NSEC proof"),
    Case("www.rsa.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_RRSIGS_MISSING,
         fault=("*.rsa.dnssec.test", "strip"), why="zone rsa.dnssec.test stripped (its DS answer loses its RRSIG too)"),
    Case("www.dnssec.test", "A", BOGUS, rcode="SERVFAIL", answer=False, ede=EDE_DNSKEY_MISSING,
         fault=("*", "strip", "--types", "dnssec"), why="DNSKEY and DS removed too: the anchor's keys are missing"),
]

SECURE_NAMES = sorted({c.name for c in CASES if c.verdict == SECURE and not c.fault})


@dataclass
class Answer:
    verdict: str
    rcode: str
    ad: bool
    ede: list[int] = field(default_factory=list)
    ede_text: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)   # RRs of the answer section, text
    message: dns.message.Message | None = None


# ------------------------------------------------------------------ queries from inside a lab namespace

# The lab's own helpers (Tests/lab/conftest.py, loaded once as `labkit` by stubkit): one netns_socket for every suite.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stub"))
from stubkit import labkit  # noqa: E402

netns_socket = labkit.netns_socket


def ask(server: str, name: str, rdtype: str = "A", *, dnssec_ok: bool = True, ad: bool = True, cd: bool = False,
        tcp: bool = False, timeout: float = 5.0, ns: str | None = None) -> dns.message.Message:
    """One query (EDNS 1232, DO and AD by default) from inside NS; the parsed reply (dns.exception.Timeout)."""
    q = dns.message.make_query(name, rdtype, use_edns=0, payload=1232, want_dnssec=dnssec_ok)
    q.flags = dns.flags.RD | (dns.flags.AD if ad else 0) | (dns.flags.CD if cd else 0)
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    sock = netns_socket(ns or CLIENT_NS, fam, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    try:
        if tcp:
            sock.settimeout(timeout)
            sock.connect((server, 53))
        sock.setblocking(False)   # dnspython wants a non-blocking socket and does its own waiting
        if tcp:
            return dns.query.tcp(q, server, timeout=timeout, sock=sock)
        return dns.query.udp(q, server, timeout=timeout, sock=sock, ignore_trailing=True)
    finally:
        sock.close()


def classify(msg: dns.message.Message) -> Answer:
    rcode = dns.rcode.to_text(msg.rcode())
    ad = bool(msg.flags & dns.flags.AD)
    edes = [o for o in (msg.options or []) if o.otype == dns.edns.EDE]
    if msg.rcode() == dns.rcode.SERVFAIL:
        verdict = BOGUS
    elif msg.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        verdict = SECURE if ad else INSECURE
    else:
        verdict = f"error:{rcode}"
    return Answer(verdict=verdict, rcode=rcode, ad=ad, ede=[int(o.code) for o in edes],
                  ede_text=[o.text or "" for o in edes],
                  answer=[rr for rrset in msg.answer for rr in rrset.to_text().splitlines()], message=msg)


def unbound_verdict(name: str, rdtype: str = "A", *, server: str = UNBOUND, **kw) -> Answer:
    """The reference validator's verdict for NAME/RDTYPE: secure (AD), insecure (no AD) or bogus (SERVFAIL)."""
    return classify(ask(server, name, rdtype, **kw))


# ------------------------------------------------------------------ Unbound's cache and the fault server

def unbound_control(*args: str, timeout: float = 10) -> str:
    conf = LAB_DIR / "dnssec" / "unbound" / "unbound.conf"
    cp = subprocess.run(["unbound-control", "-c", str(conf), *args], capture_output=True, text=True, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(f"unbound-control {' '.join(args)}: {cp.stdout}{cp.stderr}")
    return cp.stdout


def flush() -> None:
    """Forget everything Unbound learnt about dnssec.test: answers, keys, bogus and negative entries, server state."""
    unbound_control("flush_zone", ZONE)
    unbound_control("flush_bogus")
    unbound_control("flush_negative")
    unbound_control("flush_infra", "all")


def faultctl(*args: str) -> str:
    cp = subprocess.run([str(FAULTCTL), "--ctl", str(LAB_DIR / "dns" / "fault.ctl"), *args],
                        capture_output=True, text=True, timeout=10)
    if cp.returncode != 0:
        raise RuntimeError(f"faultctl {' '.join(args)}: {cp.stdout}{cp.stderr}")
    return cp.stdout


def apply_fault(case: Case) -> None:
    """Reset the fault server's rules, then set the case's rule (if any)."""
    faultctl("reset", "rules")
    if case.fault:
        faultctl("set", *case.fault)


def anchor_files() -> dict[str, Path]:
    d = LAB_DIR / "dnssec"
    return {"positive": d / "trust-anchors.d" / f"{ZONE}.positive", "unbound": d / "unbound-anchor.ds",
            "dnskey": d / "anchor.dnskey", "dir": d / "trust-anchors.d"}
