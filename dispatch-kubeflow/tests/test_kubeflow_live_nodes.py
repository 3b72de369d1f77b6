"""Live tier: a node's kubelet stops heartbeating on the real control plane. The real
node-lifecycle controller marks it NotReady and taints it, the taint-eviction controller
deletes its pods (DisruptionTarget: DeletionByTaintManager), and with no kubelet to
confirm they stay Terminating: the Job neither fails nor replaces them for good. Then
dispatch's stop (Foreground deletion, blocked by those pods until the adapter
force-deletes them) and a multi-node TrainJob with a node lost and a rank failing."""

from __future__ import annotations

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.driver import LiveDriver, condition
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.kubeapi import ApiError
from dispatch_kubeflow_testing.live.observe import submit, until

pytestmark = pytest.mark.live(server="kubeflow")

LONG = JobSpec(
    name="train",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=2),
    options={"image": "registry.example/acme/train:1.4"},
)


def terminating_on(live: LiveDriver, name: str, node: str) -> list[dict]:  # type: ignore[type-arg]
    return [
        p
        for p in live.pods(name)
        if p["spec"].get("nodeName") == node and "deletionTimestamp" in p["metadata"]
    ]


def test_live_lost_node_is_running_node_lost(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-26: the TrainJob alone looks running; the pod on the lost node says why."""
    name = submit(live_backend, job_id, LONG)
    node = live.lose_node(name, pod=1)
    live.node_not_ready(node)
    (stuck,) = live.wait(
        "the pod on the lost node Terminating", lambda: terminating_on(live, name, node)
    )
    disruption = condition(stuck, "DisruptionTarget")
    assert disruption is not None and disruption["reason"] == "DeletionByTaintManager"
    obj = until(
        live_backend,
        job_id,
        "running node-lost",
        lambda o: (
            o.phase is Phase.RUNNING and o.cause is not None and o.cause.kind is CauseKind.NODE_LOST
        ),
        live=live,
    )
    assert obj.cause is not None and node in obj.cause.detail
    tj = live.trainjob(name)
    assert not any(
        c["type"] in ("Failed", "Complete") and c["status"] == "True"
        for c in tj["status"].get("conditions", [])
    )


def test_live_foreground_deletion_blocked_by_a_lost_node_is_finished_by_stop(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-27: Foreground deletion waits for every dependent; a pod on a lost node never
    goes, so the TrainJob stays with a deletionTimestamp until dispatch's stop
    force-deletes that pod (and only that one)."""
    object_id = live_backend.dispatch_submit(job_id=job_id, submission=1, spec=LONG, gated=False)
    name = tags.split_object_id(object_id)[1]
    node = live.lose_node(name, pod=0)
    live.node_not_ready(node)
    live.wait("the pod on the lost node Terminating", lambda: terminating_on(live, name, node))
    live.delete_behind_back(name, propagation="Foreground")
    live.settle(10)
    blocked = live.trainjob(name)
    assert "deletionTimestamp" in blocked["metadata"]
    assert "foregroundDeletion" in blocked["metadata"].get("finalizers", [])
    assert terminating_on(live, name, node)
    live_backend.dispatch_stop(
        object_id, Cause(kind=CauseKind.NODE_LOST, provenance=Provenance.SCHEDULER, detail="fence")
    )

    def gone() -> bool:
        try:
            live.trainjob(name)
        except ApiError as exc:
            return exc.status == 404
        return False

    live.wait("the TrainJob deleted", gone, timeout=60)
    # its JobSet, Jobs and pods go after it (the garbage collector): then discovery is empty
    live.wait(
        "discovery empty once the garbage collector is done",
        lambda: live_backend.dispatch_discover(job_ids=[job_id]).objects == (),
        timeout=60,
    )


def test_live_multi_node_one_node_lost_and_one_rank_failing(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-26, S-42: numNodes 2; node 0's machine is lost, then rank 1 exits 1 until the
    Job's backoff runs out. The real Job controller marks FailureTarget
    (BackoffLimitExceeded) but cannot finish Failed while the lost node's pod is
    Terminating: the TrainJob stays running, and the adapter says node-lost naming that
    node (dispatch's stop past the node-loss window ends it)."""
    name = submit(live_backend, job_id, LONG)
    live.running(name, 2)
    node = live.lose_node(name, pod=0)
    live.node_not_ready(node)
    live.wait("the pod on the lost node Terminating", lambda: terminating_on(live, name, node))
    live.exit(name, 1, pod=1)

    def failure_target() -> bool:
        return any(
            (c := condition(job, "FailureTarget")) is not None and c["status"] == "True"
            for job in live.jobs(name)
        )

    live.wait("the Job at FailureTarget", failure_target, timeout=180)
    obj = until(
        live_backend,
        job_id,
        "running node-lost",
        lambda o: (
            o.phase is Phase.RUNNING and o.cause is not None and o.cause.kind is CauseKind.NODE_LOST
        ),
        live=live,
    )
    assert obj.cause is not None and node in obj.cause.detail, obj
    assert not any(
        c["type"] == "Failed" and c["status"] == "True"
        for c in live.trainjob(name)["status"].get("conditions", [])
    )
