"""The evidence chain of one TrainJob, read defensively from the API's plain dicts.

Every reader here takes what the API server returned and never raises on a field that is
missing, of the wrong type or out of range: a value it cannot read is treated as absent
(a time) or reported as an ``unknown`` cause with the raw text (see
:mod:`dispatch_kubeflow.classify`), because scheduler output is input (S-4, S-36). A
wrongly typed field is found by :mod:`dispatch_kubeflow.shape`; a listed item whose owner
cannot be read is kept on every object it could belong to (``Evidence.unreadable``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dispatch.core.cause import Cause
from dispatch.model.discovery import Execution
from dispatch.model.enums import CauseKind, Provenance

from dispatch_kubeflow import shape, tags

Obj = Mapping[str, Any]

#: the label (and annotation) the Job controller puts on an Indexed Job's pods: for a
#: Trainer node Job it is the node rank (PET_NODE_RANK)
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: JobSet restart attempts beyond this are not a count dispatch believes (JobSet's
#: maxRestarts is an int32; a real training restarting this often is broken anyway), and
#: listing one execution per attempt would not end
MAX_ATTEMPTS = 1000


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time as the API writes it; None when absent, unreadable or without a
    zone (a time dispatch cannot place is no time, not an error)."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def mapping(value: object) -> Obj:
    return value if isinstance(value, Mapping) else {}


def meta(obj: object) -> Obj:
    return mapping(mapping(obj).get("metadata"))


def labels(obj: object) -> Obj:
    return mapping(meta(obj).get("labels"))


def annotations_of(obj: object) -> Obj:
    return mapping(meta(obj).get("annotations"))


def status(obj: object) -> Obj:
    return mapping(mapping(obj).get("status"))


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def name_of(obj: object) -> str:
    return text(meta(obj).get("name"))


def cond(obj: Obj | None, ctype: str) -> Obj | None:
    conditions = status(obj).get("conditions")
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, Mapping) and c.get("type") == ctype:
            return c
    return None


def true(obj: Obj | None, ctype: str) -> Obj | None:
    c = cond(obj, ctype)
    return c if c is not None and c.get("status") == "True" else None


def said(c: Obj) -> str:
    """A condition in its own words: ``Reason: message``."""
    reason, message = text(c.get("reason")), text(c.get("message"))
    return f"{reason}: {message}" if reason and message else reason or message


def make_cause(
    kind: CauseKind,
    detail: str,
    at: object,
    *,
    exit_code: int | None = None,
    provenance: Provenance = Provenance.SCHEDULER,
    nodes: tuple[str, ...] = (),
    rank: int | None = None,
) -> Cause:
    return Cause(
        kind=kind,
        provenance=provenance,
        detail=detail,
        exit_code=exit_code,
        at=parse_time(at),
        nodes=nodes,
        rank=rank,
    )


def small_int(value: object, low: int = 0, high: int = MAX_ATTEMPTS) -> int | None:
    """An integer in [low, high] from an int or its decimal text; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not value.isascii() or not value.lstrip("-").isdigit() or len(value) > 12:
            return None
        value = int(value)
    if isinstance(value, int) and low <= value <= high:
        return value
    return None


def attempt_of(obj: Obj) -> int | None:
    """The JobSet restart attempt a Job or Pod belongs to (label absent: attempt 0)."""
    raw = labels(obj).get(tags.RESTART_ATTEMPT, "0")
    return small_int(raw)


def node_of(pod: object) -> str:
    return text(mapping(mapping(pod).get("spec")).get("nodeName"))


def rank_of(pod: Obj) -> int | None:
    """The pod's node rank: its Indexed Job completion index (label, else annotation)."""
    raw = labels(pod).get(COMPLETION_INDEX, annotations_of(pod).get(COMPLETION_INDEX))
    return small_int(raw, 0, 1 << 20)


def tasks_per_node(pod: Obj) -> int:
    """``PET_NPROC_PER_NODE`` as the torch plugin set it on the pod (1 when absent)."""
    containers = mapping(mapping(pod).get("spec")).get("containers")
    for container in containers if isinstance(containers, list) else []:
        env = mapping(container).get("env")
        for var in env if isinstance(env, list) else []:
            if mapping(var).get("name") == "PET_NPROC_PER_NODE":
                return small_int(mapping(var).get("value"), 1, 1 << 16) or 1
    return 1


def task_rank(pod: Obj) -> int | None:
    """The rank whose ending the pod's is: its node rank when the node runs one task
    (``RANK = NODE_RANK``); with several tasks the pod cannot say which one failed."""
    return rank_of(pod) if tasks_per_node(pod) == 1 else None


def container_statuses(pod: Obj) -> list[Obj]:
    found = status(pod).get("containerStatuses")
    return [cs for cs in found if isinstance(cs, Mapping)] if isinstance(found, list) else []


def pod_terminal(pod: object) -> bool:
    return status(pod).get("phase") in ("Succeeded", "Failed")


def restarts_of(jobset: Obj | None) -> object:
    """The JobSet's ``status.restarts`` as written (0 when absent); checked by classify."""
    return status(jobset).get("restarts") or 0


def jobset_names(trainjobs: Iterable[object], jobsets: Iterable[object]) -> list[str]:
    """The JobSets of these TrainJobs (each named like its TrainJob) and of these JobSets:
    before Trainer 2.2 a TrainJob's ``spec.labels`` reach only its JobSet's metadata (the
    Trainer's ``newRuntimeInfo`` gives them to the JobSet, and JobSet labels a Job from
    its replicated Job template), so Jobs and Pods are listed by
    ``jobset.sigs.k8s.io/jobset-name``, which JobSet puts on both. Only names that can
    stand in a label selector."""
    found = {name_of(o) for o in (*trainjobs, *jobsets)}
    return sorted(n for n in found if n and len(n) <= 63 and tags.is_label_value(n))


def needs_nodes(pods: Iterable[object]) -> bool:
    """Whether a pod is placed and still there (live or being deleted): only then can its
    Node's readiness matter."""
    return any(
        node_of(p) and (not pod_terminal(p) or meta(p).get("deletionTimestamp")) for p in pods
    )


def queued_uids(trainjobs: Iterable[object]) -> list[str]:
    """The uids of the TrainJobs sent to a Kueue queue (their Workloads carry the uid)."""
    return sorted(
        {
            uid
            for t in trainjobs
            if (annotations_of(t).get(tags.QUEUE) or labels(t).get(tags.KUEUE_QUEUE))
            and (uid := text(meta(t).get("uid")))
        }
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
    #: the words for a listed item whose owner could not be read: it may be this object's
    #: (a pod that showed why it failed, its TrainJob), so this object cannot be read either
    unreadable: str = ""

    def of_attempt(self, kind: str, attempt: int) -> list[Obj]:
        objs = self.jobs if kind == "jobs" else self.pods
        return [o for o in objs if attempt_of(o) == attempt]

    def malformed(self) -> str | None:
        """The first thing of this object dispatch cannot read: an item that may be its,
        or a wrongly typed field of its TrainJob, JobSet, Jobs, Pods, Workload or the
        Nodes its pods run on (:mod:`dispatch_kubeflow.shape`)."""
        if self.unreadable:
            return self.unreadable
        parts: list[tuple[str, object]] = [("TrainJob", self.trainjob), ("JobSet", self.jobset)]
        parts += [("Job", j) for j in self.jobs] + [("Pod", p) for p in self.pods]
        parts += [("Node", self.nodes[n]) for n in sorted(self.node_names()) if n in self.nodes]
        parts.append(("Workload", self.workload))
        for kind, obj in parts:
            if obj is not None and (found := shape.broken(kind, obj)) is not None:
                return found
        return None

    def node_names(self) -> set[str]:
        return {n for p in self.pods if (n := node_of(p))}


def recorded_executions(tj: Obj | None) -> dict[int, Execution]:
    """The endings of earlier JobSet restart attempts, as dispatch wrote them on the
    TrainJob before the restart deleted their pods (annotation ``dispatch.dev/attempt-N``).
    An unreadable one is skipped: the attempt is then reported as never seen."""
    found: dict[int, Execution] = {}
    for key, raw in annotations_of(tj).items():
        if not isinstance(key, str) or not key.startswith(tags.ATTEMPT_PREFIX):
            continue
        index = small_int(key[len(tags.ATTEMPT_PREFIX) :])
        if index is None or not isinstance(raw, str):
            continue
        try:
            execution = Execution.model_validate(json.loads(raw))
        except (ValueError, TypeError, RecursionError):
            continue
        if execution.index == index and execution.cause is not None:
            found[index] = execution
    return found


def group(
    trainjobs: Iterable[object],
    jobsets: Iterable[object],
    jobs: Iterable[object],
    pods: Iterable[object],
    nodes: Iterable[object],
    workloads: Iterable[object],
    wanted: set[str],
) -> list[Evidence]:
    """Sort one listing of each kind into per-object evidence, for the wanted job ids.

    Children are matched to their TrainJob by ``jobset.sigs.k8s.io/jobset-name`` (the
    JobSet is named after the TrainJob). Children whose TrainJob is gone still form an
    object, so pods left behind by a deletion keep the job alive (the gate's fence). An
    object whose tags do not name a wanted job and a positive submission is not ours.

    An item whose owner cannot be read (not an object, or its name, labels or annotations
    wrongly typed) may belong to any wanted job: it is kept, as words, on every object
    (``Evidence.unreadable``). An unreadable Node is kept on the objects whose pods run on
    a node the listing does not name.
    """
    by_label = {tags.job_label(j): j for j in wanted}
    unreadable: list[str] = []
    lost_nodes: list[str] = []

    def readable(kind: str, items: Iterable[object], into: list[str]) -> list[Obj]:
        found: list[Obj] = []
        for obj in items:
            why = shape.unattributable(kind, obj)
            if why is not None:
                into.append(why)
            elif isinstance(obj, Mapping):
                found.append(obj)
        return found

    tj_items = readable("TrainJob", trainjobs, unreadable)
    js_items = readable("JobSet", jobsets, unreadable)
    job_items = readable("Job", jobs, unreadable)
    pod_items = readable("Pod", pods, unreadable)
    wl_items = readable("Workload", workloads, unreadable)
    node_map = {name: n for n in readable("Node", nodes, lost_nodes) if (name := name_of(n))}
    evidence: dict[tuple[str, str], Evidence] = {}

    def ident(obj: Obj) -> tuple[str, int] | None:
        job_label = labels(obj).get(tags.JOB)
        job_id = annotations_of(obj).get(tags.JOB_ID) or by_label.get(text(job_label))
        if not isinstance(job_id, str) or job_id not in wanted:
            return None
        if tags.job_label(job_id) != job_label:
            return None
        submission = small_int(labels(obj).get(tags.SUBMISSION), 1, 1 << 31)
        return None if submission is None else (job_id, submission)

    for tj in tj_items:
        found = ident(tj)
        name = name_of(tj)
        if found is None or not name:
            continue
        namespace = text(meta(tj).get("namespace"))
        evidence[(namespace, name)] = Evidence(
            job_id=found[0], submission=found[1], name=name, namespace=namespace, trainjob=tj
        )

    def attach(obj: Obj, is_jobset: bool = False) -> Evidence | None:
        owner = text(labels(obj).get(tags.JOBSET_NAME)) or (name_of(obj) if is_jobset else "")
        if not owner:
            return None
        key = (text(meta(obj).get("namespace")), owner)
        if key not in evidence:
            found = ident(obj)
            if found is None:
                return None
            evidence[key] = Evidence(
                job_id=found[0], submission=found[1], name=owner, namespace=key[0]
            )
        return evidence[key]

    for js in js_items:
        if (ev := attach(js, is_jobset=True)) is not None:
            ev.jobset = js
    for job in job_items:
        if (ev := attach(job)) is not None:
            ev.jobs.append(job)
    for pod in pod_items:
        if (ev := attach(pod)) is not None:
            ev.pods.append(pod)
    uid_to_ev = {
        uid: ev
        for ev in evidence.values()
        if ev.trainjob is not None and (uid := text(meta(ev.trainjob).get("uid")))
    }
    for wl in wl_items:
        uid = text(labels(wl).get(tags.KUEUE_JOB_UID))
        if uid in uid_to_ev:
            uid_to_ev[uid].workload = wl
    for ev in evidence.values():
        ev.nodes = node_map
        if unreadable:
            ev.unreadable = unreadable[0]
        elif lost_nodes and any(
            node_of(p) not in node_map for p in ev.pods if node_of(p) and not pod_terminal(p)
        ):
            ev.unreadable = lost_nodes[0]
    return list(evidence.values())
