"""A process interrupted while discovery waits on a slow ``sacct`` exits at once (S-5):
``dispatch watch`` stopped with Ctrl-C under load had waited for the command to answer
(for up to its timeout), since the interpreter waits at exit for a thread pool's threads.

Slurm's commands are scripts of a fake Slurm (no cluster): ``squeue`` answers at once,
``sacct`` never does. Nothing here measures time: the limit only has to be long enough
for an interrupted process to exit, and a process that waits for ``sacct`` never would."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from dispatch_testing.waiting import eventually

CHILD = """
import sys
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.runner import Runner

backend = SlurmBackend(Runner(timeout=600, path_prefix=sys.argv[1]))
try:
    backend.dispatch_discover(["job-x"])
except KeyboardInterrupt:
    sys.exit(130)
sys.exit(0)
"""


def _fake_slurm(root: Path) -> None:
    scripts = {
        "squeue": "exit 0",
        "sinfo": 'echo "slurm-wlm 22.05.8"',
        # never answers: says it was asked, then waits as a slurmdbd under load would
        "sacct": 'echo $$ > "$D/sacct.pid"; exec sleep 600',
    }
    for name, body in scripts.items():
        path = root / name
        path.write_text(f'#!/bin/sh\nD="{root}"\n{body}\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_an_interrupt_while_sacct_is_slow_exits_at_once_S5(tmp_path: Path) -> None:
    _fake_slurm(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = tmp_path / "sacct.pid"
    try:
        eventually(pid_file.exists, timeout=60, interval=0.05, what="sacct asked")
        child.send_signal(signal.SIGINT)
        try:
            code = child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the interrupted process waited for sacct") from None
        assert code == 130, child.communicate()
    finally:
        child.kill()
        child.wait()
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
