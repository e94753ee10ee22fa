"""Fixtures of the DNS stub suite: the real discoverd inside dlab-a, its stub on 127.0.0.1:53, [::1]:53 and
192.0.2.1:53, the lab's fault server (192.0.2.54, relaying Knot) as its only upstream.

Run: .venv/bin/pytest -q Tests/stub   (the lab must be up: Scripts/lab up; with CI=true missing prerequisites
fail instead of skipping). DISCOVERD_BIN overrides the binary (default .build/debug/discoverd).
"""

import shutil
import tempfile
from pathlib import Path

import pytest

from stubkit import (NO_OPTIMISTIC, STUB_LAB, STUB_V4, TIMEOUT_MS, FaultServer, StubDaemon, labkit, missing,
                     port_in_use, uniq)

TOOLS = ("kdig", "drill", "getent", "unshare", "unbound", "ss")

SESSION_CONFIG = f"""\
# discoverd under test (Tests/stub)
[resolver]
timeout-ms = {TIMEOUT_MS}
attempts = 1
no-optimistic-domain = {NO_OPTIMISTIC}
"""


@pytest.fixture(scope="session")
def lab():
    """Tests/lab's checks (root, tools, lab up), plus the clients this suite runs."""
    env = labkit.lab.__wrapped__()
    for tool in TOOLS:
        if shutil.which(tool) is None:
            missing(f"{tool} not installed (run Scripts/bootstrap)")
    if not Path(labkit.LAB_DIR / "dns" / "fault.ctl").exists():
        missing("the lab's fault server control socket is missing: Scripts/lab up")
    return env


@pytest.fixture(scope="session")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="discoverd-stub-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def stub(lab, workdir):
    """The session's daemon; it must still be alive at the end (a crash anywhere is an error)."""
    for host in (STUB_V4, STUB_LAB):
        if port_in_use(host, 53):
            pytest.fail(f"{host}:53 is already taken inside dlab-a (another stub test running?)", pytrace=False)
    daemon = StubDaemon(workdir / "main", [f"{STUB_V4}:53", "[::1]:53", f"{STUB_LAB}:53"], SESSION_CONFIG)
    daemon.start()
    yield daemon
    daemon.stop_alive("discoverd (the stub session's)")


@pytest.fixture
def api(stub):
    v = stub.varlink()
    yield v
    v.close()


@pytest.fixture(scope="session")
def session_fault(lab):
    """Fault-server rules kept for the whole session (records several tests read)."""
    f = FaultServer()
    yield f
    f.clear_all()


@pytest.fixture
def fault(lab):
    """Fault-server rules of one test, cleared afterwards (only the rules it set: the server is shared)."""
    f = FaultServer()
    yield f
    f.clear_all()


@pytest.fixture(scope="session")
def txt(session_fault):
    """Three TXT RRsets: name and record count of small (about 300 bytes on the wire), medium (about 900) and
    big (about 2700)."""
    names = {}
    for size, n in (("small", 2), ("medium", 7), ("big", 18)):
        name = uniq(f"txt-{size}")
        session_fault.raw(name, "TXT", *(f'"{i:02d}-{"x" * 110}"' for i in range(n)))
        names[size] = (name, n)
    return names
