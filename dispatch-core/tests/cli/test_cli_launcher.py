"""`dispatch submit --launcher` (S-41): the launch contract on the local backend for one
node, in both modes, through the real CLI; a launcher dispatch does not know is refused
before anything is recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
SHOW = 'echo "rank=$RANK world=$WORLD_SIZE pet=${PET_NNODES:-unset}"'


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return subprocess.run(
        [DISPATCH, *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


@pytest.mark.parametrize(("launcher", "pet"), [("tasks", "unset"), ("torchrun", "1")])
def test_the_launcher_sets_the_contract_S41(tmp_path: Path, launcher: str, pet: str) -> None:
    done = _run(
        tmp_path,
        "submit",
        "--launcher",
        launcher,
        "--wait",
        "--interval",
        "0.2",
        "--",
        "sh",
        "-c",
        SHOW,
    )
    assert done.returncode == 0, done.stderr
    job = done.stdout.split()[0]
    logs = _run(tmp_path, "logs", job)
    assert logs.stdout.strip().splitlines()[-1] == f"rank=0 world=1 pet={pet}"


def test_an_unknown_launcher_is_refused_and_nothing_recorded_S36(tmp_path: Path) -> None:
    refused = _run(tmp_path, "submit", "--launcher", "mpirun", "--", "true")
    assert refused.returncode == 2
    assert "mpirun" in refused.stderr
    listed = _run(tmp_path, "list", "--json")
    assert json.loads(listed.stdout or "[]") == []
