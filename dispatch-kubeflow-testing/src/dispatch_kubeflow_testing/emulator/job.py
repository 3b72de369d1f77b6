"""The Job controller: pods per completion index, FailureTarget on the first failed pod
(backoffLimit 0), Failed only once every pod is terminal (k8s ≥ 1.31), deadline."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    JOB_NAME,
    condition,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    JOB,
    POD,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster


def jobs(c: Cluster) -> None:
    for job in list(c.store.items(JOB)):
        meta, spec = job["metadata"], job["spec"]
        if "deletionTimestamp" in meta or is_true(job, "Failed") or is_true(job, "Complete"):
            continue
        status = job.setdefault("status", {})
        pods = c.pods_of_job(job)
        if spec.get("suspend"):
            for pod in pods:
                if "deletionTimestamp" not in pod["metadata"]:
                    c.store.delete(POD, meta["namespace"], pod["metadata"]["name"], None, None)
                    c.changed = True
            c.set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended")
            _counts(c, job, pods)
            continue
        if condition(job, "Suspended"):
            c.set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
        status.setdefault("startTime", c.now())
        indices = {
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods
        }
        if not is_true(job, "FailureTarget"):
            for index in range(spec.get("completions", 1)):
                if str(index) not in indices:
                    create_pod(c, job, index)
            pods = c.pods_of_job(job)
        if meta["uid"] in c.deadline_expired:
            c.set_condition(
                job,
                "FailureTarget",
                "True",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
            kill(c, job, pods, delete=True)
        elif any(pod_failed(c, p) for p in pods) and not is_true(job, "FailureTarget"):
            c.set_condition(
                job,
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
            kill(c, job, pods, delete=False)
        pods = c.pods_of_job(job)
        if is_true(job, "FailureTarget"):
            if all(c.pod_terminal(p) for p in pods):
                target = condition(job, "FailureTarget") or {}
                c.set_condition(job, "Failed", "True", target["reason"], target["message"])
        elif pods and all(p["status"].get("phase") == "Succeeded" for p in pods):
            c.set_condition(
                job,
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            c.set_condition(
                job,
                "Complete",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
        _counts(c, job, c.pods_of_job(job))


def _counts(c: Cluster, job: Obj, pods: list[Obj]) -> None:
    status = job["status"]
    counts = {
        "active": sum(
            1 for p in pods if not c.pod_terminal(p) and "deletionTimestamp" not in p["metadata"]
        ),
        "ready": sum(
            1
            for p in pods
            if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
        ),
        "failed": sum(1 for p in pods if pod_failed(c, p)),
        "succeeded": sum(1 for p in pods if p["status"].get("phase") == "Succeeded"),
        "terminating": sum(
            1 for p in pods if "deletionTimestamp" in p["metadata"] and not c.pod_terminal(p)
        ),
    }
    if any(status.get(k) != v for k, v in counts.items()):
        status.update(counts)
        c.store.touch(job)
        c.changed = True


def pod_failed(c: Cluster, pod: Obj) -> bool:
    """``isPodFailed`` without a podFailurePolicy: a terminating pod counts as failed."""
    return pod["status"].get("phase") == "Failed" or "deletionTimestamp" in pod["metadata"]


def kill(c: Cluster, job: Obj, pods: list[Obj], *, delete: bool) -> None:
    """The Job terminates its other active pods; those on a lost node stay Terminating."""
    for pod in pods:
        if c.pod_terminal(pod):
            continue
        if not c.node_ready(pod["spec"].get("nodeName")):
            if "deletionTimestamp" not in pod["metadata"]:
                c.store.delete(
                    POD, pod["metadata"]["namespace"], pod["metadata"]["name"], None, None
                )
            continue
        if delete:
            c.store.remove(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
        else:
            c.terminate(pod, reason="Error", exit_code=143, after=1)
        c.changed = True


def create_pod(c: Cluster, job: Obj, index: int) -> None:
    meta = job["metadata"]
    template = copy.deepcopy(job["spec"]["template"])
    labels = {
        **(template.get("metadata") or {}).get("labels", {}),
        JOB_NAME: meta["name"],
        "batch.kubernetes.io/controller-uid": meta["uid"],
        # k8s ≥ 1.28 (PodIndexLabel) puts the index in a label too
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    pod = c.create(
        POD,
        meta["namespace"],
        {
            "metadata": {
                "name": f"{meta['name']}-{index}-{next(c._suffix):05x}",
                "labels": labels,
                "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                "ownerReferences": [c.owner_ref(job)],
            },
            "spec": {
                **template.get("spec", {}),
                "restartPolicy": template.get("spec", {}).get("restartPolicy", "OnFailure"),
            },
            "status": {"phase": "Pending", "conditions": []},
        },
    )
    if c.pod_index is not None:
        c.pod_index.setdefault((meta["namespace"], meta["name"]), []).append(pod)
