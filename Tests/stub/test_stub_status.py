"""io.discoverd.Daemon.Status reports the stub: its sockets and counters that move with what it answered."""

from stubkit import STUB_LAB, ask, stub_counters, udp_exchange, uniq

COUNTERS = ("udp", "tcp", "cacheAnswers", "staleAnswers", "forwarded", "local", "refused", "truncated",
            "formatErrors", "serverFailures")


def test_status_lists_listen_addresses(stub, api):
    listen = api.status()["stub"]["listen"]
    for address in ("127.0.0.1:53", "[::1]:53", "192.0.2.1:53"):
        assert f"udp {address}" in listen and f"tcp {address}" in listen, listen


def test_status_counters_move(stub, api, fault, txt):
    before = stub_counters(api.status())
    assert set(COUNTERS) <= set(before), before
    name = uniq("status")
    fault.raw(name, "A", "192.0.2.160")
    failing = uniq("status-fail")
    fault.set(failing, "servfail")
    ask(name, "A")                                   # forwarded
    ask(name, "A", tcp=True)                         # from cache, over TCP
    ask(txt["big"][0], "TXT")                        # truncated
    ask("h3.lab.test", "A", server=STUB_LAB, ns="dlab-b")    # refused
    udp_exchange(b"\x00\x01\x01\x00\x00\x00" + bytes(6))     # FORMERR (QDCOUNT 0)
    ask(failing, "A")                                # SERVFAIL
    after = stub_counters(api.status())
    delta = {k: after[k] - before[k] for k in COUNTERS}
    assert delta["udp"] >= 5 and delta["tcp"] >= 1, delta
    assert delta["forwarded"] >= 1 and delta["cacheAnswers"] >= 1, delta
    assert delta["truncated"] >= 1 and delta["refused"] >= 1, delta
    assert delta["formatErrors"] >= 1 and delta["serverFailures"] >= 1, delta
    assert after["listen"] == before["listen"]


def test_status_cache_counts_stub_lookups(stub, api):
    """The stub's lookups are cache lookups like the API's: Status.cache moves too."""
    before = api.status()["cache"]
    ask("h3.lab.test", "A")
    ask("h3.lab.test", "A")
    after = api.status()["cache"]
    assert after["hits"] + after["misses"] >= before["hits"] + before["misses"] + 2, (before, after)
