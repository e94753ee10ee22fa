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

from stubkit import labkit  # noqa: E402  (dnsseclab put Tests/stub on the path)

IN_CI, missing, read_env = labkit.IN_CI, labkit.missing, labkit.read_env


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
