"""What a caller reads about a job: ``project``'s result (S-21, S-23, S-29)."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from dispatch.base import Model
from dispatch.core.cause import Cause
from dispatch.core.job import Escalation, Transition
from dispatch.discovery import ObjectView
from dispatch.enums import Level, State


class SubmissionStatus(Model):
    number: int
    object_id: str | None = None
    gated: bool = False
    gate_opened: bool = False
    failed: Cause | None = None
    objects: tuple[ObjectView, ...] = ()


class Status(Model):
    """The job now.

    ``settled`` is False while the discovery shows an ending the record has not committed
    yet; ``state`` then shows what the plan will commit (S-21). ``history`` holds only
    committed transitions; running shows in ``state``, never in ``history`` (S-23).
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
