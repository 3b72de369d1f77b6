"""Fixtures for the reliability tests: real ``dispatch`` processes on one machine (a SQLite
record, the local backend in a fresh state directory), and a cleanup that kills every
process a test's jobs left behind."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from dispatch_testing.crash import TAG, Machine, tagged


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env[TAG] = str(tmp_path)
    m = Machine(tmp_path, env)
    yield m
    for pid in tagged(str(tmp_path)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
