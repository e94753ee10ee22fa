"""discoverd's DNSSEC verdicts beside the reference validator's (issue #17), on every name of lab/DNSSEC.md.

The real daemon runs inside dlab-a with the fault server (192.0.2.54, in front of Knot) as its upstream, the lab's
anchor directory as `trust-anchor-dir`, and its stub on 127.0.0.2:53 there. For every case of dnsseclab.CASES
(fault rule applied first, both caches flushed) the stub's answer is classified the same way as Unbound's
(AD → secure, no AD → insecure, SERVFAIL → bogus): the verdicts must be equal, and a bogus answer must carry the
EDE code the issue asks for. The API's `dnssec` field is checked on the same names.

Run: flock /tmp/discoverd-lab-session.lock bash -c 'Scripts/lab up >/dev/null && .venv/bin/pytest -q Tests/dnssec;
rc=$?; Scripts/lab down; exit $rc'
"""

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dns.exception
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stub"))

import dnsseclab  # noqa: E402
from dnsseclab import BOGUS, CASES, INSECURE, SECURE  # noqa: E402
from stubkit import DISCOVERD_BIN, StubDaemon  # noqa: E402

STUB = "127.0.0.2"          # inside dlab-a; the stub suite uses 127.0.0.1
STUB2 = "127.0.0.3"         # a second daemon started by one test
DISCOVER_BIN = DISCOVERD_BIN.parent / "discover"


def config(mode: str = "yes", timeout_ms: int = 1500) -> str:
    return f"""\
[resolver]
dnssec = {mode}
trust-anchor-dir = {dnsseclab.anchor_files()['dir']}
timeout-ms = {timeout_ms}
attempts = 2
"""


@pytest.fixture(scope="module")
def daemon(lab):
    workdir = Path(tempfile.mkdtemp(prefix="discoverd-dnssec-"))
    d = StubDaemon(workdir, [f"{STUB}:53"], config())
    d.start()
    yield d
    try:
        d.stop_alive("discoverd (the DNSSEC suite's)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
        # It says why, as the stub's EDE does: the code, and the reason naming the zone whose signature expired.
        assert bogus["parameters"]["ede"] == dnsseclab.EDE_SIGNATURE_EXPIRED, bogus
        assert "expired.dnssec.test" in bogus["parameters"]["reason"], bogus
        status = v.status()["dnssec"]
        assert status["mode"] == "yes" and status["upstreams"] == "capable", status
        assert [u["state"] for u in status["upstreamStates"]] == ["capable"], status
        assert "with RRSIGs" in status["upstreamStates"][0]["evidence"], status
        assert status["secure"] > 0 and status["bogus"] > 0, status
        assert status["lastBogusName"] == "www.expired.dnssec.test.", status
    finally:
        v.close()
    # Anyone may read Status, but the names looked up here are for root and the admin group: nobody gets the counts.
    shown = as_nobody(daemon, "status", "--json")
    assert shown.returncode == 0, shown
    theirs = json.loads(shown.stdout)["dnssec"]
    assert theirs["bogus"] >= status["bogus"], theirs
    assert "lastBogusName" not in theirs and "lastBogusReason" not in theirs, theirs
    text = as_nobody(daemon, "status").stdout
    assert "bogus; last bogus: shown to root and the admin group" in text and "expired.dnssec" not in text, text


def as_nobody(daemon, *args: str) -> subprocess.CompletedProcess:
    """`discover ARGS` against `daemon` as the user nobody (uid 65534, no groups): its workdir opened to traverse."""
    Path(daemon.workdir).chmod(0o711)
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(DISCOVER_BIN),
                           "--socket", daemon.socket_path, *args], capture_output=True, text=True, timeout=10)


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


def dnssec_status(daemon) -> dict:
    v = daemon.varlink()
    try:
        return v.status()["dnssec"]
    finally:
        v.close()


def states_by_server(status: dict) -> dict:
    return {u["server"]: u["state"] for u in status.get("upstreamStates") or []}


def wait_for_states(daemon, want, timeout: float = 15.0) -> dict:
    """Status' dnssec once want(status) holds (the probe runs in the background at start and on Reload)."""
    deadline = time.monotonic() + timeout
    status = dnssec_status(daemon)
    while not want(status) and time.monotonic() < deadline:
        time.sleep(0.1)
        status = dnssec_status(daemon)
    return status


def test_allow_downgrade_does_not_flap_on_lost_or_garbage_replies(daemon, clean):
    """Issue #17: 1000 look-ups that reach the upstream while the fault server drops 5% of replies and sends one
    garbage reply: the upstream's DNSSEC state never changes (sampled all along, two Reloads re-run the probe under
    the faults), and every answer that arrives is validated (AD)."""
    daemon.reload(config("allow-downgrade", timeout_ms=400))
    stop = threading.Event()
    samples: list[tuple[str, dict]] = []

    def sample() -> None:
        while not stop.is_set():
            try:
                status = dnssec_status(daemon)
                samples.append((status["upstreams"], states_by_server(status)))
            except (OSError, ConnectionError, ValueError) as e:  # the daemon must answer Status all along
                samples.append((f"error: {e}", {}))
            stop.wait(0.05)

    try:
        flush_all(daemon)
        before = wait_for_states(daemon, lambda s: s["upstreams"] == "capable")
        assert before["upstreams"] == "capable" and set(states_by_server(before).values()) == {"capable"}, before
        expected = states_by_server(before)
        ours("www.dnssec.test", "A")                      # the zone's keys cached before the faults start
        dnsseclab.faultctl("reset", "counts")
        dnsseclab.faultctl("set", "*", "drop", "--percent", "5")
        dnsseclab.faultctl("set", "*", "garbage", "--times", "1", "--stack")
        run = uuid.uuid4().hex[:6]
        names = [f"n{i}-{run}.wild.dnssec.test" for i in range(1000)]   # unique: each one reaches the upstream

        def look_up(name: str):
            try:
                return dnsseclab.classify(dnsseclab.ask(STUB, name, "A", timeout=3.0))
            except dns.exception.Timeout:
                return None

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        answers = []
        with ThreadPoolExecutor(max_workers=24) as pool:
            for chunk in (names[:333], names[333:666], names[666:]):
                answers += list(pool.map(look_up, chunk))
                daemon.reload(config("allow-downgrade", timeout_ms=400))   # the probe again, under the faults
        time.sleep(0.5)
        stop.set()
        sampler.join(timeout=5)
        rules = dnsseclab.faultctl("rules")
        counts = json.loads(dnsseclab.faultctl("count", "--json"))["counts"]
        reached = sum(c["count"] for c in counts if c["name"].endswith(f"-{run}.wild.dnssec.test"))
        after = dnssec_status(daemon)
    finally:
        stop.set()
        dnsseclab.faultctl("reset", "rules")
        daemon.reload(config())
    assert reached >= 1000, f"only {reached} queries for the 1000 names reached the upstream"
    assert "garbage" not in rules, f"the garbage reply was never sent: {rules}"
    assert len(samples) >= 20, f"Status sampled only {len(samples)} times"
    changed = [s for s in samples if s != ("capable", expected)]
    assert not changed, f"the DNSSEC state changed during the run: {changed[:5]} (want capable, {expected})"
    assert after["upstreams"] == "capable" and states_by_server(after) == expected, after
    arrived = [a for a in answers if a is not None]
    lost = len(answers) - len(arrived)
    print(f"no-flap run: {reached} upstream queries for 1000 names, {len(samples)} Status samples, "
          f"{sum(1 for a in arrived if a.rcode == 'NOERROR')} validated answers, {lost} lost, "
          f"{sum(1 for a in arrived if a.rcode != 'NOERROR')} failed")
    assert lost <= 50, f"{lost} of 1000 look-ups got no reply at all"
    noerror = [a for a in arrived if a.rcode == "NOERROR"]
    assert all(a.ad and a.answer for a in noerror), [a for a in noerror if not (a.ad and a.answer)][:3]
    # A question whose every try was lost fails (EDE 22, no reachable authority), never as a DNSSEC verdict.
    failed = [a for a in arrived if a.rcode != "NOERROR"]
    assert all(a.rcode == "SERVFAIL" and not set(a.ede) & set(range(6, 13)) for a in failed), failed[:3]
    assert len(noerror) >= 900, f"only {len(noerror)} validated answers of 1000"


def test_an_upstream_that_strips_dnssec_is_shown_incapable(daemon, clean):
    """The probe shows an upstream that strips DNSSEC data: its answers become insecure, not SERVFAIL."""
    try:
        dnsseclab.faultctl("set", "*", "strip", "--types", "dnssec")
        daemon.reload(config("allow-downgrade"))
        flush_all(daemon)
        status = wait_for_states(daemon, lambda s: s["upstreams"] == "incapable")
        assert status["upstreams"] == "incapable", status
        assert set(states_by_server(status).values()) == {"incapable"}, status
        assert all("without RRSIGs" in (u.get("evidence") or "") for u in status["upstreamStates"]), status
        downgraded = ours("www.dnssec.test", "A")
        assert downgraded.verdict == INSECURE and downgraded.rcode == "NOERROR", downgraded
    finally:
        dnsseclab.faultctl("reset", "rules")
        daemon.reload(config())


FAULT6 = "2001:db8::54"      # the fault server's IPv6 listener: the second upstream


def test_allow_downgrade_decides_per_upstream(lab, clean):
    """Two upstreams, one fault server: its IPv6 listener strips DNSSEC data, the IPv4 one passes it. Status shows
    one capable and one incapable upstream; an answer from the first is validated, one the second sent (after the
    first refused the name) is insecure, not SERVFAIL; the CLI prints both states."""
    dnsseclab.faultctl("set", "*", "strip", "--types", "dnssec", "--listener", FAULT6)
    workdir = Path(tempfile.mkdtemp(prefix="discoverd-dnssec2-"))
    d = StubDaemon(workdir, [f"{STUB2}:53"], config("allow-downgrade"), upstream=[dnsseclab.FAULT, f"[{FAULT6}]:53"])
    d.start()
    try:
        status = wait_for_states(d, lambda s: len(states_by_server(s)) == 2 and "unknown" not in states_by_server(s).values())
        states = states_by_server(status)
        assert len(states) == 2, status
        v4 = next(k for k in states if dnsseclab.FAULT in k)
        v6 = next(k for k in states if FAULT6 in k)
        assert states[v4] == "capable" and states[v6] == "incapable", status
        assert status["upstreams"] == "mixed", status
        # The first upstream answers: validated.
        first = dnsseclab.classify(dnsseclab.ask(STUB2, "www.dnssec.test", "A"))
        assert first.verdict == SECURE, first
        # The first refuses this name, the second (stripping) answers: not validated, and not SERVFAIL.
        dnsseclab.faultctl("set", "tampered.dnssec.test", "refused", "--listener", dnsseclab.FAULT)
        second = dnsseclab.classify(dnsseclab.ask(STUB2, "tampered.dnssec.test", "A"))
        assert second.verdict == INSECURE and second.rcode == "NOERROR" and second.answer, second
        v = d.varlink()
        try:
            reply = v.call("io.discoverd.Resolver.ResolveAddresses", {"name": "www.dnssec.test"})
            assert reply["dnssec"] == SECURE, reply
        finally:
            v.close()
        # Neither answer changed a state.
        assert states_by_server(dnssec_status(d)) == states
        shown = subprocess.run([str(DISCOVER_BIN), "status", "--socket", d.socket_path], capture_output=True,
                               text=True, timeout=10)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert any(v4 in line and "capable" in line and "incapable" not in line for line in lines), shown.stdout
        assert any(v6 in line and "incapable" in line for line in lines), shown.stdout
        assert any(line.startswith("dnssec:") and "mixed" in line for line in lines), shown.stdout
    finally:
        try:
            d.stop_alive()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def test_a_plan_says_whether_its_ech_came_from_an_authenticated_answer(daemon, clean):
    flush_all(daemon)
    v = daemon.varlink()
    try:
        signed = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "ech.dnssec.test"})
        assert any(e.get("ech") for e in signed["endpoints"]), signed
        assert signed["dnssec"] == SECURE and signed["echAuthentication"] == "dnssec", signed
        unsigned = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "ech.unsigned.dnssec.test"})
        assert any(e.get("ech") for e in unsigned["endpoints"]), unsigned
        assert unsigned["dnssec"] == INSECURE and unsigned["echAuthentication"] == "none", unsigned
        # No ECH, no statement about it.
        plain = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "svc.dnssec.test"})
        assert plain.get("echAuthentication") is None, plain
        # From the cache too (the second plan is all cache hits).
        again = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "ech.dnssec.test"})
        assert again["source"] == "cache" and again["echAuthentication"] == "dnssec", again
    finally:
        v.close()
    human = subprocess.run([str(DISCOVER_BIN), "plan", "ech.dnssec.test", "--socket", daemon.socket_path],
                           capture_output=True, text=True, timeout=10)
    assert human.returncode == 0 and "ech-authenticated=yes (dnssec)" in human.stdout, human
    human = subprocess.run([str(DISCOVER_BIN), "plan", "ech.unsigned.dnssec.test", "--socket", daemon.socket_path],
                           capture_output=True, text=True, timeout=10)
    assert human.returncode == 0 and "ech-authenticated=no" in human.stdout, human
    machine = subprocess.run([str(DISCOVER_BIN), "plan", "ech.dnssec.test", "--json", "--socket", daemon.socket_path],
                             capture_output=True, text=True, timeout=10)
    assert machine.returncode == 0 and json.loads(machine.stdout)["echAuthentication"] == "dnssec", machine


def test_ech_over_an_authenticated_encrypted_upstream(lab, clean):
    """An insecure HTTPS answer (lab.test is under the negative anchor test.) that came over DoT with a verified
    certificate: encryptedTransport."""
    workdir = Path(tempfile.mkdtemp(prefix="discoverd-dnssec-dot-"))
    tls = f"tls://{lab['LAB_TLS']}:853#{lab['LAB_TLS_NAME']}"
    d = StubDaemon(workdir, [f"{STUB2}:53"], config() + f"ca-file = {lab['LAB_CA']}\n", upstream=tls)
    d.start()
    try:
        v = d.varlink()
        try:
            plan = v.call("io.discoverd.Resolver.ConnectionPlan", {"host": "ech.lab.test"})
        finally:
            v.close()
        assert any(e.get("ech") for e in plan["endpoints"]), plan
        assert plan["dnssec"] == INSECURE and plan["echAuthentication"] == "encryptedTransport", plan
        assert {q["transport"] for q in plan["timing"]["queries"]} == {"tls"}, plan
    finally:
        try:
            d.stop_alive()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def test_a_validating_upstreams_reason_reaches_every_client(lab, clean):
    """discoverd that does not validate, forwarding to a validator (the lab's reference Unbound, `ede: yes`): the
    upstream's SERVFAIL reason (RFC 8914 EDE) reaches the stub's client with its code, its text after the
    upstream's name; the API's UpstreamFailure with `ede` and `reason`; and `discover` prints it. `discover query`
    straight at the validator shows the same EDE as dnspython."""
    name = "www.expired.dnssec.test"

    def reference() -> tuple[int, str]:
        # Unbound's reason when it validates the name afresh (a cached bogus answer says only "DNSSEC Bogus").
        dnsseclab.flush()
        got = dnsseclab.unbound_verdict(name)
        assert got.rcode == "SERVFAIL" and got.ede and got.ede_text[0], got
        return got.ede[0], got.ede_text[0]

    code, text = reference()
    assert code == dnsseclab.EDE_SIGNATURE_EXPIRED and "expired.dnssec.test" in text, (code, text)
    dnsseclab.flush()
    query = subprocess.run(["ip", "netns", "exec", "dlab-a", str(DISCOVER_BIN), "query", name, "--upstream",
                            dnsseclab.UNBOUND, "--dnssec", "--json"], capture_output=True, text=True, timeout=30)
    shown = json.loads(query.stdout)
    assert query.returncode == 1 and shown["rcode"] == "SERVFAIL", query
    assert shown["edns"]["ede"] == [{"code": code, "name": "Signature Expired", "text": text}], shown
    dnsseclab.flush()
    query = subprocess.run(["ip", "netns", "exec", "dlab-a", str(DISCOVER_BIN), "query", name, "--upstream",
                            dnsseclab.UNBOUND, "--dnssec"], capture_output=True, text=True, timeout=30)
    assert f"; EDE: {code} (Signature Expired): {text}\n" in query.stdout, query.stdout
    assert "ADDITIONAL: 1" in query.stdout and "; EDNS: version: 0, flags: do; udp: " in query.stdout, query.stdout
    # --short: no records on stdout, and the reason on stderr rather than silence.
    dnsseclab.flush()
    query = subprocess.run(["ip", "netns", "exec", "dlab-a", str(DISCOVER_BIN), "query", name, "--upstream",
                            dnsseclab.UNBOUND, "--dnssec", "--short"], capture_output=True, text=True, timeout=30)
    assert query.returncode == 1 and query.stdout == "", query
    reason = f"discover: {dnsseclab.UNBOUND}:53 answered SERVFAIL, EDE {code} (Signature Expired): {text}\n"
    assert query.stderr == reason, query

    workdir = Path(tempfile.mkdtemp(prefix="discoverd-dnssec3-"))
    d = StubDaemon(workdir, [f"{STUB2}:53"], config("no"), upstream=[dnsseclab.UNBOUND])
    d.start()
    try:
        dnsseclab.flush()
        got = dnsseclab.classify(dnsseclab.ask(STUB2, name, "A"))
        assert got.rcode == "SERVFAIL", got
        assert got.ede == [code] and got.ede_text == [f"{dnsseclab.UNBOUND}:53 answered SERVFAIL: {text}"], got
        flush_all(d)
        v = d.varlink()
        try:
            failed = v.call("io.discoverd.Resolver.ResolveAddresses", {"name": name}, error_ok=True)
        finally:
            v.close()
        assert failed.get("error") == "io.discoverd.Resolver.UpstreamFailure", failed
        # The API asks for A and AAAA at once: the reason is Unbound's for whichever failed first.
        either = (text, text.replace(f"<{name}. A IN>", f"<{name}. AAAA IN>"))
        assert either[0] != either[1], text
        assert failed["parameters"]["ede"] == code and failed["parameters"]["reason"] in either, failed
        flush_all(d)
        cli = subprocess.run([str(DISCOVER_BIN), "addresses", name, "--socket", d.socket_path], capture_output=True,
                             text=True, timeout=10)
        assert cli.returncode == 2, cli
        assert any(f"SERVFAIL, EDE {code} (Signature Expired): {reason} (server {dnsseclab.UNBOUND}:53)"
                   in cli.stderr for reason in either), cli
        # Status counts the upstream's error answers (the stub's A, the API's and the CLI's A and AAAA), not as
        # failures, and shows the last with its name, type, code and reason.
        v = d.varlink()
        try:
            up = next(u for u in v.status()["upstreamServers"] if u["server"] == f"{dnsseclab.UNBOUND}:53")
        finally:
            v.close()
        assert up["errorAnswers"] == 5 and up["queries"] == 5 and up["failures"] == 0, up
        lasts = [f"{name}. {t}: SERVFAIL, EDE {code} (Signature Expired): {r}" for t, r in zip(("A", "AAAA"), either)]
        assert up["lastErrorAnswer"] in lasts, up
        shown = subprocess.run([str(DISCOVER_BIN), "--socket", d.socket_path, "status"], capture_output=True,
                               text=True, timeout=10)
        assert f", 0 failures, 5 error answers (last: {up['lastErrorAnswer']})" in shown.stdout, shown.stdout
        theirs = as_nobody(d, "status")
        assert ", 0 failures, 5 error answers (last: shown to root and the admin group)" in theirs.stdout, theirs
        assert "expired.dnssec" not in theirs.stdout, theirs.stdout
    finally:
        try:
            d.stop_alive()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
