"""How a local object ends, each with real processes: success, exit codes, signals, the
time limit and launch failures (S-2, S-3, S-4, S-19)."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from dispatch import CauseKind, JobSpec, ObjectView, Phase, Provenance, Resources
from dispatch.local.backend import LocalBackend
from dispatch.local.processes import gone
from dispatch.local.records import ProcessIdentity


def ended(view: ObjectView) -> bool:
    return view.phase is Phase.ENDED


def test_success_ends_none_on_this_host_with_output_kept_S19(
    backend: LocalBackend, settle: Callable[..., ObjectView], state_dir: Path
) -> None:
    """S-19: the adapter reports the object's state, cause and its one execution."""
    spec = JobSpec(command=("sh", "-c", "echo to-out; echo to-err >&2"))
    object_id = backend.dispatch_submit("job-ok", 1, spec, False)
    view = settle("job-ok", ended)
    assert view.object_id == object_id
    assert view.submission == 1
    assert view.scheduler_state == "exited"
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NONE
    assert view.cause.provenance is Provenance.APPLICATION
    assert view.cause.exit_code == 0
    (execution,) = view.executions
    assert execution.index == 0
    assert execution.nodes == (socket.gethostname(),)
    assert execution.cause == view.cause
    assert execution.started_at is not None and execution.ended_at is not None
    assert view.created_at is not None and view.created_at <= execution.started_at
    assert execution.started_at <= execution.ended_at
    objdir = state_dir / "objects" / object_id
    assert (objdir / "stdout").read_text() == "to-out\n"
    assert (objdir / "stderr").read_text() == "to-err\n"


def test_exit_3_is_non_zero_exit_with_code_3_S2(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-2: the cause carries the exit code and its provenance is the application."""
    backend.dispatch_submit("job-3", 1, JobSpec(script="exit 3\n"), False)
    view = settle("job-3", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT
    assert view.cause.exit_code == 3
    assert view.cause.provenance is Provenance.APPLICATION
    assert view.cause.detail == "exited with code 3"


def test_killed_by_sigkill_from_outside_names_the_signal_S2(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
) -> None:
    """S-2: a death by a signal dispatch did not send is a non-zero exit, 128+S, named."""
    pid_file = tmp_path / "pid"
    spec = JobSpec(script=f"echo $$ > {pid_file}\nexec sleep 30\n")
    backend.dispatch_submit("job-killed", 1, spec, False)
    settle("job-killed", lambda v: v.phase is Phase.RUNNING)
    os.kill(int(wait_file(pid_file)), signal.SIGKILL)
    view = settle("job-killed", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT
    assert view.cause.exit_code == 128 + 9
    assert view.cause.detail == "killed by signal 9 (SIGKILL)"


def test_time_limit_of_1s_on_sleep_30_ends_time_limit_S3(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-3: the time limit is enforced and reported as its own kind, not as a signal."""
    spec = JobSpec(command=("sleep", "30"), resources=Resources(time_limit=timedelta(seconds=1)))
    backend.dispatch_submit("job-tl", 1, spec, False)
    view = settle("job-tl", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.TIME_LIMIT
    assert view.cause.provenance is Provenance.SCHEDULER
    assert view.scheduler_state == "timed-out"
    assert "time limit of 0:00:01 reached" in view.cause.detail
    assert "killed by signal 15 (SIGTERM)" in view.cause.detail
    assert "SIGKILL" not in view.cause.detail


def test_time_limit_kills_a_command_that_ignores_sigterm_after_the_grace_S3(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    spec = JobSpec(
        script="trap '' TERM\nsleep 30\n",
        resources=Resources(time_limit=timedelta(seconds=1)),
    )
    backend.dispatch_submit("job-tl-stubborn", 1, spec, False)
    view = settle("job-tl-stubborn", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.TIME_LIMIT
    assert "then SIGKILL after a grace of 0.5s" in view.cause.detail
    assert view.cause.detail.endswith("killed by signal 9 (SIGKILL)")


def test_command_not_found_is_launch_failed_with_the_os_words_S2(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-2: ``detail`` is the OS's own words, verbatim."""
    spec = JobSpec(command=("no-such-command-for-dispatch",))
    backend.dispatch_submit("job-nf", 1, spec, False)
    view = settle("job-nf", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.LAUNCH_FAILED
    assert view.cause.detail == (
        "[Errno 2] No such file or directory: 'no-such-command-for-dispatch'"
    )
    (execution,) = view.executions
    assert execution.started_at is None
    assert execution.cause == view.cause


def test_missing_workdir_is_launch_failed_S2(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-dir"
    spec = JobSpec(command=("true",), workdir=str(missing))
    backend.dispatch_submit("job-wd", 1, spec, False)
    view = settle("job-wd", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.LAUNCH_FAILED
    assert view.cause.detail == f"[Errno 2] No such file or directory: '{missing}'"


def test_file_that_is_not_executable_is_launch_failed_S2(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o644)
    backend.dispatch_submit("job-noexec", 1, JobSpec(command=(str(program),)), False)
    view = settle("job-noexec", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.LAUNCH_FAILED
    assert view.cause.detail == f"[Errno 13] Permission denied: '{program}'"


def test_script_runs_in_workdir_with_env_and_its_dispatch_ids(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    spec = JobSpec(
        script='echo "$GREETING $DISPATCH_JOB_ID $DISPATCH_SUBMISSION" > seen\npwd >> seen\n',
        env={"GREETING": "hello"},
        workdir=str(workdir),
    )
    backend.dispatch_submit("job-env", 4, spec, False)
    view = settle("job-env", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.NONE
    assert (workdir / "seen").read_text() == f"hello job-env 4\n{workdir}\n"


def test_script_with_a_shebang_runs_with_its_interpreter(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    spec = JobSpec(script="#!/usr/bin/env python3\nimport sys\nsys.exit(7)\n")
    backend.dispatch_submit("job-py", 1, spec, False)
    view = settle("job-py", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT
    assert view.cause.exit_code == 7


def test_leftover_processes_of_the_group_are_killed_when_the_command_exits(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "background"
    spec = JobSpec(script=f"sleep 30 &\necho $! > {pid_file}\nexit 0\n")
    backend.dispatch_submit("job-bg", 1, spec, False)
    view = settle("job-bg", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.NONE
    background = int(wait_file(pid_file))
    stat = Path(f"/proc/{background}/stat")
    if stat.exists():  # it may still be a zombie its new parent has not reaped yet
        start_ticks = int(stat.read_text().rsplit(")", 1)[1].split()[19])
        identity = ProcessIdentity(
            pid=background, start_ticks=start_ticks, boot_id="", host=socket.gethostname()
        )
        assert gone(identity) is not None
