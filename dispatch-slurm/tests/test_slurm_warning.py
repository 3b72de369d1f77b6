"""Offline: how the wrapper's ``warnings`` line turns an execution's own ending into the
time limit's (S-45), and what is left alone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, Execution, ObjectView, Phase, Provenance
from dispatch_slurm.launch import log_dir
from dispatch_slurm.warning import reclassify, warnings

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LINE = "execution=1 signal=SIGUSR1 time_left=0:41 time_limit=1:00 at=2026-12-01T09:00:19Z\n"


def ended(kind: CauseKind, detail: str, code: int = 0) -> Cause:
    return Cause(kind=kind, provenance=Provenance.APPLICATION, detail=detail, exit_code=code)


def view(job: str, *causes: Cause | None) -> ObjectView:
    executions = tuple(Execution(index=i, started_at=AT, cause=c) for i, c in enumerate(causes))
    last = causes[-1]
    return ObjectView(
        object_id="42",
        job_id=job,
        submission=1,
        phase=Phase.ENDED if last is not None else Phase.RUNNING,
        scheduler_state="COMPLETED",
        cause=last,
        executions=executions,
    )


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path))
    return tmp_path


def test_an_exit_after_the_warning_is_the_time_limit_with_both_words_S45(logs: Path) -> None:
    directory = log_dir("j-warned", 1)
    directory.mkdir(parents=True)
    (directory / "warnings").write_text(LINE)
    assert warnings("j-warned", 1) == {1: LINE.split("signal=", 1)[1].strip()}
    first = Cause(kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER, detail="PREEMPTED")
    done = ended(CauseKind.NONE, "COMPLETED, exit code 0")
    (out,) = reclassify([view("j-warned", first, done)])
    assert out.executions[0].cause == first  # no line for execution 0: left as it is
    cause = out.executions[1].cause
    assert cause is not None and cause.kind is CauseKind.TIME_LIMIT
    assert cause.provenance is Provenance.SCHEDULER and cause.exit_code == 0
    assert cause.detail == (
        "time limit: Slurm sent the warning SIGUSR1 time_left=0:41 time_limit=1:00 "
        "at=2026-12-01T09:00:19Z; the job then ended by itself: COMPLETED, exit code 0"
    )
    assert out.cause == cause


def test_a_non_zero_exit_after_the_warning_is_the_time_limit_too_S45(logs: Path) -> None:
    directory = log_dir("j-failed", 1)
    directory.mkdir(parents=True)
    (directory / "warnings").write_text(LINE.replace("execution=1", "execution=0"))
    (out,) = reclassify([view("j-failed", ended(CauseKind.NON_ZERO_EXIT, "FAILED 3:0", 3))])
    assert out.cause is not None and out.cause.kind is CauseKind.TIME_LIMIT
    assert out.cause.exit_code == 3 and "FAILED 3:0" in out.cause.detail


def test_without_a_line_or_when_the_scheduler_ended_it_nothing_changes(logs: Path) -> None:
    plain = view("j-plain", ended(CauseKind.NONE, "COMPLETED"))
    assert reclassify([plain]) == [plain]
    directory = log_dir("j-timeout", 1)
    directory.mkdir(parents=True)
    (directory / "warnings").write_text(LINE.replace("execution=1", "execution=0"))
    timeout = Cause(kind=CauseKind.TIME_LIMIT, provenance=Provenance.SCHEDULER, detail="TIMEOUT")
    killed = view("j-timeout", timeout)
    assert reclassify([killed]) == [killed]
    running = view("j-timeout", None)
    assert reclassify([running]) == [running]
