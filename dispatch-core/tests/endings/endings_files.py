"""A bounded wait for a file a job writes (shared by the endings tests)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

TIMEOUT = 30.0


def wait_for(path: Path, timeout: float = TIMEOUT) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    pytest.fail(f"{path} was not written in {timeout}s")
