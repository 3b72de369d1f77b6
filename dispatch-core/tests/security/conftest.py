"""A second Unix user for the security tests (S-51): ``nobody``, reached with ``runuser``.

Faults about another user (a state directory created first by someone else, a file they
own) are played by a real second user, not simulated with chown alone. The tests run as
root (the project's CI does); they fail loudly, never skip, when that is not so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="session")
def nobody() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.fail("the S-51 tests play a second user with runuser: run them as root")
    return pwd.getpwnam("nobody")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory both users can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="dispatch-s51-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def as_nobody(nobody: pwd.struct_passwd) -> Callable[..., str]:
    return run_as_nobody


def run_as_nobody(code: str, *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run Python ``code`` as ``nobody`` with this checkout's dispatch importable; return
    its stdout (a failing script fails the test with its stderr)."""
    # The venv's interpreter lives under /root; the system one has the same version and
    # imports the venv's packages and this checkout's sources from PYTHONPATH.
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    path = f"{SRC}:{sysconfig.get_paths()['purelib']}"
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONPATH": path, **(env or {})}
    done = subprocess.run(
        ["runuser", "-u", "nobody", "--", "env", "-i"]
        + [f"{k}={v}" for k, v in environment.items()]
        + [python, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"script as nobody failed ({done.returncode}):\n{done.stderr}", pytrace=False)
    return done.stdout
