#!/usr/bin/env python3
"""zcpeer: an independent mDNS/DNS-SD peer (python-zeroconf) for the discoverd lab.

Run it inside a lab host with the venv's Python, e.g.

  Scripts/lab exec b .venv/bin/python lab/zcpeer.py publish --name "ZC Peer" \
      --type _dlabzc._tcp --port 8080 --txt path=/x --txt v=1
  Scripts/lab exec b .venv/bin/python lab/zcpeer.py browse --type _dlabzc._tcp --seconds 3

publish: registers the service, prints one line "ready NAME" on stdout once it
is announced, and keeps it up until SIGTERM/SIGINT (then unregisters, sending
goodbyes). With --update-after S it changes TXT (adds updated=1) after S
seconds, to test "changed" events. With --count N it publishes N instances,
"NAME 1" to "NAME N", probed in parallel, and prints "ready N" once all are
announced (a burst of browse events).
browse: prints one JSON object per resolved service (name, type, server,
port, addresses, txt) and exits after --seconds.

Only the lab's interface addresses are used (the lab namespaces have no other
interfaces), never the machine's own network.
"""

import argparse
import json
import signal
import sys
import threading
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceListener, Zeroconf


def lab_addresses():
    """Non-loopback IPv4/IPv6 addresses of this namespace (the lab link)."""
    import ifaddr

    out = []
    for adapter in ifaddr.get_adapters():
        if adapter.nice_name == "lo":
            continue
        for ip in adapter.ips:
            if isinstance(ip.ip, tuple):  # IPv6: (addr, flowinfo, scope_id)
                if not ip.ip[0].startswith("fe80"):
                    out.append(ip.ip[0])
            else:
                out.append(ip.ip)
    return out


def full_type(t: str) -> str:
    t = t.rstrip(".")
    if not t.endswith(".local"):
        t += ".local"
    return t + "."


def parse_txt(items):
    props = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        props[k] = v if sep else None
    return props


def publish_many(a, addrs) -> int:
    """--count N: N instances registered concurrently, withdrawn together at SIGTERM."""
    import asyncio

    from zeroconf.asyncio import AsyncZeroconf

    stype = full_type(a.type)
    server = (a.host.rstrip(".") if a.host else "zcpeer") + ".local."
    infos = [
        ServiceInfo(stype, f"{a.name} {i}.{stype}", port=a.port, properties=parse_txt(a.txt), server=server,
                    parsed_addresses=addrs)
        for i in range(1, a.count + 1)
    ]

    async def run():
        azc = AsyncZeroconf(interfaces=addrs, ip_version=IPVersion.All)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        try:
            announced = await asyncio.gather(*(azc.async_register_service(info) for info in infos))
            await asyncio.gather(*announced)
            print(f"ready {len(infos)}", flush=True)
            await stop.wait()
            await azc.async_unregister_all_services()
        finally:
            await azc.async_close()

    asyncio.run(run())
    return 0


def publish(a) -> int:
    addrs = a.address or lab_addresses()
    if not addrs:
        print("zcpeer: no lab address found", file=sys.stderr)
        return 1
    if a.count > 1:
        return publish_many(a, addrs)
    stype = full_type(a.type)
    info = ServiceInfo(
        stype,
        f"{a.name}.{stype}",
        port=a.port,
        properties=parse_txt(a.txt),
        server=(a.host.rstrip(".") if a.host else "zcpeer") + ".local.",
        parsed_addresses=addrs,
    )
    zc = Zeroconf(interfaces=addrs, ip_version=IPVersion.All)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        zc.register_service(info, allow_name_change=a.allow_name_change)
        print(f"ready {info.name}", flush=True)
        t0 = time.monotonic()
        updated = False
        while not stop.wait(0.2):
            if a.update_after is not None and not updated and time.monotonic() - t0 >= a.update_after:
                props = parse_txt(a.txt)
                props["updated"] = "1"
                info = ServiceInfo(stype, info.name, port=a.port, properties=props, server=info.server,
                                   parsed_addresses=addrs)
                zc.update_service(info)
                print("updated", flush=True)
                updated = True
        zc.unregister_service(info)
    finally:
        zc.close()
    return 0


class Collector(ServiceListener):
    def __init__(self):
        self.names = set()

    def add_service(self, zc, type_, name):
        self.names.add((type_, name))

    def update_service(self, zc, type_, name):
        self.names.add((type_, name))

    def remove_service(self, zc, type_, name):
        self.names.discard((type_, name))


def browse(a) -> int:
    addrs = lab_addresses()
    zc = Zeroconf(interfaces=addrs or None, ip_version=IPVersion.All)
    try:
        col = Collector()
        ServiceBrowser(zc, full_type(a.type), col)
        time.sleep(a.seconds)
        for type_, name in sorted(col.names):
            info = zc.get_service_info(type_, name, timeout=2000)
            if info is None:
                continue
            print(json.dumps({
                "name": name, "type": type_, "server": info.server, "port": info.port,
                "addresses": info.parsed_addresses(),
                "txt": {k.decode(): (v.decode() if v is not None else None) for k, v in info.properties.items()},
            }), flush=True)
    finally:
        zc.close()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("publish")
    pp.add_argument("--name", required=True)
    pp.add_argument("--type", required=True, help="e.g. _http._tcp")
    pp.add_argument("--port", type=int, required=True)
    pp.add_argument("--txt", action="append", help="key=value (repeatable)")
    pp.add_argument("--host", help="host name (without .local), default zcpeer")
    pp.add_argument("--address", action="append", help="address to publish (default: the lab link's)")
    pp.add_argument("--update-after", type=float, help="change TXT after this many seconds")
    pp.add_argument("--allow-name-change", action="store_true")
    pp.add_argument("--count", type=int, default=1, help="publish COUNT instances, NAME 1 to NAME COUNT")
    bp = sub.add_parser("browse")
    bp.add_argument("--type", required=True)
    bp.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args(argv)
    return publish(a) if a.cmd == "publish" else browse(a)


if __name__ == "__main__":
    sys.exit(main())
