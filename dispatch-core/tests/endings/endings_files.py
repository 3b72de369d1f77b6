"""A bounded wait for a file a job writes (shared by the endings tests)."""

from __future__ import annotations

from pathlib import Path

from dispatch_testing.waiting import eventually

TIMEOUT = 30.0


def wait_for(path: Path, timeout: float = TIMEOUT) -> str:
    def written() -> str | None:
        text = path.read_text() if path.exists() else ""
        return text if text.endswith("\n") else None

    return eventually(written, timeout=timeout, what=f"{path} is written")
