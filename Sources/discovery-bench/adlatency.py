#!/usr/bin/env python3
"""adlatency: target 3 of BENCHMARKS-discovery.md, advertise-to-seen latency, discoverd vs avahi-publish.

  adlatency.py run --lab Scripts/lab --discover .build-dbench/release/discover --socket /tmp/dbench-discoverd.sock \
      --python .venv/bin/python --trials 20 [--json FILE]
  adlatency.py watch --type _dbadv._tcp        (the host-B side; started by `run` via `Scripts/lab exec b`)

`run` is only an orchestrator in the root namespace; every mDNS participant runs inside the lab:
- host B: `watch`, a python-zeroconf ServiceBrowser (lab addresses only) printing `seen NAME T` with
  T = time.monotonic_ns() (CLOCK_MONOTONIC, the same clock as `run`: same machine, namespaces do not change it);
- host A, per trial and fresh name: either `Scripts/lab exec a DISCOVER advertise --socket S NAME TYPE PORT`
  (the CLI asks discoverd, running in dlab-a on A's avahi) or `Scripts/lab exec a avahi-publish -s NAME TYPE PORT`.
  Both are launched the same way; t0 = monotonic_ns() just before the spawn. Latency = seen T - t0.
  The two methods alternate (order flipped every trial); each publisher is stopped (SIGTERM) after B saw it.
"""

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time


def watch(a) -> int:
    from zeroconf import IPVersion, ServiceBrowser, ServiceListener, Zeroconf
    import ifaddr

    addrs = []
    for adapter in ifaddr.get_adapters():
        if adapter.nice_name == "lo":
            continue
        for ip in adapter.ips:
            if isinstance(ip.ip, tuple):
                if not ip.ip[0].startswith("fe80"):
                    addrs.append(ip.ip[0])
            else:
                addrs.append(ip.ip)
    if not addrs:
        print("watch: no lab address", file=sys.stderr)
        return 1
    stype = a.type.rstrip(".") + ".local."

    class L(ServiceListener):
        def add_service(self, zc, type_, name):
            t = time.monotonic_ns()
            print(f"seen {name[: -len(stype) - 1]} {t}", flush=True)

        def update_service(self, zc, type_, name):
            pass

        def remove_service(self, zc, type_, name):
            pass

    zc = Zeroconf(interfaces=addrs, ip_version=IPVersion.All)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        ServiceBrowser(zc, stype, L())
        print("ready", flush=True)
        stop.wait(a.seconds)
    finally:
        zc.close()
    return 0


def pct(values, p):
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def run(a) -> int:
    here = os.path.abspath(__file__)
    seen = {}
    cond = threading.Condition()
    watcher = subprocess.Popen(
        [a.lab, "exec", "b", a.python, here, "watch", "--type", a.type, "--seconds", str(a.max_seconds)],
        stdout=subprocess.PIPE, text=True, bufsize=1)
    ready = threading.Event()

    def reader():
        for line in watcher.stdout:
            parts = line.split()
            if parts[:1] == ["ready"]:
                ready.set()
            elif parts[:1] == ["seen"] and len(parts) >= 3:
                with cond:
                    seen.setdefault(" ".join(parts[1:-1]), int(parts[-1]))
                    cond.notify_all()

    threading.Thread(target=reader, daemon=True).start()
    if not ready.wait(20):
        watcher.terminate()
        print("adlatency: watcher did not start", file=sys.stderr)
        return 1
    time.sleep(a.warmup)  # let the browser's query backoff grow (1 s, 2 s, 4 s, ...)

    def command(method, name):
        if method == "discoverd":
            return [a.lab, "exec", "a", a.discover, "advertise", "--socket", a.socket, name, a.type, "9001"]
        return [a.lab, "exec", "a", "avahi-publish", "-s", name, a.type, "9001"]

    results = {"discoverd": [], "avahi-publish": []}
    established = {"discoverd": [], "avahi-publish": []}
    failures = {"discoverd": 0, "avahi-publish": 0}
    tag = f"dba{os.getpid() % 100000}"
    try:
        for i in range(a.trials):
            order = ["discoverd", "avahi-publish"] if i % 2 == 0 else ["avahi-publish", "discoverd"]
            for method in order:
                name = f"{tag}-{i}-{'d' if method == 'discoverd' else 'a'}"
                first_line = {}

                t0 = time.monotonic_ns()
                p = subprocess.Popen(command(method, name), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)

                def out(p=p, first_line=first_line):
                    for line in p.stdout:
                        if "egistered" in line or "Established" in line:
                            first_line.setdefault("t", time.monotonic_ns())

                threading.Thread(target=out, daemon=True).start()
                deadline = time.monotonic() + a.timeout
                with cond:
                    while name not in seen and time.monotonic() < deadline:
                        cond.wait(0.05)
                t = seen.get(name)
                if t is None:
                    failures[method] += 1
                    print(f"adlatency: {method} {name}: not seen within {a.timeout}s", file=sys.stderr)
                else:
                    results[method].append((t - t0) / 1e6)
                    if "t" in first_line:
                        established[method].append((first_line["t"] - t0) / 1e6)
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                time.sleep(a.gap)
            print(f"adlatency: trial {i + 1}/{a.trials}: " + ", ".join(
                f"{m} {results[m][-1]:.1f} ms" for m in order if results[m]), file=sys.stderr)
    finally:
        watcher.terminate()
        try:
            watcher.wait(5)
        except subprocess.TimeoutExpired:
            watcher.kill()

    def summ(v):
        return {"count": len(v), "under700": sum(1 for x in v if x < 700), "p50": statistics.median(v) if v else float("nan"), "p90": pct(v, 90),
                "min": min(v) if v else float("nan"), "max": max(v) if v else float("nan"),
                "mean": statistics.fmean(v) if v else float("nan")}

    out = {"trials": a.trials, "type": a.type, "failures": failures,
           "seenMs": {m: summ(v) for m, v in results.items()},
           "publisherReportsEstablishedMs": {m: summ(v) for m, v in established.items()},
           "raw": results}
    d, p = out["seenMs"]["discoverd"], out["seenMs"]["avahi-publish"]
    out["ratioMedian"] = d["p50"] / p["p50"] if p["p50"] else float("nan")
    out["ratioP90"] = d["p90"] / p["p90"] if p["p90"] else float("nan")
    out["ratioMean"] = d["mean"] / p["mean"] if p["mean"] else float("nan")
    text = json.dumps(out, indent=2)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("--type", default="_dbadv._tcp")
    w.add_argument("--seconds", type=float, default=600)
    r = sub.add_parser("run")
    r.add_argument("--lab", default="Scripts/lab")
    r.add_argument("--discover", required=True)
    r.add_argument("--socket", required=True)
    r.add_argument("--python", default=".venv/bin/python")
    r.add_argument("--type", default="_dbadv._tcp")
    r.add_argument("--trials", type=int, default=20)
    r.add_argument("--timeout", type=float, default=10)
    r.add_argument("--gap", type=float, default=0.3)
    r.add_argument("--warmup", type=float, default=3.0)
    r.add_argument("--max-seconds", type=float, default=600)
    r.add_argument("--json")
    a = ap.parse_args()
    return watch(a) if a.cmd == "watch" else run(a)


if __name__ == "__main__":
    sys.exit(main())
