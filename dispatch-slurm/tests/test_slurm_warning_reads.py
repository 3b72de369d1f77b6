"""Offline: discovery reads an ended object's ``warnings`` file once (S-45),
a running object's at every discovery."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, Execution, ObjectView, Phase, Provenance
from dispatch_slurm.launch import log_dir
from dispatch_slurm.warning import reclassify

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LINE = "execution=0 signal=SIGUSR1 time_left=0:41 time_limit=1:00 at=2026-12-01T09:00:19Z\n"


def ended(job: str, kind: CauseKind, object_id: str = "42") -> ObjectView:
    cause = Cause(kind=kind, provenance=Provenance.APPLICATION, detail=f"{kind.value} here")
    return ObjectView(
        object_id=object_id,
        job_id=job,
        submission=1,
        phase=Phase.ENDED,
        scheduler_state="COMPLETED",
        cause=cause,
        executions=(Execution(index=0, started_at=AT, cause=cause),),
    )


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path))
    return tmp_path


def test_an_ended_objects_words_are_read_once_and_kept_S45(logs: Path) -> None:
    directory = log_dir("j-once", 1)
    directory.mkdir(parents=True)
    (directory / "warnings").write_text(LINE)
    (first,) = reclassify([ended("j-once", CauseKind.NONE)])
    (directory / "warnings").unlink()  # a cleaned log directory does not undo the ending
    (again,) = reclassify([ended("j-once", CauseKind.NONE)])
    assert first.cause is not None and first.cause.kind is CauseKind.TIME_LIMIT
    assert again == first


def test_a_running_objects_words_are_read_at_every_discovery_S45(logs: Path) -> None:
    """A running object's file may still get its line: it is never kept."""
    directory = log_dir("j-running", 1)
    directory.mkdir(parents=True)
    done = Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, detail="exit 0")
    requeued = ObjectView(
        object_id="43",
        job_id="j-running",
        submission=1,
        phase=Phase.RUNNING,
        scheduler_state="RUNNING",
        executions=(
            Execution(index=0, started_at=AT, cause=done),
            Execution(index=1, started_at=AT),
        ),
    )
    assert reclassify([requeued]) == [requeued]
    (directory / "warnings").write_text(LINE)
    (out,) = reclassify([requeued])
    cause = out.executions[0].cause
    assert cause is not None and cause.kind is CauseKind.TIME_LIMIT
