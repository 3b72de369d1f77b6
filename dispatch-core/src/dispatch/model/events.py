"""The record's event types: the only source of committed facts (S-18, S-20).

Each event carries the job id and its per-job sequence number (1, 2, ...), the time it
was decided (passed in, never read from a clock here) and who appended it. The events a
person (or a supervisor acting on its own account) makes also carry ``by``: the real uid of
the process that appended them and, on a record store with roles, its database role. The
``actor`` name comes from ``LOGNAME`` and proves nothing; ``by`` is what the process was.
Records written before ``by`` existed decode with ``by`` None. The set:

=====================  ====================================================================
type                   meaning
=====================  ====================================================================
job-created            the job exists: name, backend, what to run, the bound plan
submission-requested   intent: submission N is about to be submitted (gated or not)
submission-created     submission N is scheduler object X (``adopted`` when found by tag)
submission-failed      the scheduler refused submission N (cause launch-failed, verbatim)
gate-opened            submission N's gate was opened (every older object seen ended)
stop-requested         intent: object X is about to be stopped, and why
object-missing         a created object is absent from the backend's listing since ``at``
object-found           a missing object is listed again
recovery-started       an ending is being recovered by a rule; spends one unit of budget
hold-placed            the job is held (a recovery hold, or an actor's)
hold-resolved          an actor resolved the hold: resubmit, cancel or give up
cancel-requested       an actor asked to cancel the job
escalation-raised      a person must look: why, and the cause
outcome-committed      the terminal state: succeeded, failed or cancelled; never changes
superseded-by          a new job runs this one again; the outcome stays as it was
=====================  ====================================================================
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, TypeAdapter, ValidationError

from dispatch.core.cause import Cause
from dispatch.core.policy import Plan
from dispatch.model.base import Model, decode_error
from dispatch.model.enums import Action, Enforcer, Resolution, State
from dispatch.model.errors import DecodeError
from dispatch.model.spec import JobSpec


class Identity(Model):
    """Who a process is, as the operating system and the record store say: the real uid
    (``os.getuid()``), and the database role (PostgreSQL's ``current_user``) where the
    store has roles, else None."""

    uid: int = Field(ge=0)
    role: str | None = None

    def describe(self) -> str:
        """``uid 1001`` or ``uid 1001, role alice``: how the CLI shows it."""
        return f"uid {self.uid}" + (f", role {self.role}" if self.role else "")


class _Event(Model):
    job_id: str = Field(min_length=1)
    seq: int = Field(ge=1)
    at: AwareDatetime
    actor: str | None = None


class Group(Model):
    """The sweep a job is a member of (``dispatch submit --sweep``): the group's id, this
    member's place in it (0-based, in the order the grid expands), how many members it
    has, this member's values, and at most how many members may be submitted and not
    ended at once (None: no bound). Member ``index`` of group ``G`` is job ``G-index``."""

    id: str = Field(min_length=1)
    index: int = Field(ge=0)
    size: int = Field(ge=1)
    values: dict[str, str] = Field(default_factory=dict)
    max_running: int | None = Field(default=None, ge=1)


class JobCreated(_Event):
    """``group`` is set for a member of a sweep; records written before sweeps existed
    decode with ``group`` None."""

    type: Literal["job-created"] = "job-created"
    name: str
    backend: str
    spec: JobSpec
    plan: Plan
    supersedes: str | None = None
    by: Identity | None = None
    group: Group | None = None


class SubmissionRequested(_Event):
    type: Literal["submission-requested"] = "submission-requested"
    submission: int = Field(ge=1)
    gated: bool = False
    exclude_nodes: frozenset[str] = frozenset()


class SubmissionCreated(_Event):
    type: Literal["submission-created"] = "submission-created"
    submission: int = Field(ge=1)
    object_id: str
    adopted: bool = False


class SubmissionFailed(_Event):
    type: Literal["submission-failed"] = "submission-failed"
    submission: int = Field(ge=1)
    cause: Cause


class GateOpened(_Event):
    type: Literal["gate-opened"] = "gate-opened"
    submission: int = Field(ge=1)
    object_id: str


class StopRequested(_Event):
    type: Literal["stop-requested"] = "stop-requested"
    submission: int = Field(ge=1)
    object_id: str
    cause: Cause


class ObjectMissing(_Event):
    type: Literal["object-missing"] = "object-missing"
    submission: int = Field(ge=1)
    object_id: str


class ObjectFound(_Event):
    type: Literal["object-found"] = "object-found"
    submission: int = Field(ge=1)
    object_id: str


class RecoveryStarted(_Event):
    """``execution`` is set for a native recovery (the execution the backend recovers)."""

    type: Literal["recovery-started"] = "recovery-started"
    submission: int = Field(ge=1)
    execution: int | None = None
    rule: int = Field(ge=0)
    action: Action
    enforcer: Enforcer
    cause: Cause


class HoldPlaced(_Event):
    """``rule`` is the policy rule behind a recovery hold; None for an actor's hold."""

    type: Literal["hold-placed"] = "hold-placed"
    submission: int | None = None
    rule: int | None = None
    cause: Cause
    by: Identity | None = None


class HoldResolved(_Event):
    type: Literal["hold-resolved"] = "hold-resolved"
    resolution: Resolution
    by: Identity | None = None


class CancelRequested(_Event):
    type: Literal["cancel-requested"] = "cancel-requested"
    cause: Cause
    by: Identity | None = None


class EscalationRaised(_Event):
    type: Literal["escalation-raised"] = "escalation-raised"
    reason: str
    cause: Cause | None = None
    by: Identity | None = None


class OutcomeCommitted(_Event):
    type: Literal["outcome-committed"] = "outcome-committed"
    state: Literal[State.SUCCEEDED, State.FAILED, State.CANCELLED]
    cause: Cause
    by: Identity | None = None


class SupersededBy(_Event):
    type: Literal["superseded-by"] = "superseded-by"
    new_job_id: str
    by: Identity | None = None


Event = Annotated[
    JobCreated
    | SubmissionRequested
    | SubmissionCreated
    | SubmissionFailed
    | GateOpened
    | StopRequested
    | ObjectMissing
    | ObjectFound
    | RecoveryStarted
    | HoldPlaced
    | HoldResolved
    | CancelRequested
    | EscalationRaised
    | OutcomeCommitted
    | SupersededBy,
    Field(discriminator="type"),
]

EVENT_TYPES: tuple[str, ...] = (
    "job-created",
    "submission-requested",
    "submission-created",
    "submission-failed",
    "gate-opened",
    "stop-requested",
    "object-missing",
    "object-found",
    "recovery-started",
    "hold-placed",
    "hold-resolved",
    "cancel-requested",
    "escalation-raised",
    "outcome-committed",
    "superseded-by",
)

_ADAPTERS: list[TypeAdapter[Event]] = []


def _adapter() -> TypeAdapter[Event]:
    """Built on first use: compiling the union of every event costs CLI start-up time."""
    if not _ADAPTERS:
        _ADAPTERS.append(TypeAdapter(Event))
    return _ADAPTERS[0]


def decode_event(data: str | bytes) -> Event:
    """Decode one event from JSON, strictly (S-6)."""
    try:
        return _adapter().validate_json(data)
    except ValidationError as exc:
        raise decode_error("Event", exc) from None


def decode_event_obj(data: object) -> Event:
    """Decode one event from already-parsed Python data, strictly (S-6)."""
    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise decode_error("Event", exc) from None


def encode_event(event: Event) -> str:
    return event.model_dump_json()


__all__ = [
    "EVENT_TYPES",
    "DecodeError",
    "Event",
    "Group",
    "Identity",
    "decode_event",
    "decode_event_obj",
    "encode_event",
]
