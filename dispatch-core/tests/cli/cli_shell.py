"""The CLI tests run the installed ``dispatch`` as a user does: a real process, the local
backend and a SQLite record under a private XDG_STATE_HOME/XDG_CONFIG_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


class Shell:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
        }
        for name in ("DISPATCH_STORE", "DISPATCH_PROFILE", "DISPATCH_BACKEND", "DISPATCH_POLICY"):
            self.env.pop(name, None)
        self.env.pop("DISPATCH_NOTIFY_URL", None)

    def run(
        self, *args: str | bytes, timeout: float = 60, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            errors="backslashreplace",
            env=self.env,
            timeout=timeout,
            cwd=cwd or self.home,
        )

    def json(self, *args: str) -> object:
        out = self.run(*args, "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def write(self, name: str, text: str) -> Path:
        path = self.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    @property
    def db(self) -> Path:
        return self.home / "state" / "dispatch" / "record.db"

    def recorded(self) -> list[object]:
        """The jobs in the record (none when it was never created)."""
        if not self.db.exists():
            return []
        return self.json("list")  # type: ignore[return-value]


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path)
