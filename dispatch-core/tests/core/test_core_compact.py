"""A folded job kept packed is the same job (S-20): ``unpack(pack(job)) == job``.

A supervisor holds its folded jobs packed (:mod:`dispatch.core.compact`) and unpacks one
only to decide it, so a packed job must give back exactly the job folded: equal field for
field, serialised alike (unset fields included), with a cause named twice still one object.
Over random records: ``test_core_properties.test_a_packed_job_unpacks_to_the_job_folded_S20``.
"""

from __future__ import annotations

from typing import Any

from core_bench import World, cause, policy
from dispatch import Action, CauseKind, Job, fold
from dispatch.core.cause import Cause
from dispatch.core.compact import Folded, pack, unpack
from dispatch.core.job import Hold
from dispatch.model.base import Model
from dispatch.model.enums import Provenance


def _causes(job: Job) -> list[Cause]:
    found: list[Cause | None] = [job.cancel]
    for sub in job.submissions:
        found += [sub.failed, sub.ended_by, *sub.stopped.values()]
    found += [t.cause for t in job.history] + [e.cause for e in job.escalations]
    found += [job.hold.cause if job.hold else None, job.outcome.cause if job.outcome else None]
    return [c for c in found if c is not None]


def _models(value: Any) -> list[Model]:
    """Every model reachable from a packed job's values."""
    if isinstance(value, Model):
        return [value]
    if isinstance(value, tuple | list):
        return [m for v in value for m in _models(v)]
    if isinstance(value, dict):
        return [m for v in value.values() for m in _models(v)]
    return []


def _assert_packs_back(job: Job) -> None:
    back = unpack(pack(job))
    assert back == job
    assert back.model_dump_json() == job.model_dump_json()
    assert back.model_dump(exclude_unset=True) == job.model_dump(exclude_unset=True)
    before, after = _causes(job), _causes(back)
    assert [c.model_fields_set for c in after] == [c.model_fields_set for c in before]
    assert len({id(c) for c in after}) == len({id(c) for c in before})


def test_a_packed_job_holds_no_model_of_its_own_S20() -> None:
    """What a packed job keeps as models is what jobs share (plan, spec, submitter,
    group); its submissions, history, hold and causes are plain tuples."""
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 5)))
    for _ in range(3):
        w.tick()
        w.run_current()
        w.end_current(cause(CauseKind.PREEMPTED))
        w.tick()
    job = fold(w.events)
    assert len(job.submissions) == 4 and len(job.history) >= 3
    shared = {id(job.spec), id(job.plan), id(job.submitter), id(job.group)}
    kept = [m for m in _models(pack(job)) if id(m) not in shared]
    assert kept == [], [type(m).__name__ for m in kept]
    _assert_packs_back(job)


def test_a_cause_with_unset_fields_keeps_them_unset_S20() -> None:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 5)))
    w.tick()
    job = fold(w.events)
    bare = Cause(kind=CauseKind.HELD, provenance=Provenance.ACTOR)
    hold = Hold.trusted(since=job.created_at, cause=bare, rule=None, submission=None)  # as fold
    held = job.model_copy(update={"hold": hold, "cancel": bare})
    back = unpack(pack(held))
    assert back.hold is not None and back.hold.cause.model_fields_set == {"kind", "provenance"}
    assert back.cancel is back.hold.cause
    _assert_packs_back(held)


def test_folded_jobs_are_held_packed_and_read_back_as_jobs_S20() -> None:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 5)))
    w.tick()
    job = fold(w.events)
    jobs = Folded()
    jobs[job.job_id] = job
    assert type(jobs.packed[job.job_id]) is tuple
    assert jobs[job.job_id] == job and jobs.get("other") is None
    assert dict(jobs) == {job.job_id: job} and list(jobs) == [job.job_id]
    del jobs[job.job_id]
    assert not jobs and job.job_id not in jobs
