"""What a person asks through the CLI, as events to append (S-14, S-18). Pure.

Each function refuses, with advice, a request the job's state does not allow, and
changes nothing; otherwise it returns the events to append at ``job.version``. ``by`` is
who the asking process is (its real uid and database role, a fact the caller passes in):
recorded beside the actor's name, which comes from ``LOGNAME`` and proves nothing.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.cause import Cause
from dispatch.core.job import Job
from dispatch.model.enums import CauseKind, Provenance, Resolution, State
from dispatch.model.errors import NotAllowed
from dispatch.model.events import (
    CancelRequested,
    EscalationRaised,
    Event,
    HoldResolved,
    Identity,
    OutcomeCommitted,
    SupersededBy,
)


def _next(job: Job, k: int = 1) -> int:
    return job.version + k


def named(actor: str, by: Identity | None) -> str:
    """``alice (uid 1001)``: the actor's name and, when known, who the process really was."""
    return f"{actor} ({by.describe()})" if by is not None else actor


def _refuse_terminal(job: Job) -> None:
    if job.outcome is not None:
        raise NotAllowed(
            f"job {job.job_id} is already {job.outcome.state.value}; a committed outcome never "
            f"changes. To run it again use `dispatch supersede {job.job_id}`."
        )


def cancel(
    job: Job, *, actor: str, now: datetime, detail: str = "", by: Identity | None = None
) -> list[Event]:
    _refuse_terminal(job)
    if job.cancel is not None:
        return []  # already asked: cancelling twice is not an error
    cause = Cause(
        kind=CauseKind.CANCELLED,
        provenance=Provenance.ACTOR,
        actor=actor,
        detail=detail or f"cancelled by {named(actor, by)}",
        at=now,
    )
    return [
        CancelRequested(job_id=job.job_id, seq=_next(job), at=now, actor=actor, cause=cause, by=by)
    ]


def current_hold(job: Job) -> int | None:
    """The sequence number of the hold-placed event of the job's current hold: what a
    resubmit or give-up names as the hold it resolves, so two racing requests cannot both
    resolve it."""
    if job.hold is None:
        return None
    placed = [t.seq for t in job.history if t.event == "hold-placed"]
    return placed[-1] if placed else None


def _require_hold(job: Job, verb: str, hold: int | None = None) -> None:
    """Refuse unless the job is held, and (``hold`` given) held by that very hold: a
    request made against a hold someone else resolved meanwhile resolves nothing else."""
    if hold is not None and current_hold(job) != hold:
        raise HoldResolvedMeanwhile(job, hold, verb)
    _refuse_terminal(job)
    if job.hold is None:
        raise NotAllowed(
            f"job {job.job_id} is not held, so there is nothing to {verb}; "
            f"see `dispatch status {job.job_id}`"
        )


class HoldResolvedMeanwhile(NotAllowed):
    """The hold a request named was resolved by another request first (two people, or
    two terminals, resubmitting at once): this one does nothing, rather than a second
    submission."""

    def __init__(self, job: Job, hold: int, verb: str) -> None:
        later = [t for t in job.history if t.seq > hold and t.event == "hold-resolved"]
        if later:
            first = later[0]
            how = (
                f"already resolved ({first.note or 'resolved'}) by {first.actor or 'someone'} "
                f"at seq {first.seq}"
            )
        else:
            how = "no longer the job's hold"
        now = current_hold(job)
        then = f"; the job is held again by the hold placed at seq {now}" if now else ""
        super().__init__(
            f"job {job.job_id}: the hold placed at seq {hold} that this {verb} was for is "
            f"{how}{then}; nothing was done. See `dispatch status {job.job_id}`."
        )


def resubmit(
    job: Job, *, actor: str, now: datetime, hold: int | None = None, by: Identity | None = None
) -> list[Event]:
    """Release a recovery hold with a new submission (spends no budget: a person chose it).

    :param hold: the hold this request resolves (:func:`current_hold` when the person
        looked); another hold, or none, refuses it.
    """
    _require_hold(job, "resubmit", hold)
    return [_resolved(job, Resolution.RESUBMIT, actor, now, by)]


def _resolved(
    job: Job, resolution: Resolution, actor: str, now: datetime, by: Identity | None
) -> HoldResolved:
    return HoldResolved(
        job_id=job.job_id, seq=_next(job), at=now, actor=actor, resolution=resolution, by=by
    )


def give_up(
    job: Job, *, actor: str, now: datetime, hold: int | None = None, by: Identity | None = None
) -> list[Event]:
    """End a held job as failed, with the cause that ended its execution (S-14)."""
    _require_hold(job, "give up", hold)
    assert job.hold is not None
    return [
        _resolved(job, Resolution.GIVE_UP, actor, now, by),
        EscalationRaised(
            job_id=job.job_id,
            seq=_next(job, 2),
            at=now,
            actor=actor,
            reason=f"{named(actor, by)} gave up",
            cause=job.hold.cause,
            by=by,
        ),
        OutcomeCommitted(
            job_id=job.job_id,
            seq=_next(job, 3),
            at=now,
            actor=actor,
            state=State.FAILED,
            cause=job.hold.cause,
            by=by,
        ),
    ]


def check_supersede(job: Job) -> None:
    """Only a finished job can be run again as a new one (S-18)."""
    if job.outcome is None:
        raise NotAllowed(
            f"job {job.job_id} is not finished ({'held' if job.hold else 'active'}); "
            f"supersede runs a finished job again. Cancel it first: `dispatch cancel {job.job_id}`."
        )


def supersede(
    job: Job, *, new_job_id: str, actor: str, now: datetime, by: Identity | None = None
) -> list[Event]:
    """Link a terminal job to the new job that runs it again; its outcome stays (S-18)."""
    check_supersede(job)
    return [
        SupersededBy(
            job_id=job.job_id, seq=_next(job), at=now, actor=actor, new_job_id=new_job_id, by=by
        )
    ]
