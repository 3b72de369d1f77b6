"""The emulated Kueue's promises: what Kueue v0.17.0 does to a queued TrainJob and its
Workload, each stated once and run against a tier: the emulator here, the real Kueue of
the live plane in test_kubeflow_live_kueue_promises.py (dispatch-kubeflow-testing/README.md
lists where the two differed and what is emulated).

The tier creates TrainJobs through the official client over HTTP and reads them and
their Workloads back; the Kueue objects are the live plane's (install.py's
``kueue_setup``: ClusterQueues ``team-a`` and ``team-b`` of 16 GPUs in one cohort,
``team-a`` without borrowing, LocalQueues of the same names, WorkloadPriorityClasses
``low`` and ``high``), and the provocations that Kueue itself decides (a requeuing limit
reached) are the driver's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.live.install import (
    KUEUE_COHORT,
    KUEUE_GPUS,
    KUEUE_PRIORITIES,
    KUEUE_QUEUES,
)
from kubernetes import client, config

G, V = "trainer.kubeflow.org", "v1alpha1"
NS = "default"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
JOB_UID = "kueue.x-k8s.io/job-uid"
T = TypeVar("T")
Obj = dict[str, Any]
#: the live plane's queues: each LocalQueue on the ClusterQueue of its name
CLUSTER_QUEUES = dict.fromkeys(KUEUE_QUEUES, KUEUE_GPUS)
LOCAL_QUEUES = {name: name for name in KUEUE_QUEUES}
COHORTS = dict.fromkeys(KUEUE_QUEUES, KUEUE_COHORT)
BORROWING = {name: limit for name, limit in KUEUE_QUEUES.items() if limit is not None}


class KueueTier(Protocol):
    api: client.ApiClient

    def trainjob(self, name: str) -> Obj: ...
    def workload(self, name: str) -> Obj: ...
    def queues(
        self,
        cluster_queues: dict[str, int],
        local_queues: dict[str, str],
        priorities: dict[str, int],
        *,
        cohorts: dict[str, str],
        borrowing_limits: dict[str, int],
    ) -> None: ...
    def deactivate(self, name: str) -> None: ...
    def reach_requeuing_limit(self, name: str) -> None: ...
    def until(self, what: str, check: Callable[[], T | None]) -> T: ...


class EmulatorKueue:
    STEPS = 60

    def __init__(self, emulator: Emulator, api: client.ApiClient) -> None:
        self.emulator, self.api = emulator, api

    def trainjob(self, name: str) -> Obj:
        return self.emulator.trainjob(name)

    def workload(self, name: str) -> Obj:
        return self.emulator.workload(name)

    def queues(
        self,
        cluster_queues: dict[str, int],
        local_queues: dict[str, str],
        priorities: dict[str, int],
        *,
        cohorts: dict[str, str],
        borrowing_limits: dict[str, int],
    ) -> None:
        self.emulator.kueue_queues(
            cluster_queues,
            local_queues,
            priorities,
            cohorts=cohorts,
            borrowing_limits=borrowing_limits,
        )

    def deactivate(self, name: str) -> None:
        self.emulator.kueue_deactivate(name)

    def reach_requeuing_limit(self, name: str) -> None:
        self.emulator.kueue_requeuing_limit(name)

    def until(self, what: str, check: Callable[[], T | None]) -> T:
        for _ in range(self.STEPS):
            try:
                result = check()
            except LookupError:
                result = None
            if result:
                return result
            self.emulator.advance()
        raise AssertionError(f"{what}: not after {self.STEPS} emulator steps")


@pytest.fixture
def tier(emulator: Emulator, kubeconfig: Path) -> Any:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    tier = EmulatorKueue(emulator, api)
    tier.queues(
        CLUSTER_QUEUES,
        LOCAL_QUEUES,
        KUEUE_PRIORITIES,
        cohorts=COHORTS,
        borrowing_limits=BORROWING,
    )
    yield tier
    api.close()


def submit(
    tier: KueueTier, *, nodes: int = 2, priority: str | None = None, queue: str = "team-a"
) -> str:
    """A TrainJob of ``nodes`` × 8 GPUs sent to LocalQueue ``queue``, not suspended by
    its author (Kueue's webhook suspends it)."""
    name = f"kq-{uuid.uuid4().hex[:6]}"
    labels = {QUEUE_NAME: queue, **({PRIORITY_CLASS: priority} if priority else {})}
    gpus = {"nvidia.com/gpu": "8"}
    body = {
        "apiVersion": f"{G}/{V}",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": nodes,
                "image": "registry.example/acme/train:1.4",
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {"limits": gpus, "requests": gpus},
            },
        },
    }
    created = client.CustomObjectsApi(tier.api).create_namespaced_custom_object(
        G, V, NS, "trainjobs", body
    )
    assert created["spec"]["suspend"] is True  # Kueue's webhook, before anything runs
    return name


def workload_when(tier: KueueTier, name: str, test: Callable[[Obj], object]) -> Obj | None:
    """The TrainJob's Workload once ``test`` holds of it."""
    wl = tier.workload(name)
    return wl if test(wl) else None


def cond(obj: Obj, ctype: str) -> Obj:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return {}


def state(obj: Obj, ctype: str) -> tuple[str, str]:
    c = cond(obj, ctype)
    return c.get("status", ""), c.get("reason", "")


def admitted(tier: KueueTier, name: str) -> bool:
    wl = tier.workload(name)
    return (
        state(wl, "QuotaReserved") == ("True", "QuotaReserved")
        and state(wl, "Admitted") == ("True", "Admitted")
        and tier.trainjob(name)["spec"]["suspend"] is False
    )


def test_promise_kueue_admits_a_queued_trainjob_by_clearing_its_suspend(tier: KueueTier) -> None:
    """One Workload per TrainJob, named trainjob-<name>-…, labelled with the TrainJob's
    uid and owned by it; admission is QuotaReserved and Admitted, then suspend=false."""
    name = submit(tier)
    tier.until(f"{name} admitted", lambda: admitted(tier, name))
    wl, tj = tier.workload(name), tier.trainjob(name)
    assert wl["metadata"]["name"].startswith(f"trainjob-{name}-")
    assert wl["metadata"]["labels"][JOB_UID] == tj["metadata"]["uid"]
    (owner,) = wl["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("TrainJob", name, tj["metadata"]["uid"])
    assert wl["spec"]["queueName"] == "team-a"


def test_promise_kueue_keeps_a_trainjob_that_does_not_fit_suspended_with_its_words(
    tier: KueueTier,
) -> None:
    """More than the ClusterQueue could ever hold (24 GPUs; 16 and no borrowing) is
    refused in the flavor assigner's words for that; one that fits the capacity but not
    what is unused waits for it ("N more needed")."""
    name = submit(tier, nodes=3)
    wl = tier.until(
        f"{name} refused quota",
        lambda: workload_when(tier, name, lambda w: state(w, "QuotaReserved")[0] == "False"),
    )
    assert state(wl, "QuotaReserved") == ("False", "Pending")
    assert cond(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in "
        "flavor default-flavor, previously considered podsets requests (0) + current podset "
        "request (24) > maximum capacity (16)"
    )
    assert tier.trainjob(name)["spec"]["suspend"] is True
    first, second = submit(tier), submit(tier)
    tier.until(f"{first} admitted", lambda: admitted(tier, first))
    wl = tier.until(
        f"{second} refused quota",
        lambda: workload_when(tier, second, lambda w: state(w, "QuotaReserved")[0] == "False"),
    )
    assert cond(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set node: insufficient unused quota for "
        "nvidia.com/gpu in flavor default-flavor, 16 more needed"
    )
    assert tier.trainjob(second)["spec"]["suspend"] is True


def _preempted(tier: KueueTier) -> tuple[str, str]:
    low = submit(tier, priority="low")
    tier.until(f"{low} admitted", lambda: admitted(tier, low))
    high = submit(tier, priority="high")
    tier.until(f"{high} admitted", lambda: admitted(tier, high))
    return low, high


def test_promise_kueue_preempts_a_lower_priority_trainjob_in_its_cluster_queue(
    tier: KueueTier,
) -> None:
    """The lower one is Evicted (Preempted) and Preempted (InClusterQueue) with
    preemptionMessage's words naming the preemptor's Workload and TrainJob uids, its
    TrainJob suspended, then Requeued (Preempted) and QuotaReserved=False Pending (with
    the same words, then the scheduler's), still Evicted."""
    low, high = _preempted(tier)
    wl = tier.until(
        f"{low} requeued", lambda: workload_when(tier, low, lambda w: cond(w, "Requeued"))
    )
    preemptor, high_tj = tier.workload(high), tier.trainjob(high)
    message = (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
        f"{high_tj['metadata']['uid']}) due to prioritization in the ClusterQueue"
    )
    assert state(wl, "Evicted") == ("True", "Preempted")
    assert cond(wl, "Evicted")["message"].startswith(message)
    assert state(wl, "Preempted") == ("True", "InClusterQueue")
    assert state(wl, "Requeued") == ("True", "Preempted")
    assert state(wl, "QuotaReserved") == ("False", "Pending")
    # the eviction's words, until the scheduler tries it again and gives its own
    assert cond(wl, "QuotaReserved")["message"] in (
        cond(wl, "Evicted")["message"],
        "couldn't assign flavors to pod set node: insufficient unused quota for "
        "nvidia.com/gpu in flavor default-flavor, 16 more needed",
    )
    assert state(wl, "Admitted") == ("False", "NoReservation")
    assert tier.trainjob(low)["spec"]["suspend"] is True


def test_promise_kueue_admits_an_evicted_trainjob_again_once_quota_frees(tier: KueueTier) -> None:
    """Evicted and Preempted turn False (QuotaReserved, "Previously: …") on re-admission."""
    low, high = _preempted(tier)
    tier.until(f"{low} requeued", lambda: cond(tier.workload(low), "Requeued"))
    client.CustomObjectsApi(tier.api).delete_namespaced_custom_object(G, V, NS, "trainjobs", high)
    tier.until(f"{low} admitted again", lambda: admitted(tier, low))
    wl = tier.workload(low)
    assert state(wl, "Evicted") == ("False", "QuotaReserved")
    assert cond(wl, "Evicted")["message"].startswith("Previously: Preempted to accommodate")
    assert state(wl, "Preempted") == ("False", "QuotaReserved")


def test_promise_kueue_a_deactivated_workload_is_evicted_and_its_trainjob_suspended(
    tier: KueueTier,
) -> None:
    name = submit(tier)
    tier.until(f"{name} admitted", lambda: admitted(tier, name))
    tier.deactivate(name)
    wl = tier.until(  # the real Kueue sets Requeued after the TrainJob is suspended
        f"{name} stopped",
        lambda: workload_when(
            tier, name, lambda w: tier.trainjob(name)["spec"]["suspend"] and cond(w, "Requeued")
        ),
    )
    assert state(wl, "Evicted") == ("True", "Deactivated")
    assert cond(wl, "Evicted")["message"] == "The workload is deactivated"
    assert state(wl, "Requeued") == ("False", "Deactivated")


def test_promise_kueue_the_requeuing_limit_deactivates_with_its_cause(tier: KueueTier) -> None:
    name = submit(tier)
    tier.until(f"{name} admitted", lambda: admitted(tier, name))
    tier.reach_requeuing_limit(name)
    wl = tier.until(
        f"{name} stopped",
        lambda: workload_when(tier, name, lambda _: tier.trainjob(name)["spec"]["suspend"]),
    )
    assert state(wl, "Evicted") == ("True", "DeactivatedDueToRequeuingLimitExceeded")
    assert cond(wl, "Evicted")["message"] == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    assert wl["spec"]["active"] is False
    # the cause stays on the Workload (the live tier showed it)
    assert state(wl, "DeactivationTarget") == ("True", "RequeuingLimitExceeded")


def test_promise_kueue_reclaims_what_another_cluster_queue_of_its_cohort_borrows(
    tier: KueueTier,
) -> None:
    """team-b runs 24 GPUs, 8 of them team-a's unused quota; team-a then asks for its 16:
    Kueue preempts team-b's Workload whatever its priority (``InCohortReclamation``, the
    paths naming the cohort), and admits team-a's once team-b's job is suspended."""
    borrower = submit(tier, nodes=3, priority="high", queue="team-b")
    tier.until(f"{borrower} admitted", lambda: admitted(tier, borrower))
    owner = submit(tier, priority="low", queue="team-a")
    wl = tier.until(
        f"{borrower} preempted",
        lambda: workload_when(tier, borrower, lambda w: state(w, "Evicted")[0] == "True"),
    )
    preemptor, owner_tj = tier.workload(owner), tier.trainjob(owner)
    assert state(wl, "Evicted") == ("True", "Preempted")
    assert state(wl, "Preempted") == ("True", "InCohortReclamation")
    assert cond(wl, "Evicted")["message"] == (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
        f"{owner_tj['metadata']['uid']}) due to reclamation within the cohort; preemptor "
        f"path: /{KUEUE_COHORT}/team-a; preemptee path: /{KUEUE_COHORT}/team-b"
    )
    tier.until(f"{owner} admitted", lambda: admitted(tier, owner))
    assert tier.trainjob(borrower)["spec"]["suspend"] is True
