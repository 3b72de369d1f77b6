"""The local backend carries out a job's warning and gives it a checkpoint directory that
survives resubmissions (S-44, S-45), with real processes."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from dispatch import Cause, CauseKind, JobSpec, ObjectView, Phase, Provenance, Resources
from dispatch.local.backend import LocalBackend
from dispatch.warning_text import parse_warning
from endings.endings_files import wait_for

#: traps the warning, writes a checkpoint in DISPATCH_CHECKPOINT_DIR and exits 0
CHECKPOINTING = """#!/bin/sh
echo "execution resumed=$DISPATCH_RESUMED dir=$DISPATCH_CHECKPOINT_DIR" >> "$OUT"
trap 'echo "warned; checkpoint written" > "$DISPATCH_CHECKPOINT_DIR/ckpt"; exit 0' USR1
echo ready >> "$OUT"
while :; do sleep 0.1; done
"""


def ended(view: ObjectView) -> bool:
    return view.phase is Phase.ENDED


def spec(tmp_path: Path, script: str = CHECKPOINTING, **fields: object) -> JobSpec:
    return JobSpec(script=script, env={"OUT": str(tmp_path / "out")}, **fields)  # type: ignore[arg-type]


def test_a_job_that_checkpoints_on_the_warning_and_exits_0_ended_by_its_time_limit_S45(
    local: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    job = spec(
        tmp_path,
        warn=parse_warning("USR1@2s"),
        resources=Resources(time_limit=timedelta(seconds=4)),
    )
    oid = local.dispatch_submit("job-warned", 1, job, False)
    view = settle(oid, "job-warned", ended)
    assert view.cause is not None
    assert view.cause.kind is CauseKind.TIME_LIMIT, view.cause
    assert view.cause.provenance is Provenance.SCHEDULER
    assert view.cause.exit_code == 0
    detail = view.cause.detail
    assert "time limit of 0:00:04 reached: warned with SIGUSR1 2s before it" in detail
    assert "sent SIGUSR1 to its process group" in detail and "SIGKILL" not in detail
    assert detail.endswith("; the command ended: exited with code 0")
    ckpt_dir = Path(wait_for(tmp_path / "out").split("dir=")[1].split()[0])
    assert (ckpt_dir / "ckpt").read_text() == "warned; checkpoint written\n"


def test_a_job_ignoring_the_warning_is_killed_at_the_limit_S45(
    local: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    script = "trap '' USR1 TERM\necho ready >> \"$OUT\"\nwhile :; do sleep 0.1; done\n"
    job = spec(
        tmp_path,
        script,
        warn=parse_warning("USR1@1"),
        resources=Resources(time_limit=timedelta(seconds=3)),
    )
    oid = local.dispatch_submit("job-stubborn", 1, job, False)
    view = settle(oid, "job-stubborn", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.TIME_LIMIT
    assert "sent SIGUSR1 to its process group, then SIGKILL after a grace of 1s" in (
        view.cause.detail
    )
    assert view.cause.detail.endswith("killed by signal 9 (SIGKILL)")


def test_dispatch_stop_sends_the_warning_first_and_the_ending_stays_the_stop_S45(
    local: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    job = spec(tmp_path, warn=parse_warning("USR1@30s"))
    oid = local.dispatch_submit("job-stopped", 1, job, False)
    assert "ready" in wait_for(tmp_path / "out")
    local.dispatch_stop(
        oid,
        Cause(
            kind=CauseKind.CANCELLED,
            provenance=Provenance.ACTOR,
            actor="alice",
            detail="cancelled by alice",
        ),
    )
    view = settle(oid, "job-stopped", ended)
    assert view.cause is not None and view.cause.kind is CauseKind.CANCELLED
    assert "cancelled by alice; sent SIGUSR1 to its process group" in view.cause.detail
    assert view.cause.exit_code == 0


def test_the_checkpoint_dir_is_the_jobs_own_0700_and_survives_resubmissions_S44(
    local: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    show = JobSpec(
        command=("sh", "-c", 'echo "$DISPATCH_CHECKPOINT_DIR $DISPATCH_RESUMED" >> "$OUT"'),
        env={"OUT": str(tmp_path / "out")},
    )
    first = local.dispatch_submit("job-ck", 1, show, False)
    settle(first, "job-ck", ended)
    second = local.dispatch_submit("job-ck", 2, show, False)
    settle(second, "job-ck", ended)
    other = local.dispatch_submit("job-other", 1, show, False)
    settle(other, "job-other", ended)
    (one, r1), (two, r2), (three, r3) = (
        line.split() for line in (tmp_path / "out").read_text().splitlines()
    )
    assert one == two != three
    assert (r1, r2, r3) == ("0", "1", "0")
    assert stat.S_IMODE(os.stat(one).st_mode) == 0o700
    assert Path(one).is_relative_to(local.state.root)


def test_a_given_checkpoint_dir_is_created_0700_and_passed_on_S44(
    local: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    wanted = tmp_path / "ckpts" / "run-1"
    show = JobSpec(
        command=("sh", "-c", 'echo "$DISPATCH_CHECKPOINT_DIR" >> "$OUT"'),
        env={"OUT": str(tmp_path / "out")},
        checkpoint_dir=str(wanted),
    )
    oid = local.dispatch_submit("job-given", 1, show, False)
    settle(oid, "job-given", ended)
    assert (tmp_path / "out").read_text() == f"{wanted}\n"
    assert stat.S_IMODE(os.stat(wanted).st_mode) == 0o700
