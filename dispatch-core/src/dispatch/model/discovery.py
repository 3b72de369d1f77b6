"""What an adapter reports (S-19): per object, what the scheduler shows now.

Adapters never compute a job's state; they fill these models and the core projects them.
"""

from __future__ import annotations

from functools import cached_property

from pydantic import AwareDatetime, Field

from dispatch.core.cause import Cause
from dispatch.model.base import Model
from dispatch.model.enums import Phase


class Execution(Model):
    """One run of an object (a Slurm requeue or a JobSet restart starts another).

    ``cause`` is None while it runs. ``node_causes`` keeps each node's or rank's own ending
    when they differ; ``cause`` is then ``root_cause(node_causes)``.
    """

    index: int = Field(ge=0)
    started_at: AwareDatetime | None = None
    ended_at: AwareDatetime | None = None
    nodes: tuple[str, ...] = ()
    cause: Cause | None = None
    node_causes: tuple[Cause, ...] = ()

    @property
    def ended(self) -> bool:
        return self.cause is not None


class ObjectView(Model):
    """One scheduler object, tagged with the job id and submission number it belongs to.

    ``scheduler_state`` is the scheduler's own state word (``PENDING``, ``Suspended``...)
    kept for people; ``phase`` is the adapter's normalisation the core reads. ``cause`` is
    set when the object ended, is pending or held for a reason, or runs on a lost node.
    """

    object_id: str
    job_id: str
    submission: int = Field(ge=1)
    phase: Phase
    scheduler_state: str
    cause: Cause | None = None
    executions: tuple[Execution, ...] = ()
    created_at: AwareDatetime | None = None
    #: The scheduler's own words for why a pending object waits (Slurm's ``Reason``:
    #: ``Priority``, ``Resources``...), for people (``watch``, ``list``); None when it
    #: does not wait or the scheduler gives none.
    pending_reason: str | None = None

    @property
    def alive(self) -> bool:
        return self.phase.alive


class Discovery(Model):
    """Everything one backend showed, in one call, about the objects of some jobs, at ``at``.

    Unknown job ids are simply absent (S-32 kit rule): absence is information, not an error.
    """

    backend: str
    at: AwareDatetime
    objects: tuple[ObjectView, ...] = ()

    @cached_property
    def _index(self) -> dict[str, tuple[ObjectView, ...]]:
        # a cached_property stays out of equality and encoding, unlike a private attribute
        grouped: dict[str, list[ObjectView]] = {}
        for o in self.objects:
            grouped.setdefault(o.job_id, []).append(o)
        return {job_id: tuple(objs) for job_id, objs in grouped.items()}

    def of_job(self, job_id: str) -> tuple[ObjectView, ...]:
        """The objects of one job; indexed once, since a tick asks for every job."""
        return self._index.get(job_id, ())

    def by_job(self) -> dict[str, tuple[ObjectView, ...]]:
        return dict(self._index)
