"""Fixtures of the abuse suite (issue #18): one discoverd inside dlab-a whose varlink socket other uids can reach,
its DNS stub on the lab network (192.0.2.1:5399, strangers: dlab-b) and on the remote link (198.51.100.1:5399,
allowed: dlab-r).

Run: flock /tmp/discoverd-lab-session.lock .venv/bin/pytest -q Tests/abuse  (lab up; CI=true: missing = failure).
ABUSE_FUZZ_SECONDS (default 60) sets how long the fuzzers' traffic is sent to the running daemon (1800 for the
30-minute soak). Figures go to $ABUSE_RESULTS (default /tmp/discoverd-abuse-results.json).
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stub"))

from stubkit import StubDaemon, labkit, missing  # noqa: E402

STUB_PORT = 5399
STRANGER_TARGET = "192.0.2.1"     # dlab-a's lab address: dlab-b (192.0.2.2) is not allowed there
ALLOWED_TARGET = "198.51.100.1"   # dlab-a's remote link: dlab-r (198.51.100.2) is allowed
RESULTS = Path(os.environ.get("ABUSE_RESULTS", "/tmp/discoverd-abuse-results.json"))

CONFIG = """\
# discoverd under the abuse suite (Tests/abuse): default [limits] except where a test says
[resolver]
timeout-ms = 1000
attempts = 1
[stub]
allow = 198.51.100.0/24
"""


def record(key: str, value) -> None:
    """Adds one figure to the results file (read back for BENCHMARKS-abuse.md)."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = value
    RESULTS.write_text(json.dumps(data, indent=2, sort_keys=True))


@pytest.fixture(scope="session")
def lab():
    env = labkit.lab.__wrapped__()
    for tool in ("setpriv", "ss"):
        if shutil.which(tool) is None:
            missing(f"{tool} not installed (run Scripts/bootstrap)")
    return env


@pytest.fixture(scope="session")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="discoverd-abuse-"))
    # Other uids must reach the varlink socket inside it (the socket itself is 0666).
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(lab, workdir):
    """The session's daemon; it must still be alive at the end."""
    if RESULTS.exists():
        RESULTS.unlink()
    d = StubDaemon(workdir / "main", [f"127.0.0.1:{STUB_PORT}", f"{STRANGER_TARGET}:{STUB_PORT}",
                                      f"{ALLOWED_TARGET}:{STUB_PORT}"], CONFIG)
    d.start()
    (workdir / "main").chmod(0o755)
    yield d
    alive = d.alive()
    tail = d.log_tail()
    d.stop()
    assert alive, f"discoverd died during the abuse suite:\n{tail}"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
