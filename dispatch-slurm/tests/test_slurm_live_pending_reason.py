"""While a job waits in the real Slurm queue, ``list`` and ``watch`` say why in Slurm's
words (its Reason): a job told to begin in an hour waits for ``BeginTime``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live(server="slurm")

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def test_list_and_watch_show_the_pending_reason(slurm_cluster: str, tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")},
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DISPATCH_SLURM_LOG_DIR": str(tmp_path / "logs"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
        )

    submitted = run(
        "submit", "--backend", "slurm", "-o", "sbatch_args=--begin=now+1hour", "--", "true"
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.split()[0]
    try:
        listed = run("list")
        assert listed.returncode == 0, listed.stderr
        (row,) = [line for line in listed.stdout.splitlines() if line.startswith(job)]
        assert "pending" in row and "(BeginTime)" in row, listed.stdout
        watching = subprocess.Popen(
            [DISPATCH, "watch", job, "--interval", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            assert watching.stdout is not None
            first = watching.stdout.readline()
            assert (
                "pending" in first and "waiting" in first and first.rstrip().endswith(": BeginTime")
            ), first
            assert "\x1b" not in first
            watching.send_signal(signal.SIGINT)
            watching.wait(timeout=60)
        finally:
            watching.kill()
            watching.wait()
    finally:
        cancelled = run("cancel", job)
        assert cancelled.returncode == 0, cancelled.stderr
