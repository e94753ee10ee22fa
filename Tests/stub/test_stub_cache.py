"""The stub's cache behaviour: optimistic answers (RFC 8767 with EDE 3, RFC 8914), one refresh upstream,
negative caching (RFC 2308), the cache shared with the varlink API, and upstream failures."""

import time

import pytest

from stubkit import (EDE_NETWORK_ERROR, EDE_NO_REACHABLE_AUTHORITY, EDE_STALE, NO_OPTIMISTIC, STALE_TTL, TIMEOUT_MS,
                     StubDaemon, ask, ask_many, sleep_until, stub_counters, uniq, wait_until)

CLIENTS = 8
SLOW_MS = 800


def warm_and_expire(fault, name: str, rtype: str, old: str, ttl: int = 1) -> None:
    """Caches NAME/RTYPE = OLD with a TTL of TTL seconds through the stub, then waits until it has expired."""
    fault.raw(name, rtype, old, ttl=ttl)
    r = ask(name, rtype)
    fetched = time.monotonic()
    assert r.texts(rtype) == [old] and r.ttls() == [ttl], r.msg
    assert fault.count(name, rtype) == 1
    sleep_until(fetched + ttl + 0.3)


def test_optimistic_answer_at_once_and_one_refresh(stub, api, fault):
    name = uniq("opt")
    warm_and_expire(fault, name, "A", "192.0.2.101")
    fault.raw(name, "A", "192.0.2.102", ttl=300, delay_ms=SLOW_MS)  # the refresh is slow and brings new data
    before = stub_counters(api.status())

    replies = ask_many(CLIENTS, name, "A")

    for r in replies:
        assert r.rcode == "NOERROR" and r.texts("A") == ["192.0.2.101"], r.msg
        assert all(0 < ttl <= STALE_TTL for ttl in r.ttls()), r.ttls()
        assert EDE_STALE in r.ede_codes(), r.msg.options
        assert r.ms < SLOW_MS / 4, f"stale answer took {r.ms:.1f} ms (upstream delay {SLOW_MS} ms)"
    print(f"stale answers in {sorted(round(r.ms, 2) for r in replies)} ms with a {SLOW_MS} ms upstream")
    # Once the refresh has landed, the fresh answer is served from the cache.
    deadline = time.monotonic() + SLOW_MS / 1000 + 3
    while True:
        r = ask(name, "A")
        if r.texts("A") == ["192.0.2.102"] or time.monotonic() > deadline:
            break
        assert r.texts("A") == ["192.0.2.101"] and EDE_STALE in r.ede_codes()
        time.sleep(0.05)
    assert r.texts("A") == ["192.0.2.102"], "the refreshed answer never arrived"
    assert 290 < r.ttls()[0] <= 300 and EDE_STALE not in r.ede_codes()
    assert fault.count(name, "A") == 2, "exactly one refresh query upstream"
    after = stub_counters(api.status())
    assert after["staleAnswers"] - before["staleAnswers"] >= CLIENTS
    assert after["forwarded"] == before["forwarded"], "stale answers are not forwarded ones"


def test_optimistic_over_tcp(stub, fault):
    name = uniq("opt-tcp")
    warm_and_expire(fault, name, "AAAA", "2001:db8::101")
    fault.raw(name, "AAAA", "2001:db8::102", ttl=300, delay_ms=SLOW_MS)
    r = ask(name, "AAAA", tcp=True)
    assert r.texts("AAAA") == ["2001:db8::101"] and r.ttls() == [STALE_TTL] and EDE_STALE in r.ede_codes()
    assert r.ms < SLOW_MS / 4
    assert fault.wait_count(name, "AAAA", 2) == 2


def test_stale_answer_without_edns_has_no_opt(stub, fault):
    name = uniq("opt-noedns")
    warm_and_expire(fault, name, "A", "192.0.2.103")
    fault.raw(name, "A", "192.0.2.104", delay_ms=SLOW_MS)
    r = ask(name, "A", edns=None)
    assert r.texts("A") == ["192.0.2.103"] and r.ttls() == [STALE_TTL]
    assert r.msg.edns == -1, "no OPT (hence no EDE) when the query had none"


def test_no_optimistic_domain_waits_for_upstream(stub, fault):
    """[resolver] no-optimistic-domain: names under it are never answered from expired cache."""
    name = uniq("bank", NO_OPTIMISTIC)
    warm_and_expire(fault, name, "A", "192.0.2.105")
    fault.raw(name, "A", "192.0.2.106", delay_ms=400)
    r = ask(name, "A")
    assert r.texts("A") == ["192.0.2.106"] and EDE_STALE not in r.ede_codes()
    assert r.ms >= 350, f"answered in {r.ms:.0f} ms: must have waited for the upstream"


# ------------------------------------------------------------------ negative caching


def test_nxdomain_has_soa_and_is_cached(stub, fault):
    name = uniq("nx")  # Knot: no such name
    for tcp in (False, True, False):
        r = ask(name, "A", tcp=tcp)
        assert r.rcode == "NXDOMAIN" and not r.msg.answer
        auth = r.rrs("authority")
        assert [(n, t) for n, _, t, _ in auth] == [("lab.test.", "SOA")], auth
        assert 0 < auth[0][1] <= 60, "negative TTL = min(SOA TTL, MINIMUM) = 60 (RFC 2308 §5)"
    assert fault.count(name) == 1, "the second and third queries came from the cache"


def test_nxdomain_without_edns_and_other_type_from_cache(stub, fault):
    """RFC 2308 §5: NXDOMAIN is cached per name and type here: asking the same type again is a hit."""
    name = uniq("nx2")
    assert ask(name, "AAAA", edns=None).rcode == "NXDOMAIN"
    r = ask(name, "AAAA", edns=None)
    assert r.rcode == "NXDOMAIN" and [t for _, _, t, _ in r.rrs("authority")] == ["SOA"]
    assert fault.count(name, "AAAA") == 1


def test_nodata_has_soa_and_is_cached(stub, fault):
    name = "h2only.lab.test"  # exists in Knot, has no TXT records
    before = fault.count(name, "TXT")
    for tcp in (False, True):
        r = ask(name, "TXT", tcp=tcp)
        assert r.rcode == "NOERROR" and not r.msg.answer
        assert [(n, t) for n, _, t, _ in r.rrs("authority")] == [("lab.test.", "SOA")], r.msg
    assert fault.count(name, "TXT") - before == 1


def test_nodata_synthesized_cname_target(stub, fault):
    """A CNAME whose target has no records of the type: CNAME in the answer, the target's SOA in authority."""
    name = uniq("cname-nodata")
    fault.raw(name, "TXT", "h2only.lab.test.", rtype="CNAME")
    r = ask(name, "TXT")
    assert r.rcode == "NOERROR", r.msg
    assert [(t, d) for _, _, t, d in r.rrs()] == [("CNAME", "h2only.lab.test.")]
    assert [t for _, _, t, _ in r.rrs("authority")] == ["SOA"], r.msg


# ------------------------------------------------------------------ one cache for the stub and the API


def test_stub_fetch_is_api_cache_hit(stub, api, fault):
    name = uniq("shared1")
    fault.raw(name, "A", "192.0.2.110")
    fault.raw(name, "AAAA", "2001:db8::110")
    assert ask(name, "A").texts("A") == ["192.0.2.110"]
    assert ask(name, "AAAA", tcp=True).texts("AAAA") == ["2001:db8::110"]
    res = api.call("io.discoverd.Resolver.ResolveAddresses", {"name": name})
    assert res["source"] == "cache", res
    assert sorted(res["addresses"]) == ["192.0.2.110", "2001:db8::110"]
    assert res["timing"]["queries"] == []
    assert fault.count(name) == 2


def test_api_fetch_is_stub_cache_hit(stub, api, fault):
    name = uniq("shared2")
    fault.raw(name, "A", "192.0.2.111")
    fault.raw(name, "AAAA", "2001:db8::111")
    res = api.call("io.discoverd.Resolver.ResolveAddresses", {"name": name})
    assert res["source"] == "network" and sorted(res["addresses"]) == ["192.0.2.111", "2001:db8::111"]
    before = stub_counters(api.status())
    a, aaaa = ask(name, "A"), ask(name, "AAAA")
    assert a.texts("A") == ["192.0.2.111"] and aaaa.texts("AAAA") == ["2001:db8::111"]
    assert all(0 < ttl <= 300 for ttl in a.ttls() + aaaa.ttls())
    assert fault.count(name) == 2, "the stub asked upstream again"
    after = stub_counters(api.status())
    assert after["cacheAnswers"] - before["cacheAnswers"] == 2 and after["forwarded"] == before["forwarded"]


def test_https_shared_both_ways(stub, api, fault):
    one, two = uniq("https1"), uniq("https2")
    for name in (one, two):
        fault.raw(name, "HTTPS", "1 . alpn=h3,h2")
    # stub first, then the API
    assert ask(one, "HTTPS").texts("HTTPS") == ['1 . alpn="h3,h2"']
    res = api.call("io.discoverd.Resolver.ResolveHTTPS", {"name": one})
    assert res["source"] == "cache" and res["h3"] is True, res
    # the API first, then the stub
    res = api.call("io.discoverd.Resolver.ResolveHTTPS", {"name": two})
    assert res["source"] == "network" and res["h3"] is True, res
    assert ask(two, "HTTPS", tcp=True).texts("HTTPS") == ['1 . alpn="h3,h2"']
    assert fault.count(one, "HTTPS") == 1 and fault.count(two, "HTTPS") == 1


def test_stale_entry_shared_with_api(stub, api, fault):
    """A name the stub cached and that expired is an expiredCache answer for the API too, and one refresh serves
    both."""
    name = uniq("shared-stale")
    warm_and_expire(fault, name, "A", "192.0.2.112")
    fault.raw(name, "A", "192.0.2.113", delay_ms=SLOW_MS)
    res = api.call("io.discoverd.Resolver.ResolveAddresses", {"name": name, "family": "ipv4"})
    assert res["source"] == "expiredCache" and res["addresses"] == ["192.0.2.112"], res
    r = ask(name, "A")
    assert r.texts("A") == ["192.0.2.112"] and EDE_STALE in r.ede_codes()
    assert wait_until(lambda: ask(name, "A").texts("A") == ["192.0.2.113"], SLOW_MS / 1000 + 3)
    assert fault.count(name, "A") == 2


# ------------------------------------------------------------------ upstream failures


@pytest.mark.parametrize("mode,rcode_text", [("servfail", "SERVFAIL"), ("refused", "REFUSED")])
def test_upstream_error_is_servfail_with_ede_23(stub, api, fault, mode, rcode_text):
    name = uniq(f"up-{mode}")
    fault.set(name, mode)
    before = stub_counters(api.status())
    r = ask(name, "A")
    assert r.rcode == "SERVFAIL" and not r.msg.answer
    assert [c for c, _ in r.ede] == [EDE_NETWORK_ERROR], r.ede
    assert rcode_text in r.ede[0][1], f"EDE text should name the upstream's answer: {r.ede}"
    assert stub_counters(api.status())["serverFailures"] == before["serverFailures"] + 1


def test_upstream_silent_is_servfail_with_ede_22(stub, fault):
    name = uniq("up-drop")
    fault.set(name, "drop")
    r = ask(name, "A", timeout=TIMEOUT_MS / 1000 + 3)
    assert r.rcode == "SERVFAIL", r.msg
    assert [c for c, _ in r.ede] == [EDE_NO_REACHABLE_AUTHORITY], r.ede
    assert r.ms >= TIMEOUT_MS * 0.9, f"SERVFAIL after {r.ms:.0f} ms, before the {TIMEOUT_MS} ms timeout"
    r = ask(name, "A", edns=None, tcp=True, timeout=TIMEOUT_MS / 1000 + 3)
    assert r.rcode == "SERVFAIL" and r.msg.edns == -1


def test_upstream_port_closed_is_servfail_with_ede_22_naming_the_refusal(lab, workdir):
    """A plain upstream with nothing on its port: the ICMP port unreachable ends the try at once, and the EDE says
    what the try failed with rather than "in time"."""
    d = StubDaemon(workdir / "closed-port", ["127.0.0.1:5391"],
                   "[resolver]\ntimeout-ms = 4000\nattempts = 1\ndnssec = no\n[stub]\nlocal = no\n",
                   upstream="127.0.0.1:9")
    d.start()
    try:
        r = ask(uniq("closed"), "A", port=5391, timeout=8)
        assert r.rcode == "SERVFAIL", r.msg
        assert r.ms < 3000, f"SERVFAIL after {r.ms:.0f} ms: the try waited for its timeout"
        assert r.ede == [(EDE_NO_REACHABLE_AUTHORITY,
                          "no answer from 127.0.0.1:9 (127.0.0.1:9: receive: Connection refused)")], r.ede
        assert d.alive()
    finally:
        d.stop()


@pytest.mark.parametrize("mode", ["servfail", "drop"])
def test_stale_data_beats_upstream_failure(stub, fault, mode):
    name = uniq(f"stale-{mode}")
    warm_and_expire(fault, name, "A", "192.0.2.120")
    fault.set(name, mode, qtype="A")  # replaces the raw rule (a rule for any type would not: (name, A) wins)
    r = ask(name, "A")
    assert r.texts("A") == ["192.0.2.120"] and r.ttls() == [STALE_TTL] and EDE_STALE in r.ede_codes(), r.msg
    assert fault.wait_count(name, "A", 2) == 2
    time.sleep(TIMEOUT_MS / 1000 + 0.3)  # the refresh has failed by now
    r = ask(name, "A")
    assert r.rcode == "NOERROR" and r.texts("A") == ["192.0.2.120"] and EDE_STALE in r.ede_codes(), r.msg
    assert fault.count(name, "A") == 2, "a failed refresh is not retried at once (refresh-retry)"


def test_coalesced_misses(stub, fault):
    """Identical queries for a name not cached yet: one upstream query, every client answered."""
    name = uniq("coalesce")
    fault.raw(name, "A", "192.0.2.121", delay_ms=300)
    replies = ask_many(CLIENTS, name, "A")
    assert all(r.texts("A") == ["192.0.2.121"] for r in replies)
    assert fault.count(name, "A") == 1


def test_ttl_counts_down(stub, fault):
    name = uniq("countdown")
    fault.raw(name, "A", "192.0.2.122", ttl=300)
    assert ask(name, "A").ttls() == [300]
    seen = []

    def dropped():
        seen.append(ask(name, "A", tcp=len(seen) % 2 == 1).ttls()[0])
        return seen[-1] < 300

    assert wait_until(dropped, 2.5, interval=0.1), seen
    assert 297 <= seen[-1] < 300 and seen == sorted(seen, reverse=True), seen
    assert fault.count(name, "A") == 1


def test_stale_cname_with_fresh_target(stub, fault):
    """c1 CNAME c2 has expired, c2 A is fresh: the chain comes back whole at once, the CNAME with the stale TTL,
    EDE 3, and only the CNAME is refreshed."""
    c1, c2 = uniq("stale-cname"), uniq("fresh-target")
    fault.raw(c2, "A", "192.0.2.123", ttl=300)
    fault.raw(c1, "A", f"{c2}.", rtype="CNAME", ttl=1)
    r = ask(c1, "A")
    fetched = time.monotonic()
    assert [(t, d) for _, _, t, d in r.rrs()] == [("CNAME", f"{c2}."), ("A", "192.0.2.123")]
    sleep_until(fetched + 1.3)
    fault.raw(c1, "A", f"{c2}.", rtype="CNAME", ttl=300, delay_ms=SLOW_MS)
    r = ask(c1, "A")
    assert r.ms < SLOW_MS / 4, f"{r.ms:.0f} ms"
    assert [(t, d) for _, _, t, d in r.rrs()] == [("CNAME", f"{c2}."), ("A", "192.0.2.123")], r.msg
    cname_ttl, a_ttl = r.ttls()
    assert cname_ttl == STALE_TTL and 290 < a_ttl <= 300, r.ttls()
    assert EDE_STALE in r.ede_codes()
    assert fault.wait_count(c1, "A", 2) == 2 and fault.count(c2, "A") == 1


@pytest.mark.parametrize("mode", ["wrongname", "wrongid", "garbage"])
def test_bad_upstream_reply_not_accepted(stub, fault, mode):
    """An upstream reply for another question, with another ID, or garbage is never relayed or cached."""
    name = uniq(f"bad-{mode}")
    fault.set(name, mode, qtype="A", target="h3.lab.test")
    r = ask(name, "A", timeout=TIMEOUT_MS / 1000 + 3)
    assert r.rcode == "SERVFAIL" and not r.msg.answer, r.msg
    fault.clear(name, "A")
    r = ask(name, "A")
    assert r.rcode == "NXDOMAIN", f"after the bad reply: {r.msg}"  # Knot's real answer, not a cached bad one


def test_cname_loop_terminates(stub, fault):
    c1, c2 = uniq("loop1"), uniq("loop2")
    fault.raw(c1, "A", f"{c2}.", rtype="CNAME")
    fault.raw(c2, "A", f"{c1}.", rtype="CNAME")
    r = ask(c1, "A", timeout=5)
    assert r.wire is not None, "no answer to a CNAME loop"
    assert r.rcode in ("NOERROR", "SERVFAIL") and len(r.rrs()) <= 4, r.msg
    assert stub.alive()
    assert fault.count(c1, "A") == 1 and fault.count(c2, "A") == 1
