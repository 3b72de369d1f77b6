"""Discovery on the local backend: from other processes, for many jobs at once, and when
the runner is gone (S-4, S-29, S-32, S-34, S-40)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch import (
    Cause,
    CauseKind,
    Discovery,
    JobSpec,
    ObjectView,
    Phase,
    Provenance,
    Unreachable,
)
from dispatch.local import keeper
from dispatch.local.backend import LocalBackend
from dispatch.local.layout import ObjectDir
from dispatch.local.processes import gone
from dispatch.local.records import ProcessIdentity, Started
from dispatch_testing.waiting import eventually


def ended(view: ObjectView) -> bool:
    return view.phase is Phase.ENDED


def running(view: ObjectView) -> bool:
    return view.phase is Phase.RUNNING


def in_another_process(state_dir: Path, code: str) -> str:
    """Run ``code`` in a fresh Python with the backend loaded from its entry point, as a
    later ``dispatch`` command would; ``backend`` is bound there. Returns its stdout."""
    program = textwrap.dedent(
        """
        from dispatch import Registry
        backend = Registry.from_entry_points().get("local")
        """
    ) + textwrap.dedent(code)
    env = {**os.environ, "DISPATCH_LOCAL_DIR": str(state_dir), "DISPATCH_LOCAL_STOP_GRACE": "0.5"}
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_object_outlives_the_process_that_submitted_it(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    """The runner is detached: the submitting process exits, the command goes on, and a
    later process learns how it ended."""
    go, marker = tmp_path / "go", tmp_path / "done"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done\necho finished > {marker}\nexit 5\n"
    object_id = in_another_process(
        state_dir,
        f"""
        from dispatch import JobSpec
        print(backend.submit("job-detached", 1, JobSpec(script={script!r}), gated=False))
        """,
    ).strip()
    go.touch()  # only now, with the submitter gone, may the command finish
    view = settle("job-detached", ended)
    assert view.object_id == object_id
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT and view.cause.exit_code == 5
    assert marker.read_text() == "finished\n"


def test_a_later_process_sees_and_stops_what_this_one_started_S40(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-40/S-24: every process computes its view from the same scheduler state."""
    object_id = backend.dispatch_submit("job-shared", 1, JobSpec(command=("sleep", "30")), False)
    here = settle("job-shared", running)
    seen = Discovery.model_validate_json(
        in_another_process(state_dir, 'print(backend.discover(["job-shared"]).model_dump_json())')
    )
    (there,) = seen.objects
    assert there == here
    in_another_process(
        state_dir,
        f"""
        from dispatch import Cause
        cause = Cause(kind="cancelled", provenance="actor", actor="carol", detail="from afar")
        backend.stop({object_id!r}, cause)
        """,
    )
    (view,) = backend.dispatch_discover(["job-shared"]).objects
    assert view.phase is Phase.ENDED
    assert view.cause is not None and view.cause.actor == "carol"
    assert view.cause.detail.startswith("from afar; ")


def test_the_keeper_hands_the_runner_the_record_it_wrote_one_start_time_for_all_S40(
    tmp_path: Path,
) -> None:
    """The keeper writes started.json as the command starts and the runner writes it again
    once it hears of it: the same record, so a process reading between the two writes
    computes the same view as one reading after (a second start time differed by ms)."""
    obj = ObjectDir(tmp_path / "objects" / "local-keeper")
    obj.path.mkdir(parents=True, mode=0o700)
    pid, started = keeper.start(obj, lambda: subprocess.Popen(["true"], process_group=0))
    os.waitpid(pid, 0)  # the keeper ends once it has recorded the command's exit
    assert Started.model_validate_json(obj.started.read_text()) == started


def test_many_jobs_in_one_call_unknown_ids_absent_S32(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-32: one call answers for every job asked; unknown ids are absent, not errors."""
    ids: dict[str, list[str]] = {}
    for n in range(6):
        job = f"job-many-{n}"
        ids[job] = [backend.dispatch_submit(job, 1, JobSpec(command=("true",)), False)]
    ids["job-many-0"].append(
        backend.dispatch_submit("job-many-0", 2, JobSpec(command=("true",)), False)
    )
    backend.dispatch_submit("job-not-asked", 1, JobSpec(command=("true",)), False)
    asked = [*ids, "job-unknown-a", "job-unknown-b"]
    discovery = backend.dispatch_discover(asked)
    assert discovery.backend == "local"
    grouped = discovery.by_job()
    assert set(grouped) == set(ids)
    for job, object_ids in ids.items():
        assert [o.object_id for o in grouped[job]] == object_ids
        assert [o.submission for o in grouped[job]] == list(range(1, len(object_ids) + 1))
    assert discovery.of_job("job-unknown-a") == ()
    assert backend.dispatch_discover([]).objects == ()


def test_job_ids_that_are_not_file_names_are_kept_apart_S32(backend: LocalBackend) -> None:
    odd = ["a/b", "a%2Fb", "..", ".", "x" * 300, "y" * 300]
    for job in odd:
        backend.dispatch_submit(job, 1, JobSpec(command=("true",)), True)
    discovery = backend.dispatch_discover(odd)
    assert sorted(o.job_id for o in discovery.objects) == sorted(odd)
    for job in odd:
        assert len(discovery.of_job(job)) == 1


def _runner_of(state_dir: Path, object_id: str) -> ProcessIdentity:
    path = state_dir / "objects" / object_id / "runner.json"
    return ProcessIdentity.model_validate_json(path.read_text())


def _command_of(state_dir: Path, object_id: str) -> ProcessIdentity:
    path = state_dir / "objects" / object_id / "started.json"
    return Started.model_validate_json(path.read_text()).process


def _keeper_of(state_dir: Path, object_id: str) -> ProcessIdentity:
    path = state_dir / "objects" / object_id / "started.json"
    keeper = Started.model_validate_json(path.read_text()).keeper
    assert keeper is not None
    return keeper


@pytest.mark.parametrize(("code", "kind"), [(0, CauseKind.NONE), (3, CauseKind.NON_ZERO_EXIT)])
def test_a_command_that_ends_after_its_runner_was_killed_keeps_its_exit_status(
    state_dir: Path,
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
    code: int,
    kind: CauseKind,
) -> None:
    """Issue 15.3: the command's exit is known (its keeper kept it), so a command that
    exited 0 while its runner was dead succeeded; it is not ``unknown``."""
    go = tmp_path / "go"
    spec = JobSpec(
        command=(
            "sh",
            "-c",
            f"echo up > up; while [ ! -e {go} ]; do sleep 0.05; done; exit {code}",
        ),
        workdir=str(tmp_path),
    )
    object_id = backend.dispatch_submit("job-kept", 1, spec, False)
    settle("job-kept", running)
    wait_file(tmp_path / "up")
    runner = _runner_of(state_dir, object_id)
    os.kill(runner.pid, signal.SIGKILL)
    settle("job-kept", lambda v: gone(runner) is not None)
    go.touch()
    view = settle("job-kept", ended)
    assert view.cause is not None
    assert (view.cause.kind, view.cause.exit_code) == (kind, code)
    assert f"exited with code {code}" in view.cause.detail
    assert "its local runner was gone" in view.cause.detail
    (execution,) = view.executions
    assert execution.cause == view.cause


def test_runner_and_command_killed_is_ended_unknown_not_running_for_ever_S4(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-4: what cannot be known is reported ``unknown`` with what was found: the runner,
    the command's keeper (its parent, the one who learns its exit) and the command are
    all killed."""
    object_id = backend.dispatch_submit("job-orphan", 1, JobSpec(command=("sleep", "30")), False)
    settle("job-orphan", running)
    runner, command = _runner_of(state_dir, object_id), _command_of(state_dir, object_id)
    keeper = _keeper_of(state_dir, object_id)
    os.kill(runner.pid, signal.SIGKILL)
    os.kill(keeper.pid, signal.SIGKILL)
    os.killpg(command.pid, signal.SIGKILL)
    view = settle("job-orphan", ended)
    assert view.scheduler_state == "lost"
    assert view.cause is not None
    assert view.cause.kind is CauseKind.UNKNOWN
    assert view.cause.detail.startswith("the local runner is gone (")
    assert f"pid {runner.pid}" in view.cause.detail
    assert f"pid {command.pid}" in view.cause.detail
    (execution,) = view.executions
    assert execution.cause == view.cause and execution.started_at is not None


@pytest.mark.parametrize(
    ("script", "sent"),
    [
        (
            "exec sleep 30\n",
            "sent SIGTERM to its process group; the command ended: killed by signal 15 (SIGTERM)",
        ),
        (
            "trap '' TERM\necho ready > ready\nsleep 30\n",
            "sent SIGTERM to its process group, then SIGKILL after a grace of 0.5s; "
            "the command ended: killed by signal 9 (SIGKILL)",
        ),
    ],
)
def test_a_command_that_outlives_its_runner_runs_and_stop_still_kills_it_S30(
    state_dir: Path,
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
    script: str,
    sent: str,
) -> None:
    spec = JobSpec(script=script, workdir=str(tmp_path))
    object_id = backend.dispatch_submit("job-alone", 1, spec, False)
    settle("job-alone", running)
    if "ready" in script:
        wait_file(tmp_path / "ready")  # its trap is set
    runner, command = _runner_of(state_dir, object_id), _command_of(state_dir, object_id)
    os.kill(runner.pid, signal.SIGKILL)
    settle("job-alone", lambda v: gone(runner) is not None)
    (view,) = backend.dispatch_discover(["job-alone"]).objects
    assert view.phase is Phase.RUNNING
    stop = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="enough")
    backend.dispatch_stop(object_id, stop)
    (view,) = backend.dispatch_discover(["job-alone"]).objects
    assert view.phase is Phase.ENDED
    assert view.cause is not None and view.cause.kind is CauseKind.CANCELLED
    assert view.cause.detail == f"enough; its local runner was gone, so dispatch {sent}"
    assert gone(command) is not None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"start_ticks": 1}, "now belongs to another process"),
        ({"boot_id": "an-earlier-boot"}, "the machine rebooted since"),
    ],
)
def test_a_reused_pid_or_a_reboot_is_not_taken_for_a_live_runner_S4(
    state_dir: Path,
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    change: dict[str, object],
    words: str,
) -> None:
    """The runner's pid now names this test's own live process (a reused pid), or the
    record comes from an earlier boot: either way the gated object is lost, not gated."""
    object_id = backend.dispatch_submit("job-reused", 1, JobSpec(command=("true",)), True)
    record = state_dir / "objects" / object_id / "runner.json"
    settle("job-reused", lambda v: record.exists() and v.phase is Phase.GATED)
    runner = _runner_of(state_dir, object_id)
    os.kill(runner.pid, signal.SIGKILL)
    reused = json.loads(runner.model_dump_json()) | {"pid": os.getpid()} | change
    if "start_ticks" not in change:
        me = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
        reused["start_ticks"] = int(me[19])
    (state_dir / "objects" / object_id / "runner.json").write_text(json.dumps(reused))
    view = settle("job-reused", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.UNKNOWN
    assert words in view.cause.detail
    assert "the command never started" in view.cause.detail
    assert view.executions == ()


def test_an_end_file_that_does_not_decode_is_unknown_with_its_text_S4(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-4: an answer that cannot be mapped is ``unknown`` with the answer verbatim."""
    object_id = backend.dispatch_submit("job-garbled", 1, JobSpec(command=("true",)), False)
    settle("job-garbled", ended)
    end = state_dir / "objects" / object_id / "end.json"
    end.write_text('{"state": "exploded", "cause": 42}')
    (view,) = backend.dispatch_discover(["job-garbled"]).objects
    assert view.phase is Phase.ENDED
    assert view.scheduler_state == "unreadable"
    assert view.cause is not None and view.cause.kind is CauseKind.UNKNOWN
    assert str(end) in view.cause.detail
    assert view.cause.detail.endswith('\n{"state": "exploded", "cause": 42}')


def test_an_ending_during_a_state_dir_outage_is_recorded_once_it_is_back_S5(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    """S-5: while the state directory is gone (an unmounted share) the backend raises
    Unreachable; the runner keeps the command's ending and records it afterwards."""
    go = tmp_path / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done\nexit 4\n"
    object_id = backend.dispatch_submit("job-outage", 1, JobSpec(script=script), False)
    settle("job-outage", running)
    command = _command_of(state_dir, object_id)
    aside = state_dir.with_name("state-aside")
    os.rename(state_dir, aside)
    state_dir.write_text("")
    try:
        go.touch()
        eventually(  # reaped (not only a zombie): the runner has its ending
            lambda: not Path(f"/proc/{command.pid}").exists(), what="the command is reaped"
        )
        time.sleep(0.3)  # lets time pass for the runner's first attempt to record it to fail
        with pytest.raises(Unreachable):
            backend.dispatch_discover(["job-outage"])
    finally:
        state_dir.unlink()
        os.rename(aside, state_dir)
    view = settle("job-outage", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.NON_ZERO_EXIT and view.cause.exit_code == 4


def test_a_stop_right_after_submit_cancels_it_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    object_id = backend.dispatch_submit("job-hasty", 1, JobSpec(command=("sleep", "30")), False)
    stop = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="changed my mind")
    backend.dispatch_stop(object_id, stop)
    (view,) = backend.dispatch_discover(["job-hasty"]).objects
    assert view.phase is Phase.ENDED
    assert view.cause is not None and view.cause.kind is CauseKind.CANCELLED
    assert view.cause.detail.startswith("changed my mind")
