"""A supervisor that is always there, and visible: ``dispatch supervise --detach``,
``--stop``, ``--status``, ``--print-systemd-unit``, the refusal of a SQLite record on a
network file system, and the ``watch`` line of ``dispatch status``. Real processes: the
installed ``dispatch``, a real detached supervisor recovering a real local job."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli.cli_shell import DISPATCH, Shell
from dispatch.supervising import mount_of, network_file_system, record_on_network_fs
from dispatch_testing.waiting import eventually

FLAKY = """#!/bin/sh
# fails on its first run, succeeds when run again
if [ -e "$HOME_DIR/ran" ]; then echo done; exit 0; fi
touch "$HOME_DIR/ran"
exit 1
"""
POLICY = """
[[rule]]
on = ["non-zero-exit"]
action = "resubmit"
budget = 2
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def started(sh: Shell) -> Iterator[list[int]]:
    """The detached supervisors a test starts; any left running are ended afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _status(sh: Shell, job: str) -> dict[str, object]:
    return sh.json("status", job)  # type: ignore[return-value]


def test_a_detached_supervisor_recovers_a_local_job_is_visible_and_stops(sh, started):
    sh.env["HOME_DIR"] = str(sh.home)
    script = sh.write("flaky.sh", FLAKY)
    policy = sh.write("policy.toml", POLICY)
    sub = sh.run("submit", "--policy", str(policy), "--", "sh", str(script))
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    before = _status(sh, job)["supervisor"]
    assert before["watched"] is False
    assert "no supervisor has ever ticked" in before["message"]
    assert "WARNING: no supervisor has ever ticked" in sh.run("status", job).stdout

    out = sh.run("supervise", "--detach", "--interval", "0.2")
    assert out.returncode == 0, out.stderr
    pid = int(re.search(r"pid (\d+)", out.stdout).group(1))
    started.append(pid)
    assert _alive(pid)
    log = Path(re.search(r"log\s+(\S+)", out.stdout).group(1))
    pid_file = Path(re.search(r"pid file\s+(\S+)", out.stdout).group(1))
    assert log.parent == pid_file.parent == sh.home / "state" / "dispatch" / "supervise"
    assert pid_file.read_text().strip() == str(pid)
    assert oct(pid_file.stat().st_mode & 0o777) == "0o600"

    again = sh.run("supervise", "--detach", "--interval", "0.2")
    assert again.returncode == 2
    assert "already runs" in again.stderr and f"pid {pid}" in again.stderr

    done = eventually(
        lambda: _status(sh, job),
        until=lambda s: s["state"] == "succeeded" and s["settled"],
        what="the detached supervisor resubmits the job and commits its success",
    )
    assert len(done["submissions"]) == 2
    assert done["supervisor"] is None  # an ended job needs nobody

    other = sh.run("submit", "--", "sleep", "300")
    assert other.returncode == 0, other.stderr
    waiting = other.stdout.strip()
    seen = eventually(
        lambda: _status(sh, waiting)["supervisor"],
        until=lambda s: s["holds_lease"],
        what="the detached supervisor takes the new job",
    )
    assert seen["watched"] and seen["pid"] == pid and seen["host"] == socket.gethostname()
    line = sh.run("status", waiting).stdout
    assert re.search(
        rf"watch +supervised by {re.escape(socket.gethostname())}:{pid}, last tick \d+ s ago", line
    )

    status = sh.run("supervise", "--status")
    assert status.returncode == 0 and f"pid {pid}" in status.stdout
    assert sh.json("supervise", "--status")["pid"] == pid

    stop = sh.run("supervise", "--stop")
    assert stop.returncode == 0, stop.stderr
    assert f"pid {pid}" in stop.stdout
    assert not _alive(pid), "--stop returns once the supervisor is gone"
    assert pid_file.read_text() == ""
    assert sh.run("supervise", "--status").returncode == 1
    assert "no detached supervisor runs" in sh.run("supervise", "--stop").stdout
    after = _status(sh, waiting)["supervisor"]
    assert after["watched"] is False and "was stopped" in after["message"]
    text = log.read_text()
    assert f"supervisor {socket.gethostname()}:{pid} started" in text
    assert f"supervisor {socket.gethostname()}:{pid} stopped" in text
    sh.run("cancel", waiting)


def test_a_stale_pid_file_does_not_block_a_new_detached_supervisor(sh, started):
    """The lock says whether one runs: a pid file left with a pid in it (a crash) does not."""
    first = sh.run("supervise", "--detach", "--interval", "0.2")
    assert first.returncode == 0, first.stderr
    pid = int(re.search(r"pid (\d+)", first.stdout).group(1))
    started.append(pid)
    os.kill(pid, signal.SIGKILL)
    eventually(lambda: not _alive(pid), what=f"pid {pid} is gone")
    pid_file = Path(re.search(r"pid file\s+(\S+)", first.stdout).group(1))
    assert pid_file.read_text().strip() == str(pid), "a killed supervisor leaves its pid"
    assert sh.run("supervise", "--status").returncode == 1
    second = sh.run("supervise", "--detach", "--interval", "0.2")
    assert second.returncode == 0, second.stderr
    new = int(re.search(r"pid (\d+)", second.stdout).group(1))
    started.append(new)
    assert new != pid
    assert sh.run("supervise", "--stop").returncode == 0
    assert not _alive(new)


@pytest.mark.parametrize("options", [["--detach", "--once"], ["--stop", "--status"]])
def test_modes_that_do_not_go_together_are_a_usage_error(sh, options):
    out = sh.run("supervise", *options)
    assert out.returncode == 2
    assert "do not go together" in out.stderr


def test_the_systemd_user_unit_keeps_the_discovery_timeout_given(sh):
    """The unit runs the supervisor with the --discovery-timeout given, and leaves the
    option out when it is the default."""
    out = sh.run("supervise", "--print-systemd-unit", "--discovery-timeout", "2.5")
    assert out.returncode == 0, out.stderr
    command = shlex.split(re.search(r"^ExecStart=(.*)$", out.stdout, re.M).group(1))
    assert command[command.index("--discovery-timeout") + 1] == "2.5"
    default = sh.run("supervise", "--print-systemd-unit")
    assert default.returncode == 0 and "--discovery-timeout" not in default.stdout


def test_the_systemd_user_unit_runs_a_supervisor_that_stops_on_sigterm(sh):
    """The unit's ExecStart, run with the unit's Environment as systemd would, supervises
    the record the unit names and ends cleanly on the SIGTERM systemd sends."""
    out = sh.run("supervise", "--print-systemd-unit", "--interval", "0.2")
    assert out.returncode == 0, out.stderr
    unit = out.stdout
    assert "[Service]" in unit and "WantedBy=default.target" in unit
    assert "systemctl --user enable --now dispatch-supervise" in unit
    assert f"DISPATCH_STORE=sqlite://{sh.db}" in unit
    command = shlex.split(re.search(r"^ExecStart=(.*)$", unit, re.M).group(1))
    assert command[0] == DISPATCH and command[1] == "supervise"
    env = {"HOME": str(sh.home)}
    for value in re.findall(r"^Environment=(.*)$", unit, re.M):
        name, _, text = shlex.split(value)[0].partition("=")
        env[name] = text
    assert env["XDG_STATE_HOME"] == str(sh.home / "state")
    job = sh.run("submit", "--", "sleep", "300").stdout.strip()
    unit_process = subprocess.Popen(command, env=env, cwd="/", stderr=subprocess.PIPE, text=True)
    try:
        seen = eventually(
            lambda: _status(sh, job)["supervisor"],
            until=lambda s: s["holds_lease"],
            what="the unit's supervisor takes the job",
        )
        assert seen["pid"] == unit_process.pid
        unit_process.send_signal(signal.SIGTERM)
        assert unit_process.wait(timeout=120) == 0
    finally:
        if unit_process.poll() is None:
            unit_process.kill()
            unit_process.wait()
    assert "was stopped" in _status(sh, job)["supervisor"]["message"]
    sh.run("cancel", job)


def test_a_postgres_store_url_with_a_password_stays_out_of_the_unit(sh):
    url = "postgresql://alice:s3cret@db.example:5432/dispatch"
    from dispatch.supervising import systemd_unit

    unit = systemd_unit(
        ["dispatch", "supervise"], url, "postgresql://alice:***@db", {}, has_secret=True
    )
    assert "s3cret" not in unit
    assert "EnvironmentFile=%h/.config/dispatch/supervise.env" in unit


NFS_HOME = (
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "40 22 0:40 / /home rw,relatime shared:20 - nfs4 fs:/export/home rw,vers=4.2\n"
    "41 40 0:41 / /home/alice/scratch rw - tmpfs tmpfs rw\n"
    "42 22 0:42 / /mnt/my\\040lustre rw - lustre mds@o2ib:/fs rw\n"
)


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/home/alice/.local/state/dispatch/record.db", ("/home", "nfs4")),
        ("/home", ("/home", "nfs4")),
        ("/homework/record.db", ("/", "ext4")),
        ("/home/alice/scratch/record.db", ("/home/alice/scratch", "tmpfs")),
        ("/mnt/my lustre/r.db", ("/mnt/my lustre", "lustre")),
        ("/var/lib/record.db", ("/", "ext4")),
    ],
)
def test_the_mount_of_a_path_is_the_longest_mount_point_above_it(path, found):
    assert mount_of(path, NFS_HOME) == found


def test_only_network_file_systems_are_named():
    assert network_file_system("/home/alice/r.db", NFS_HOME) == ("/home", "nfs4")
    assert network_file_system("/home/alice/scratch/r.db", NFS_HOME) is None
    assert network_file_system("/var/r.db", NFS_HOME) is None


def test_this_hosts_own_temporary_directory_is_not_a_network_file_system(tmp_path):
    """Read from the real /proc/self/mountinfo: a record here is supervised as usual."""
    assert network_file_system(tmp_path) is None


def test_a_sqlite_record_on_a_network_file_system_is_refused_or_warned(tmp_path, monkeypatch):
    """``supervise`` refuses it with the reason (exit 2); ``--allow-network-fs`` warns with
    the same reason and runs. The mount table is a file of the test's (no NFS server here)."""
    from click.testing import CliRunner
    from dispatch import supervising
    from dispatch.cli.main import cli
    from dispatch.store.sqlite import SQLiteStore

    record = tmp_path / "home" / "record.db"
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 0:21 / / rw - ext4 /dev/vda1 rw\n"
        f"40 22 0:40 / {tmp_path / 'home'} rw - nfs4 fs:/export/home rw\n"
    )
    monkeypatch.setattr(supervising, "MOUNTINFO", table)
    with SQLiteStore(record) as store:
        why = record_on_network_fs(store)
    assert why is not None and "nfs4" in why and "PostgreSQL" in why
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runner = CliRunner()
    refused = runner.invoke(cli, ["--store", f"sqlite://{record}", "supervise", "--once"])
    assert refused.exit_code == 2
    assert "refusing to supervise" in refused.stderr and "nfs4" in refused.stderr
    allowed = runner.invoke(
        cli, ["--store", f"sqlite://{record}", "supervise", "--once", "--allow-network-fs"]
    )
    assert allowed.exit_code == 0, allowed.stderr
    assert "warning" in allowed.stderr and "nfs4" in allowed.stderr
    json.loads(
        runner.invoke(
            cli, ["--store", f"sqlite://{record}", "supervise", "--status", "--json"]
        ).stdout
    )


def test_a_watch_following_the_job_shows_as_its_supervisor(sh):
    """``dispatch watch`` supervises its job while it runs: status, from another process,
    names it (it records no beat: it watches that job alone)."""
    job = sh.run("submit", "--", "sleep", "300").stdout.strip()
    watch = subprocess.Popen(
        [DISPATCH, "watch", job, "--interval", "0.2"],
        env=sh.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        seen = eventually(
            lambda: _status(sh, job)["supervisor"],
            until=lambda s: s["holds_lease"],
            what="the watch holds the job",
        )
        assert seen["watched"] and seen["pid"] == watch.pid
        assert "which follows this job alone" in seen["message"]
        assert sh.run("cancel", job).returncode == 0
        assert watch.wait(timeout=120) == 5  # the job was cancelled
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
