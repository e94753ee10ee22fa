"""Fixtures for the lab smoke tests.

The lab must already be up (Scripts/lab up). Without it the tests are skipped,
except with CI=true, where a missing lab or prerequisite is a failure.
"""

import ctypes
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "Scripts" / "lab"
FAULTCTL = REPO / "lab" / "faultctl"
VENV_PY = REPO / ".venv" / "bin" / "python"
LAB_DIR = Path(os.environ.get("DISCOVERD_LAB_DIR", "/tmp/discoverd-lab"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str):
    """Skip locally, fail in CI: CI must never silently skip the lab."""
    if IN_CI:
        pytest.fail(f"lab prerequisite missing (CI=true): {reason}", pytrace=False)
    pytest.skip(reason)


def read_env(path: Path) -> dict:
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip()
    return env


@pytest.fixture(scope="session")
def lab():
    if os.geteuid() != 0:
        missing("the lab needs root")
    for tool in ("ip", "kdig", "avahi-browse", "avahi-publish", "dbus-send", "socat"):
        if shutil.which(tool) is None:
            missing(f"{tool} not installed (run Scripts/bootstrap)")
    if not VENV_PY.exists():
        missing(".venv missing (run Scripts/bootstrap)")
    envfile = LAB_DIR / "env"
    if not envfile.exists():
        missing(f"lab is not up ({envfile} missing): run Scripts/lab up")
    return read_env(envfile)


def run(cmd, timeout=20, check=True, env=None, **kw) -> subprocess.CompletedProcess:
    cp = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and cp.returncode != 0:
        raise AssertionError(f"{cmd} exited {cp.returncode}\nstdout: {cp.stdout}\nstderr: {cp.stderr}")
    return cp


def lab_exec(host: str, *cmd, **kw) -> subprocess.CompletedProcess:
    return run([LAB_SCRIPT, "exec", host, *cmd], **kw)


def lab_popen(host: str, *cmd, **kw) -> subprocess.Popen:
    return subprocess.Popen([str(LAB_SCRIPT), "exec", host, *[str(c) for c in cmd]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def stop(proc: subprocess.Popen):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def faultctl(*args) -> str:
    return run([FAULTCTL, "--ctl", LAB_DIR / "dns" / "fault.ctl", *args]).stdout


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def netns_socket(ns: str, family: int, type_: int) -> socket.socket:
    """A socket created inside network namespace NS (e.g. dlab-a).

    setns(2) changes only the calling thread's namespace, and a socket stays in
    the namespace it was created in: a short-lived helper thread enters NS and
    creates the socket; the test process itself never changes namespace.
    """
    result = {}

    def work():
        try:
            with open(f"/run/netns/{ns}") as f:
                if _libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns({ns}): {os.strerror(e)}")
            # Never let a lab query leave through the machine's own network.
            here = os.readlink(f"/proc/self/task/{threading.get_native_id()}/ns/net")
            if here != f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]":
                raise RuntimeError(f"thread is in {here}, not in {ns}")
            result["sock"] = socket.socket(family, type_)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            result["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["sock"]


def probe(server: str, name: str, qtype: str = "A", *, tcp=False, timeout=2.0, host="a") -> dict:
    """One DNS query from inside the lab host's namespace (see dnsprobe.query)."""
    import dnsprobe

    ns = f"dlab-{host}"
    return dnsprobe.query(server, name, qtype, tcp=tcp, timeout=timeout,
                          make_socket=lambda fam, typ: netns_socket(ns, fam, typ))


_ESC = re.compile(r"\\(\d{3})")


def unescape(s: str) -> str:
    """avahi-browse -p escapes e.g. a space as \\032 (decimal)."""
    return _ESC.sub(lambda m: chr(int(m.group(1))), s)


def avahi_resolved(stype: str, *, host="a", env=None, timeout=12.0, want=None) -> list:
    """Poll `avahi-browse -r -t -p TYPE` until a resolved ('=') line matches want(fields)."""
    deadline = time.monotonic() + timeout
    rows = []
    while time.monotonic() < deadline:
        if host is None:
            cp = run(["avahi-browse", "-r", "-t", "-p", stype], check=False, env=env, timeout=15)
        else:
            cp = lab_exec(host, "avahi-browse", "-r", "-t", "-p", stype, check=False, timeout=15)
        rows = [[unescape(f) for f in line.split(";")] for line in cp.stdout.splitlines() if line.startswith("=;")]
        if rows and (want is None or any(want(r) for r in rows)):
            return rows
        time.sleep(0.3)
    return rows


@pytest.fixture
def fault(lab):
    faultctl("reset")
    yield faultctl
    faultctl("reset")
