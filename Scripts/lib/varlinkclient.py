"""A minimal varlink client with no dependency beyond Python's standard library: shared by the lab's test kit
(Tests/stub/stubkit.py) and the benchmark scripts, which run under the system's Python without the test venv."""

import json
import socket


class Varlink:
    """A minimal varlink client: one JSON object plus NUL per message, replies in order."""

    def __init__(self, path: str, timeout: float = 10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""

    def call(self, method: str, parameters: dict | None = None, *, error_ok: bool = False) -> dict:
        self.sock.sendall(json.dumps({"method": method, "parameters": parameters or {}}).encode() + b"\0")
        while b"\0" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"varlink connection closed during {method}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        reply = json.loads(msg)
        if "error" in reply and not error_ok:
            raise AssertionError(f"{method}({parameters}) failed: {reply}")
        return reply if error_ok else reply.get("parameters", {})

    def status(self) -> dict:
        return self.call("io.discoverd.Daemon.Status")

    def close(self):
        self.sock.close()
