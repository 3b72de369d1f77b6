"""The Python API example in docs/cli.md (and README.md) runs, as written, and prints
what it says: a failed first try resubmitted by the policy, then success."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def example() -> str:
    text = DOC.read_text()
    marker = text.index("<!-- example: python-api")
    block = re.search(r"```python\n(.*?)```", text[marker:], re.S)
    assert block is not None, "no python block after the example marker"
    return block.group(1)


def test_python_api_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    for name in ("DISPATCH_STORE", "DISPATCH_LOCAL_DIR", "DISPATCH_PROFILE"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", example()],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "final succeeded none" in lines
    assert "submission 1: try 1" in lines and "submission 2: try 2" in lines
    history = [line.split()[2] for line in lines if line.startswith("history")]
    assert history == ["recovery-started", "outcome-committed"]
    assert lines[0].startswith("now ") and "now succeeded" in lines
