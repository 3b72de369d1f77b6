"""The Kueue controller, as far as TrainJobs need it: a Workload per queued TrainJob,
quota, admission (resume), preemption and deactivation (suspend). Kueue owns
``spec.suspend`` of a queued TrainJob; its webhook suspends it at create (admission.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    KUEUE_JOB_UID,
    QUEUE_NAME,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    TRAINJOB,
    WORKLOAD,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster


def kueue(c: Cluster) -> None:
    for tj in list(c.store.items(TRAINJOB)):
        meta = tj["metadata"]
        if not meta["labels"].get(QUEUE_NAME) or "deletionTimestamp" in meta:
            continue
        if is_true(tj, "Complete") or is_true(tj, "Failed"):
            continue
        wl = next(
            (
                w
                for w in c.store.items(WORKLOAD, meta["namespace"])
                if w["metadata"]["labels"].get(KUEUE_JOB_UID) == meta["uid"]
            ),
            None,
        )
        if wl is None:
            wl = c.create(
                WORKLOAD,
                meta["namespace"],
                {
                    "metadata": {
                        "name": f"trainjob-{meta['name']}-{meta['uid'][:5]}",
                        "labels": {KUEUE_JOB_UID: meta["uid"]},
                        "ownerReferences": [c.owner_ref(tj)],
                    },
                    "spec": {"queueName": meta["labels"][QUEUE_NAME], "active": True},
                    "status": {},
                },
            )
        active = wl["spec"].get("active", True)
        evicted = is_true(wl, "Evicted")
        admitted = is_true(wl, "Admitted")
        if not active:
            if not is_true(wl, "Evicted"):
                c.set_condition(wl, "Evicted", "True", "Deactivated", "The workload is deactivated")
            c.set_condition(wl, "QuotaReserved", "False", "Pending", "The workload is deactivated")
            c.set_condition(
                wl, "Admitted", "False", "NoReservation", "The workload has no reservation"
            )
            _suspend(c, tj, True)
        elif admitted:
            _suspend(c, tj, False)
        elif c.kueue_quota and not evicted:
            c.set_condition(
                wl,
                "QuotaReserved",
                "True",
                "QuotaReserved",
                "Quota reserved in ClusterQueue cluster-queue",
            )
            c.set_condition(wl, "Admitted", "True", "Admitted", "The workload is admitted")
            _suspend(c, tj, False)
        else:
            message = (
                "couldn't assign flavors to pod set node: insufficient unused quota for "
                "nvidia.com/gpu in flavor default-flavor, 8 more needed"
            )
            if not evicted:
                c.set_condition(wl, "QuotaReserved", "False", "Pending", message)
            _suspend(c, tj, True)


def readmit(c: Cluster) -> None:
    """Quota came back: evicted workloads are requeued and admitted again."""
    for wl in c.store.items(WORKLOAD):
        if is_true(wl, "Evicted") and wl["spec"].get("active", True):
            c.set_condition(wl, "Evicted", "False", "QuotaReserved", "Previously: Preempted")
            c.set_condition(wl, "Requeued", "True", "Preempted", "Requeued after preemption")


def _suspend(c: Cluster, tj: Obj, value: bool) -> None:
    if bool(tj["spec"].get("suspend")) != value:
        tj["spec"]["suspend"] = value
        c.store.touch(tj)
        c.changed = True
