"""The fault server's query counts (lab/dnsfault.py), without the lab: its FaultServer answers synthetic queries.

A benchmark sends hundreds of thousands of unique names through the fault server. Its counts were once one flat
dict that every "count" sorted whole: after a benchmark each count took most of a second (0.69 s with 1 M names),
blocked the loop that answers queries, and the lab tests that followed timed out. Counts are now kept per name and
bounded.
"""

import asyncio
import importlib.util

import dns.message

from conftest import REPO

spec = importlib.util.spec_from_file_location("dnsfault", REPO / "lab" / "dnsfault.py")
dnsfault = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dnsfault)


def query(name: str, transport: str = "udp", qtype: str = "A"):
    return dns.message.make_query(name, qtype).to_wire(), transport


def dropping_server(queries):
    """A FaultServer that drops every query (nothing is forwarded, so no network is needed), after `queries`."""
    server = dnsfault.FaultServer(("127.0.0.1", 9), timeout=0.1, verbose=False)
    assert server.control({"cmd": "set", "name": "*", "mode": "drop"})["ok"]

    async def ask_all():
        for wire, transport in queries:
            assert await server.handle(wire, transport) is dnsfault.DROP

    asyncio.run(ask_all())
    return server


def test_counts_are_per_name_and_bounded(monkeypatch):
    monkeypatch.setattr(dnsfault, "MAX_COUNTED_NAMES", 200)
    server = dropping_server(
        [query("first.lab.test"), query("first.lab.test", "tcp"), query("first.lab.test", qtype="AAAA")]
        + [query(f"n{index}.bench.lab.test") for index in range(1000)]
        + [query("last.lab.test"), query("last.lab.test")])
    last = server.control({"cmd": "count", "name": "last.lab.test"})
    assert last["total"] == 2
    assert last["counts"] == [{"name": "last.lab.test", "qtype": "A", "transport": "udp", "count": 2}]
    # The oldest names were forgotten, the bound holds, and a count of everything still adds up.
    assert server.control({"cmd": "count", "name": "first.lab.test"})["total"] == 0
    assert len(server.counts) == 200
    assert server.control({"cmd": "count"})["total"] == 200 + 1
    assert server.control({"cmd": "count", "name": "n999.bench.lab.test", "transport": "udp"})["total"] == 1
    assert server.control({"cmd": "count", "name": "n999.bench.lab.test", "transport": "tcp"})["total"] == 0


def test_a_name_counts_by_type_and_transport():
    server = dropping_server(
        [query("Mixed.Lab.Test"), query("mixed.lab.test", "tcp"), query("mixed.lab.test", qtype="HTTPS")])
    assert server.control({"cmd": "count", "name": "MIXED.lab.test."})["total"] == 3
    assert server.control({"cmd": "count", "name": "mixed.lab.test", "qtype": "HTTPS"})["total"] == 1
    assert server.control({"cmd": "count", "name": "mixed.lab.test", "transport": "tcp"})["total"] == 1
    assert server.control({"cmd": "reset", "what": "counts"})["ok"]
    assert server.control({"cmd": "count"})["total"] == 0
