"""A folded job kept compact: ``pack(job)`` and ``unpack(packed) == job``. Pure.

A supervisor holds every active job it watches between ticks, and memory per job is what
bounds a supervisor of 50,000 jobs. A ``Job`` is some thirty frozen models, each an object
with a ``__dict__`` of its own (a submission's is 464 bytes): 11 KiB a job. Packed, the
same values sit in plain tuples in field order (a submission's is 144 bytes), about 4 KiB
a job, and a job is unpacked only when it must be decided again. Values shared between
jobs (plans, specs, identities, groups) stay the shared objects they were; a cause that
two places of one job name (a submission's ``ended_by`` and its transition's ``cause``)
stays one object after a round trip.

Layout: a packed job is the tuple of ``Job``'s field values in field order; its
``submissions``, ``history`` and ``escalations`` are tuples of packed models, its
``hold``, ``outcome`` and ``cancel`` packed or None, ``spent`` a tuple of (rule, spent)
pairs. A packed model is its field values in field order; a packed ``Cause`` has one more
item, its fields-set when it is not every field (None when it is), so an unpacked cause
serialises exactly as the one packed. The indexes below name the fields a supervisor reads
without unpacking.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from operator import itemgetter
from typing import Any

from pydantic import BaseModel

from dispatch.core.cause import Cause
from dispatch.core.job import Escalation, Hold, Job, Outcome, Submission, Transition
from dispatch.model.base import build, every_field

#: A packed job (see the module's docstring).
Packed = tuple[Any, ...]


def _names(cls: type[BaseModel]) -> tuple[str, ...]:
    return tuple(cls.model_fields)


_JOB = _names(Job)
_SUBMISSION = _names(Submission)
_TRANSITION = _names(Transition)
_CAUSE = _names(Cause)
_HOLD = _names(Hold)
_ESCALATION = _names(Escalation)
_OUTCOME = _names(Outcome)

JOB_ID = _JOB.index("job_id")
BACKEND = _JOB.index("backend")
SPEC = _JOB.index("spec")
VERSION = _JOB.index("version")
SUBMISSIONS = _JOB.index("submissions")
HOLD = _JOB.index("hold")
CANCEL = _JOB.index("cancel")
OUTCOME = _JOB.index("outcome")
SUBMITTER = _JOB.index("submitter")
GROUP = _JOB.index("group")
_SPENT = _JOB.index("spent")
_ESCALATIONS = _JOB.index("escalations")
_HISTORY = _JOB.index("history")

_S_FAILED = _SUBMISSION.index("failed")
_S_STOPPED = _SUBMISSION.index("stopped")
_S_ENDED_BY = _SUBMISSION.index("ended_by")
_T_CAUSE = _TRANSITION.index("cause")
_H_CAUSE = _HOLD.index("cause")
_E_CAUSE = _ESCALATION.index("cause")
_O_CAUSE = _OUTCOME.index("cause")

_job_values = itemgetter(*_JOB)
_submission_values = itemgetter(*_SUBMISSION)
_transition_values = itemgetter(*_TRANSITION)
_cause_values = itemgetter(*_CAUSE)
_hold_values = itemgetter(*_HOLD)
_escalation_values = itemgetter(*_ESCALATION)
_outcome_values = itemgetter(*_OUTCOME)

_EVERY_CAUSE_FIELD = every_field(Cause)
_set = object.__setattr__


class _Packer:
    """Packs one job: a cause named twice is packed once (keyed by identity)."""

    __slots__ = ("causes",)

    def __init__(self) -> None:
        self.causes: dict[int, Packed] = {}

    def cause(self, cause: Cause | None) -> Packed | None:
        if cause is None:
            return None
        known = self.causes.get(id(cause))
        if known is None:
            fields = cause.__pydantic_fields_set__
            every = fields is _EVERY_CAUSE_FIELD or fields == _EVERY_CAUSE_FIELD
            known = (*_cause_values(cause.__dict__), None if every else frozenset(fields))
            self.causes[id(cause)] = known
        return known

    def model(
        self, model: BaseModel | None, values: itemgetter[Any], cause_at: int
    ) -> Packed | None:
        if model is None:
            return None
        packed = list(values(model.__dict__))
        packed[cause_at] = self.cause(packed[cause_at])
        return tuple(packed)

    def submission(self, sub: Submission) -> Packed:
        packed = list(_submission_values(sub.__dict__))
        packed[_S_FAILED] = self.cause(packed[_S_FAILED])
        packed[_S_ENDED_BY] = self.cause(packed[_S_ENDED_BY])
        stopped = packed[_S_STOPPED]
        if stopped:
            packed[_S_STOPPED] = {oid: self.cause(c) for oid, c in stopped.items()}
        return tuple(packed)


def pack(job: Job) -> Packed:
    """``job``'s values in plain tuples; ``unpack`` gives back an equal ``Job``."""
    p = _Packer()
    packed = list(_job_values(job.__dict__))
    packed[SUBMISSIONS] = tuple([p.submission(s) for s in job.submissions])
    packed[_HISTORY] = tuple([p.model(t, _transition_values, _T_CAUSE) for t in job.history])
    packed[_ESCALATIONS] = tuple(
        [p.model(e, _escalation_values, _E_CAUSE) for e in job.escalations]
    )
    packed[HOLD] = p.model(job.hold, _hold_values, _H_CAUSE)
    packed[OUTCOME] = p.model(job.outcome, _outcome_values, _O_CAUSE)
    packed[CANCEL] = p.cause(job.cancel)
    packed[_SPENT] = tuple(job.spent.items())
    return tuple(packed)


class _Unpacker:
    """Unpacks one job: a packed cause named twice becomes one ``Cause``."""

    __slots__ = ("causes",)

    def __init__(self) -> None:
        self.causes: dict[int, Cause] = {}

    def cause(self, packed: Packed | None) -> Cause | None:
        if packed is None:
            return None
        known = self.causes.get(id(packed))
        if known is None:
            known = build(Cause, dict(zip(_CAUSE, packed, strict=False)))
            if packed[-1] is not None:
                _set(known, "__pydantic_fields_set__", set(packed[-1]))
            self.causes[id(packed)] = known
        return known

    def model(
        self, cls: type[BaseModel], names: tuple[str, ...], packed: Packed | None, cause_at: int
    ) -> Any:
        if packed is None:
            return None
        values = dict(zip(names, packed, strict=False))
        values[names[cause_at]] = self.cause(packed[cause_at])
        return build(cls, values)

    def submission(self, packed: Packed) -> Submission:
        values = dict(zip(_SUBMISSION, packed, strict=False))
        values["failed"] = self.cause(packed[_S_FAILED])
        values["ended_by"] = self.cause(packed[_S_ENDED_BY])
        stopped = packed[_S_STOPPED]
        if stopped:
            values["stopped"] = {oid: self.cause(c) for oid, c in stopped.items()}
        return build(Submission, values)


def unpack(packed: Packed) -> Job:
    """The ``Job`` that ``pack`` was given (equal to it, not the same object)."""
    u = _Unpacker()
    values = dict(zip(_JOB, packed, strict=False))
    values["submissions"] = tuple([u.submission(s) for s in packed[SUBMISSIONS]])
    values["history"] = tuple(
        [u.model(Transition, _TRANSITION, t, _T_CAUSE) for t in packed[_HISTORY]]
    )
    values["escalations"] = tuple(
        [u.model(Escalation, _ESCALATION, e, _E_CAUSE) for e in packed[_ESCALATIONS]]
    )
    values["hold"] = u.model(Hold, _HOLD, packed[HOLD], _H_CAUSE)
    values["outcome"] = u.model(Outcome, _OUTCOME, packed[OUTCOME], _O_CAUSE)
    values["cancel"] = u.cause(packed[CANCEL])
    values["spent"] = dict(packed[_SPENT])
    return build(Job, values)


class Folded(MutableMapping[str, Job]):
    """Folded jobs by id, held packed: reading one unpacks it, storing one packs it.
    ``packed`` is the jobs as held, for the readers of a few fields (the indexes above)
    that must not unpack every job."""

    __slots__ = ("packed",)

    def __init__(self, packed: dict[str, Packed] | None = None) -> None:
        self.packed: dict[str, Packed] = {} if packed is None else packed

    def __getitem__(self, job_id: str) -> Job:
        return unpack(self.packed[job_id])

    def __setitem__(self, job_id: str, job: Job) -> None:
        self.packed[job_id] = pack(job)

    def __delitem__(self, job_id: str) -> None:
        del self.packed[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.packed)

    def __len__(self) -> int:
        return len(self.packed)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.packed
