"""``fold(events) -> Job``: replay a job's record (S-20). Pure.

One ``_apply_*`` per event type, over a mutable scratch copy that becomes a frozen ``Job``
once at the end: building a frozen model per event would cost more than the decode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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


class _Scratch:
    def __init__(self, created: JobCreated) -> None:
        self.fields: dict[str, Any] = {
            "job_id": created.job_id,
            "name": created.name,
            "backend": created.backend,
            "spec": created.spec,
            "plan": created.plan,
            "created_at": created.at,
            "version": created.seq,
            "supersedes": created.supersedes,
        }
        self.submissions: list[dict[str, Any]] = []
        self.spent: dict[int, int] = {}
        self.awaiting = False
        self.hold: Hold | None = None
        self.cancel: Cause | None = None
        self.escalations: list[Escalation] = []
        self.outcome: Outcome | None = None
        self.history: list[Transition] = []
        self.superseded_by: list[str] = []

    def submission(self, number: int, event: Event) -> dict[str, Any]:
        for sub in self.submissions:
            if sub["number"] == number:
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
        return Job.trusted(
            **dict(
                **self.fields,
                submissions=tuple(Submission.trusted(**s) for s in self.submissions),
                spent=dict(self.spent),
                awaiting_submission=self.awaiting,
                hold=self.hold,
                cancel=self.cancel,
                escalations=tuple(self.escalations),
                outcome=self.outcome,
                history=tuple(self.history),
                superseded_by=tuple(self.superseded_by),
            )
        )


def _requested(s: _Scratch, e: SubmissionRequested) -> None:
    s.awaiting = False
    s.submissions.append(
        {
            "number": e.submission,
            "requested_at": e.at,
            "gated": e.gated,
            "object_id": None,
            "adopted": False,
            "failed": None,
            "gate_opened": False,
            "stopped": {},
            "missing_since": None,
            "handled": False,
            "native_recoveries": (),
        }
    )


def _created(s: _Scratch, e: SubmissionCreated) -> None:
    sub = s.submission(e.submission, e)
    sub["object_id"] = e.object_id
    sub["adopted"] = e.adopted


def _failed(s: _Scratch, e: SubmissionFailed) -> None:
    s.submission(e.submission, e)["failed"] = e.cause


def _gate(s: _Scratch, e: GateOpened) -> None:
    s.submission(e.submission, e)["gate_opened"] = True


def _stop(s: _Scratch, e: StopRequested) -> None:
    sub = s.submission(e.submission, e)
    sub["stopped"] = {**sub["stopped"], e.object_id: e.cause}


def _missing(s: _Scratch, e: ObjectMissing) -> None:
    s.submission(e.submission, e)["missing_since"] = e.at


def _found(s: _Scratch, e: ObjectFound) -> None:
    s.submission(e.submission, e)["missing_since"] = None


def _recovery(s: _Scratch, e: RecoveryStarted) -> None:
    s.spent[e.rule] = s.spent.get(e.rule, 0) + 1
    sub = s.submission(e.submission, e)
    if e.enforcer is Enforcer.BACKEND and e.execution is not None:
        sub["native_recoveries"] = (*sub["native_recoveries"], e.execution)
    else:
        sub["handled"] = True
        s.awaiting = True
    s.note(
        e, State.RECOVERING, e.cause, f"{e.action.value} by {e.enforcer.value} (rule {e.rule + 1})"
    )


def _hold(s: _Scratch, e: HoldPlaced) -> None:
    if e.submission is not None:
        s.submission(e.submission, e)["handled"] = True
    s.hold = Hold.trusted(since=e.at, cause=e.cause, rule=e.rule, submission=e.submission)
    s.note(e, State.HELD, e.cause, "recovery hold" if e.rule is not None else "hold")


def _resolved(s: _Scratch, e: HoldResolved) -> None:
    if e.resolution is Resolution.RESUBMIT:
        s.awaiting = True
    s.note(e, None, None, e.resolution.value)
    s.hold = None if e.resolution is Resolution.RESUBMIT else s.hold


def _cancel(s: _Scratch, e: CancelRequested) -> None:
    s.cancel = e.cause
    s.note(e, None, e.cause, "cancel requested")


def _escalation(s: _Scratch, e: EscalationRaised) -> None:
    s.escalations.append(Escalation.trusted(seq=e.seq, at=e.at, reason=e.reason, cause=e.cause))
    s.note(e, None, e.cause, e.reason)


def _outcome(s: _Scratch, e: OutcomeCommitted) -> None:
    if s.outcome is not None:  # a committed outcome never changes (S-18)
        return
    s.outcome = Outcome.trusted(seq=e.seq, at=e.at, state=e.state, cause=e.cause)
    s.hold = None
    s.awaiting = False
    for sub in s.submissions:
        sub["handled"] = True
    s.note(e, e.state, e.cause)


def _superseded(s: _Scratch, e: SupersededBy) -> None:
    s.superseded_by.append(e.new_job_id)
    s.note(e, None, None, f"superseded by {e.new_job_id}")


_APPLY: dict[str, Callable[[_Scratch, Any], None]] = {
    "submission-requested": _requested,
    "submission-created": _created,
    "submission-failed": _failed,
    "gate-opened": _gate,
    "stop-requested": _stop,
    "object-missing": _missing,
    "object-found": _found,
    "recovery-started": _recovery,
    "hold-placed": _hold,
    "hold-resolved": _resolved,
    "cancel-requested": _cancel,
    "escalation-raised": _escalation,
    "outcome-committed": _outcome,
    "superseded-by": _superseded,
}


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
        expected = scratch.fields["version"] + 1
        if event.seq != expected or event.job_id != scratch.fields["job_id"]:
            raise DecodeError(
                f"record of job {scratch.fields['job_id']!r}: expected sequence {expected}, "
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
        _APPLY[event.type](scratch, event)
        scratch.fields["version"] = event.seq
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
    s.fields["version"] = job.version
    s.submissions = [dict(sub) for sub in (x.__dict__ for x in job.submissions)]
    s.spent = dict(job.spent)
    s.awaiting = job.awaiting_submission
    s.hold = job.hold
    s.cancel = job.cancel
    s.escalations = list(job.escalations)
    s.outcome = job.outcome
    s.history = list(job.history)
    s.superseded_by = list(job.superseded_by)
    return s
