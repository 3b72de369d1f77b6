"""The cause of a state (S-2), and the one rule for a multi-node root cause."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import AwareDatetime

from dispatch.model.base import Model
from dispatch.model.enums import CauseKind, Provenance


class Cause(Model):
    """Why a job or object is where it is.

    ``detail`` is the scheduler's (or actor's) own words, verbatim: adapters never
    paraphrase it, because it is what a person pastes into a ticket.

    ``nodes`` and ``rank`` attribute the ending (S-42): the node that was lost, the node
    (and rank, where the scheduler says it) whose task failed first. They are structured so
    a resubmission can keep off those nodes (S-43) without parsing ``detail``; empty when
    the scheduler does not say.
    """

    kind: CauseKind
    provenance: Provenance
    actor: str | None = None
    detail: str = ""
    exit_code: int | None = None
    at: AwareDatetime | None = None
    nodes: tuple[str, ...] = ()
    rank: int | None = None


#: Specific over generic when two ranks failed at the same instant.
_SPECIFICITY = {
    CauseKind.NODE_LOST: 0,
    CauseKind.OUT_OF_MEMORY: 1,
    CauseKind.PREEMPTED: 2,
    CauseKind.TIME_LIMIT: 3,
    CauseKind.LAUNCH_FAILED: 4,
    CauseKind.NON_ZERO_EXIT: 5,
    CauseKind.UNKNOWN: 6,
    CauseKind.CANCELLED: 7,
}


def root_cause(causes: Iterable[Cause]) -> Cause | None:
    """The cause that ended a multi-node execution, from the endings of its nodes or ranks.

    Rule: ignore successes (``none``); among the failures take the earliest by ``at``;
    at the same instant (or with no time) prefer the more specific kind
    (node-lost, out-of-memory, preempted, time-limit, launch-failed, then non-zero-exit,
    unknown, cancelled). So one rank killed by OOM and the others terminated after it gives
    ``out-of-memory``, not the SIGTERM the others got. All successes give ``none``.
    """

    all_causes = list(causes)
    failures = [c for c in all_causes if c.kind is not CauseKind.NONE]
    if not failures:
        return all_causes[0] if all_causes else None

    def key(c: Cause) -> tuple[float, int]:
        t = c.at.timestamp() if c.at is not None else float("inf")
        return (t, _SPECIFICITY.get(c.kind, 9))

    return min(failures, key=key)
