"""From the evidence chain of one TrainJob to the object dispatch reports (S-19, S-4).

Pure: it reads plain object dicts as the API returns them (TrainJob, JobSet, Jobs, Pods,
Nodes, Kueue Workload) and returns an :class:`~dispatch.ObjectView`. The table in
``docs/mapping.md`` lists every row; ``tests/test_kubeflow_classify.py`` has one test each.

Order of reading (RESEARCH.md §3): deletion, then the TrainJob's terminal condition
(authoritative but coarse: ``FailedJobs`` hides the cause, so the Jobs and Pods say why),
then suspension (dispatch's gate, Kueue, someone else's hold), then the live evidence
(lost nodes, FailureTarget, restarts, pending reasons).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dispatch.cause import Cause, root_cause
from dispatch.discovery import Execution, ObjectView
from dispatch.enums import CauseKind, Phase, Provenance

from dispatch_kubeflow import tags

Obj = Mapping[str, Any]

#: JobSet failure reasons the TrainJob copies; the cause is in the Jobs and Pods.
JOBSET_FAILURES = frozenset({"FailedJobs", "FailJobSetFailurePolicyAction", "ReachedMaxRestarts"})
#: ``DisruptionTarget`` reasons → kind. Others are reported ``unknown`` verbatim.
DISRUPTIONS = {
    "PreemptionByScheduler": CauseKind.PREEMPTED,
    "PreemptionByKubeScheduler": CauseKind.PREEMPTED,
    "EvictionByEvictionAPI": CauseKind.PREEMPTED,
    "DeletionByTaintManager": CauseKind.NODE_LOST,
    "DeletionByPodGC": CauseKind.NODE_LOST,
    # Kueue marks the pods of an evicted workload (condition TerminationTarget in recent
    # Kueue, DisruptionTarget in older ones)
    "WorkloadEvictedDueToPreempted": CauseKind.PREEMPTED,
    "WorkloadEvictedDueToNodeFailures": CauseKind.NODE_LOST,
}
#: Pod condition types that say who is taking the pod away.
DISRUPTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")
#: Kueue Workload ``Evicted`` reasons that leave the TrainJob queued to run again.
KUEUE_REQUEUES = {"Preempted": CauseKind.PREEMPTED, "NodeFailures": CauseKind.NODE_LOST}
#: Container waiting reasons that mean the kubelet cannot start it (a Pending pod never
#: fails its Job, so these are reported pending; the core's launch window ends the wait).
LAUNCH_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "ImageInspectError",
        "RegistryUnavailable",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreStartHookError",
    }
)
_POLICY_EXIT = re.compile(r"failed with exit code (\d+) matching FailJob rule")
_POLICY_DISRUPTION = re.compile(r"has condition DisruptionTarget matching FailJob rule")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def cond(obj: Obj | None, ctype: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            found: Obj = c
            return found
    return None


def true(obj: Obj | None, ctype: str) -> Obj | None:
    c = cond(obj, ctype)
    return c if c is not None and c.get("status") == "True" else None


def _said(c: Obj) -> str:
    """A condition in its own words: ``Reason: message``."""
    reason, message = c.get("reason") or "", c.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


def _cause(
    kind: CauseKind,
    detail: str,
    at: str | None,
    *,
    exit_code: int | None = None,
    provenance: Provenance = Provenance.SCHEDULER,
) -> Cause:
    return Cause(
        kind=kind, provenance=provenance, detail=detail, exit_code=exit_code, at=parse_time(at)
    )


@dataclass
class Evidence:
    """Everything the cluster shows about one submission's object."""

    job_id: str
    submission: int
    name: str
    namespace: str
    trainjob: Obj | None = None
    jobset: Obj | None = None
    jobs: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    nodes: Mapping[str, Obj] = field(default_factory=dict)
    workload: Obj | None = None


# -- one pod ---------------------------------------------------------------------------


def node_problem(pod: Obj, nodes: Mapping[str, Obj]) -> Cause | None:
    """The pod's node is not Ready (Unknown/False): the node is lost under it."""
    name = (pod.get("spec") or {}).get("nodeName")
    node = nodes.get(name or "")
    if node is None:
        return None
    ready = cond(node, "Ready")
    if ready is None or ready.get("status") == "True":
        return None
    return _cause(
        CauseKind.NODE_LOST,
        f"node {name}: Ready={ready.get('status')} {_said(ready)}",
        ready.get("lastTransitionTime"),
    )


def pod_terminal(pod: Obj) -> bool:
    return ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


def pod_cause(pod: Obj) -> Cause | None:
    """How one pod ended, or None while it has not. A disruption outranks the exit code
    it caused (a preempted pod exits 143; it was preempted, it did not fail)."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name", "")
    for ctype in DISRUPTION_CONDITIONS:
        disruption = true(pod, ctype)
        if disruption is None:
            continue
        reason = disruption.get("reason") or ""
        kind = DISRUPTIONS.get(reason)
        if reason == "TerminationByKubelet":
            kind = (
                CauseKind.NODE_LOST if status.get("reason") == "Terminated" else CauseKind.PREEMPTED
            )
        return _cause(
            kind or CauseKind.UNKNOWN,
            f"pod {name}: {ctype} {_said(disruption)}",
            disruption.get("lastTransitionTime"),
        )
    for cs in status.get("containerStatuses") or []:
        for where in ("state", "lastState"):
            term = (cs.get(where) or {}).get("terminated")
            if not term:
                continue
            code = term.get("exitCode")
            reason = term.get("reason") or ""
            words = (
                f"pod {name} container {cs.get('name')}: "
                f"{where}.terminated reason={reason} exitCode={code}"
            )
            if term.get("message"):
                words += f" message={term['message']}"
            at = term.get("finishedAt")
            if reason == "OOMKilled":
                return _cause(CauseKind.OUT_OF_MEMORY, words, at, exit_code=code)
            if code == 0 and where == "state":
                return _cause(
                    CauseKind.NONE, words, at, exit_code=0, provenance=Provenance.APPLICATION
                )
            if code:
                return _cause(
                    CauseKind.NON_ZERO_EXIT,
                    words,
                    at,
                    exit_code=code,
                    provenance=Provenance.APPLICATION,
                )
    if status.get("phase") == "Failed":
        return _cause(
            CauseKind.UNKNOWN,
            f"pod {name}: phase Failed reason={status.get('reason', '')} "
            f"message={status.get('message', '')}",
            None,
        )
    return None


def pod_pending_cause(pod: Obj) -> Cause | None:
    """Why a pod that has not started waits: launch failure, or no capacity."""
    name = (pod.get("metadata") or {}).get("name", "")
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in LAUNCH_REASONS:
            return _cause(
                CauseKind.LAUNCH_FAILED,
                f"pod {name} container {cs.get('name')}: {_said(waiting)}",
                None,
            )
    scheduled = cond(pod, "PodScheduled")
    if (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    ):
        return _cause(
            CauseKind.NO_CAPACITY,
            f"pod {name}: PodScheduled=False {_said(scheduled)}",
            scheduled.get("lastTransitionTime"),
        )
    return None


# -- Jobs and the execution ------------------------------------------------------------


def job_cause(job: Obj) -> Cause | None:
    """What a failed Job says when its pods cannot (deadline, podFailurePolicy messages)."""
    failed = true(job, "Failed") or true(job, "FailureTarget")
    if failed is None:
        return None
    name = (job.get("metadata") or {}).get("name", "")
    words = f"job {name}: {_said(failed)}"
    at = failed.get("lastTransitionTime")
    message = failed.get("message") or ""
    if failed.get("reason") == "DeadlineExceeded":
        return _cause(CauseKind.TIME_LIMIT, words, at)
    if failed.get("reason") == "PodFailurePolicy":
        if m := _POLICY_EXIT.search(message):
            return _cause(
                CauseKind.NON_ZERO_EXIT,
                words,
                at,
                exit_code=int(m.group(1)),
                provenance=Provenance.APPLICATION,
            )
        if _POLICY_DISRUPTION.search(message):
            return _cause(CauseKind.PREEMPTED, words, at)
    return None


def attempt_of(obj: Obj) -> int:
    try:
        return int(((obj.get("metadata") or {}).get("labels") or {}).get(tags.RESTART_ATTEMPT, "0"))
    except ValueError:
        return 0


def ending_of(ev: Evidence, attempt: int) -> tuple[Cause | None, tuple[Cause, ...]]:
    """The cause that ended an execution: a Job's deadline first (it deleted the pods),
    then the root cause across the pods (the earliest failure, not the pods killed after
    it), then what a Job's condition says. None when nothing ended."""
    jobs = [j for j in ev.jobs if attempt_of(j) == attempt]
    for job in jobs:
        c = job_cause(job)
        if c is not None and c.kind is CauseKind.TIME_LIMIT:
            return c, ()
    pods = [p for p in ev.pods if attempt_of(p) == attempt]
    causes = tuple(c for c in (pod_cause(p) for p in pods) if c is not None)
    failures = tuple(c for c in causes if c.kind is not CauseKind.NONE)
    if failures:
        return root_cause(failures), causes
    for job in jobs:
        c = job_cause(job)
        if c is not None:
            return c, causes
    return None, causes


def _execution(
    index: int, ev: Evidence, cause: Cause | None, node_causes: tuple[Cause, ...]
) -> Execution:
    pods = [p for p in ev.pods if attempt_of(p) == index]
    starts = [t for t in (parse_time((p.get("status") or {}).get("startTime")) for p in pods) if t]
    nodes = tuple(sorted({n for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}))
    ended_at = cause.at if cause is not None else None
    return Execution(
        index=index,
        started_at=min(starts) if starts else None,
        ended_at=ended_at,
        nodes=nodes,
        cause=cause,
        node_causes=node_causes if len(node_causes) > 1 else (),
    )


# -- the object ------------------------------------------------------------------------


def stop_cause(tj: Obj) -> Cause | None:
    """The stop dispatch recorded on the object before deleting it: the object was
    cancelled by an actor (dispatch, on behalf of whoever asked), whatever the reason the
    stop gave (a cancel, the node-loss fence, a duplicate); the reason stays in ``detail``."""
    meta = tj.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(tags.STOP)
    if not raw:
        return None
    when = meta.get("deletionTimestamp")
    try:
        stop = Cause.model_validate(json.loads(raw))
    except (ValueError, TypeError):
        return _cause(CauseKind.UNKNOWN, f"unreadable {tags.STOP} annotation: {raw}", when)
    detail = f"stopped by dispatch ({stop.kind.value})" + (
        f": {stop.detail}" if stop.detail else ""
    )
    return Cause(
        kind=CauseKind.CANCELLED,
        provenance=Provenance.ACTOR,
        actor=stop.actor or "dispatch",
        detail=detail,
        at=parse_time(when) or stop.at,
    )


def classify(ev: Evidence, remembered: Mapping[int, Cause] | None = None) -> ObjectView:
    """The object as dispatch reports it. ``remembered`` holds causes of earlier JobSet
    restart attempts seen by earlier discoveries (a restart deletes their pods)."""

    remembered = remembered or {}
    tj = ev.trainjob
    attempt = int(((ev.jobset or {}).get("status") or {}).get("restarts") or 0)
    past = []
    for index in range(attempt):
        cause = remembered.get(index)
        if cause is None:
            restart = cond(ev.jobset, "RestartingJobSet")
            words = _said(restart) if restart and index == attempt - 1 else ""
            cause = _cause(
                CauseKind.UNKNOWN,
                f"JobSet {ev.name} restart attempt {index} ended before dispatch saw why"
                + (f"; JobSet says {words}" if words else ""),
                None,
            )
        past.append(_execution(index, ev, cause, ()))

    def view(
        phase: Phase,
        state: str,
        cause: Cause | None,
        current: Cause | None = None,
        node_causes: tuple[Cause, ...] = (),
    ) -> ObjectView:
        executions = [*past, _execution(attempt, ev, current, node_causes)]
        return ObjectView(
            object_id=tags.object_id(ev.namespace, ev.name),
            job_id=ev.job_id,
            submission=ev.submission,
            phase=phase,
            scheduler_state=state,
            cause=cause,
            executions=tuple(executions),
            created_at=parse_time(((tj or {}).get("metadata") or {}).get("creationTimestamp")),
        )

    live = [p for p in ev.pods if not pod_terminal(p)]
    lost = next((c for p in live if (c := node_problem(p, ev.nodes)) is not None), None)
    if lost is None:
        lost = next(
            (c for p in live if (c := pod_cause(p)) is not None and c.kind is CauseKind.NODE_LOST),
            None,
        )

    # Deletion: alive while any pod is; then ended, by dispatch's stop or by someone else.
    if tj is None or (tj.get("metadata") or {}).get("deletionTimestamp"):
        if live:
            return view(Phase.RUNNING, "Terminating", lost, lost)
        recorded = stop_cause(tj) if tj is not None else None
        if recorded is not None:
            return view(Phase.ENDED, "Deleted", recorded, recorded)
        when = ((tj or {}).get("metadata") or {}).get("deletionTimestamp")
        gone = _cause(
            CauseKind.UNKNOWN,
            f"TrainJob {ev.namespace}/{ev.name} was deleted"
            + (f" at {when}" if when else "")
            + " without a stop recorded by dispatch",
            when,
        )
        return view(Phase.ENDED, "Deleted", gone, gone)

    # Terminal conditions.
    if (done := true(tj, "Complete")) is not None:
        ok = _cause(
            CauseKind.NONE,
            _said(done),
            done.get("lastTransitionTime"),
            exit_code=0,
            provenance=Provenance.APPLICATION,
        )
        return view(Phase.ENDED, "Complete", ok, ok)
    if (failed := true(tj, "Failed")) is not None:
        reason, at = failed.get("reason") or "", failed.get("lastTransitionTime")
        node_causes: tuple[Cause, ...] = ()
        if reason == "DeadlineExceeded":
            cause = _cause(CauseKind.TIME_LIMIT, f"TrainJob: {_said(failed)}", at)
        elif reason == "TrainingRuntimeNotSupported":
            cause = _cause(CauseKind.LAUNCH_FAILED, f"TrainJob: {_said(failed)}", at)
        elif reason in JOBSET_FAILURES:
            found, node_causes = ending_of(ev, attempt)
            cause = found or _cause(CauseKind.UNKNOWN, f"TrainJob: {_said(failed)}", at)
        else:
            cause = _cause(CauseKind.UNKNOWN, f"TrainJob: {_said(failed)}", at)
        return view(Phase.ENDED, "Failed", cause, cause, node_causes)

    # Suspension: dispatch's gate, Kueue's queueing, or someone else's hold.
    annotations = (tj.get("metadata") or {}).get("annotations") or {}
    if (tj.get("spec") or {}).get("suspend"):
        if annotations.get(tags.GATE) == "closed":
            return view(Phase.GATED, "Suspended", None)
        wl = ev.workload
        if wl is not None:
            evicted = true(wl, "Evicted")
            if evicted is not None:
                reason = evicted.get("reason") or ""
                words = f"Kueue workload {wl['metadata']['name']}: Evicted {_said(evicted)}"
                at = evicted.get("lastTransitionTime")
                if reason in KUEUE_REQUEUES:
                    return view(
                        Phase.PENDING, "Suspended", _cause(KUEUE_REQUEUES[reason], words, at)
                    )
                if reason.endswith("MaximumExecutionTimeExceeded"):
                    limit = _cause(CauseKind.TIME_LIMIT, words, at)
                    return view(Phase.ENDED, "Suspended", limit, limit)
                if reason.startswith("Deactivated"):
                    return view(Phase.HELD, "Suspended", _cause(CauseKind.HELD, words, at))
                return view(Phase.PENDING, "Suspended", _cause(CauseKind.UNKNOWN, words, at))
            reserved = cond(wl, "QuotaReserved")
            if reserved is not None and reserved.get("status") == "False":
                wl_name = wl["metadata"]["name"]
                words = f"Kueue workload {wl_name}: QuotaReserved=False {_said(reserved)}"
                return view(
                    Phase.PENDING,
                    "Queued",
                    _cause(CauseKind.NO_CAPACITY, words, reserved.get("lastTransitionTime")),
                )
            return view(Phase.PENDING, "Queued", None)
        if ((tj.get("metadata") or {}).get("labels") or {}).get(tags.KUEUE_QUEUE):
            return view(Phase.PENDING, "Queued", None)
        suspended = cond(tj, "Suspended")
        words = f"TrainJob: {_said(suspended)}" if suspended else "TrainJob: spec.suspend=true"
        return view(
            Phase.HELD,
            "Suspended",
            _cause(CauseKind.HELD, words, (suspended or {}).get("lastTransitionTime")),
        )

    # Alive: a lost node first (the case where running carries a cause).
    if lost is not None:
        return view(Phase.RUNNING, "Running", lost)
    current, node_causes = ending_of(ev, attempt)
    target = next(
        (
            t
            for j in ev.jobs
            if attempt_of(j) == attempt
            and (t := true(j, "FailureTarget"))
            and not true(j, "Failed")
        ),
        None,
    )
    if target is not None and current is None:
        stuck = _cause(
            CauseKind.NODE_LOST,
            f"job: FailureTarget without Failed: {_said(target)}",
            target.get("lastTransitionTime"),
        )
        return view(Phase.RUNNING, "Running", stuck)
    restarting = true(ev.jobset, "RestartingJobSet") is not None or any(
        true(j, "Failed") for j in ev.jobs if attempt_of(j) == attempt
    )
    if current is not None and current.kind is not CauseKind.NONE and restarting:
        return view(Phase.PENDING, "Restarting", None, current, node_causes)
    if current is not None and current.kind is not CauseKind.NONE:
        return view(Phase.RUNNING, "Running", None)
    pending = [c for p in live if (c := pod_pending_cause(p)) is not None]
    launch = next((c for c in pending if c.kind is CauseKind.LAUNCH_FAILED), None)
    if launch is not None:
        return view(Phase.PENDING, "Pending", launch)
    if pending:
        return view(Phase.PENDING, "Pending", pending[0])
    if any(((p.get("status") or {}).get("phase")) == "Running" for p in live):
        return view(Phase.RUNNING, "Running", None)
    return view(Phase.PENDING, "Created", None)


def past_endings(ev: Evidence) -> dict[int, Cause]:
    """Endings of the current attempt worth remembering before a restart deletes them."""
    attempt = int(((ev.jobset or {}).get("status") or {}).get("restarts") or 0)
    cause, _ = ending_of(ev, attempt)
    if cause is None or cause.kind is CauseKind.NONE:
        return {}
    return {attempt: cause}


def group(
    trainjobs: Iterable[Obj],
    jobsets: Iterable[Obj],
    jobs: Iterable[Obj],
    pods: Iterable[Obj],
    nodes: Iterable[Obj],
    workloads: Iterable[Obj],
    wanted: set[str],
) -> list[Evidence]:
    """Sort one listing of each kind into per-object evidence, for the wanted job ids.

    Children are matched to their TrainJob by ``jobset.sigs.k8s.io/jobset-name`` (the
    JobSet is named after the TrainJob). Children whose TrainJob is gone still form an
    object, so pods left behind by a deletion keep the job alive (the gate's fence).
    """
    by_label = {tags.job_label(j): j for j in wanted}
    node_map = {n["metadata"]["name"]: n for n in nodes}
    evidence: dict[tuple[str, str], Evidence] = {}

    def ident(obj: Obj) -> tuple[str, int] | None:
        meta = obj.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        job_id = annotations.get(tags.JOB_ID) or by_label.get(labels.get(tags.JOB, ""))
        if job_id is None or job_id not in wanted or tags.job_label(job_id) != labels.get(tags.JOB):
            return None
        try:
            return job_id, int(labels.get(tags.SUBMISSION, ""))
        except ValueError:
            return None

    for tj in trainjobs:
        found = ident(tj)
        if found is None:
            continue
        meta = tj["metadata"]
        evidence[(meta.get("namespace", ""), meta["name"])] = Evidence(
            job_id=found[0],
            submission=found[1],
            name=meta["name"],
            namespace=meta.get("namespace", ""),
            trainjob=tj,
        )

    def attach(obj: Obj) -> Evidence | None:
        meta = obj.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(tags.JOBSET_NAME) or (
            meta["name"] if obj.get("kind") == "JobSet" else None
        )
        if owner is None:
            return None
        key = (meta.get("namespace", ""), owner)
        if key not in evidence:
            found = ident(obj)
            if found is None:
                return None
            evidence[key] = Evidence(
                job_id=found[0], submission=found[1], name=owner, namespace=key[0]
            )
        return evidence[key]

    for js in jobsets:
        if (ev := attach({**js, "kind": "JobSet"})) is not None:
            ev.jobset = js
    for job in jobs:
        if (ev := attach(job)) is not None:
            ev.jobs.append(job)
    for pod in pods:
        if (ev := attach(pod)) is not None:
            ev.pods.append(pod)
    uid_to_ev = {
        ev.trainjob["metadata"]["uid"]: ev
        for ev in evidence.values()
        if ev.trainjob is not None and ev.trainjob["metadata"].get("uid")
    }
    for wl in workloads:
        uid = ((wl.get("metadata") or {}).get("labels") or {}).get(tags.KUEUE_JOB_UID)
        if uid in uid_to_ev:
            uid_to_ev[uid].workload = wl
    for ev in evidence.values():
        ev.nodes = node_map
    return list(evidence.values())
