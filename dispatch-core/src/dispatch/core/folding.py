"""``fold(events) -> Job``: replay a job's record (S-20). Pure.

One applier per event class (``@_applies(SubmissionRequested)``...), over a typed mutable
scratch copy that becomes a frozen ``Job`` once at the end: building a frozen model per
event would cost more than the decode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from dispatch.core.cause import Cause
from dispatch.core.job import Escalation, Hold, Job, Outcome, Submission, Transition
from dispatch.enums import Enforcer, Resolution, State
from dispatch.errors import DecodeError
from dispatch.events import (
    CancelRequested,
    EscalationRaised,
    Event,
    GateOpened,
    HoldPlaced,
    HoldResolved,
    JobCreated,
    ObjectFound,
    ObjectMissing,
    OutcomeCommitted,
    RecoveryStarted,
    StopRequested,
    SubmissionCreated,
    SubmissionFailed,
    SubmissionRequested,
    SupersededBy,
)


@dataclass(slots=True)
class _Draft:
    """A submission being folded: a mutable ``Submission`` (same fields, same defaults;
    slots and a spelled-out ``freeze``: a fold makes many, and the collector scans them)."""

    number: int
    requested_at: datetime
    gated: bool = False
    object_id: str | None = None
    adopted: bool = False
    failed: Cause | None = None
    gate_opened: bool = False
    stopped: dict[str, Cause] = field(default_factory=dict)
    missing_since: datetime | None = None
    handled: bool = False
    native_recoveries: tuple[int, ...] = ()
    ended_by: Cause | None = None
    exclude_nodes: frozenset[str] = frozenset()

    def freeze(self) -> Submission:
        return Submission.trusted(
            number=self.number,
            requested_at=self.requested_at,
            gated=self.gated,
            object_id=self.object_id,
            adopted=self.adopted,
            failed=self.failed,
            gate_opened=self.gate_opened,
            stopped=self.stopped,
            missing_since=self.missing_since,
            handled=self.handled,
            native_recoveries=self.native_recoveries,
            ended_by=self.ended_by,
            exclude_nodes=self.exclude_nodes,
        )


class _Scratch:
    """A job being folded: mutable, typed, frozen into a ``Job`` once at the end."""

    def __init__(self, created: JobCreated) -> None:
        self.created = created
        self.version = created.seq
        self.submissions: list[_Draft] = []
        self.spent: dict[int, int] = {}
        self.awaiting = False
        self.hold: Hold | None = None
        self.cancel: Cause | None = None
        self.escalations: list[Escalation] = []
        self.outcome: Outcome | None = None
        self.history: list[Transition] = []
        self.superseded_by: list[str] = []

    def submission(self, number: int, event: Event) -> _Draft:
        for sub in self.submissions:
            if sub.number == number:
                return sub
        raise DecodeError(
            f"record of job {event.job_id!r}: event {event.seq} ({event.type}) names "
            f"submission {number}, which was never requested",
            field="submission",
            value=number,
        )

    def note(self, event: Event, state: State | None, cause: Cause | None, note: str = "") -> None:
        self.history.append(
            Transition.trusted(
                seq=event.seq,
                at=event.at,
                event=event.type,
                state=state,
                cause=cause,
                actor=event.actor,
                note=note,
            )
        )

    def freeze(self) -> Job:
        # every value was built here from validated events: skip validating it again
        c = self.created
        return Job.trusted(
            job_id=c.job_id,
            name=c.name,
            backend=c.backend,
            spec=c.spec,
            plan=c.plan,
            created_at=c.at,
            version=self.version,
            submissions=tuple(s.freeze() for s in self.submissions),
            spent=dict(self.spent),
            awaiting_submission=self.awaiting,
            hold=self.hold,
            cancel=self.cancel,
            escalations=tuple(self.escalations),
            outcome=self.outcome,
            history=tuple(self.history),
            supersedes=c.supersedes,
            superseded_by=tuple(self.superseded_by),
        )


_E = TypeVar("_E", bound=BaseModel)
_Applier = Callable[[_Scratch, _E], None]
#: One applier per event class; fold looks the class up (job-created starts the fold).
APPLY: dict[type[BaseModel], _Applier[Any]] = {}


def _applies(cls: type[_E]) -> Callable[[_Applier[_E]], _Applier[_E]]:
    def register(fn: _Applier[_E]) -> _Applier[_E]:
        APPLY[cls] = fn
        return fn

    return register


@_applies(SubmissionRequested)
def _requested(s: _Scratch, e: SubmissionRequested) -> None:
    s.awaiting = False
    s.submissions.append(
        _Draft(
            number=e.submission,
            requested_at=e.at,
            gated=e.gated,
            exclude_nodes=e.exclude_nodes,
        )
    )


@_applies(SubmissionCreated)
def _created(s: _Scratch, e: SubmissionCreated) -> None:
    sub = s.submission(e.submission, e)
    sub.object_id = e.object_id
    sub.adopted = e.adopted


@_applies(SubmissionFailed)
def _failed(s: _Scratch, e: SubmissionFailed) -> None:
    s.submission(e.submission, e).failed = e.cause


@_applies(GateOpened)
def _gate(s: _Scratch, e: GateOpened) -> None:
    s.submission(e.submission, e).gate_opened = True


@_applies(StopRequested)
def _stop(s: _Scratch, e: StopRequested) -> None:
    sub = s.submission(e.submission, e)
    sub.stopped = {**sub.stopped, e.object_id: e.cause}


@_applies(ObjectMissing)
def _missing(s: _Scratch, e: ObjectMissing) -> None:
    s.submission(e.submission, e).missing_since = e.at


@_applies(ObjectFound)
def _found(s: _Scratch, e: ObjectFound) -> None:
    s.submission(e.submission, e).missing_since = None


@_applies(RecoveryStarted)
def _recovery(s: _Scratch, e: RecoveryStarted) -> None:
    s.spent[e.rule] = s.spent.get(e.rule, 0) + 1
    sub = s.submission(e.submission, e)
    if e.enforcer is Enforcer.BACKEND and e.execution is not None:
        sub.native_recoveries = (*sub.native_recoveries, e.execution)
    else:
        sub.handled = True
        sub.ended_by = e.cause
        s.awaiting = True
    s.note(
        e, State.RECOVERING, e.cause, f"{e.action.value} by {e.enforcer.value} (rule {e.rule + 1})"
    )


@_applies(HoldPlaced)
def _hold(s: _Scratch, e: HoldPlaced) -> None:
    if e.submission is not None:
        sub = s.submission(e.submission, e)
        sub.handled = True
        sub.ended_by = e.cause
    s.hold = Hold.trusted(since=e.at, cause=e.cause, rule=e.rule, submission=e.submission)
    s.note(e, State.HELD, e.cause, "recovery hold" if e.rule is not None else "hold")


@_applies(HoldResolved)
def _resolved(s: _Scratch, e: HoldResolved) -> None:
    if e.resolution is Resolution.RESUBMIT:
        s.awaiting = True
    s.note(e, None, None, e.resolution.value)
    s.hold = None if e.resolution is Resolution.RESUBMIT else s.hold


@_applies(CancelRequested)
def _cancel(s: _Scratch, e: CancelRequested) -> None:
    s.cancel = e.cause
    s.note(e, None, e.cause, "cancel requested")


@_applies(EscalationRaised)
def _escalation(s: _Scratch, e: EscalationRaised) -> None:
    s.escalations.append(Escalation.trusted(seq=e.seq, at=e.at, reason=e.reason, cause=e.cause))
    s.note(e, None, e.cause, e.reason)


@_applies(OutcomeCommitted)
def _outcome(s: _Scratch, e: OutcomeCommitted) -> None:
    if s.outcome is not None:  # a committed outcome never changes (S-18)
        return
    s.outcome = Outcome.trusted(seq=e.seq, at=e.at, state=e.state, cause=e.cause)
    s.hold = None
    s.awaiting = False
    for sub in s.submissions:
        sub.handled = True
    s.note(e, e.state, e.cause)


@_applies(SupersededBy)
def _superseded(s: _Scratch, e: SupersededBy) -> None:
    s.superseded_by.append(e.new_job_id)
    s.note(e, None, None, f"superseded by {e.new_job_id}")


def fold(events: Iterable[Event], job: Job | None = None) -> Job:
    """Replay ``events`` (in sequence order) into a Job; with ``job``, continue from it.

    Refuses a record that is not one job's unbroken sequence starting with job-created:
    a gap, a repeat, or an event of another job is a ``DecodeError``, never guessed around.
    """

    scratch: _Scratch | None = _thaw(job) if job is not None else None
    for event in events:
        if scratch is None:
            if not isinstance(event, JobCreated) or event.seq != 1:
                raise DecodeError(
                    f"record of job {event.job_id!r} starts with {event.type} at sequence "
                    f"{event.seq}, not job-created at 1",
                    field="type",
                    value=event.type,
                )
            scratch = _Scratch(event)
            continue
        expected = scratch.version + 1
        if event.seq != expected or event.job_id != scratch.created.job_id:
            raise DecodeError(
                f"record of job {scratch.created.job_id!r}: expected sequence {expected}, "
                f"got {event.type} {event.job_id!r} #{event.seq}",
                field="seq",
                value=event.seq,
            )
        if isinstance(event, JobCreated):
            raise DecodeError(
                f"record of job {event.job_id!r}: a second job-created at {event.seq}",
                field="type",
                value=event.type,
            )
        APPLY[type(event)](scratch, event)
        scratch.version = event.seq
    if scratch is None:
        raise DecodeError("an empty record has no job", field="events", value=[])
    return scratch.freeze()


def _thaw(job: Job) -> _Scratch:
    created = JobCreated(
        job_id=job.job_id,
        seq=1,
        at=job.created_at,
        name=job.name,
        backend=job.backend,
        spec=job.spec,
        plan=job.plan,
        supersedes=job.supersedes,
    )
    s = _Scratch(created)
    s.version = job.version
    s.submissions = [_Draft(**sub.__dict__) for sub in job.submissions]
    s.spent = dict(job.spent)
    s.awaiting = job.awaiting_submission
    s.hold = job.hold
    s.cancel = job.cancel
    s.escalations = list(job.escalations)
    s.outcome = job.outcome
    s.history = list(job.history)
    s.superseded_by = list(job.superseded_by)
    return s
