"""Live tier: Kueue v0.17.0's own controllers queue, admit, preempt, evict and deactivate
TrainJobs on the real control plane (``start-kube.sh`` with Trainer v2.2), and the adapter
classifies what Kueue wrote on the Workloads. The queues are install.py's
``kueue_setup``: ClusterQueues ``team-a`` (16 GPUs, no borrowing) and ``team-b`` (16 GPUs,
may borrow) in one cohort, LocalQueues of the same names, WorkloadPriorityClasses ``low``
and ``high``; waitForPodsReady's timeout is ``DISPATCH_KUBE_KUEUE_PODS_READY_TIMEOUT``
seconds with one requeue. The emulator's Kueue states the same behaviour offline
(test_kubeflow_kueue_submit.py); where the two disagree, the real one is right."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dispatch import CauseKind, JobSpec, Phase, Resources
from dispatch.model.discovery import ObjectView
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.driver import LiveDriver, condition
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.observe import submit, until

pytestmark = pytest.mark.live(server="kubeflow")

IMAGE = "registry.example/acme/train:1.4"
#: waitForPodsReady's timeout, one requeue with a backoff of a few seconds, twice over,
#: and the controllers' own pace on a loaded machine
REQUEUE_LIMIT_WAIT = 300.0


@pytest.fixture(autouse=True)
def _kueue_runs(live: LiveDriver) -> None:
    assert "kueue" in live.plane.versions, (
        f"this control plane runs no Kueue ({live.plane.versions}); start-kube.sh runs "
        "Kueue with DISPATCH_KUBE_TRAINER=v2.2.0"
    )


def queued(queue: str, *, nodes: int = 2, gpus: int = 8, priority: str | None = None) -> JobSpec:
    options = {"image": IMAGE, "queue": queue}
    if priority is not None:
        options["priority"] = priority
    return JobSpec(
        name=f"kq-{queue}",
        command=("torchrun", "train.py"),
        resources=Resources(nodes=nodes, gpus_per_node=gpus),
        options=options,
    )


def running(o: ObjectView) -> bool:
    return o.phase is Phase.RUNNING


def pending(kind: CauseKind) -> Callable[[ObjectView], bool]:
    def check(o: ObjectView) -> bool:
        return o.phase is Phase.PENDING and o.cause is not None and o.cause.kind is kind

    return check


def test_live_kueue_higher_priority_preempts_within_the_cluster_queue(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: ``high`` needs team-a's 16 GPUs that ``low`` holds; team-a may not borrow,
    so Kueue preempts ``low`` (``InClusterQueue``): pending/preempted with Kueue's message
    verbatim, never an ending to resubmit over; ``high`` runs."""
    low_id, high_id = f"{job_id}-low", f"{job_id}-high"
    submit(live_backend, low_id, queued("team-a", priority="low"))
    until(live_backend, low_id, "running", running, live=live)
    high = submit(live_backend, high_id, queued("team-a", priority="high"))
    low = until(live_backend, low_id, "pending preempted", pending(CauseKind.PREEMPTED), live=live)
    assert low.cause is not None
    assert "Evicted Preempted (InClusterQueue): Preempted to accommodate a workload" in (
        low.cause.detail
    )
    assert "preemptor path: /dispatch/team-a; preemptee path: /dispatch/team-a" in (
        low.cause.detail
    )
    assert low.pending_reason is not None and low.pending_reason.startswith("Kueue ")
    until(live_backend, high_id, "running", running, live=live)
    admitted = condition(live.workload(high), "Admitted")
    assert admitted is not None and admitted["status"] == "True"


def test_live_kueue_cohort_reclamation_preempts_the_borrower(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: team-b runs 24 GPUs (8 borrowed from team-a); team-a asks for its own 16
    back and Kueue preempts team-b's job (``InCohortReclamation``), whatever its
    priority."""
    borrower_id, owner_id = f"{job_id}-b", f"{job_id}-a"
    submit(live_backend, borrower_id, queued("team-b", nodes=3, priority="high"))
    until(live_backend, borrower_id, "running", running, live=live)
    submit(live_backend, owner_id, queued("team-a", priority="low"))
    borrower = until(
        live_backend, borrower_id, "pending preempted", pending(CauseKind.PREEMPTED), live=live
    )
    assert borrower.cause is not None
    assert "Evicted Preempted (InCohortReclamation):" in borrower.cause.detail
    assert "preemptor path: /dispatch/team-a" in borrower.cause.detail
    until(live_backend, owner_id, "running", running, live=live)


def test_live_kueue_waiting_for_quota_is_no_capacity_then_admitted_once_quota_frees(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-39: a second job of the same priority does not fit team-a's quota: pending /
    no-capacity with Kueue's ``QuotaReserved=False`` words; once the first is stopped and
    its Workload gone, Kueue admits the second and it runs."""
    first_id, second_id = f"{job_id}-1", f"{job_id}-2"
    first = live_backend.dispatch_submit(
        job_id=first_id, submission=1, spec=queued("team-a"), gated=False
    )
    until(live_backend, first_id, "running", running, live=live)
    submit(live_backend, second_id, queued("team-a"))
    waiting = until(
        live_backend, second_id, "pending no-capacity", pending(CauseKind.NO_CAPACITY), live=live
    )
    assert waiting.cause is not None
    assert "QuotaReserved=False Pending: couldn't assign flavors to pod set" in (
        waiting.cause.detail
    )
    assert "insufficient unused quota for nvidia.com/gpu in flavor default-flavor" in (
        waiting.cause.detail
    )
    assert waiting.pending_reason is not None
    assert waiting.pending_reason.startswith("Kueue QuotaReserved=False Pending: ")
    live_backend.dispatch_stop(object_id=first, cause=waiting.cause)
    until(live_backend, second_id, "admitted and running", running, live=live, timeout=180)


def test_live_kueue_pods_ready_timeout_is_pending_no_capacity(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-39: the quota fits (16 GPUs) but no node has 16: the pods stay unschedulable,
    waitForPodsReady's timeout passes and Kueue evicts the Workload (``PodsReadyTimeout``)
    and requeues it: pending / no-capacity with Kueue's words."""
    submit(live_backend, job_id, queued("team-a", nodes=1, gpus=16))
    obj = until(
        live_backend,
        job_id,
        "evicted for PodsReadyTimeout",
        lambda o: (
            pending(CauseKind.NO_CAPACITY)(o)
            and o.cause is not None
            and "Evicted PodsReadyTimeout" in o.cause.detail
        ),
        live=live,
        timeout=REQUEUE_LIMIT_WAIT,
    )
    assert obj.cause is not None
    assert "Exceeded the PodsReady timeout" in obj.cause.detail, obj.cause.detail


def test_live_kueue_requeue_limit_reached_is_held(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: the same job's second PodsReady timeout exceeds ``backoffLimitCount`` (1):
    Kueue deactivates the Workload (``DeactivatedDueToRequeuingLimitExceeded``) and it
    stays suspended until a person reactivates it: held, never resubmitted over."""
    name = submit(live_backend, job_id, queued("team-a", nodes=1, gpus=16))
    obj = until(
        live_backend,
        job_id,
        "held after the requeuing limit",
        lambda o: o.phase is Phase.HELD,
        live=live,
        timeout=REQUEUE_LIMIT_WAIT,
    )
    assert obj.cause is not None and obj.cause.kind is CauseKind.HELD, obj
    assert "Evicted DeactivatedDueToRequeuingLimitExceeded: " in obj.cause.detail
    assert live.workload(name)["spec"]["active"] is False
    assert live.trainjob(name)["spec"]["suspend"] is True
