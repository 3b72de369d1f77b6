"""An object whose directory was deleted is still found by what survives it: its
processes (S-28: never two live executions of one job)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, JobSpec, ObjectView, Phase, Provenance
from dispatch.local import survivors
from dispatch.local.backend import LocalBackend
from dispatch.local.processes import gone
from dispatch.local.records import ProcessIdentity, Started
from dispatch_testing.waiting import eventually


def test_a_deleted_object_directory_still_shows_its_command_running_and_stop_kills_it_S28(
    state_dir: Path,
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
) -> None:
    spec = JobSpec(
        command=("sh", "-c", "trap '' TERM; echo up > up; sleep 300 & wait; sleep 300"),
        workdir=str(tmp_path),
    )
    object_id = backend.dispatch_submit("job-deleted", 1, spec, False)
    settle("job-deleted", lambda v: v.phase is Phase.RUNNING)
    wait_file(tmp_path / "up")
    obj = state_dir / "objects" / object_id
    command = Started.model_validate_json((obj / "started.json").read_text()).process

    def deleted() -> bool:
        shutil.rmtree(obj, ignore_errors=True)  # the runner may still be writing into it
        return not obj.exists()

    eventually(deleted, what=f"{obj} is deleted")

    (view,) = backend.dispatch_discover(["job-deleted"]).objects
    assert (view.object_id, view.submission, view.phase) == (object_id, 1, Phase.RUNNING)
    assert f"command pid {command.pid}" in view.scheduler_state
    assert gone(command) is None

    stop = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="enough")
    backend.dispatch_stop(object_id, stop)
    assert gone(command) is not None  # SIGTERM ignored: killed after the grace
    (view,) = backend.dispatch_discover(["job-deleted"]).objects
    assert view.phase is Phase.ENDED
    assert view.cause is not None and view.cause.kind is CauseKind.UNKNOWN
    assert "was deleted and no process of it is left" in view.cause.detail


def test_a_stop_of_survivors_waits_until_the_killed_ones_are_gone_not_until_a_scan_misses_them_S28(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An exiting process reads as having no environment before it is a zombie, so a scan
    stops finding it while ``/proc/<pid>/stat`` still says it runs: the stop waits on what
    it killed, by ``gone``, until ``gone`` says so."""
    pid = 4242
    identity = ProcessIdentity(pid=pid, start_ticks=7, boot_id="", host="here")
    scans = iter([survivors.Survivors(commands=[pid]), survivors.Survivors(commands=[pid])])

    def scan(objects: Path) -> dict[str, survivors.Survivors]:
        found = next(scans, None)  # the process while it runs, then nothing: it is exiting
        return {} if found is None else {"local-x": found}

    sent: list[tuple[int, int]] = []

    def signal(target: int, number: int, *, group: bool = False) -> None:
        sent.append((target, number))

    answers = iter([None, None, None])
    asked: list[ProcessIdentity] = []

    def gone(process: ProcessIdentity) -> str | None:
        asked.append(process)
        return next(answers, f"pid {pid} has exited (state Z)")

    monkeypatch.setattr(survivors, "scan", scan)
    monkeypatch.setattr(survivors, "_signal", signal)
    monkeypatch.setattr(survivors, "identify", lambda pid: identity)
    monkeypatch.setattr(survivors, "gone", gone)
    monkeypatch.setattr(survivors.os, "getpgid", lambda pid: pid)

    survivors.stop(tmp_path, "local-x", grace=0.0)

    assert (pid, 9) in sent  # SIGTERM ignored: killed after the grace
    assert asked == [identity] * 4  # asked until it answered gone, and no further
