"""Fixtures that run the real discoverd binary for tests written against independent peers."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bin_dir():
    """Where the built executables are: $DISCOVERD_BIN_DIR, else `swift build --show-bin-path`."""
    env = os.environ.get("DISCOVERD_BIN_DIR")
    if env:
        return env
    out = subprocess.run(["swift", "build", "--show-bin-path"], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def can_connect(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    def __init__(self, extra=()):
        self.dir = tempfile.mkdtemp(prefix="discoverd-py-")
        self.socket = os.path.join(self.dir, "io.discoverd")
        self.log_path = os.path.join(self.dir, "discoverd.log")
        binary = os.path.join(bin_dir(), "discoverd")
        if not os.path.exists(binary):
            pytest.fail(f"discoverd binary not built at {binary}")
        args = [binary, "--socket", self.socket, "--upstream", "127.0.0.1:9", "--state-dir", self.dir + "/state", *extra]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            if can_connect(self.socket):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        log = open(self.log_path).read()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        pytest.fail("discoverd did not start: " + log)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


@pytest.fixture
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        d.stop()
        d.log.close()
        shutil.rmtree(d.dir, ignore_errors=True)
