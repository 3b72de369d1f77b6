"""A deleted object directory or a dead runner never leaves a command running unwatched
(S-28): real supervisor and CLI processes on the local backend."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from dispatch_testing.crash import Machine
from dispatch_testing.waiting import eventually


def _commands_of(job_id: str) -> list[int]:
    """Live processes that run a command of ``job_id`` (they carry DISPATCH_JOB_ID)."""
    marker = f"DISPATCH_JOB_ID={job_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            found.append(int(entry.name))
    return found


def _delete_while_written(path: Path) -> None:
    """Delete a directory the object's keeper may be writing into at that moment (rmtree
    then fails with "Directory not empty"): try again until one pass gets it all."""

    def deleted() -> bool:
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()

    eventually(deleted, interval=0.02, what=f"{path} is deleted")


def test_cancel_stops_a_command_whose_object_directory_was_deleted_S28(machine: Machine) -> None:
    up = machine.root / "up"
    job = machine.run(
        "submit", "--", "sh", "-c", f"trap '' TERM; echo up > {up}; exec sleep 300"
    ).stdout.strip()
    assert machine.run("supervise", "--once").returncode == 0
    machine.until(up.exists)
    (object_id,) = machine.objects_of(job)
    _delete_while_written(machine.local / "objects" / object_id)

    for _ in range(3):
        assert machine.run("supervise", "--once").returncode == 0
        status = machine.json("status", job)
        assert status["state"] == "running", status  # its command runs: shown, not lost
    assert len(_commands_of(job)) == 1

    assert machine.run("cancel", job).returncode == 0
    machine.until(lambda: machine.json("status", job)["state"] == "cancelled")
    assert _commands_of(job) == []


def test_a_command_whose_runner_was_killed_is_still_stopped_and_its_success_kept(
    machine: Machine,
) -> None:
    go = machine.root / "go"
    up = machine.root / "up"
    cmd = f"echo up > {up}; while [ ! -e {go} ]; do sleep 0.05; done"
    job = machine.run("submit", "--", "sh", "-c", cmd).stdout.strip()
    assert machine.run("supervise", "--once").returncode == 0
    machine.until(up.exists)
    (object_id,) = machine.objects_of(job)
    runner = machine.local / "objects" / object_id / "runner.json"
    os.kill(json.loads(runner.read_text())["pid"], signal.SIGKILL)
    go.touch()
    machine.until(lambda: _commands_of(job) == [])
    machine.until(
        lambda: (
            machine.run("supervise", "--once").returncode == 0
            and machine.json("status", job)["settled"]
        )
    )
    status = machine.json("status", job)
    assert status["state"] == "succeeded", status
