#!/usr/bin/env python3
"""Programmable DNS fault server for the discoverd lab.

Runs inside the dlab-dns namespace (started by Scripts/lab) on 192.0.2.54:53
and [2001:db8::54]:53, UDP and TCP. By default every query is forwarded to the
upstream (Knot, 192.0.2.53) over the same transport and the answer relayed, so
it serves the same zone data. Rules change that per query name (exact,
case-insensitive, "*.ZONE" for ZONE and every name below it, or "*") and
optionally per query type.

Control: a Unix stream socket (--ctl, $LAB/dns/fault.ctl). One JSON object per
line in, one JSON object per line out:

  {"cmd": "ping"}
  {"cmd": "set", "name": "slow.lab.test", "qtype": "HTTPS", "mode": "delay", "delay_ms": 300}
      name      exact qname (trailing dot optional, case-insensitive), "*.ZONE"
                (ZONE itself and every name below it) or "*"
      qtype     optional: "A", "HTTPS", 65, "TYPE65"...; absent = every type
      mode      pass | delay | drop | servfail | refused | nxdomain | formerr |
                notimp | rcode | truncate | garbage | wrongid | wrongname | raw |
                badsig | strip
                badsig: relay the upstream's answer with one byte of every RRSIG
                signature in the answer and authority sections flipped (the
                signature no longer verifies; "rtype" limits it to the RRSIGs
                covering that type)
                strip: relay the answer without RRSIG, NSEC and NSEC3 records
                in every section (an upstream that strips DNSSEC data; it still
                answers a DNSKEY or DS query) and AD cleared; "types" to choose
                others ("dnssec": RRSIG NSEC NSEC3 NSEC3PARAM DNSKEY DS). The reply is
                re-encoded without name compression (TC=1 if it no longer fits
                the client's UDP size)
      percent   apply the rule to this share (0-100) of matching queries only;
                the others are relayed untouched (e.g. drop 5% of replies)
      stack     true: put the rule on top of the rules already set for this
                name and qtype instead of replacing them; the top rule that
                applies (times left, percent drawn) wins, e.g. one garbage
                reply ("times": 1) on top of a 5% drop
      delay_ms  wait this long before acting (any mode except drop; with mode
                "delay" it is the whole point)
      times     apply the rule to this many matching queries, then forget it
      rcode     mode "rcode": the numeric RCODE to answer with
      rdata     mode "raw": hex RDATA (string or list of strings, one per RR)
      rtype     mode "raw": RR type of the answer records (default: the qtype)
      ttl       mode "raw": TTL of the answer records (default 300)
      wire      mode "raw": a whole DNS message in hex, sent as is except that
                its ID is replaced by the query's (unless "keep_id": true)
      target    mode "wrongname": answer for this name instead (default
                h3.lab.test, or h2only.lab.test when asked for h3.lab.test);
                the reply's question and answers name it
      size      mode "garbage": number of random bytes (default 64)
      types     mode "strip": list of RR types to remove
  {"cmd": "clear", "name": N, "qtype": T?}          remove one rule
  {"cmd": "rules"}                                  list rules
  {"cmd": "count", "name": N?, "qtype": T?, "transport": "udp"|"tcp"?}
      -> {"ok": true, "total": n, "counts": [{"name","qtype","transport","count"}...]}
      (kept for the last MAX_COUNTED_NAMES names asked; older ones count 0)
  {"cmd": "log", "limit": n?}                       recent queries (newest last)
  {"cmd": "reset", "what": "all"|"rules"|"counts"?} default all
Replies: {"ok": true, ...} or {"ok": false, "error": "..."}.

Most specific rule wins: (name, qtype) > (name, any) > (*.ZONE, qtype) >
(*.ZONE, any), the longest ZONE first > (*, qtype) > (*, any).
Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import socket
import struct
import sys
import time
from collections import OrderedDict, deque

log = logging.getLogger("dnsfault")

QTYPES = {
    "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16,
    "AAAA": 28, "SRV": 33, "NAPTR": 35, "DS": 43, "RRSIG": 46, "NSEC": 47,
    "DNSKEY": 48, "NSEC3": 50, "NSEC3PARAM": 51, "DNAME": 39, "OPT": 41, "SVCB": 64, "HTTPS": 65, "AXFR": 252, "ANY": 255, "CAA": 257,
}
QTYPE_NAMES = {v: k for k, v in QTYPES.items()}
RCODES = {"servfail": 2, "nxdomain": 3, "notimp": 4, "refused": 5, "formerr": 1}
MODES = {"pass", "delay", "drop", "truncate", "garbage", "wrongid", "wrongname",
         "raw", "rcode", "badsig", "strip"} | set(RCODES)
STRIP_TYPES = (46, 47, 50)  # RRSIG NSEC NSEC3
DNSSEC_TYPES = (46, 47, 50, 51, 48, 43)  # RRSIG NSEC NSEC3 NSEC3PARAM DNSKEY DS
DROP = object()
# Names whose query counts are kept ("count"); beyond that the oldest are forgotten.
MAX_COUNTED_NAMES = 50_000


def qtype_code(v) -> int | None:
    if v is None or v == "" or v == "*":
        return None
    if isinstance(v, int):
        return v
    s = str(v).strip().upper()
    if s.isdigit():
        return int(s)
    if s.startswith("TYPE") and s[4:].isdigit():
        return int(s[4:])
    if s in QTYPES:
        return QTYPES[s]
    raise ValueError(f"unknown qtype {v!r}")


def qtype_name(n: int | None) -> str:
    if n is None:
        return "*"
    return QTYPE_NAMES.get(n, f"TYPE{n}")


def norm_name(n: str) -> str:
    n = n.strip().lower()
    if n in ("*", ".", ""):
        return n or "."
    n = n.rstrip(".")
    return n or "."


def encode_name(name: str) -> bytes:
    out = b""
    for label in norm_name(name).split("."):
        if label:
            b = label.encode()
            if len(b) > 63:
                raise ValueError("label too long")
            out += bytes([len(b)]) + b
    return out + b"\0"


# ---------------------------------------------------------------- messages
# Just enough of RFC 1035 to edit a relayed answer: names are decompressed, and so are the names inside the
# RDATA of the types that may be compressed (RFC 3597 section 4), so a message can be re-encoded without
# compression after records were removed.

COMPRESSED_RDATA = {2: "n", 5: "n", 12: "n", 39: "n", 6: "nn", 15: "2n", 33: "6n"}  # NS CNAME PTR DNAME SOA MX SRV


def read_name(wire: bytes, pos: int) -> tuple[bytes, int]:
    """(uncompressed wire name, position after the name at pos)."""
    out, end, hops = b"", None, 0
    while True:
        if pos >= len(wire):
            raise ValueError("name runs past the message")
        ln = wire[pos]
        if ln & 0xC0 == 0xC0:
            if pos + 1 >= len(wire):
                raise ValueError("truncated pointer")
            if end is None:
                end = pos + 2
            hops += 1
            if hops > 64:
                raise ValueError("compression loop")
            pos = ((ln & 0x3F) << 8) | wire[pos + 1]
            continue
        if ln & 0xC0:
            raise ValueError("bad label type")
        out += wire[pos:pos + 1 + ln]
        pos += 1 + ln
        if ln == 0:
            return out, (end if end is not None else pos)


def parse_message(wire: bytes):
    """(header 12 bytes, question bytes, [[(name, type, class, ttl, rdata, rdata_offset)...] x 3])."""
    if len(wire) < 12:
        raise ValueError("short message")
    qd, an, ns, ar = struct.unpack("!HHHH", wire[4:12])
    pos = 12
    for _ in range(qd):
        _, pos = read_name(wire, pos)
        pos += 4
    question = wire[12:pos]
    sections = []
    for count in (an, ns, ar):
        rrs = []
        for _ in range(count):
            name, pos = read_name(wire, pos)
            if pos + 10 > len(wire):
                raise ValueError("truncated record")
            rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", wire[pos:pos + 10])
            pos += 10
            if pos + rdlen > len(wire):
                raise ValueError("truncated rdata")
            rdata = wire[pos:pos + rdlen]
            layout = COMPRESSED_RDATA.get(rtype)
            if layout:
                p, out = pos, b""
                for part in layout:
                    if part == "n":
                        n, p = read_name(wire, p)
                        out += n
                    else:
                        out += wire[p:p + int(part)]
                        p += int(part)
                rdata = out + wire[p:pos + rdlen]
            rrs.append((name, rtype, rclass, ttl, rdata, pos))
            pos += rdlen
        sections.append(rrs)
    return wire[:12], question, sections


def rrsig_flipped(resp: bytes, covers: int | None = None) -> bytes:
    """resp with the last byte of every RRSIG signature in the answer and authority sections flipped."""
    _, _, sections = parse_message(resp)
    out = bytearray(resp)
    for rrs in sections[:2]:
        for _name, rtype, _cls, _ttl, rdata, off in rrs:
            if rtype == 46 and len(rdata) > 18 and (covers is None or struct.unpack("!H", rdata[:2])[0] == covers):
                out[off + len(rdata) - 1] ^= 0xFF
    return bytes(out)


def dnssec_stripped(resp: bytes, types, udp_limit: int | None) -> bytes:
    """resp without the records of TYPES (OPT is kept), re-encoded without compression."""
    header, question, sections = parse_message(resp)
    kept = [[rr for rr in rrs if rr[1] not in types] for rrs in sections]
    body = b"".join(name + struct.pack("!HHIH", rtype, rclass, ttl, len(rdata)) + rdata
                    for rrs in kept for name, rtype, rclass, ttl, rdata, _ in rrs)
    flags = struct.unpack("!H", header[2:4])[0] & ~0x0020  # AD off: nothing left to authenticate
    msg = header[:2] + struct.pack("!HHHHH", flags, 1 if question else 0, *(len(k) for k in kept)) + question + body
    if udp_limit is not None and len(msg) > udp_limit:
        opt = [rr for rr in kept[2] if rr[1] == 41]
        optb = b"".join(n + struct.pack("!HHIH", t, c, ttl, len(rd)) + rd for n, t, c, ttl, rd, _ in opt)
        msg = (header[:2] + struct.pack("!HHHHH", flags | 0x0200, 1 if question else 0, 0, 0, len(opt)) +
               question + optb)
    return msg


def query_udp_size(wire: bytes) -> int:
    """The UDP payload size the query advertises (EDNS0 OPT), else 512."""
    try:
        _, _, sections = parse_message(wire)
    except ValueError:
        return 512
    for _name, rtype, rclass, _ttl, _rdata, _off in sections[2]:
        if rtype == 41:
            return max(512, rclass)
    return 512


class Question:
    __slots__ = ("name", "qtype", "qclass", "end", "raw")

    def __init__(self, name, qtype, qclass, end, raw):
        self.name, self.qtype, self.qclass, self.end, self.raw = name, qtype, qclass, end, raw


def parse_question(wire: bytes) -> Question | None:
    """First question of a query, or None if the message is not parseable."""
    if len(wire) < 12:
        return None
    qd = struct.unpack("!H", wire[4:6])[0]
    if qd < 1:
        return None
    pos, labels = 12, []
    while True:
        if pos >= len(wire):
            return None
        ln = wire[pos]
        if ln == 0:
            pos += 1
            break
        if ln & 0xC0:
            return None  # no compression in a query's question
        labels.append(wire[pos + 1:pos + 1 + ln].decode("ascii", "replace"))
        pos += 1 + ln
    if pos + 4 > len(wire):
        return None
    qtype, qclass = struct.unpack("!HH", wire[pos:pos + 4])
    name = ".".join(labels).lower() or "."
    return Question(name, qtype, qclass, pos + 4, wire[12:pos + 4])


def reply_header(query: bytes, *, rcode=0, aa=False, tc=False, an=0) -> bytes:
    qid, qflags = struct.unpack("!HH", query[:4])
    opcode = qflags & 0x7800
    rd = qflags & 0x0100
    flags = 0x8000 | opcode | rd | (0x0400 if aa else 0) | (0x0200 if tc else 0) | (rcode & 0xF)
    return struct.pack("!HHHHHH", qid, flags, 1, an, 0, 0)


class Rule:
    def __init__(self, spec: dict):
        self.name = norm_name(str(spec.get("name", "")))
        if not self.name:
            raise ValueError("missing name")
        self.qtype = qtype_code(spec.get("qtype"))
        self.mode = str(spec.get("mode", "pass")).lower()
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; modes: {sorted(MODES)}")
        self.delay_ms = float(spec.get("delay_ms", spec.get("delay", 0)) or 0)
        if self.delay_ms < 0:
            raise ValueError("delay_ms < 0")
        t = spec.get("times")
        self.times = None if t is None else int(t)
        self.rcode = int(spec.get("rcode", RCODES.get(self.mode, 0)))
        rd = spec.get("rdata", [])
        if isinstance(rd, str):
            rd = [rd]
        self.rdata = [bytes.fromhex(x.replace(" ", "").replace(":", "")) for x in rd]
        self.rtype = qtype_code(spec.get("rtype"))
        self.ttl = int(spec.get("ttl", 300))
        self.wire = bytes.fromhex(spec["wire"].replace(" ", "")) if spec.get("wire") else None
        self.keep_id = bool(spec.get("keep_id", False))
        self.target = norm_name(str(spec["target"])) if spec.get("target") else None
        self.size = int(spec.get("size", 64))
        if self.mode == "raw" and not self.rdata and self.wire is None:
            raise ValueError("mode raw needs rdata or wire")
        p = spec.get("percent")
        self.percent = None if p is None else float(p)
        if self.percent is not None and not 0 <= self.percent <= 100:
            raise ValueError("percent must be between 0 and 100")
        types = spec.get("types")
        if isinstance(types, str):
            types = types.replace(",", " ").split()
        if types and [str(t).lower() for t in types] == ["dnssec"]:
            self.types = DNSSEC_TYPES
        else:
            self.types = tuple(qtype_code(t) for t in types) if types else STRIP_TYPES
        if self.name.startswith("*.") and len(self.name) < 3:
            raise ValueError("bad zone rule name")
        # only queries that arrived on this local address (one of --listen); None: every listener
        listener = spec.get("listener")
        self.listener = str(listener).strip("[]") if listener else None
        self.hits = 0

    def to_json(self) -> dict:
        d = {"name": self.name, "qtype": qtype_name(self.qtype), "mode": self.mode,
             "delay_ms": self.delay_ms, "times": self.times, "hits": self.hits}
        if self.mode == "raw":
            d.update(rdata=[r.hex() for r in self.rdata], rtype=qtype_name(self.rtype) if self.rtype else None,
                     ttl=self.ttl, wire=self.wire.hex() if self.wire else None)
        if self.mode == "rcode":
            d["rcode"] = self.rcode
        if self.mode == "wrongname":
            d["target"] = self.target
        if self.mode == "garbage":
            d["size"] = self.size
        if self.mode == "strip":
            d["types"] = [qtype_name(t) for t in self.types]
        if self.mode == "badsig" and self.rtype:
            d["rtype"] = qtype_name(self.rtype)
        if self.percent is not None:
            d["percent"] = self.percent
        if self.listener:
            d["listener"] = self.listener
        return d


class FaultServer:
    def __init__(self, upstream: tuple[str, int], timeout: float, verbose: bool):
        self.upstream = upstream
        self.timeout = timeout
        self.verbose = verbose
        # per (name, qtype) a stack of rules, the top (last) one tried first; "set" replaces the stack unless
        # the rule has "stack": true (e.g. one garbage reply on top of a 5% drop)
        self.rules: dict[tuple[str, int | None], list[Rule]] = {}
        # per name, per (qtype, transport): how many queries came. Indexed by name so that a "count" for one
        # name (the tests ask it all the time) does not sort every name ever asked, and bounded: after a
        # benchmark's unique names each "count" once took most of a second (0.69 s with 1 M names), blocking the
        # loop that answers queries, so the lab tests after a benchmark timed out. The oldest names go first, in
        # O(1): a plain dict's `del d[next(iter(d))]` scans the holes earlier deletions left at its front, which
        # made every query cost up to twice as much CPU in a sawtooth over 100 000 names (66 to 130 us a query),
        # moving the whole-chain misses/s of Scripts/bench-encrypted by as much between passes.
        self.counts: OrderedDict[str, dict[tuple[str, str], int]] = OrderedDict()
        self.recent: deque = deque(maxlen=1000)
        fam = socket.AF_INET6 if ":" in upstream[0] else socket.AF_INET
        self.upfamily = fam

    # ----------------------------------------------------------- rules

    def match(self, q: Question, listener: str | None = None) -> Rule | None:
        keys = [(q.name, q.qtype), (q.name, None)]
        labels = [] if q.name == "." else q.name.split(".")
        for i in range(len(labels)):
            zone = "*." + ".".join(labels[i:])
            keys += [(zone, q.qtype), (zone, None)]
        keys += [("*", q.qtype), ("*", None)]
        for key in keys:
            stack = self.rules.get(key)
            if not stack:
                continue
            if all(r.listener is not None and r.listener != listener for r in stack):
                continue   # rules for other listeners only: the less specific names decide for this one
            for r in reversed(stack):
                if r.times is not None and r.times <= 0:
                    continue
                if r.listener is not None and r.listener != listener:
                    continue
                if r.percent is not None and random.random() * 100 >= r.percent:
                    continue
                if r.times is not None:
                    r.times -= 1
                r.hits += 1
                self._prune(key)
                return r
            self._prune(key)
            return None   # the most specific name has rules, none applied this time: relay untouched
        return None

    def _prune(self, key) -> None:
        stack = [r for r in self.rules.get(key, []) if r.times is None or r.times > 0]
        if stack:
            self.rules[key] = stack
        else:
            self.rules.pop(key, None)

    # ----------------------------------------------------------- upstream

    async def forward_udp(self, wire: bytes) -> bytes | None:
        loop = asyncio.get_running_loop()
        s = socket.socket(self.upfamily, socket.SOCK_DGRAM)
        s.setblocking(False)
        try:
            s.connect(self.upstream)
            await loop.sock_sendall(s, wire)
            deadline = loop.time() + self.timeout
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                data = await asyncio.wait_for(loop.sock_recv(s, 65535), left)
                if len(data) >= 2 and data[:2] == wire[:2]:
                    return data
        except (OSError, asyncio.TimeoutError) as e:
            log.warning("upstream udp: %s", e or type(e).__name__)
            return None
        finally:
            s.close()

    async def forward_tcp(self, wire: bytes) -> bytes | None:
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.upstream[0], self.upstream[1]), self.timeout)
            writer.write(struct.pack("!H", len(wire)) + wire)
            await writer.drain()
            hdr = await asyncio.wait_for(reader.readexactly(2), self.timeout)
            return await asyncio.wait_for(reader.readexactly(struct.unpack("!H", hdr)[0]), self.timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            log.warning("upstream tcp: %s", e or type(e).__name__)
            return None
        finally:
            if writer is not None:
                writer.close()

    async def forward(self, wire: bytes, transport: str, q: Question | None) -> bytes:
        resp = await (self.forward_udp(wire) if transport == "udp" else self.forward_tcp(wire))
        if resp is None:
            if q is None:
                return b""
            return reply_header(wire, rcode=2) + q.raw
        return resp

    # ----------------------------------------------------------- queries

    async def handle(self, wire: bytes, transport: str, listener: str | None = None):
        """Answer bytes, or DROP for no answer. `listener`: the local address the query arrived on."""
        q = parse_question(wire)
        if q is None:
            if len(wire) < 12:
                return DROP
            return await self.forward(wire, transport, None) or DROP
        per_name = self.counts.get(q.name)
        if per_name is None:
            per_name = self.counts[q.name] = {}
            if len(self.counts) > MAX_COUNTED_NAMES:
                self.counts.popitem(last=False)
        key = (qtype_name(q.qtype), transport)
        per_name[key] = per_name.get(key, 0) + 1
        rule = self.match(q, listener)
        mode = rule.mode if rule else "pass"
        self.recent.append({"t": time.time(), "name": q.name, "qtype": qtype_name(q.qtype),
                            "transport": transport, "mode": mode})
        if self.verbose:
            log.info("%s %s %s -> %s", transport, q.name, qtype_name(q.qtype), mode)
        if rule is None:
            return await self.forward(wire, transport, q)
        if mode == "drop":
            return DROP
        if rule.delay_ms:
            await asyncio.sleep(rule.delay_ms / 1000.0)
        if mode in ("pass", "delay"):
            return await self.forward(wire, transport, q)
        if mode in RCODES or mode == "rcode":
            return reply_header(wire, rcode=rule.rcode, aa=mode == "nxdomain") + q.raw
        if mode == "truncate":
            if transport == "udp":
                return reply_header(wire, aa=True, tc=True) + q.raw
            return await self.forward(wire, transport, q)
        if mode == "garbage":
            return os.urandom(max(1, rule.size))
        if mode == "wrongid":
            resp = await self.forward(wire, transport, q)
            qid = struct.unpack("!H", resp[:2])[0]
            return struct.pack("!H", qid ^ 0x5A5A) + resp[2:]
        if mode == "wrongname":
            target = rule.target or ("h2only.lab.test" if q.name == "h3.lab.test" else "h3.lab.test")
            other = wire[:12] + encode_name(target) + struct.pack("!HH", q.qtype, q.qclass) + wire[q.end:]
            return await self.forward(other, transport, q)
        if mode in ("badsig", "strip"):
            resp = await self.forward(wire, transport, q)
            try:
                if mode == "badsig":
                    return rrsig_flipped(resp, rule.rtype)
                return dnssec_stripped(resp, rule.types, query_udp_size(wire) if transport == "udp" else None)
            except ValueError as e:
                log.warning("%s: cannot edit the answer for %s: %s", mode, q.name, e)
                return resp
        if mode == "raw":
            if rule.wire is not None:
                return rule.wire if rule.keep_id or len(rule.wire) < 2 else wire[:2] + rule.wire[2:]
            rtype = rule.rtype or q.qtype
            body = b"".join(struct.pack("!HHHIH", 0xC00C, rtype, q.qclass, rule.ttl, len(rd)) + rd
                            for rd in rule.rdata)
            return reply_header(wire, aa=True, an=len(rule.rdata)) + q.raw + body
        return await self.forward(wire, transport, q)

    # ----------------------------------------------------------- control

    def control(self, req: dict) -> dict:
        cmd = str(req.get("cmd", "")).lower()
        if cmd == "ping":
            return {"ok": True, "pong": True, "upstream": f"{self.upstream[0]}@{self.upstream[1]}"}
        if cmd == "set":
            r = Rule(req)
            if req.get("stack"):
                self.rules.setdefault((r.name, r.qtype), []).append(r)
            else:
                # replaces the rules for this name and type on the same listener (or all, without one)
                kept = [x for x in self.rules.get((r.name, r.qtype), [])
                        if r.listener is not None and x.listener is not None and x.listener != r.listener]
                self.rules[(r.name, r.qtype)] = kept + [r]
            log.info("rule set: %s", json.dumps(r.to_json()))
            return {"ok": True, "rule": r.to_json()}
        if cmd == "clear":
            key = (norm_name(str(req.get("name", ""))), qtype_code(req.get("qtype")))
            removed = self.rules.pop(key, None) is not None
            return {"ok": True, "removed": removed}
        if cmd == "rules":
            return {"ok": True, "rules": [r.to_json() for stack in self.rules.values() for r in stack]}
        if cmd == "count":
            name = req.get("name")
            name = norm_name(str(name)) if name not in (None, "", "*") else None
            qt = req.get("qtype")
            qt = qtype_name(qtype_code(qt)) if qt not in (None, "", "*") else None
            tr = req.get("transport")
            names = [name] if name is not None else sorted(self.counts)
            rows = [{"name": n, "qtype": t, "transport": x, "count": c}
                    for n in names for (t, x), c in sorted(self.counts.get(n, {}).items())
                    if (qt is None or t == qt) and (tr is None or x == tr)]
            return {"ok": True, "total": sum(r["count"] for r in rows), "counts": rows}
        if cmd == "log":
            limit = int(req.get("limit", 100))
            return {"ok": True, "queries": list(self.recent)[-limit:] if limit > 0 else []}
        if cmd == "reset":
            what = str(req.get("what", "all")).lower()
            if what not in ("all", "rules", "counts"):
                raise ValueError("what must be all, rules or counts")
            if what in ("all", "rules"):
                self.rules.clear()
            if what in ("all", "counts"):
                self.counts.clear()
                self.recent.clear()
            log.info("reset %s", what)
            return {"ok": True}
        raise ValueError(f"unknown cmd {cmd!r} (ping set clear rules count log reset)")

    async def control_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict):
                        raise ValueError("request must be a JSON object")
                    resp = self.control(req)
                except Exception as e:  # noqa: BLE001 - report every error to the client
                    resp = {"ok": False, "error": str(e)}
                writer.write(json.dumps(resp).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


class UDPProto(asyncio.DatagramProtocol):
    def __init__(self, server: FaultServer, listener: str | None = None):
        self.server = server
        self.listener = listener
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        asyncio.ensure_future(self._answer(data, addr))

    async def _answer(self, data, addr):
        try:
            resp = await self.server.handle(data, "udp", self.listener)
        except Exception:  # noqa: BLE001
            log.exception("udp query from %s", addr)
            return
        if resp is not DROP and resp:
            self.transport.sendto(resp, addr)


async def tcp_client(server: FaultServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     listener: str | None = None):
    lock = asyncio.Lock()
    tasks = set()

    async def answer(msg):
        try:
            resp = await server.handle(msg, "tcp", listener)
        except Exception:  # noqa: BLE001
            log.exception("tcp query")
            return
        if resp is DROP or not resp:
            return
        async with lock:
            try:
                writer.write(struct.pack("!H", len(resp)) + resp)
                await writer.drain()
            except ConnectionError:
                pass

    try:
        while True:
            hdr = await asyncio.wait_for(reader.readexactly(2), 60)
            msg = await asyncio.wait_for(reader.readexactly(struct.unpack("!H", hdr)[0]), 10)
            t = asyncio.ensure_future(answer(msg))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
        pass
    finally:
        for t in list(tasks):
            t.cancel()
        writer.close()


async def main_async(args) -> None:
    loop = asyncio.get_running_loop()
    server = FaultServer((args.upstream, args.upstream_port), args.upstream_timeout, args.verbose)
    closers = []
    for addr in args.listen:
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        tr, _ = await loop.create_datagram_endpoint(lambda a=addr: UDPProto(server, a), local_addr=(addr, args.port),
                                                    family=fam)
        closers.append(tr.close)
        srv = await asyncio.start_server(lambda r, w, a=addr: tcp_client(server, r, w, a), addr, args.port,
                                         family=fam, reuse_address=True)
        closers.append(srv.close)
        log.info("listening on %s port %d (udp, tcp)", addr, args.port)
    if args.ctl:
        try:
            os.unlink(args.ctl)
        except FileNotFoundError:
            pass
        ctl = await asyncio.start_unix_server(server.control_client, path=args.ctl)
        os.chmod(args.ctl, 0o666)
        closers.append(ctl.close)
        log.info("control socket %s", args.ctl)
    stop = asyncio.Event()
    import signal
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("upstream %s port %d", args.upstream, args.upstream_port)
    await stop.wait()
    for c in closers:
        c()
    if args.ctl:
        try:
            os.unlink(args.ctl)
        except OSError:
            pass
    log.info("stopped")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="programmable DNS fault server (discoverd lab)")
    p.add_argument("--listen", action="append", default=[], help="address to listen on (repeatable)")
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--upstream", default="192.0.2.53")
    p.add_argument("--upstream-port", type=int, default=53)
    p.add_argument("--upstream-timeout", type=float, default=3.0)
    p.add_argument("--ctl", help="Unix control socket path")
    p.add_argument("-v", "--verbose", action="store_true", help="log every query")
    args = p.parse_args(argv)
    if not args.listen:
        args.listen = ["127.0.0.1"]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s dnsfault %(levelname)s %(message)s")
    random.seed()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
