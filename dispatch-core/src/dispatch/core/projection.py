"""``project(job, discovery, now) -> Status``: the job now (S-21, S-24, S-29). Pure.

With a record, the state is what the record committed or, when the discovery shows an
ending the record has not committed yet, what ``decide`` would commit (``settled`` is then
False); :data:`dispatch.core.table.SHOWN_TABLE` says which. So the CLI and the supervisor
can never disagree (S-40): both go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dispatch.core.cause import Cause
from dispatch.core.decisions import decide
from dispatch.core.effects import Append
from dispatch.core.folding import fold
from dispatch.core.job import Job
from dispatch.core.status import Status, SubmissionStatus
from dispatch.core.table import shown
from dispatch.model.discovery import Discovery, ObjectView
from dispatch.model.enums import Level, State
from dispatch.model.events import (
    EscalationRaised,
    Event,
    HoldPlaced,
    OutcomeCommitted,
    RecoveryStarted,
)

#: Events that commit how an ending was handled; pending ones make a Status unsettled.
_ENDING_EVENTS = (RecoveryStarted, HoldPlaced, EscalationRaised, OutcomeCommitted)


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
    ahead = look_ahead(job, discovery, now)
    state, cause = shown(ahead.job, objects)
    return _status(job, objects, now, state, cause, settled=ahead.settled)


@dataclass(frozen=True)
class Ahead:
    """The record as it will be once a supervisor has acted on one discovery: the events
    ``decide`` appends now, and the job they fold to. A request a person makes on what
    ``status`` showed (give up a job shown ``held (not yet committed)``) is made on
    ``job`` and appended after ``events``, in one append at the record's version."""

    events: tuple[Event, ...]
    job: Job

    @property
    def settled(self) -> bool:
        """False while an ending is decided but not yet committed (S-21)."""
        return not any(isinstance(e, _ENDING_EVENTS) for e in self.events)


def look_ahead(job: Job, discovery: Discovery, now: datetime) -> Ahead:
    """What the plan commits for ``job`` given ``discovery``, without committing it."""

    events = tuple(
        e
        for eff in decide(job, discovery, job.plan, now)
        if isinstance(eff, Append)
        for e in eff.events
    )
    return Ahead(events, fold(events, job) if events else job)


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
            exclude_nodes=tuple(sorted(s.exclude_nodes)),
        )
        for s in job.submissions
    )
    budgets = {
        f"rule {b.index + 1}": job.budget_left(b.index)
        for b in job.plan.bindings
        if b.rule.action.needs_budget
    }
    policy = job.plan.policy
    if policy.resubmit_on_stall is not None:  # the stall rule spends under rule N+1 (S-47)
        spent = job.spent.get(policy.stall_index, 0)
        budgets[f"rule {policy.stall_index + 1} (stall)"] = policy.resubmit_on_stall - spent
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
        exclude_nodes=subs[-1].exclude_nodes if subs else (),
        submitter=job.submitter,
        group=job.group,
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
