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
  unused quota for nvidia.com/gpu in flavor default-flavor, N more needed"; for one
  larger than its ClusterQueue could ever hold, "insufficient quota for nvidia.com/gpu in
  flavor default-flavor, previously considered podsets requests (0) + current podset
  request (N) > maximum capacity (M)", as the live tier showed).
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
  the requeuing limit's words are "exceeding the maximum number of re-queuing retries"
  (the ``DeactivationTarget`` condition stays, as the live tier showed).

- Cohorts: a ClusterQueue may borrow what the others of its cohort do not use, up to its
  ``borrowingLimit``; one whose Workload fits its own nominal quota reclaims what others
  borrow by preempting them (``InCohortReclamation``); the preemption message's paths
  are ``/<cohort>/<ClusterQueue>``.

Not emulated: fair sharing, lending limits, flavors other than one, resources other than
GPUs, admission checks, waitForPodsReady's timer (the driver evicts for
``PodsReadyTimeout`` when told).
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
    ApiError,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster

PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
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


def preemption_message(preemptor: Obj, reason: str, path: str, preemptee: str = "") -> str:
    """``preemptionMessage`` of ``pkg/scheduler/preemption/preemption.go``; the paths
    are ``buildCQPath``'s (``/<cohort>/<ClusterQueue>``)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: "
        f"{preemptor['metadata']['labels'].get(KUEUE_JOB_UID, 'UNKNOWN')}) due to "
        f"{HUMAN_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {path}; "
        f"preemptee path: {preemptee or path}"
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


def _prebuilt(c: Cluster, tj: Obj) -> Obj | None:
    """The Workload a job's ``kueue.x-k8s.io/prebuilt-workload-name`` label names
    (``jobframework`` ``ensureOneWorkload``): none when it does not exist or another
    object controls it, and Kueue then makes none; else adopted (controller owner and
    job-uid label). Kueue's check that it matches the job is not emulated."""
    meta = tj["metadata"]
    try:
        wl = c.store.raw(WORKLOAD, meta["namespace"], meta["labels"][PREBUILT])
    except ApiError:
        return None
    owners = [o for o in wl["metadata"].get("ownerReferences") or [] if o.get("controller")]
    if owners and owners[0].get("uid") != meta["uid"]:
        return None
    if not owners:
        wl["metadata"]["ownerReferences"] = [c.owner_ref(tj)]
        wl["metadata"].setdefault("labels", {})[KUEUE_JOB_UID] = meta["uid"]
        c.store.touch(wl)
    return wl


def kueue(c: Cluster) -> None:
    queued: list[tuple[Obj, Obj]] = []
    for tj in list(c.store.items(TRAINJOB)):
        meta = tj["metadata"]
        if not meta["labels"].get(QUEUE_NAME) or "deletionTimestamp" in meta:
            continue
        if is_true(tj, "Complete") or is_true(tj, "Failed"):
            continue
        wl = _prebuilt(c, tj) if PREBUILT in meta["labels"] else _workload(c, tj)
        if wl is None:
            _suspend(c, tj, True)  # stopJob: "missing workload"; Kueue makes none
            continue
        queued.append((tj, wl))
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


def _path(c: Cluster, cq: str) -> str:
    """``buildCQPath``: the cohort, then the ClusterQueue."""
    cohort = c.kueue_cohorts.get(cq)
    return f"/{cohort}/{cq}" if cohort else f"/{cq}"


class _Quota:
    """GPU quota by ClusterQueue and cohort: each ClusterQueue's nominal quota, what its
    admitted Workloads use, and what it may borrow from the rest of its cohort."""

    def __init__(self, c: Cluster, usage: dict[str, int]) -> None:
        self.c, self.usage = c, usage

    def members(self, cq: str) -> list[str]:
        cohort = self.c.kueue_cohorts.get(cq)
        if not cohort:
            return [cq]
        return [q for q in self.c.kueue_cluster_queues if self.c.kueue_cohorts.get(q) == cohort]

    def available(self, cq: str) -> int:
        nominal = self.c.kueue_cluster_queues.get(cq, 0)
        own = nominal - self.usage.get(cq, 0)
        members = self.members(cq)
        if len(members) == 1:
            return own
        cohort = sum(self.c.kueue_cluster_queues.get(q, 0) - self.usage.get(q, 0) for q in members)
        limit = self.c.kueue_borrowing.get(cq)
        return min(cohort, own + limit) if limit is not None else cohort

    def maximum(self, cq: str) -> int:
        """What the ClusterQueue could ever hold: its nominal quota and what it may
        borrow (its limit, or the rest of its cohort's nominal quota)."""
        nominal = self.c.kueue_cluster_queues.get(cq, 0)
        others = sum(self.c.kueue_cluster_queues.get(q, 0) for q in self.members(cq) if q != cq)
        limit = self.c.kueue_borrowing.get(cq)
        return nominal + (others if limit is None else min(limit, others))

    def borrowing(self, cq: str) -> bool:
        return self.usage.get(cq, 0) > self.c.kueue_cluster_queues.get(cq, 0)


def _schedule(c: Cluster, queued: list[tuple[Obj, Obj]]) -> None:
    """Admitted Workloads hold their quota (an evicted one until its job is suspended);
    pending ones are admitted (those that need not borrow first, then by priority, then
    age) where their ClusterQueue's quota, with what it may borrow from its cohort, fits
    them. One that does not fit preempts:
    admitted Workloads of other ClusterQueues of its cohort that borrow, when it fits in
    its own nominal quota (``InCohortReclamation``), then lower-priority ones of its own
    ClusterQueue (``InClusterQueue``), borrowers first, as Kueue orders candidates."""
    members: list[tuple[str, Obj, Obj]] = []
    for tj, wl in queued:
        cq = c.kueue_local_queues.get(wl["spec"]["queueName"])
        if cq is None:
            message = f"LocalQueue {wl['spec']['queueName']} doesn't exist"
            c.set_condition(wl, "QuotaReserved", "False", "Inadmissible", message)
            continue
        members.append((cq, tj, wl))
    holding = [(cq, tj, wl) for cq, tj, wl in members if is_true(wl, "QuotaReserved")]
    usage: dict[str, int] = {}
    for cq, tj, wl in holding:
        usage[cq] = usage.get(cq, 0) + gpus_of(tj)
        if not is_true(wl, "Evicted"):
            _suspend(c, tj, False)
    quota = _Quota(c, usage)
    pending = [
        (cq, tj, wl)
        for cq, tj, wl in members
        if not is_true(wl, "QuotaReserved") and not _stopping(tj, wl)
    ]
    # Kueue's scheduler takes the heads that fit without borrowing first, then by
    # priority, then by age
    pending.sort(
        key=lambda p: (
            usage.get(p[0], 0) + gpus_of(p[1]) > c.kueue_cluster_queues.get(p[0], 0),
            -_priority(p[2]),
            p[2]["metadata"]["creationTimestamp"],
        )
    )
    for cq, tj, wl in pending:
        need = gpus_of(tj)
        if need <= quota.available(cq):
            _admit(c, tj, wl, cq)
            usage[cq] = usage.get(cq, 0) + need
            continue
        words = "couldn't assign flavors to pod set node: insufficient"
        if need > quota.maximum(cq):
            # no preemption can make room: the flavor assigner's other words
            words += (
                " quota for nvidia.com/gpu in flavor default-flavor, previously considered "
                f"podsets requests (0) + current podset request ({need}) > maximum capacity "
                f"({quota.maximum(cq)})"
            )
        else:
            _preempt(c, quota, cq, tj, wl, holding)
            more = need - max(quota.available(cq), 0)
            words += (
                f" unused quota for nvidia.com/gpu in flavor default-flavor, {more} more needed"
            )
        c.set_condition(wl, "QuotaReserved", "False", "Pending", words)
        _suspend(c, tj, True)


def _preempt(
    c: Cluster, quota: _Quota, cq: str, tj: Obj, wl: Obj, holding: list[tuple[str, Obj, Obj]]
) -> None:
    need = gpus_of(tj)
    within_nominal = quota.usage.get(cq, 0) + need <= c.kueue_cluster_queues.get(cq, 0)
    candidates = [
        (vcq, vtj, vwl)
        for vcq, vtj, vwl in holding
        if not is_true(vwl, "Evicted")
        and (
            (vcq == cq and _priority(vwl) < _priority(wl))
            or (vcq != cq and vcq in quota.members(cq) and within_nominal and quota.borrowing(vcq))
        )
    ]
    # other ClusterQueues' first, then the lowest priority, then the latest admitted
    candidates.sort(key=lambda v: (v[0] == cq, _priority(v[2])))
    usage = dict(quota.usage)
    trial = _Quota(c, usage)
    chosen: list[tuple[str, Obj, Obj]] = []
    for victim in candidates:
        if need <= trial.available(cq):
            break
        if victim[0] != cq and not trial.borrowing(victim[0]):
            continue
        chosen.append(victim)
        usage[victim[0]] -= gpus_of(victim[1])
    if not chosen or need > trial.available(cq):
        return
    for vcq, vtj, vwl in chosen:
        reason = "InClusterQueue" if vcq == cq else "InCohortReclamation"
        message = preemption_message(wl, reason, _path(c, cq), _path(c, vcq))
        c.set_condition(vwl, "Evicted", "True", "Preempted", message)
        c.set_condition(vwl, "Preempted", "True", reason, message)
        _suspend(c, vtj, True)


def _priority(wl: Obj) -> int:
    return int(wl["spec"].get("priority") or 0)


def _suspend(c: Cluster, tj: Obj, value: bool) -> None:
    if bool(tj["spec"].get("suspend")) != value:
        tj["spec"]["suspend"] = value
        c.store.touch(tj)
        c.changed = True
