"""discoverd's DNSSEC verdicts beside the reference validator's (issue #17), on every name of lab/DNSSEC.md.

The real daemon runs inside dlab-a with the fault server (192.0.2.54, in front of Knot) as its upstream, the lab's
anchor directory as `trust-anchor-dir`, and its stub on 127.0.0.2:53 there. For every case of dnsseclab.CASES
(fault rule applied first, both caches flushed) the stub's answer is classified the same way as Unbound's
(AD → secure, no AD → insecure, SERVFAIL → bogus): the verdicts must be equal, and a bogus answer must carry the
EDE code the issue asks for. The API's `dnssec` field is checked on the same names.

Run: flock /tmp/discoverd-lab-session.lock bash -c 'Scripts/lab up >/dev/null && .venv/bin/pytest -q Tests/dnssec;
rc=$?; Scripts/lab down; exit $rc'
"""

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stub"))

import dnsseclab  # noqa: E402
from dnsseclab import BOGUS, CASES, INSECURE, SECURE  # noqa: E402
from stubkit import StubDaemon  # noqa: E402

STUB = "127.0.0.2"          # inside dlab-a; the stub suite uses 127.0.0.1


def config(mode: str = "yes") -> str:
    return f"""\
[resolver]
dnssec = {mode}
trust-anchor-dir = {dnsseclab.anchor_files()['dir']}
timeout-ms = 1500
attempts = 2
"""


@pytest.fixture(scope="module")
def daemon(lab):
    workdir = Path(tempfile.mkdtemp(prefix="discoverd-dnssec-"))
    d = StubDaemon(workdir, [f"{STUB}:53"], config())
    d.start()
    yield d
    crashed = not d.alive()
    tail = d.log_tail()
    d.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    if crashed:
        pytest.fail(f"discoverd died during the DNSSEC suite:\n{tail}", pytrace=False)


def flush_all(daemon) -> None:
    dnsseclab.flush()
    v = daemon.varlink()
    try:
        v.call("io.discoverd.Resolver.Flush", {})
    finally:
        v.close()


def ours(name: str, rdtype: str, **kw) -> dnsseclab.Answer:
    return dnsseclab.classify(dnsseclab.ask(STUB, name, rdtype, **kw))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_verdict_equals_unbounds(case, daemon, clean):
    dnsseclab.apply_fault(case)
    flush_all(daemon)
    reference = dnsseclab.unbound_verdict(case.name, case.rdtype)
    flush_all(daemon)
    mine = ours(case.name, case.rdtype)
    assert reference.verdict == case.verdict, f"the lab's reference changed: {reference}"
    assert mine.verdict == reference.verdict, (
        f"{case.id}: discoverd says {mine.verdict} {mine.rcode} EDE {mine.ede} {mine.ede_text}, "
        f"Unbound says {reference.verdict} {reference.rcode} EDE {reference.ede} ({case.why})")
    if case.verdict == BOGUS:
        assert case.ede in mine.ede, f"{case.id}: EDE {mine.ede} {mine.ede_text}, want {case.ede} ({case.why})"
        # The text names the name that failed: the one asked, or the zone above it whose keys or DS failed.
        labels = case.name.split(".")
        ancestors = {".".join(labels[i:]) for i in range(len(labels) - 1)}
        assert any(name in text for name in ancestors for text in mine.ede_text), (
            f"the EDE text names the name that failed: {mine.ede_text}")
    else:
        assert mine.rcode == reference.rcode
        assert bool(mine.answer) == bool(reference.answer)


def test_the_api_says_dnssec(daemon, clean):
    flush_all(daemon)
    v = daemon.varlink()
    try:
        for name, want in (("www.dnssec.test", SECURE), ("www.deep.rsa.dnssec.test", SECURE),
                           ("www.unsigned.dnssec.test", INSECURE)):
            reply = v.call("io.discoverd.Resolver.ResolveAddresses", {"name": name})
            assert reply["dnssec"] == want, (name, reply)
        https = v.call("io.discoverd.Resolver.ResolveHTTPS", {"name": "svc.dnssec.test"})
        assert https["dnssec"] == SECURE and https["records"][0]["alpn"] == ["h3", "h2"], https
        plan = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "svc.dnssec.test"})
        assert plan["dnssec"] == SECURE, plan
        bogus = v.call("io.discoverd.Resolver.ResolveAddresses", {"name": "www.expired.dnssec.test"}, error_ok=True)
        assert bogus.get("error") == "io.discoverd.Resolver.UpstreamFailure", bogus
        status = v.status()["dnssec"]
        assert status["mode"] == "yes" and status["upstreams"] == "capable", status
        assert status["secure"] > 0 and status["bogus"] > 0, status
        assert status["lastBogusName"] == "www.expired.dnssec.test.", status
    finally:
        v.close()


def test_cd_gets_the_records_as_they_came(daemon, clean):
    flush_all(daemon)
    reply = ours("www.expired.dnssec.test", "A", cd=True)
    assert reply.rcode == "NOERROR" and not reply.ad
    assert any("192.0.2.88" in rr for rr in reply.answer), reply.answer
    # Without DO an AD client still gets AD on a secure answer (RFC 6840 §5.7), and no RRSIGs.
    plain = ours("www.dnssec.test", "A", dnssec_ok=False, ad=True)
    assert plain.ad and not any("RRSIG" in rr for rr in plain.answer), plain.answer
    signed = ours("www.dnssec.test", "A")
    assert signed.ad and any("RRSIG" in rr for rr in signed.answer), signed.answer


def test_allow_downgrade_does_not_flap_on_lost_or_garbage_replies(daemon, clean):
    daemon.reload(config("allow-downgrade"))
    try:
        flush_all(daemon)
        v = daemon.varlink()
        try:
            assert v.status()["dnssec"]["upstreams"] == "capable"
            dnsseclab.faultctl("set", "*", "drop", "--percent", "5")
            dnsseclab.faultctl("set", "*", "garbage", "--times", "1")
            for i in range(200):
                try:
                    ours("www.dnssec.test", "A")
                except Exception:  # noqa: BLE001 - a dropped reply is a timeout here
                    pass
            daemon.reload(config("allow-downgrade"))     # a reload runs the probe again
            status = v.status()["dnssec"]
            assert status["upstreams"] == "capable", status
            assert status["mode"] == "allow-downgrade"
        finally:
            v.close()
        # An upstream that strips everything, shown by the probe: answers become insecure, not SERVFAIL.
        dnsseclab.faultctl("reset", "rules")
        dnsseclab.faultctl("set", "*", "strip", "--types", "dnssec")
        daemon.reload(config("allow-downgrade"))
        flush_all(daemon)
        v = daemon.varlink()
        try:
            for _ in range(50):
                if v.status()["dnssec"]["upstreams"] == "incapable":
                    break
                import time
                time.sleep(0.1)
            assert v.status()["dnssec"]["upstreams"] == "incapable"
        finally:
            v.close()
        downgraded = ours("www.dnssec.test", "A")
        assert downgraded.verdict == INSECURE and downgraded.rcode == "NOERROR", downgraded
    finally:
        dnsseclab.faultctl("reset", "rules")
        daemon.reload(config())
