"""Gates and stops on the local backend (S-28, S-30, S-36), with real processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch import BadInput, Cause, CauseKind, JobSpec, ObjectView, Phase, Provenance
from dispatch.local.backend import LocalBackend
from dispatch.local.records import ProcessIdentity

ALICE = Cause(
    kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="alice", detail="not needed"
)


def ended(view: ObjectView) -> bool:
    return view.phase is Phase.ENDED


def running(view: ObjectView) -> bool:
    return view.phase is Phase.RUNNING


def test_gated_object_starts_only_when_its_gate_opens_S28(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    """S-28: a gated object is held at the scheduler until dispatch opens its gate."""
    marker = tmp_path / "ran"
    spec = JobSpec(command=("touch", str(marker)))
    object_id = backend.dispatch_submit("job-gated", 2, spec, True)
    deadline = time.monotonic() + 1.0  # five times the runner's gate poll
    while time.monotonic() < deadline:
        (view,) = backend.dispatch_discover(["job-gated"]).objects
        assert view.phase is Phase.GATED, view
        assert view.scheduler_state == "gated"
        assert view.executions == ()
        assert not marker.exists()
        time.sleep(0.1)
    backend.dispatch_open_gate(object_id)
    backend.dispatch_open_gate(object_id)  # idempotent
    view = settle("job-gated", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.NONE
    assert view.submission == 2
    assert marker.exists()
    backend.dispatch_open_gate(object_id)  # the gate of an ended object: not an error


def test_ungated_object_is_never_shown_gated(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    backend.dispatch_submit("job-open", 1, JobSpec(command=("sleep", "30")), False)
    seen: list[Phase] = []

    def record(view: ObjectView) -> bool:
        seen.append(view.phase)
        return view.phase is Phase.RUNNING

    settle("job-open", record)
    assert Phase.GATED not in seen
    assert set(seen) <= {Phase.PENDING, Phase.RUNNING}


def test_stop_kills_a_command_that_ignores_sigterm_after_the_grace_S30(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    wait_file: Callable[[Path], str],
    tmp_path: Path,
) -> None:
    """S-30: stop ends the object within a bounded time, whatever the command does."""
    ready = tmp_path / "ready"
    spec = JobSpec(script=f"trap '' TERM\necho yes > {ready}\nsleep 30\n")
    object_id = backend.dispatch_submit("job-stubborn", 1, spec, False)
    wait_file(ready)
    backend.dispatch_stop(object_id, ALICE)
    (view,) = backend.dispatch_discover(["job-stubborn"]).objects  # stop waited for the end
    assert view.phase is Phase.ENDED
    assert view.scheduler_state == "cancelled"
    assert view.cause is not None
    assert view.cause.kind is CauseKind.CANCELLED
    assert view.cause.provenance is Provenance.ACTOR
    assert view.cause.actor == "alice"
    assert view.cause.detail.startswith("not needed; sent SIGTERM to its process group")
    assert "then SIGKILL after a grace of 0.5s" in view.cause.detail
    assert view.cause.detail.endswith("killed by signal 9 (SIGKILL)")
    assert view.executions[0].cause == view.cause


def test_stop_of_a_command_that_obeys_sigterm_needs_no_sigkill_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    object_id = backend.dispatch_submit("job-polite", 1, JobSpec(command=("sleep", "30")), False)
    settle("job-polite", running)
    backend.dispatch_stop(object_id, ALICE)
    (view,) = backend.dispatch_discover(["job-polite"]).objects
    assert view.cause is not None
    assert view.cause.kind is CauseKind.CANCELLED
    assert view.cause.detail == (
        "not needed; sent SIGTERM to its process group; "
        "the command ended: killed by signal 15 (SIGTERM)"
    )


def test_stopping_twice_keeps_the_first_ending_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    """S-30: stop is idempotent; a second stop changes nothing."""
    object_id = backend.dispatch_submit("job-twice", 1, JobSpec(command=("sleep", "30")), False)
    settle("job-twice", running)
    backend.dispatch_stop(object_id, ALICE)
    (first,) = backend.dispatch_discover(["job-twice"]).objects
    bob = Cause(kind=CauseKind.DUPLICATE, provenance=Provenance.SCHEDULER, actor="bob")
    backend.dispatch_stop(object_id, bob)
    (second,) = backend.dispatch_discover(["job-twice"]).objects
    assert second == first
    assert first.cause is not None and first.cause.actor == "alice"


def test_stopping_an_ended_object_changes_nothing_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    object_id = backend.dispatch_submit("job-done", 1, JobSpec(command=("true",)), False)
    before = settle("job-done", ended)
    backend.dispatch_stop(object_id, ALICE)
    (after,) = backend.dispatch_discover(["job-done"]).objects
    assert after == before
    assert after.cause is not None and after.cause.kind is CauseKind.NONE


def test_stopping_an_unknown_object_is_not_an_error_S30(backend: LocalBackend) -> None:
    backend.dispatch_stop("local-000000000000", ALICE)
    backend.dispatch_open_gate("local-000000000000")
    assert backend.dispatch_discover(["anything"]).objects == ()


def test_stopping_a_gated_object_cancels_it_before_it_runs_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    object_id = backend.dispatch_submit(
        "job-gated-stop", 1, JobSpec(command=("touch", str(marker))), True
    )
    settle("job-gated-stop", lambda v: v.phase is Phase.GATED)
    backend.dispatch_stop(object_id, ALICE)
    (view,) = backend.dispatch_discover(["job-gated-stop"]).objects
    assert view.phase is Phase.ENDED
    assert view.cause is not None
    assert view.cause.kind is CauseKind.CANCELLED
    assert view.cause.detail == "not needed; stopped before its gate opened"
    assert view.executions == ()
    backend.dispatch_open_gate(object_id)  # too late: nothing runs
    (again,) = backend.dispatch_discover(["job-gated-stop"]).objects
    assert again == view
    assert not marker.exists()


def test_stop_without_words_says_what_asked_for_it_S30(
    backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    object_id = backend.dispatch_submit("job-dup", 1, JobSpec(command=("sleep", "30")), False)
    settle("job-dup", running)
    duplicate = Cause(kind=CauseKind.DUPLICATE, provenance=Provenance.SCHEDULER)
    backend.dispatch_stop(object_id, duplicate)
    (view,) = backend.dispatch_discover(["job-dup"]).objects
    assert view.cause is not None
    assert view.cause.kind is CauseKind.CANCELLED
    assert view.cause.detail.startswith("stopped by dispatch (cause duplicate); ")


@pytest.mark.parametrize("bad", ["../../etc", "local-xyz", "", "local-00000000000g"])
def test_a_malformed_object_id_is_refused_and_named_S36(backend: LocalBackend, bad: str) -> None:
    """S-36: an id that is not ours never becomes a path; the error names it."""
    with pytest.raises(BadInput, match="is not a local object id") as stop_error:
        backend.dispatch_stop(bad, ALICE)
    assert repr(bad) in str(stop_error.value)
    with pytest.raises(BadInput, match="is not a local object id"):
        backend.dispatch_open_gate(bad)


def _runner_pid(state_dir: Path, object_id: str) -> int:
    record = (state_dir / "objects" / object_id / "runner.json").read_text()
    return ProcessIdentity.model_validate_json(record).pid


@pytest.mark.parametrize("gated", [False, True])
def test_a_signal_to_the_runner_from_a_user_is_a_cancel_outside_dispatch_S12(
    backend: LocalBackend, settle: Callable[..., ObjectView], state_dir: Path, gated: bool
) -> None:
    """S-12: a cancel that reached the scheduler without dispatch asking is ``cancelled``
    with provenance scheduler, naming who sent it (the local ``scancel``)."""
    job = f"job-kill-runner-{gated}"
    object_id = backend.dispatch_submit(job, 1, JobSpec(command=("sleep", "30")), gated)
    record = state_dir / "objects" / object_id / "runner.json"
    settle(job, lambda v: record.exists() and v.phase is (Phase.GATED if gated else Phase.RUNNING))
    runner = _runner_pid(state_dir, object_id)
    os.kill(runner, signal.SIGTERM)
    view = settle(job, ended)
    assert view.scheduler_state == "cancelled"
    assert view.cause is not None
    assert view.cause.kind is CauseKind.CANCELLED
    assert view.cause.provenance is Provenance.SCHEDULER
    assert view.cause.detail.startswith(
        f"cancelled outside dispatch: the local runner (pid {runner}) received "
        f"signal 15 (SIGTERM) from pid {os.getpid()} (uid {os.getuid()}); "
    )
    if gated:
        assert view.cause.detail.endswith("; stopped before its gate opened")
        assert view.executions == ()
    else:
        assert view.cause.detail.endswith("the command ended: killed by signal 15 (SIGTERM)")
        assert view.executions[0].cause == view.cause
