"""Node failure on real Slurm: slurmd killed, node NOT_RESPONDING, then NODE_FAIL (S-25, S-26).

While the node does not answer, a job still RUNNING is reported running with cause
``node-lost`` (the node-loss fence counts from there); once Slurm gives up on the node the
``--no-requeue`` job ends ``node-lost`` and the ``--requeue`` job shows an execution ended
by ``node-lost`` and waits to run again under the same job id.
"""

from __future__ import annotations

import uuid

import pytest
from dispatch import Cause, CauseKind, Phase, Provenance
from dispatch_slurm_testing.provoke import wait_for
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="live test cleanup")


def test_killed_slurmd_is_node_lost_running_then_ended_S25_S26(backend, provoker, launched) -> None:
    run = uuid.uuid4().hex[:8]
    plain, native = f"live-node-{run}-plain", f"live-node-{run}-native"
    on_node1 = "--nodelist=node1"
    oids = {
        plain: provoker.long(plain, requeue="no", sbatch_args=on_node1),
        native: provoker.long(native, requeue="yes", sbatch_args=on_node1),
    }
    for oid in oids.values():
        provoker.wait_state(oid, {"RUNNING"})
        launched(oid)  # srun has launched its step through slurmd before slurmd dies
    assert provoker.lose(oids[plain]) == "node1"
    running_lost: list[str] = []
    try:

        def both_ended() -> dict:  # type: ignore[type-arg]
            seen = {o.job_id: o for o in backend.dispatch_discover(list(oids)).objects}
            for obj in seen.values():
                lost = obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST
                if obj.phase is Phase.RUNNING and lost:
                    running_lost.append(obj.cause.detail)
            return seen

        seen = eventually(
            both_ended,
            until=lambda seen: (
                seen[plain].phase is Phase.ENDED
                and seen[native].executions
                and seen[native].executions[0].ended
            ),
            timeout=120,
            interval=0.5,
            what="the plain job ended and the native one's first execution ended",
        )
        assert running_lost, "never saw a running job on a NOT_RESPONDING node"
        assert "sinfo: Node=" in running_lost[0] and "*" in running_lost[0]
        assert seen[plain].cause.kind is CauseKind.NODE_LOST
        assert "NODE_FAIL" in seen[plain].cause.detail
        first = seen[native].executions[0]
        assert first.cause.kind is CauseKind.NODE_LOST
        assert seen[native].phase is not Phase.ENDED, seen[native]
        assert seen[native].object_id == oids[native]
    finally:
        provoker.restore_nodes()
        for oid in oids.values():
            backend.dispatch_stop(oid, STOP)
    node = wait_for(
        backend.dispatch_discover, [native], lambda s: s[native].phase is Phase.ENDED, timeout=60
    )[native]
    assert node.cause.kind is CauseKind.CANCELLED


def test_node_loss_window_is_declared_and_overridable_S25(monkeypatch, backend) -> None:
    assert backend.dispatch_declare().node_loss_window.total_seconds() == 600
    monkeypatch.setenv("DISPATCH_SLURM_NODE_LOSS_WINDOW", "45")
    assert backend.dispatch_declare().node_loss_window.total_seconds() == 45


def test_a_drained_node_keeps_its_running_job_and_starves_new_ones_S39(backend, provoker) -> None:
    """Drain is not loss: the running job runs on, a new job pends on ReqNodeNotAvail
    (no-capacity, within its window) and starts once the node is resumed."""
    run = uuid.uuid4().hex[:8]
    running, waiting = f"live-drain-{run}-running", f"live-drain-{run}-waiting"
    first = provoker.long(running, sbatch_args="--nodelist=node3")
    provoker.wait_state(first, {"RUNNING"})
    node = "node3"
    provoker.oob.run(
        ["scontrol", "update", f"nodename={node}", "state=drain", "reason=dispatch live test"]
    )
    try:
        second = provoker.long(waiting, sbatch_args="--nodelist=node3")
        seen = wait_for(
            backend.dispatch_discover,
            [running, waiting],
            lambda s: waiting in s and s[waiting].cause is not None,
            timeout=30,
        )
        assert (seen[running].phase, seen[running].cause) == (Phase.RUNNING, None)
        assert seen[waiting].phase is Phase.PENDING
        assert seen[waiting].cause.kind is CauseKind.NO_CAPACITY
        assert "ReqNodeNotAvail" in seen[waiting].cause.detail
    finally:
        provoker.oob.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    wait_for(
        backend.dispatch_discover,
        [waiting],
        lambda s: s[waiting].phase is Phase.RUNNING,
        timeout=60,
    )
    for oid in (first, second):
        backend.dispatch_stop(oid, STOP)
