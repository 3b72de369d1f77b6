"""A job as its record says it is: what ``fold`` returns (S-20).

Only committed facts live here. What the scheduler shows now is a ``Discovery``;
``project`` combines the two.
"""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from dispatch.core.cause import Cause
from dispatch.core.policy import Plan
from dispatch.model.base import Model
from dispatch.model.enums import State
from dispatch.model.events import Group, Identity
from dispatch.model.spec import JobSpec


class Submission(Model):
    """One attempt, as recorded. ``handled`` is True once its ending has been decided on
    (a recovery, a hold or an outcome), so a late ending of the same object is ignored;
    ``ended_by`` is the cause a recovery or hold was decided on. ``exclude_nodes`` are the
    nodes it was asked to keep off (S-43)."""

    number: int = Field(ge=1)
    requested_at: AwareDatetime
    gated: bool = False
    object_id: str | None = None
    adopted: bool = False
    failed: Cause | None = None
    gate_opened: bool = False
    stopped: dict[str, Cause] = Field(default_factory=dict)
    missing_since: AwareDatetime | None = None
    handled: bool = False
    native_recoveries: tuple[int, ...] = ()
    ended_by: Cause | None = None
    exclude_nodes: frozenset[str] = frozenset()


class Hold(Model):
    since: AwareDatetime
    cause: Cause
    rule: int | None = None
    submission: int | None = None


class Escalation(Model):
    seq: int
    at: AwareDatetime
    reason: str
    cause: Cause | None = None


class Outcome(Model):
    seq: int
    at: AwareDatetime
    state: State
    cause: Cause


class Transition(Model):
    """One committed transition, as ``Status.history`` shows it (S-23). ``by`` is who the
    process that appended it was (real uid, database role), when the event records it."""

    seq: int
    at: AwareDatetime
    event: str
    state: State | None = None
    cause: Cause | None = None
    actor: str | None = None
    note: str = ""
    by: Identity | None = None


class Job(Model):
    job_id: str
    name: str
    backend: str
    spec: JobSpec
    plan: Plan
    created_at: AwareDatetime
    version: int = Field(ge=1, description="sequence number of the last event folded")
    submissions: tuple[Submission, ...] = ()
    spent: dict[int, int] = Field(default_factory=dict, description="rule index -> units spent")
    awaiting_submission: bool = False
    hold: Hold | None = None
    cancel: Cause | None = None
    escalations: tuple[Escalation, ...] = ()
    outcome: Outcome | None = None
    history: tuple[Transition, ...] = ()
    supersedes: str | None = None
    superseded_by: tuple[str, ...] = ()
    #: Who submitted the job (the process that recorded it); None in records written
    #: before submitters were recorded.
    submitter: Identity | None = None
    #: The sweep this job is a member of; None for a job submitted on its own.
    group: Group | None = None

    @property
    def current(self) -> Submission | None:
        return self.submissions[-1] if self.submissions else None

    @property
    def terminal(self) -> bool:
        return self.outcome is not None

    def budget_left(self, rule_index: int) -> int:
        budget = self.plan.policy.rules[rule_index].budget or 0
        return budget - self.spent.get(rule_index, 0)
