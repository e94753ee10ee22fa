"""A varlink client run as another uid (setpriv) by the abuse suite; standard library only.

  peer.py flood PATH CONNECTIONS CALLS EXTRA   open CONNECTIONS + EXTRA, pipeline a Browse stream and CALLS - 1
                                               calls behind it on each without reading, report what the refused
                                               ones were told; holds the rest until stdin closes
  peer.py resolve PATH NAME COUNT              COUNT fresh connections, one ResolveAddresses each: JSON timings
"""

import json
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def read_one(s):
    buf = b""
    while b"\0" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return None
        buf += chunk
    return json.loads(buf.split(b"\0", 1)[0])


def flood(path, count, calls, extra):
    browse = json.dumps({"method": "io.discoverd.Discovery.Browse", "parameters": {"type": "_abuse._tcp"},
                         "more": True}).encode() + b"\0"
    resolve = json.dumps({"method": "io.discoverd.Resolver.ResolveAddresses",
                          "parameters": {"name": "h3.lab.test"}}).encode() + b"\0"
    opened, sent = [], 0
    # Connections are admitted on several event loops at once, so which of them are the ones over the cap is not
    # fixed: open them all, then see which were told TooManyConnections (peeking, so nothing else is read).
    for _ in range(count + extra):
        s = connect(path)
        s.setblocking(False)
        # A stream first (a barrier), then one-shot calls queued behind it: all in flight, none read.
        try:
            sent += s.send(browse + resolve * (calls - 1))
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass
        opened.append(s)
    # The refusals come as the daemon gets to the connections, which under this flood (and in a debug build) can
    # take longer than a fixed pause: look every 0.5 s, for at most 15 s, until `extra` of them were told.
    held, told = opened, []
    deadline = time.monotonic() + 15
    while True:
        time.sleep(0.5)
        still = []
        for s in held:
            try:
                head = s.recv(300, socket.MSG_PEEK)
            except BlockingIOError:
                head = b""
            except OSError:
                head = b"closed"
            if b"TooManyConnections" in head:
                told.append(json.loads(head.split(b"\0", 1)[0]))
                s.close()
            else:
                still.append(s)
        held = still
        if len(told) >= extra or time.monotonic() > deadline:
            break
    print(json.dumps({"held": len(held), "bytesSent": sent, "extra": told}), flush=True)
    sys.stdin.read()


def resolve(path, name, count):
    times = []
    for _ in range(count):
        start = time.monotonic()
        s = connect(path)
        s.sendall(json.dumps({"method": "io.discoverd.Resolver.ResolveAddresses",
                              "parameters": {"name": name}}).encode() + b"\0")
        reply = read_one(s)
        times.append((time.monotonic() - start) * 1000)
        s.close()
        if reply is None or "error" in reply:
            print(json.dumps({"error": reply}), flush=True)
            return
    print(json.dumps({"ms": times}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "flood":
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        resolve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
