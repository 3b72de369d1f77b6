"""What a caller reads about a job: ``project``'s result (S-21, S-23, S-29)."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from dispatch.core.cause import Cause
from dispatch.core.job import Escalation, Transition
from dispatch.model.base import Model
from dispatch.model.discovery import ObjectView
from dispatch.model.enums import Level, State
from dispatch.model.events import Group, Identity
from dispatch.model.supervision import Supervision


class SubmissionStatus(Model):
    """One submission: its object(s) now, and the nodes it was asked to keep off (S-43)."""

    number: int
    object_id: str | None = None
    gated: bool = False
    gate_opened: bool = False
    failed: Cause | None = None
    objects: tuple[ObjectView, ...] = ()
    exclude_nodes: tuple[str, ...] = ()


class Unreached(Model):
    """The scheduler could not be asked for a Status: its words, and since when dispatch
    knows it (``source`` says whose sighting ``since`` is: ``this call`` when nothing
    earlier records it). The Status then shows only what the record knows."""

    backend: str
    words: str
    since: AwareDatetime
    source: str = "this call"


class Status(Model):
    """The job now.

    ``settled`` is False while the discovery shows an ending the record has not committed
    yet; ``state`` then shows what the plan will commit (S-21). ``history`` holds only
    committed transitions; running shows in ``state``, never in ``history`` (S-23).
    ``exclude_nodes`` are the nodes the latest submission keeps off, sorted (S-43).
    ``submitter`` is who recorded the job (real uid, database role), when recorded.
    ``unreachable`` is set when the scheduler could not be asked: the state is then the
    record's alone (``unknown`` for a job whose object only the scheduler can describe).
    """

    job_id: str
    name: str | None = None
    backend: str | None = None
    state: State
    cause: Cause | None = None
    level: Level
    settled: bool
    at: AwareDatetime
    history: tuple[Transition, ...] = ()
    submissions: tuple[SubmissionStatus, ...] = ()
    escalations: tuple[Escalation, ...] = ()
    supersedes: str | None = None
    superseded_by: tuple[str, ...] = ()
    budgets: dict[str, int] = Field(default_factory=dict)
    exclude_nodes: tuple[str, ...] = ()
    submitter: Identity | None = None
    #: Whether a supervisor watches the job (an active job read from the record), else None.
    supervisor: Supervision | None = None
    #: The scheduler could not be asked (its words, since when): the record alone is shown.
    unreachable: Unreached | None = None
    #: The sweep the job is a member of (its group id, index, values), else None.
    group: Group | None = None
