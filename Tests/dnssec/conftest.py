"""Fixtures for the lab DNSSEC suite (Tests/dnssec): the lab must be up (Scripts/lab up).

Without it the tests are skipped, except with CI=true, where a missing lab or prerequisite is a failure.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dnsseclab  # noqa: E402

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
    for tool in ("kdig", "drill", "unbound-control", "ip"):
        if shutil.which(tool) is None:
            missing(f"{tool} not installed (run Scripts/bootstrap)")
    envfile = dnsseclab.LAB_DIR / "env"
    if not envfile.exists():
        missing(f"lab is not up ({envfile} missing): run Scripts/lab up")
    env = read_env(envfile)
    if "LAB_DNSSEC_UNBOUND" not in env:
        missing("the lab that is up has no DNSSEC part (an older Scripts/lab): Scripts/lab down && Scripts/lab up")
    return env


@pytest.fixture
def clean(lab):
    """No fault rules and a cold Unbound cache before and after the test."""
    dnsseclab.faultctl("reset", "rules")
    dnsseclab.flush()
    yield
    dnsseclab.faultctl("reset", "rules")
    dnsseclab.flush()
