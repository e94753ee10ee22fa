"""Listen addresses the stub cannot have: one clear warning naming the address and the reason, and the daemon
keeps serving its varlink API (issue: "A port in use or not permitted is one clear warning")."""

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
import uuid

from stubkit import DISCOVERD_BIN, Varlink, wait_until


def test_port_not_permitted_is_one_warning_and_varlink_keeps_serving(lab, workdir):
    # Not under workdir: nobody cannot enter a root-only directory.
    directory = Path(tempfile.mkdtemp(prefix="discoverd-unprivileged-"))
    directory.chmod(0o777)
    socket_path = directory / "io.discoverd"
    # As nobody, inside dlab-a: port 53 needs a privilege this process lacks.
    proc = subprocess.Popen(
        ["ip", "netns", "exec", "dlab-a", "setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         "env", f"HOME={directory}", DISCOVERD_BIN, "--socket", socket_path, "--state-dir", directory / "state",
         "--upstream", "127.0.0.1:9", "--stub-listen", "127.0.0.1:53"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_until(lambda: socket_path.exists(), timeout=15), "daemon did not start"
        status = Varlink(str(socket_path)).status()
        assert "stub" not in status or not status["stub"], status   # nothing bound: no stub in Status
        time.sleep(0.5)
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
    shutil.rmtree(directory, ignore_errors=True)
    warnings = [line for line in output.splitlines() if "cannot listen on 127.0.0.1:53" in line]
    assert len(warnings) == 1, output
    assert "Permission denied" in warnings[0] and "UDP and TCP" in warnings[0], warnings[0]
    assert "varlink API keeps serving" in warnings[0]


def test_port_in_use_names_the_address(stub, workdir):
    """127.0.0.1:53 in dlab-a belongs to the session's stub: a second daemon says so and serves varlink."""
    directory = workdir / f"second-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    socket_path = directory / "io.discoverd"
    proc = subprocess.Popen(
        ["ip", "netns", "exec", "dlab-a", DISCOVERD_BIN, "--socket", socket_path, "--state-dir", directory / "state",
         "--upstream", "127.0.0.1:9", "--stub-listen", "127.0.0.1:53"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_until(lambda: socket_path.exists(), timeout=15), "daemon did not start"
        assert Varlink(str(socket_path)).status()["version"]
        time.sleep(0.5)
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
    warnings = [line for line in output.splitlines() if "cannot listen on 127.0.0.1:53" in line]
    # UDP binds with SO_REUSEPORT only among sockets of the same user; TCP is taken: at most one line per
    # transport, each naming the reason.
    assert 1 <= len(warnings) <= 2, output
    assert all("in use" in w.lower() for w in warnings), warnings
