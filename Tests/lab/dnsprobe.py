#!/usr/bin/env python3
"""Send one DNS query and describe what came back, as one JSON line.

Run inside a lab namespace (Scripts/lab exec a .venv/bin/python Tests/lab/dnsprobe.py ...).
Unlike a normal stub it reports wrong IDs, garbage and timeouts instead of
hiding them:

  {"result": "answer"|"timeout"|"garbage", "ms": float, "id_match": bool,
   "rcode": "NOERROR", "tc": bool, "aa": bool, "qname": "...", "answers": ["rr text", ...],
   "rdata_hex": ["..."], "error": "..."}
"""

import argparse
import json
import socket
import struct
import sys
import time

import dns.flags
import dns.message
import dns.rcode


def query(server, name, qtype="A", *, tcp=False, timeout=2.0, port=53, make_socket=socket.socket) -> dict:
    """One query; make_socket(family, type) creates the socket (e.g. inside a namespace)."""
    q = dns.message.make_query(name, qtype, use_edns=True, payload=1232)
    wire = q.to_wire()
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    out = {"server": server, "transport": "tcp" if tcp else "udp"}
    t0 = time.monotonic()
    s = make_socket(fam, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        if tcp:
            s.connect((server, port))
            s.sendall(struct.pack("!H", len(wire)) + wire)
            hdr = b""
            while len(hdr) < 2:
                chunk = s.recv(2 - len(hdr))
                if not chunk:
                    raise ConnectionError("closed")
                hdr += chunk
            n = struct.unpack("!H", hdr)[0]
            resp = b""
            while len(resp) < n:
                chunk = s.recv(n - len(resp))
                if not chunk:
                    raise ConnectionError("closed")
                resp += chunk
        else:
            s.sendto(wire, (server, port))
            resp, _ = s.recvfrom(65535)
    except (socket.timeout, TimeoutError):
        out.update(result="timeout", ms=(time.monotonic() - t0) * 1000)
        return out
    finally:
        s.close()
    out["ms"] = (time.monotonic() - t0) * 1000
    out["id_match"] = len(resp) >= 2 and resp[:2] == wire[:2]
    out["raw_hex"] = resp.hex()
    try:
        m = dns.message.from_wire(resp, ignore_trailing=False)
    except Exception as e:  # noqa: BLE001 - any parse failure means garbage
        out.update(result="garbage", error=f"{type(e).__name__}: {e}")
        return out
    out.update(
        result="answer",
        rcode=dns.rcode.to_text(m.rcode()),
        tc=bool(m.flags & dns.flags.TC),
        aa=bool(m.flags & dns.flags.AA),
        qname=m.question[0].name.to_text() if m.question else None,
        answers=[rr.to_text() for rr in m.answer],
        rdata_hex=[rd.to_digestable().hex() for rr in m.answer for rd in rr],
    )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("name")
    p.add_argument("qtype", nargs="?", default="A")
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--tcp", action="store_true")
    p.add_argument("--timeout", type=float, default=2.0)
    a = p.parse_args(argv)
    print(json.dumps(query(a.server, a.name, a.qtype, tcp=a.tcp, timeout=a.timeout, port=a.port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
