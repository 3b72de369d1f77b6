"""A full disk under the SQLite record and the local backend's object directories.

A 2 MB tmpfs, mounted by the test (as root, as CI runs), holds XDG_STATE_HOME: the record
and every object directory. Filled to the last byte, every command fails with one clear
line ("no space left on ...: free space and run again", exit 3) and no traceback; a running
supervisor skips its ticks saying so and stays up; the jobs' commands end while the disk is
full and their runners keep their endings until space returns. Freed, the same commands
and the same supervisor go on: every job ends as it would have, none is lost, and
``PRAGMA integrity_check`` is ok.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch_testing.crash import DISPATCH, TAG, tagged

WAIT = 180.0  # generous: a deadline for a condition, never a pause


class Disk:
    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work
        self.filler = root / "filler"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
        self.env |= {
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(work / "config"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
            TAG: str(work),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            timeout=WAIT,
            check=False,
        )

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == 28, exc
        finally:
            os.close(fd)
        st = os.statvfs(self.root)
        assert st.f_bavail == 0

    def free(self) -> None:
        self.filler.unlink()

    def jobs(self) -> dict[str, dict[str, object]]:
        out = self.run("list", "--json")
        assert out.returncode == 0, out.stderr
        return {row["job_id"]: row for row in json.loads(out.stdout)}

    def integrity(self) -> str:
        db = sqlite3.connect(self.root / "state" / "dispatch" / "record.db")
        try:
            return str(db.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            db.close()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    if os.geteuid() != 0:
        pytest.fail("the disk-full tests mount a small tmpfs: run them as root")
    root = tmp_path / "disk"
    root.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(root)], check=True
    )
    try:
        yield Disk(root, tmp_path)
    finally:
        for pid in tagged(str(tmp_path)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["umount", "-l", str(root)], check=False)


def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def said_no_space(out: subprocess.CompletedProcess[str]) -> bool:
    return (
        out.returncode == 3
        and "no space left on " in out.stderr
        and "free space and run again" in out.stderr
        and "Traceback" not in out.stderr
    )


def test_every_command_says_no_space_and_goes_on_when_space_returns_S5(disk: Disk) -> None:
    first = disk.run("submit", "--no-start", "--name", "before", "--", "true")
    assert first.returncode == 0, first.stderr
    job = first.stdout.split()[0]
    disk.fill()
    commands = [
        ("submit", "--no-start", "--", "true"),
        ("submit", "--", "true"),
        ("list",),
        ("status", job),
        ("history", job),
        ("supervise", "--once"),
        ("cancel", job),
    ]
    for args in commands:
        out = disk.run(*args)
        assert said_no_space(out), (args, out.returncode, out.stderr)
        assert len(out.stderr.strip().splitlines()) <= 2, out.stderr  # one clear line
    error = json.loads(disk.run("list", "--json").stdout)["error"]
    assert "no space left on" in error["message"] and error["exit_code"] == 3
    disk.free()
    for args in commands[:2]:
        assert disk.run(*args).returncode == 0
    until(
        "every job to end",
        lambda: (
            disk.run("supervise", "--once").returncode == 0
            and all(row["outcome"] is not None for row in disk.jobs().values())
        ),
    )
    rows = disk.jobs()
    assert len(rows) == 3 and job in rows  # the two submits refused while full recorded nothing
    assert {row["outcome"] for row in rows.values()} == {"succeeded"}
    assert disk.integrity() == "ok"


def test_a_supervisor_rides_out_a_full_disk_and_no_job_is_lost_S34(disk: Disk) -> None:
    marks = disk.work / "marks"  # off the small disk: the commands say when they ended
    marks.mkdir()
    # each command runs until the test says go, then says it ended
    script = f"while [ ! -e {marks}/go ]; do sleep 0.1; done; touch {marks}/$DISPATCH_JOB_ID"
    jobs = []
    for n in range(4):
        out = disk.run("submit", "--no-start", "--name", f"j{n}", "--", "sh", "-c", script)
        assert out.returncode == 0, out.stderr
        jobs.append(out.stdout.split()[0])
    log = disk.work / "supervisor.log"
    with open(log, "w") as err:
        supervisor = subprocess.Popen(
            [DISPATCH, "supervise", "--interval", "0.3"],
            env=disk.env,
            cwd=disk.work,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        until(
            "every job to run", lambda: all(r["state"] == "running" for r in disk.jobs().values())
        )
        disk.fill()
        (marks / "go").touch()
        until("every command to end", lambda: all((marks / j).exists() for j in jobs))
        until("a tick to say the disk is full", lambda: "no space left on" in log.read_text())
        said = log.read_text().count("no space left on")
        until("another tick to say it", lambda: log.read_text().count("no space left on") > said)
        assert supervisor.poll() is None, log.read_text()[-3000:]
        disk.free()
        until(
            "every job to succeed",
            lambda: all(r["outcome"] == "succeeded" for r in disk.jobs().values()),
        )
        assert supervisor.poll() is None, log.read_text()[-3000:]
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(WAIT)
    assert sorted(disk.jobs()) == sorted(jobs)
    assert "Traceback" not in log.read_text()
    assert disk.integrity() == "ok"
