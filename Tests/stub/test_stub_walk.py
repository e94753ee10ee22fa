"""The resolution walk with real clients and real servers: scrubbing of polluted replies (kdig, the varlink API,
the saved cache file), special-use names answered locally (kdig, with the upstream's query log), and a flood of
random names from an allowed client while the upstream is silent (dnsperf).
"""

import json
import os
import statistics
import subprocess
import time
import uuid

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from stubkit import STUB_LAB, STUB_V4, ScriptedUpstream, StubDaemon, Varlink, ask, kdig, uniq, wait_until

VICTIM_ADDRESS = "6.6.6.6"


def polluted_wire(name: str, victim: str, rtype: str = "A") -> str:
    """A reply to NAME that also carries an address for VICTIM, a foreign SOA with a two-day minimum, and glue."""
    query = dns.message.make_query(name, rtype)
    reply = dns.message.make_response(query)
    reply.answer.append(dns.rrset.from_text(name + ".", 300, "IN", "A", "192.0.2.77"))
    reply.answer.append(dns.rrset.from_text(victim + ".", 172800, "IN", "A", VICTIM_ADDRESS))
    reply.authority.append(dns.rrset.from_text(
        "attacker.example.", 172800, "IN", "SOA", "ns.attacker.example. h.attacker.example. 1 2 3 4 172800"))
    reply.additional.append(dns.rrset.from_text("glue." + victim + ".", 172800, "IN", "A", "6.6.6.7"))
    return reply.to_wire().hex()


def all_texts(reply) -> list[str]:
    msg = reply.msg
    return [rr.to_text() for section in (msg.answer, msg.authority, msg.additional) for rr in section]


# ---------------------------------------------------------------- scrubbing


def test_a_polluted_reply_serves_only_the_answer(stub, fault, api):
    name, victim = uniq("polluted"), uniq("victim")
    fault.set(name, "raw", qtype="A", wire=polluted_wire(name, victim))

    reply = ask(name, "A")
    assert reply.rcode == "NOERROR"
    assert reply.texts("A") == ["192.0.2.77"]
    text = "\n".join(all_texts(reply))
    assert victim not in text and VICTIM_ADDRESS not in text and "attacker" not in text
    # kdig agrees, and asking for the victim goes upstream (the planted record was not cached).
    out = kdig(f"@{STUB_V4}", name, "A")
    assert [r[4] for r in out.records("ANSWER", "A")] == ["192.0.2.77"]
    before = fault.count(victim, "A")
    out = kdig(f"@{STUB_V4}", victim, "A", check=False)
    assert VICTIM_ADDRESS not in out.text
    assert fault.count(victim, "A") == before + 1
    # The API has nothing for it either.
    answer = api.call("io.discoverd.Resolver.ResolveAddresses", {"name": victim}, error_ok=True)
    assert VICTIM_ADDRESS not in json.dumps(answer)
    # Status counts what was dropped.
    assert api.status()["upstreamQueries"]["scrubbedRecords"] >= 1


def test_a_foreign_soa_sets_no_negative_ttl_and_is_not_served(stub, fault):
    name = uniq("foreignsoa")
    query = dns.message.make_query(name, "A")
    reply = dns.message.make_response(query)
    reply.set_rcode(dns.rcode.NXDOMAIN)
    reply.authority.append(dns.rrset.from_text(
        "attacker.example.", 172800, "IN", "SOA", "ns.attacker.example. h.attacker.example. 1 2 3 4 172800"))
    fault.set(name, "raw", qtype="A", wire=reply.to_wire().hex())
    answer = ask(name, "A")
    assert answer.rcode == "NXDOMAIN"
    assert not answer.rrs("authority")
    # Cached for the 30 s of an SOA-less negative answer at most, not two days: the TTL the next reply shows.
    again = ask(name, "A")
    assert again.rcode == "NXDOMAIN"
    assert fault.count(name, "A") == 1


def test_the_saved_cache_holds_no_planted_record(lab, fault, workdir):
    name, victim = uniq("persist"), uniq("victim")
    fault.set(name, "raw", qtype="A", wire=polluted_wire(name, victim))
    daemon = StubDaemon(workdir / "walk-persist", ["127.0.0.1:5305"], "[stub]\nlocal = no\n")
    daemon.start()
    try:
        reply = ask(name, "A", port=5305)
        assert reply.texts("A") == ["192.0.2.77"]
    finally:
        daemon.stop()  # SIGTERM: the cache is saved on the way out
    saved = (daemon.workdir / "state" / "cache.json").read_text()
    assert name in saved
    assert victim not in saved and "attacker.example" not in saved


# ---------------------------------------------------------------- special-use names


@pytest.mark.parametrize("name,rtype,rcode,answer", [
    ("localhost", "A", "NOERROR", ["127.0.0.1"]),
    ("localhost", "AAAA", "NOERROR", ["::1"]),
    ("app.localhost", "A", "NOERROR", ["127.0.0.1"]),
    ("localhost", "MX", "NOERROR", []),
    ("invalid", "A", "NXDOMAIN", []),
    ("x.invalid", "AAAA", "NXDOMAIN", []),
    ("hiddenservice.onion", "A", "NXDOMAIN", []),
    ("_dns.resolver.arpa", "SVCB", "NOERROR", []),
])
def test_special_use_names_are_answered_here_and_never_forwarded(stub, fault, name, rtype, rcode, answer):
    before = fault.count(name)
    out = kdig(f"@{STUB_V4}", name, rtype, check=False)
    assert out.status == rcode, out.text
    assert [r[4] for r in out.records("ANSWER", rtype)] == answer
    assert fault.count(name) == before, f"{name} was forwarded upstream"


# ---------------------------------------------------------------- a flood


SILENT_PORT = 5397
FLOOD_STUB_PORT = 5306


def selective_answer(q: dns.message.Message):
    """Names starting with `ok-` get A 192.0.2.80; everything else gets silence."""
    qname = q.question[0].name.to_text()
    if not qname.startswith("ok-"):
        return None
    r = dns.message.make_response(q)
    if q.question[0].rdtype == dns.rdatatype.A:
        r.answer.append(dns.rrset.from_text(qname, 300, "IN", "A", "192.0.2.80"))
    return r


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def timed_status(path: str) -> float:
    v = Varlink(path, timeout=5)
    try:
        start = time.monotonic()
        v.status()
        return (time.monotonic() - start) * 1000
    finally:
        v.close()


def test_a_flood_of_random_names_stays_bounded_and_cached_names_stay_fast(lab, workdir):
    upstream = ScriptedUpstream(SILENT_PORT, selective_answer)
    daemon = StubDaemon(
        workdir / "walk-flood", [f"127.0.0.1:{FLOOD_STUB_PORT}", f"{STUB_LAB}:{FLOOD_STUB_PORT}"],
        "[resolver]\ntimeout-ms = 1000\nattempts = 1\n[stub]\nlocal = no\n", upstream=f"127.0.0.1:{SILENT_PORT}")
    queries = workdir / "flood-queries.txt"
    queries.write_text("".join(f"r{uuid.uuid4().hex[:12]}.flood.test A\n" for _ in range(50_000)))
    daemon.start()
    try:
        pid = daemon.pid
        cached = f"ok-{uuid.uuid4().hex[:8]}.flood.test"
        assert ask(cached, "A", port=FLOOD_STUB_PORT).texts("A") == ["192.0.2.80"]
        baseline = [ask(cached, "A", port=FLOOD_STUB_PORT).ms for _ in range(20)]
        fds_before = proc_fds(pid)

        samples = {"fds": [], "rss": [], "cached_ms": [], "status_ms": [], "lost": 0, "other_client_ms": []}
        flood = subprocess.Popen(
            ["ip", "netns", "exec", "dlab-a", "dnsperf", "-s", "127.0.0.1", "-p", str(FLOOD_STUB_PORT),
             "-d", str(queries), "-n", "1", "-c", "4", "-q", "1000", "-t", "3", "-l", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while flood.poll() is None:
            samples["fds"].append(proc_fds(pid))
            samples["rss"].append(proc_rss_mb(pid))
            hit = ask(cached, "A", port=FLOOD_STUB_PORT, timeout=2)
            if hit.wire is None:
                samples["lost"] += 1
            else:
                samples["cached_ms"].append(hit.ms)
            # Another allowed client (the lab address is one of the machine's own) gets its own budget.
            other = ask(f"ok-{uuid.uuid4().hex[:8]}.flood.test", "A", server=STUB_LAB, port=FLOOD_STUB_PORT, timeout=3)
            assert other.texts("A") == ["192.0.2.80"]
            samples["other_client_ms"].append(other.ms)
            samples["status_ms"].append(timed_status(daemon.socket_path))
            time.sleep(0.05)
        output = flood.communicate()[0]
        assert flood.returncode == 0, output
        assert "Queries sent:         50000" in output, output

        status = Varlink(daemon.socket_path).status()
        queries_status = status["upstreamQueries"]
        report = {
            "fds_before": fds_before, "fds_max": max(samples["fds"]), "rss_max_mb": round(max(samples["rss"]), 1),
            "cached_ms_p50_before": round(statistics.median(baseline), 3),
            "cached_ms_p50_during": round(statistics.median(samples["cached_ms"]), 3),
            "cached_ms_max_during": round(max(samples["cached_ms"]), 3),
            "status_ms_p50": round(statistics.median(samples["status_ms"]), 3),
            "status_ms_max": round(max(samples["status_ms"]), 3),
            "other_client_ms_p50": round(statistics.median(samples["other_client_ms"]), 3),
            "samples": len(samples["fds"]), "peak_inflight": queries_status["peak"],
            "refused_per_client": queries_status["refusedPerClient"], "upstream_silent": upstream.silent,
        }
        print("flood figures:", json.dumps(report))

        assert samples["lost"] == 0
        # Upstream work stayed within the per-client limit (one flooding address), so descriptors did too.
        assert queries_status["peak"] <= queries_status["perClientLimit"] + 2  # + the other client's queries
        assert queries_status["refusedPerClient"] > 0
        assert max(samples["fds"]) <= fds_before + queries_status["perClientLimit"] + 16
        assert max(samples["rss"]) < 200
        # Cached answers and Status stay fast (the machine is also running dnsperf at full speed).
        assert statistics.median(samples["cached_ms"]) < 20
        assert statistics.median(samples["status_ms"]) < 100

        # Afterwards everything is normal: nothing in flight, new names resolve, the daemon lives.
        assert wait_until(lambda: Varlink(daemon.socket_path).status()["upstreamQueries"]["inflight"] == 0, 10)
        assert ask(f"ok-{uuid.uuid4().hex[:8]}.flood.test", "A", port=FLOOD_STUB_PORT).texts("A") == ["192.0.2.80"]
        assert proc_fds(pid) <= fds_before + 4
        assert daemon.alive()
    finally:
        daemon.stop()
        upstream.close()
