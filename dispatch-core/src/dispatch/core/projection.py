"""``project(job, discovery, now) -> Status``: the job now (S-21, S-24, S-29). Pure.

With a record, the state is what the record committed or, when the discovery shows an
ending the record has not committed yet, what ``decide`` would commit (``settled`` is then
False). So the CLI and the supervisor can never disagree (S-40): both go through here.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.cause import Cause
from dispatch.core.decisions import decide
from dispatch.core.effects import Append
from dispatch.core.folding import fold
from dispatch.core.job import Job
from dispatch.core.status import Status, SubmissionStatus
from dispatch.discovery import Discovery, ObjectView
from dispatch.enums import CauseKind, Level, Phase, Provenance, State

#: Events that commit how an ending was handled; pending ones make a Status unsettled.
_ENDING_EVENTS = frozenset(
    {"recovery-started", "hold-placed", "escalation-raised", "outcome-committed"}
)


def project(
    job: Job | None, discovery: Discovery, now: datetime, *, job_id: str | None = None
) -> Status:
    """The Status of ``job`` (or, with no record, of ``job_id``'s objects alone)."""

    if job is None:
        if job_id is None:
            raise ValueError("project() without a record needs the job_id")
        return _object_only(job_id, discovery, now)
    objects = discovery.of_job(job.job_id)
    if job.outcome is not None:
        return _status(job, objects, now, job.outcome.state, job.outcome.cause, settled=True)

    pending = [
        e
        for eff in decide(job, discovery, job.plan, now)
        if isinstance(eff, Append)
        for e in eff.events
    ]
    settled = not any(e.type in _ENDING_EVENTS for e in pending)
    ahead = fold(pending, job) if pending else job
    state, cause = _state(ahead, objects)
    return _status(job, objects, now, state, cause, settled=settled)


def _state(job: Job, objects: tuple[ObjectView, ...]) -> tuple[State, Cause | None]:
    if job.outcome is not None:
        return job.outcome.state, job.outcome.cause
    if job.hold is not None:
        return State.HELD, job.hold.cause
    waiting = State.RECOVERING if _has_recovered(job) else State.PENDING
    current = job.current
    last = _last_recovery_cause(job)
    if current is None or job.awaiting_submission:
        return waiting, last
    if current.failed is not None:
        return waiting, current.failed
    obj = next(
        (
            o
            for o in objects
            if o.submission == current.number
            and (current.object_id is None or o.object_id == current.object_id)
        ),
        None,
    )
    if obj is None:
        if current.object_id is not None and current.missing_since is not None:
            return State.UNKNOWN, Cause(
                kind=CauseKind.UNKNOWN,
                provenance=Provenance.SCHEDULER,
                detail=f"object {current.object_id} is not listed by the backend",
                at=current.missing_since,
            )
        return waiting, last
    if obj.phase is Phase.RUNNING:
        node_lost = obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST
        return State.RUNNING, obj.cause if node_lost else None  # S-26
    if obj.phase is Phase.HELD:
        return State.HELD, obj.cause  # a hold dispatch did not place (S-37)
    ended = [e.cause for e in obj.executions if e.cause is not None]
    if obj.phase is Phase.PENDING and ended:
        return State.RECOVERING, ended[-1]  # waiting to run again after a native recovery (S-38)
    if obj.phase is Phase.ENDED:
        return State.UNKNOWN, obj.cause
    # gated or pending: the scheduler's reason if it gives one (S-39), else why we recover
    return waiting, obj.cause or last


def _last_recovery_cause(job: Job) -> Cause | None:
    for step in reversed(job.history):
        if step.state in (State.RECOVERING, State.HELD) and step.cause is not None:
            return step.cause
    return None


def _has_recovered(job: Job) -> bool:
    return (
        len(job.submissions) > 1
        or job.awaiting_submission
        or any(s.native_recoveries for s in job.submissions)
    )


def _status(
    job: Job,
    objects: tuple[ObjectView, ...],
    now: datetime,
    state: State,
    cause: Cause | None,
    *,
    settled: bool,
) -> Status:
    subs = tuple(
        SubmissionStatus(
            number=s.number,
            object_id=s.object_id,
            gated=s.gated,
            gate_opened=s.gate_opened,
            failed=s.failed,
            objects=tuple(o for o in objects if o.submission == s.number),
        )
        for s in job.submissions
    )
    budgets = {
        f"rule {b.index + 1}": job.budget_left(b.index)
        for b in job.plan.bindings
        if b.rule.action.needs_budget
    }
    return Status(
        job_id=job.job_id,
        name=job.name,
        backend=job.backend,
        state=state,
        cause=cause,
        level=Level.RECORD,
        settled=settled,
        at=now,
        history=job.history,
        submissions=subs,
        escalations=job.escalations,
        supersedes=job.supersedes,
        superseded_by=job.superseded_by,
        budgets=budgets,
    )


def _object_only(job_id: str, discovery: Discovery, now: datetime) -> Status:
    """S-29: no record, so never terminal: running if any object is alive, else pending."""

    objects = discovery.of_job(job_id)
    alive = [o for o in objects if o.alive]
    state = State.RUNNING if alive else State.PENDING
    numbers = sorted({o.submission for o in objects})
    subs = tuple(
        SubmissionStatus(number=n, objects=tuple(o for o in objects if o.submission == n))
        for n in numbers
    )
    newest = max(objects, key=lambda o: o.submission, default=None)
    return Status(
        job_id=job_id,
        backend=discovery.backend,
        state=state,
        cause=newest.cause if newest is not None else None,
        level=Level.OBJECT_ONLY,
        settled=True,
        at=now,
        submissions=subs,
    )
