"""Preemption (REQUEUE and CANCEL partitions) and Slurm's own requeue, on real Slurm.

A job submitted with ``requeue=yes`` (a policy ``requeue`` rule, enforced by Slurm: S-9)
keeps its job id across preemption and ``scontrol requeue``; dispatch reports each
execution with the cause that ended it (S-38). Without it, preemption ends the object.
"""

from __future__ import annotations

import uuid

import pytest
from dispatch import Cause, CauseKind, Phase, Provenance
from dispatch_slurm_testing.provoke import wait_for

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="live test cleanup")


def test_preemption_requeues_or_ends_each_victim_and_history_is_truthful_S9_S38(
    backend, provoker
) -> None:
    run = uuid.uuid4().hex[:8]
    native, ended, cancel = (f"live-pre-{run}-{k}" for k in ("native", "norequeue", "cancel"))
    victims = {
        native: provoker.long(native, partition="low", requeue="yes"),
        ended: provoker.long(ended, partition="low", requeue="no"),
        cancel: provoker.long(cancel, partition="lowcancel", requeue="no"),
    }
    preemptor = provoker.preempt(victims, rerun_seconds=5)
    try:
        seen = wait_for(
            backend.dispatch_discover,
            list(victims),
            lambda s: (
                len(s) == 3
                and s[ended].phase is Phase.ENDED
                and s[cancel].phase is Phase.ENDED
                and len(s[native].executions) >= 1
                and s[native].executions[0].ended
            ),
            timeout=90,
        )
        for job in (ended, cancel):
            assert seen[job].cause.kind is CauseKind.PREEMPTED, seen[job]
            assert seen[job].cause.provenance is Provenance.SCHEDULER
            assert "PREEMPTED" in seen[job].cause.detail
        first = seen[native].executions[0]
        assert first.cause.kind is CauseKind.PREEMPTED and "PREEMPTED" in first.cause.detail
        assert seen[native].object_id == victims[native]
        # the preemptor ends, then Slurm runs the same job id again: a second execution
        again = wait_for(
            backend.dispatch_discover,
            [native],
            lambda s: len(s[native].executions) == 2 and s[native].phase is Phase.RUNNING,
            timeout=90,
        )[native]
        assert again.object_id == victims[native]
        assert again.executions[0].cause.kind is CauseKind.PREEMPTED
        assert again.executions[1].cause is None
    finally:
        provoker.cleanup([*victims.values(), preemptor])


def test_scontrol_requeue_shows_an_execution_ended_by_requeue_S38(backend, provoker) -> None:
    job = f"live-requeue-{uuid.uuid4().hex[:8]}"
    oid = provoker.long(job, partition="high", requeue="yes")
    provoker.requeue(oid)
    try:
        seen = wait_for(
            backend.dispatch_discover,
            [job],
            lambda s: job in s and len(s[job].executions) >= 1 and s[job].executions[0].ended,
            timeout=60,
        )[job]
        assert seen.executions[0].cause.kind is CauseKind.REQUEUED
        assert seen.phase in (Phase.PENDING, Phase.RUNNING)
        if seen.phase is Phase.PENDING:
            assert seen.cause.kind is CauseKind.REQUEUED
    finally:
        backend.dispatch_stop(oid, STOP)
