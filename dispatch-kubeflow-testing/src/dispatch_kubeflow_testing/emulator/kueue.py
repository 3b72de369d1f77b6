"""The Kueue controller, as far as TrainJobs need it, after Kueue v0.17.0: a Workload per
queued TrainJob, quota, admission (resume), preemption and deactivation (suspend). Kueue
owns ``spec.suspend`` of a queued TrainJob; its webhook suspends it at create
(admission.py).

What it follows, in Kueue's own terms (v0.17.0):

- Admission sets ``QuotaReserved=True`` and ``Admitted=True`` and clears the TrainJob's
  ``spec.suspend`` (``jobframework`` reconciler, "Job admitted, unsuspending"); a Workload
  admitted again has its ``Evicted`` and ``Preempted`` conditions turned ``False`` with
  reason ``QuotaReserved`` and the message ``Previously: <old message>``
  (``pkg/workload`` ``SetQuotaReservation``/``resetActiveCondition``).
- A Workload that does not fit waits with ``QuotaReserved=False`` reason ``Pending`` and
  the flavor assigner's words ("couldn't assign flavors to pod set node: insufficient
  unused quota for nvidia.com/gpu in flavor default-flavor, N more needed").
- Preemption within a ClusterQueue (``InClusterQueue``): a pending Workload of a higher
  priority evicts admitted ones of a lower priority, lowest first, until it fits; each
  gets ``Evicted=True`` reason ``Preempted`` and ``Preempted=True`` reason
  ``InClusterQueue``, both with ``preemptionMessage``'s words.
- An evicted Workload's TrainJob is suspended (``stopJob``); once it is, the Workload gets
  ``Requeued`` (``True`` only for ``Preempted`` and ``NodeFailures``) with the eviction's
  reason and message, ``QuotaReserved=False`` reason ``Pending`` with the eviction's
  message, and ``Admitted=False`` ``NoReservation``. It stays ``Evicted=True`` until
  admitted again.
- ``spec.active=false`` evicts with reason ``Deactivated`` ("The workload is
  deactivated"), or ``DeactivatedDueTo<cause>`` with "The workload is deactivated due to
  <words>" when a ``DeactivationTarget`` condition named the cause (``ReasonWithCause``);
  the requeuing limit's words are "exceeding the maximum number of re-queuing retries".

Not emulated: cohorts (borrowing, reclamation, fair sharing), flavors other than one,
resources other than GPUs, admission checks, waitForPodsReady's timer (the driver evicts
for ``PodsReadyTimeout`` when told).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    KUEUE_JOB_UID,
    QUEUE_NAME,
    condition,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    TRAINJOB,
    WORKLOAD,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster

PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
NO_RESERVATION = ("NoReservation", "The workload has no reservation")
REQUEUE_LIMIT = "exceeding the maximum number of re-queuing retries"
HUMAN_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def gpus_of(tj: Obj) -> int:
    """What the TrainJob asks of the quota: nodes × nvidia.com/gpu per node."""
    trainer = tj["spec"].get("trainer") or {}
    resources = trainer.get("resourcesPerNode") or {}
    per_node = (resources.get("limits") or {}).get("nvidia.com/gpu") or (
        resources.get("requests") or {}
    ).get("nvidia.com/gpu", 0)
    return int(trainer.get("numNodes") or 1) * int(per_node)


def preemption_message(preemptor: Obj, reason: str, cq: str) -> str:
    """``preemptionMessage`` of ``pkg/scheduler/preemption/preemption.go``."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
        f"{preemptor['metadata']['labels'].get(KUEUE_JOB_UID, 'UNKNOWN')}) due to "
        f"{HUMAN_REASONS.get(reason, 'UNKNOWN')}; preemptor path: /{cq}; preemptee path: /{cq}"
    )


def _workload(c: Cluster, tj: Obj) -> Obj:
    meta = tj["metadata"]
    found = next(
        (
            w
            for w in c.store.items(WORKLOAD, meta["namespace"])
            if w["metadata"]["labels"].get(KUEUE_JOB_UID) == meta["uid"]
        ),
        None,
    )
    if found is not None:
        return found
    priority_class = meta["labels"].get(PRIORITY_CLASS, "")
    spec: Obj = {"queueName": meta["labels"][QUEUE_NAME], "active": True}
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priority"] = c.kueue_priorities.get(priority_class, 0)
    return c.create(
        WORKLOAD,
        meta["namespace"],
        {
            "metadata": {
                "name": f"trainjob-{meta['name']}-{meta['uid'][:5]}",
                "labels": {KUEUE_JOB_UID: meta["uid"]},
                "ownerReferences": [c.owner_ref(tj)],
            },
            "spec": spec,
            "status": {},
        },
    )


def kueue(c: Cluster) -> None:
    queued: list[tuple[Obj, Obj]] = []
    for tj in list(c.store.items(TRAINJOB)):
        meta = tj["metadata"]
        if not meta["labels"].get(QUEUE_NAME) or "deletionTimestamp" in meta:
            continue
        if is_true(tj, "Complete") or is_true(tj, "Failed"):
            continue
        queued.append((tj, _workload(c, tj)))
    for tj, wl in queued:
        if not wl["spec"].get("active", True):
            _deactivate(c, tj, wl)
        elif is_true(wl, "Evicted"):
            _stop(c, tj, wl)
    if c.kueue_cluster_queues:
        _schedule(c, [(tj, wl) for tj, wl in queued if wl["spec"].get("active", True)])
        return
    for tj, wl in queued:
        if not wl["spec"].get("active", True) or _stopping(tj, wl):
            continue
        if is_true(wl, "Admitted"):
            _suspend(c, tj, False)
        elif c.kueue_quota:
            _admit(c, tj, wl, "cluster-queue")
        else:
            message = (
                "couldn't assign flavors to pod set node: insufficient unused quota for "
                "nvidia.com/gpu in flavor default-flavor, 8 more needed"
            )
            if not is_true(wl, "Evicted"):
                c.set_condition(wl, "QuotaReserved", "False", "Pending", message)
            _suspend(c, tj, True)


def _stopping(tj: Obj, wl: Obj) -> bool:
    """Evicted and still holding its quota or running: being stopped, not yet requeued."""
    return is_true(wl, "Evicted") and (
        is_true(wl, "QuotaReserved") or not tj["spec"].get("suspend")
    )


def _deactivate(c: Cluster, tj: Obj, wl: Obj) -> None:
    if not is_true(wl, "Evicted"):
        target = condition(wl, "DeactivationTarget")
        reason, message = "Deactivated", "The workload is deactivated"
        if target is not None:
            reason = f"DeactivatedDueTo{target['reason']}"
            message = f"{message} due to {target['message']}"
            wl["status"]["conditions"].remove(target)
        c.set_condition(wl, "Evicted", "True", reason, message)
    _stop(c, tj, wl)


def _stop(c: Cluster, tj: Obj, wl: Obj) -> None:
    """``stopJob``, then, once the job is suspended, the admission cleared."""
    evicted = condition(wl, "Evicted") or {}
    if not tj["spec"].get("suspend"):
        _suspend(c, tj, True)
        return
    if is_true(wl, "QuotaReserved") or is_true(wl, "Admitted"):
        requeued = evicted.get("reason") in ("Preempted", "NodeFailures")
        c.set_condition(
            wl,
            "Requeued",
            "True" if requeued else "False",
            evicted.get("reason", ""),
            evicted.get("message", ""),
        )
        c.set_condition(wl, "QuotaReserved", "False", "Pending", evicted.get("message", ""))
        c.set_condition(wl, "Admitted", "False", *NO_RESERVATION)
        wl["status"].pop("admission", None)
        c.store.touch(wl)


def _admit(c: Cluster, tj: Obj, wl: Obj, cq: str) -> None:
    for ctype in ("Evicted", "Preempted"):
        old = condition(wl, ctype)
        if old is not None and old["status"] == "True":
            c.set_condition(
                wl, ctype, "False", "QuotaReserved", f"Previously: {old.get('message', '')}"
            )
    c.set_condition(
        wl, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"
    )
    c.set_condition(wl, "Admitted", "True", "Admitted", "The workload is admitted")
    wl["status"]["admission"] = {"clusterQueue": cq}
    c.store.touch(wl)
    _suspend(c, tj, False)


def _schedule(c: Cluster, queued: list[tuple[Obj, Obj]]) -> None:
    """One ClusterQueue at a time: admitted Workloads hold their quota (an evicted one
    until its job is suspended); pending ones are admitted by priority, then age, and one
    that does not fit preempts lower-priority admitted ones of its ClusterQueue."""
    by_cq: dict[str, list[tuple[Obj, Obj]]] = {}
    for tj, wl in queued:
        cq = c.kueue_local_queues.get(wl["spec"]["queueName"])
        if cq is None:
            message = f"LocalQueue {wl['spec']['queueName']} doesn't exist"
            c.set_condition(wl, "QuotaReserved", "False", "Inadmissible", message)
            continue
        by_cq.setdefault(cq, []).append((tj, wl))
    for cq, members in by_cq.items():
        quota = c.kueue_cluster_queues.get(cq, 0)
        holding = [(tj, wl) for tj, wl in members if is_true(wl, "QuotaReserved")]
        used = sum(gpus_of(tj) for tj, _ in holding)
        for tj, wl in holding:
            if not is_true(wl, "Evicted"):
                _suspend(c, tj, False)
        pending = [
            (tj, wl)
            for tj, wl in members
            if not is_true(wl, "QuotaReserved") and not _stopping(tj, wl)
        ]
        pending.sort(key=lambda p: (-_priority(p[1]), p[1]["metadata"]["creationTimestamp"]))
        for tj, wl in pending:
            need = gpus_of(tj)
            if used + need <= quota:
                _admit(c, tj, wl, cq)
                used += need
                continue
            victims = sorted(
                (
                    (vtj, vwl)
                    for vtj, vwl in holding
                    if not is_true(vwl, "Evicted") and _priority(vwl) < _priority(wl)
                ),
                key=lambda p: _priority(p[1]),
            )
            chosen, freed = [], 0
            for victim in victims:
                if used - freed + need <= quota:
                    break
                chosen.append(victim)
                freed += gpus_of(victim[0])
            if chosen and used - freed + need <= quota:
                message = preemption_message(wl, "InClusterQueue", cq)
                for vtj, vwl in chosen:
                    c.set_condition(vwl, "Evicted", "True", "Preempted", message)
                    c.set_condition(vwl, "Preempted", "True", "InClusterQueue", message)
                    _suspend(c, vtj, True)
            more = used + need - quota
            c.set_condition(
                wl,
                "QuotaReserved",
                "False",
                "Pending",
                "couldn't assign flavors to pod set node: insufficient unused quota for "
                f"nvidia.com/gpu in flavor default-flavor, {more} more needed",
            )
            _suspend(c, tj, True)


def _priority(wl: Obj) -> int:
    return int(wl["spec"].get("priority") or 0)


def _suspend(c: Cluster, tj: Obj, value: bool) -> None:
    if bool(tj["spec"].get("suspend")) != value:
        tj["spec"]["suspend"] = value
        c.store.touch(tj)
        c.changed = True
