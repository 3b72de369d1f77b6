"""Gate (sbatch --hold / scontrol release) and stop (scancel), idempotent, on real Slurm
(S-28, S-30, S-37)."""

from __future__ import annotations

import uuid

import pytest
from dispatch import Cause, CauseKind, Phase, Provenance
from dispatch_slurm_testing.provoke import wait_for

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(
    kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="tester", detail="live test stop"
)


def test_gated_submission_waits_until_its_gate_opens_then_runs_S28_S37(backend, provoker) -> None:
    job = f"live-gate-{uuid.uuid4().hex[:8]}"
    oid = backend.dispatch_submit(job, 2, provoker.spec(("true",)), True)
    seen = wait_for(backend.dispatch_discover, [job], lambda s: job in s, timeout=20)
    gated = seen[job]
    assert (gated.phase, gated.cause, gated.submission) == (Phase.GATED, None, 2)
    assert gated.executions == ()
    backend.dispatch_open_gate(oid)
    done = wait_for(
        backend.dispatch_discover, [job], lambda s: s[job].phase is Phase.ENDED, timeout=60
    )[job]
    assert done.cause.kind is CauseKind.NONE
    backend.dispatch_open_gate(oid)  # the gate of an ended object: not an error


def test_a_hold_after_the_gate_opened_is_not_mistaken_for_the_gate_S37(backend, provoker) -> None:
    job = f"live-regate-{uuid.uuid4().hex[:8]}"
    spec = provoker.spec(("true",), sbatch_args="--begin=now+3600")
    oid = backend.dispatch_submit(job, 1, spec, True)
    backend.dispatch_open_gate(oid)
    provoker.oob.run(["scontrol", "hold", oid])
    held = wait_for(
        backend.dispatch_discover, [job], lambda s: s[job].phase is Phase.HELD, timeout=20
    )[job]
    assert held.cause.kind is CauseKind.HELD and held.cause.provenance is Provenance.SCHEDULER
    backend.dispatch_stop(oid, STOP)


def test_stop_is_idempotent_running_ended_and_unknown_S30(backend, provoker) -> None:
    job = f"live-stop-{uuid.uuid4().hex[:8]}"
    oid = provoker.long(job)
    provoker.wait_state(oid, {"RUNNING"})
    backend.dispatch_stop(oid, STOP)
    ended = wait_for(
        backend.dispatch_discover, [job], lambda s: s[job].phase is Phase.ENDED, timeout=60
    )[job]
    assert ended.cause.kind is CauseKind.CANCELLED
    backend.dispatch_stop(oid, STOP)  # already ended
    backend.dispatch_stop("999999999", STOP)  # never existed


def test_stop_of_a_gated_submission_ends_it_without_an_execution_S30(backend, provoker) -> None:
    job = f"live-stopgated-{uuid.uuid4().hex[:8]}"
    oid = backend.dispatch_submit(job, 1, provoker.spec(("true",)), True)
    backend.dispatch_stop(oid, STOP)
    ended = wait_for(
        backend.dispatch_discover,
        [job],
        lambda s: job in s and s[job].phase is Phase.ENDED,
        timeout=30,
    )[job]
    assert ended.cause.kind is CauseKind.CANCELLED and ended.executions == ()
