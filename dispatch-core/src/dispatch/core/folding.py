"""``fold(events) -> Job``: replay a job's record (S-20). Pure.

One applier per event class (``@_applies(SubmissionRequested)``...), over a typed mutable
scratch copy that becomes a frozen ``Job`` once at the end: building a frozen model per
event would cost more than the decode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypedDict, TypeVar, cast

from pydantic import BaseModel

from dispatch.core.cause import Cause
from dispatch.core.job import Escalation, Hold, Job, Outcome, Submission, Transition
from dispatch.model.base import build
from dispatch.model.enums import Action, Enforcer, Resolution, State
from dispatch.model.errors import DecodeError
from dispatch.model.events import (
    CancelRequested,
    EscalationRaised,
    Event,
    GateOpened,
    HoldPlaced,
    HoldResolved,
    Identity,
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


class _Draft(TypedDict):
    """A submission being folded: a ``Submission``'s fields in a plain dict, which becomes
    the frozen model's own ``__dict__`` at the end (nothing copied, nothing validated again:
    every value comes from a validated event)."""

    number: int
    requested_at: datetime
    gated: bool
    object_id: str | None
    adopted: bool
    failed: Cause | None
    gate_opened: bool
    stopped: dict[str, Cause]
    missing_since: datetime | None
    handled: bool
    native_recoveries: tuple[int, ...]
    ended_by: Cause | None
    exclude_nodes: frozenset[str]


#: The ``stopped`` of every submission nothing was stopped for: one empty dict, not one
#: each (a folded job's models are frozen, and an applier replaces, never updates, it).
_NO_STOPS: dict[str, Cause] = {}


class _Scratch:
    """A job being folded: mutable, typed, frozen into a ``Job`` once at the end."""

    __slots__ = (
        "awaiting",
        "cancel",
        "created",
        "escalations",
        "history",
        "hold",
        "numbered",
        "outcome",
        "spent",
        "submissions",
        "superseded_by",
        "version",
    )

    def __init__(self, created: JobCreated) -> None:
        self.created = created
        self.version = created.seq
        self.submissions: list[_Draft] = []
        #: the first submission of each number (what a scan of ``submissions`` finds)
        self.numbered: dict[int, _Draft] = {}
        self.spent: dict[int, int] = {}
        self.awaiting = False
        self.hold: Hold | None = None
        self.cancel: Cause | None = None
        self.escalations: list[Escalation] = []
        self.outcome: Outcome | None = None
        self.history: list[Transition] = []
        self.superseded_by: list[str] = []

    def submission(self, number: int, event: Event) -> _Draft:
        sub = self.numbered.get(number)
        if sub is not None:
            return sub
        raise DecodeError(
            f"record of job {event.job_id!r}: event {event.seq} ({event.type}) names "
            f"submission {number}, which was never requested",
            field="submission",
            value=number,
        )

    def note(self, event: Event, state: State | None, cause: Cause | None, note: str = "") -> None:
        by = getattr(event, "by", None)
        self.history.append(
            transition(event.seq, event.at, event.type, state, cause, event.actor, note, by)
        )

    def freeze(self) -> Job:
        # every value was built here from validated events: skip validating it again
        c = self.created
        return build(
            Job,
            {
                "job_id": c.job_id,
                "name": c.name,
                "backend": c.backend,
                "spec": c.spec,
                "plan": c.plan,
                "created_at": c.at,
                "version": self.version,
                "submissions": tuple(
                    [build(Submission, cast(dict[str, Any], d)) for d in self.submissions]
                ),
                "spent": self.spent,
                "awaiting_submission": self.awaiting,
                "hold": self.hold,
                "cancel": self.cancel,
                "escalations": tuple(self.escalations),
                "outcome": self.outcome,
                "history": tuple(self.history),
                "supersedes": c.supersedes,
                "superseded_by": tuple(self.superseded_by),
                "submitter": c.by,
                "group": c.group,
            },
        )


#: Transitions already built, by value: jobs of one sweep recovered in one tick share
#: them (frozen, so sharing is safe). Bounded lower than the codec's caches: each entry
#: keeps its transition and cause alive, and a supervisor holds its jobs packed
#: (:mod:`dispatch.core.compact`), so what the cache still buys there is the build saved.
_TRANSITIONS: dict[tuple[Any, ...], Transition] = {}
_LIMIT = 10_000


def forget() -> None:
    """Empty the shared transitions (benchmarks of a cold start; a process never needs to)."""
    _TRANSITIONS.clear()


def transition(
    seq: int,
    at: datetime,
    event: str,
    state: State | None,
    cause: Cause | None,
    actor: str | None,
    note: str,
    by: Identity | None = None,
) -> Transition:
    """One ``Transition``, shared with an equal one built before. The cause is keyed by
    identity (the codec hands equal causes out as one object); the cache keeps it alive,
    so an id is never reused while its key is in the cache."""
    key = (seq, at, event, state, id(cause), actor, note, by)
    known = _TRANSITIONS.get(key)
    if known is not None:
        return known
    if len(_TRANSITIONS) >= _LIMIT:
        _TRANSITIONS.clear()
    made = _TRANSITIONS[key] = build(
        Transition,
        {
            "seq": seq,
            "at": at,
            "event": event,
            "state": state,
            "cause": cause,
            "actor": actor,
            "note": note,
            "by": by,
        },
    )
    return made


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
    draft: _Draft = {
        "number": e.submission,
        "requested_at": e.at,
        "gated": e.gated,
        "object_id": None,
        "adopted": False,
        "failed": None,
        "gate_opened": False,
        "stopped": _NO_STOPS,
        "missing_since": None,
        "handled": False,
        "native_recoveries": (),
        "ended_by": None,
        "exclude_nodes": e.exclude_nodes,
    }
    s.submissions.append(draft)
    s.numbered.setdefault(e.submission, draft)


@_applies(SubmissionCreated)
def _created(s: _Scratch, e: SubmissionCreated) -> None:
    sub = s.submission(e.submission, e)
    sub["object_id"] = e.object_id
    sub["adopted"] = e.adopted


@_applies(SubmissionFailed)
def _failed(s: _Scratch, e: SubmissionFailed) -> None:
    s.submission(e.submission, e)["failed"] = e.cause


@_applies(GateOpened)
def _gate(s: _Scratch, e: GateOpened) -> None:
    s.submission(e.submission, e)["gate_opened"] = True


@_applies(StopRequested)
def _stop(s: _Scratch, e: StopRequested) -> None:
    sub = s.submission(e.submission, e)
    sub["stopped"] = {**sub["stopped"], e.object_id: e.cause}


@_applies(ObjectMissing)
def _missing(s: _Scratch, e: ObjectMissing) -> None:
    s.submission(e.submission, e)["missing_since"] = e.at


@_applies(ObjectFound)
def _found(s: _Scratch, e: ObjectFound) -> None:
    s.submission(e.submission, e)["missing_since"] = None


_BACKEND = Enforcer.BACKEND
_RECOVERING = State.RECOVERING
_NOTES: dict[tuple[Action, Enforcer, int], str] = {}


@_applies(RecoveryStarted)
def _recovery(s: _Scratch, e: RecoveryStarted) -> None:
    s.spent[e.rule] = s.spent.get(e.rule, 0) + 1
    sub = s.submission(e.submission, e)
    if e.enforcer is _BACKEND and e.execution is not None:
        sub["native_recoveries"] = (*sub["native_recoveries"], e.execution)
    else:
        sub["handled"] = True
        sub["ended_by"] = e.cause
        s.awaiting = True
    key = (e.action, e.enforcer, e.rule)
    note = _NOTES.get(key)
    if note is None:
        note = _NOTES[key] = f"{e.action.value} by {e.enforcer.value} (rule {e.rule + 1})"
    s.history.append(transition(e.seq, e.at, e.type, _RECOVERING, e.cause, e.actor, note))


@_applies(HoldPlaced)
def _hold(s: _Scratch, e: HoldPlaced) -> None:
    if e.submission is not None:
        sub = s.submission(e.submission, e)
        sub["handled"] = True
        sub["ended_by"] = e.cause
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
        sub["handled"] = True
    s.note(e, e.state, e.cause)


@_applies(SupersededBy)
def _superseded(s: _Scratch, e: SupersededBy) -> None:
    s.superseded_by.append(e.new_job_id)
    s.note(e, None, None, f"superseded by {e.new_job_id}")


def _created_again(s: _Scratch, e: JobCreated) -> None:
    raise DecodeError(
        f"record of job {e.job_id!r}: a second job-created at {e.seq}",
        field="type",
        value=e.type,
    )


#: What ``fold`` looks an event's class up in: the appliers, and the refusal of a second
#: job-created (the first one starts the fold, before the loop).
_STEPS: dict[type[BaseModel], _Applier[Any]] = {**APPLY, JobCreated: _created_again}


def fold(events: Iterable[Event], job: Job | None = None) -> Job:
    """Replay ``events`` (in sequence order) into a Job; with ``job``, continue from it.

    Refuses a record that is not one job's unbroken sequence starting with job-created:
    a gap, a repeat, or an event of another job is a ``DecodeError``, never guessed around.
    """

    rest = iter(events)
    if job is not None:
        scratch = _thaw(job)
    else:
        first = next(rest, None)
        if first is None:
            raise DecodeError("an empty record has no job", field="events", value=[])
        if not isinstance(first, JobCreated) or first.seq != 1:
            raise DecodeError(
                f"record of job {first.job_id!r} starts with {first.type} at sequence "
                f"{first.seq}, not job-created at 1",
                field="type",
                value=first.type,
            )
        scratch = _Scratch(first)
    job_id = scratch.created.job_id
    version = scratch.version
    apply = _STEPS
    for event in rest:
        version += 1
        if event.seq != version or event.job_id != job_id:
            raise DecodeError(
                f"record of job {job_id!r}: expected sequence {version}, "
                f"got {event.type} {event.job_id!r} #{event.seq}",
                field="seq",
                value=event.seq,
            )
        apply[type(event)](scratch, event)
    scratch.version = version
    return scratch.freeze()


def _thaw(job: Job) -> _Scratch:
    created = build(
        JobCreated,
        {
            "job_id": job.job_id,
            "seq": 1,
            "at": job.created_at,
            "actor": None,
            "type": "job-created",
            "name": job.name,
            "backend": job.backend,
            "spec": job.spec,
            "plan": job.plan,
            "supersedes": job.supersedes,
            "by": job.submitter,
            "group": job.group,
        },
    )
    s = _Scratch(created)
    s.version = job.version
    s.submissions = [cast(_Draft, dict(sub.__dict__)) for sub in job.submissions]
    for draft in s.submissions:
        s.numbered.setdefault(draft["number"], draft)
    s.spent = dict(job.spent)
    s.awaiting = job.awaiting_submission
    s.hold = job.hold
    s.cancel = job.cancel
    s.escalations = list(job.escalations)
    s.outcome = job.outcome
    s.history = list(job.history)
    s.superseded_by = list(job.superseded_by)
    return s
