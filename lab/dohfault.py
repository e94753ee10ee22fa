#!/usr/bin/env python3
"""A DNS-over-HTTPS server that misbehaves on purpose (lab only), HTTP/2 over TLS with the h2 library.

The path chooses the fault; every other path relays the query to Knot over UDP and answers properly:

  /status500   HTTP 500, no body
  /wrongtype   the right DNS answer, but content-type text/html
  /truncated   the first half of the DNS answer, then the stream ends
  /garbage     200 application/dns-message with 64 random bytes
  /reset       the stream is reset (RST_STREAM) without an answer
  /getonly     HTTP 405 to every POST; GET ?dns=BASE64URL (RFC 8484 §4.1, also after other parameters) is
               answered properly. Each request to it prints "getonly METHOD PATH" on stdout (the lab log), so a test
               sees which method came and where.
  /early       a 103 Early Hints header block (RFC 8297; informational, RFC 9113 §8.1) before the proper answer
  /goaway      answered properly, but after every 20th request on a connection the server says GOAWAY (RFC 9113
               §6.8, as nginx does after keepalive_requests) with that request as the last it processed, and closes
               the connection: requests on streams after it were not processed and may be sent again.
  /abort       answered properly, but the 20th request on a connection is not: the server drops the connection
               with a TCP reset (no GOAWAY, no close_notify), as a crashed or overloaded server does.

Usage: dohfault.py --listen ADDR --port 443 --cert PEM --key KEY --upstream 192.0.2.53
Prints "ready" once listening. Stops on SIGTERM.
"""
import argparse
import base64
import os
import socket
import ssl
import struct
import threading

import h2.config
import h2.connection
import h2.events


def relay(query: bytes, upstream: str) -> bytes:
    with socket.socket(socket.AF_INET6 if ":" in upstream else socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(query, (upstream, 53))
        return s.recv(65535)


def serve(conn: ssl.SSLSocket, upstream: str) -> None:
    h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    conn.sendall(h2c.data_to_send())
    paths: dict[int, str] = {}
    methods: dict[int, str] = {}
    bodies: dict[int, bytes] = {}
    served = 0
    try:
        while True:
            data = conn.recv(65535)
            if not data:
                return
            for event in h2c.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                               for k, v in event.headers}
                    paths[event.stream_id] = headers.get(":path", "/")
                    methods[event.stream_id] = headers.get(":method", "")
                    bodies[event.stream_id] = b""
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    h2c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if isinstance(event, (h2.events.StreamEnded,)):
                    sid = event.stream_id
                    path = paths.pop(sid, "/")
                    if path.startswith("/abort"):
                        served += 1
                        if served % 20 == 0:
                            abort(conn)
                            return
                    respond(h2c, sid, path, bodies.pop(sid, b""), upstream, methods.pop(sid, ""))
                    if path.startswith("/goaway"):
                        served += 1
                        if served % 20 == 0:
                            h2c.close_connection(last_stream_id=sid)
                            conn.sendall(h2c.data_to_send())
                            linger(conn)
                            return
            conn.sendall(h2c.data_to_send())
    except (OSError, h2.exceptions.ProtocolError):
        return
    finally:
        conn.close()


def abort(conn: ssl.SSLSocket) -> None:
    """Drops the connection as a crashed or overloaded server does: a TCP reset, no GOAWAY, no close_notify, the
    request just received unanswered."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    print("abort", flush=True)


def linger(conn: ssl.SSLSocket) -> None:
    """Closes as nginx does after GOAWAY (lingering_close): reads what the client still sends, for a second at most
    or until it closes, so that the kernel does not answer unread data with a reset that would discard the GOAWAY
    before the client reads it."""
    try:
        conn.settimeout(1)
        while conn.recv(65535):
            pass
    except (OSError, ssl.SSLError):
        pass


def respond(h2c, sid: int, path: str, query: bytes, upstream: str, method: str = "POST") -> None:
    if path.startswith("/getonly"):
        print(f"getonly {method} {path}", flush=True)
        if method != "GET":
            h2c.send_headers(sid, [(":status", "405"), ("allow", "GET"), ("content-length", "0")], end_stream=True)
            return
        param = [p[4:] for p in path.partition("?")[2].split("&") if p.startswith("dns=")]
        try:
            query = base64.urlsafe_b64decode(param[0] + "=" * (-len(param[0]) % 4))
        except (IndexError, ValueError):
            h2c.send_headers(sid, [(":status", "400"), ("content-length", "0")], end_stream=True)
            return
    if path.startswith("/status500"):
        h2c.send_headers(sid, [(":status", "500"), ("content-length", "0")], end_stream=True)
        return
    if path.startswith("/reset"):
        h2c.reset_stream(sid)
        return
    if path.startswith("/garbage"):
        body = os.urandom(64)
        h2c.send_headers(sid, [(":status", "200"), ("content-type", "application/dns-message")])
        h2c.send_data(sid, body, end_stream=True)
        return
    try:
        answer = relay(query, upstream)
    except OSError:
        h2c.send_headers(sid, [(":status", "502")], end_stream=True)
        return
    if path.startswith("/early"):
        h2c.send_headers(sid, [(":status", "103"), ("link", "</style.css>; rel=preload")])
    if path.startswith("/wrongtype"):
        h2c.send_headers(sid, [(":status", "200"), ("content-type", "text/html")])
        h2c.send_data(sid, answer, end_stream=True)
    elif path.startswith("/truncated"):
        h2c.send_headers(sid, [(":status", "200"), ("content-type", "application/dns-message")])
        h2c.send_data(sid, answer[: len(answer) // 2], end_stream=True)
    else:
        h2c.send_headers(sid, [(":status", "200"), ("content-type", "application/dns-message"),
                               ("content-length", str(len(answer)))])
        h2c.send_data(sid, answer, end_stream=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, default=443)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--upstream", default="192.0.2.53")
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    family = socket.AF_INET6 if ":" in args.listen else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((args.listen, args.port))
    server.listen(64)
    print("ready", flush=True)
    while True:
        raw, _ = server.accept()
        try:
            conn = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(conn, args.upstream), daemon=True).start()


if __name__ == "__main__":
    main()
