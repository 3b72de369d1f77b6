"""The Job controller (``pkg/controller/job``, Kubernetes 1.35), as the Job spec says:

- a pod per completion index; a failed pod counts once against ``backoffLimit`` (a pod
  being deleted counts as failed unless ``podReplacementPolicy`` is Failed, which a
  ``podFailurePolicy`` implies) and its index gets a new pod from the next step;
- under ``restartPolicy: OnFailure`` the containers' restarts count too
  (``pastBackoffLimitOnFailure``: their sum reaching ``backoffLimit``);
- ``podFailurePolicy`` rules (FailJob, Ignore, Count) on exit codes and pod conditions;
- the end is FailureTarget first (BackoffLimitExceeded, PodFailurePolicy,
  DeadlineExceeded), every active pod is deleted, and Failed follows once no pod is
  terminating, so a pod stuck on a lost node holds the Job at FailureTarget.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    COMPLETION_INDEX,
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
                if "deletionTimestamp" not in pod["metadata"] and not c.pod_terminal(pod):
                    c.store.delete(POD, meta["namespace"], pod["metadata"]["name"], None, None)
                    c.changed = True
            c.set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended")
            _counts(c, job, c.pods_of_job(job))
            continue
        if condition(job, "Suspended"):
            c.set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
        status.setdefault("startTime", c.now())
        fail_message = _count_finished(c, job, pods)
        if not is_true(job, "FailureTarget"):
            if fail_message is not None:
                c.set_condition(job, "FailureTarget", "True", "PodFailurePolicy", fail_message)
            elif status.get("failed", 0) > spec.get("backoffLimit", 6) or _past_backoff_on_failure(
                job, pods
            ):
                c.set_condition(
                    job,
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                )
            elif meta["uid"] in c.deadline_expired:
                c.set_condition(
                    job,
                    "FailureTarget",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                )
        if is_true(job, "FailureTarget"):
            for pod in pods:
                if _active(c, pod):
                    c.store.delete(POD, meta["namespace"], pod["metadata"]["name"], None, None)
                    c.changed = True
            pods = c.pods_of_job(job)
            _counts(c, job, pods)
            if not status.get("terminating"):
                target = condition(job, "FailureTarget") or {}
                c.set_condition(job, "Failed", "True", target["reason"], target["message"])
            continue
        completions = spec.get("completions", 1)
        succeeded = _succeeded_indexes(pods)
        if len(succeeded) >= completions:
            c.set_condition(
                job,
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            _counts(c, job, pods)
            if not status.get("terminating"):
                c.set_condition(
                    job,
                    "Complete",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                )
            continue
        only_failed = spec.get("podReplacementPolicy") == "Failed"
        for index in range(completions):
            key = str(index)
            of_index = [p for p in pods if _index(p) == key]
            if key in succeeded or any(_active(c, p) for p in of_index):
                continue
            if only_failed and any(_terminating(c, p) for p in of_index):
                continue
            mark = c.replace_after.get((meta["uid"], key))
            if mark is not None and not c.due(mark):
                continue
            create_pod(c, job, index)
        _counts(c, job, c.pods_of_job(job))


def _index(pod: Obj) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, ""))


def _active(c: Cluster, pod: Obj) -> bool:
    return not c.pod_terminal(pod) and "deletionTimestamp" not in pod["metadata"]


def _terminating(c: Cluster, pod: Obj) -> bool:
    return "deletionTimestamp" in pod["metadata"] and not c.pod_terminal(pod)


def pod_failed(job: Obj, pod: Obj) -> bool:
    """``isPodFailed``: Failed, or being deleted and not Succeeded unless only failed
    pods are replaced (``podReplacementPolicy: Failed``, implied by a podFailurePolicy)."""
    phase = pod["status"].get("phase")
    if phase == "Failed":
        return True
    if job["spec"].get("podReplacementPolicy") == "Failed":
        return False
    return "deletionTimestamp" in pod["metadata"] and phase != "Succeeded"


def _count_finished(c: Cluster, job: Obj, pods: list[Obj]) -> str | None:
    """Count each newly failed pod once (unless a podFailurePolicy rule ignores it) and
    mark its index for replacement; the message of a FailJob rule that matched, if any."""
    counted = c.counted.setdefault(job["metadata"]["uid"], set())
    status = job["status"]
    policy = job["spec"].get("podFailurePolicy")
    message = None
    for pod in pods:
        uid = pod["metadata"]["uid"]
        if uid in counted:
            continue
        if pod["status"].get("phase") == "Succeeded":
            counted.add(uid)
            continue
        if not pod_failed(job, pod):
            continue
        counted.add(uid)
        c.replace_after[(job["metadata"]["uid"], _index(pod))] = c.step
        action, said = match_pod_failure_policy(policy, pod)
        if action == "FailJob" and message is None:
            message = said
        if action != "Ignore":
            status["failed"] = status.get("failed", 0) + 1
            c.store.touch(job)
            c.changed = True
    return message


def match_pod_failure_policy(policy: Obj | None, pod: Obj) -> tuple[str | None, str]:
    """``matchPodFailurePolicy``: the first rule whose exit codes (of a terminated,
    non-zero container) or pod conditions match decides; no rule, no action (Count)."""
    if not policy:
        return None, ""
    meta, status = pod["metadata"], pod["status"]
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            req = rule["onExitCodes"]
            for cs in status.get("containerStatuses") or []:
                term = (cs.get("state") or {}).get("terminated")
                if term is None or term.get("exitCode", 0) == 0:
                    continue
                if req.get("containerName") not in (None, cs.get("name")):
                    continue
                code = term["exitCode"]
                inside = code in (req.get("values") or [])
                if (req.get("operator") == "In") == inside:
                    return action, (
                        f"Container {cs.get('name')} for pod {meta['namespace']}/{meta['name']} "
                        f"failed with exit code {code} matching {action} rule at index {index}"
                    )
        elif rule.get("onPodConditions") is not None:
            for cond in status.get("conditions") or []:
                for pattern in rule["onPodConditions"]:
                    if cond.get("type") == pattern.get("type") and cond.get(
                        "status"
                    ) == pattern.get("status", "True"):
                        return action, (
                            f"Pod {meta['namespace']}/{meta['name']} has condition "
                            f"{cond['type']} matching {action} rule at index {index}"
                        )
    return None, ""


def _past_backoff_on_failure(job: Obj, pods: list[Obj]) -> bool:
    """``pastBackoffLimitOnFailure``: under OnFailure, the restarts of the containers of
    running and pending pods, summed, reach ``backoffLimit`` (any, when it is 0)."""
    template = job["spec"].get("template") or {}
    if (template.get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(
        int(cs.get("restartCount", 0))
        for p in pods
        if p["status"].get("phase") in ("Running", "Pending")
        for cs in (p["status"].get("containerStatuses") or [])
        + (p["status"].get("initContainerStatuses") or [])
    )
    limit = int(job["spec"].get("backoffLimit", 6))
    return restarts > 0 if limit == 0 else restarts >= limit


def _succeeded_indexes(pods: list[Obj]) -> set[str]:
    return {_index(p) for p in pods if p["status"].get("phase") == "Succeeded"}


def _counts(c: Cluster, job: Obj, pods: list[Obj]) -> None:
    status = job["status"]
    counts = {
        "active": sum(1 for p in pods if _active(c, p)),
        "ready": sum(1 for p in pods if _active(c, p) and is_true(p, "Ready")),
        "succeeded": len(_succeeded_indexes(pods)),
        "terminating": sum(1 for p in pods if _terminating(c, p)),
    }
    if any(status.get(k) != v for k, v in counts.items()):
        status.update(counts)
        c.store.touch(job)
        c.changed = True


def create_pod(c: Cluster, job: Obj, index: int) -> None:
    meta = job["metadata"]
    template = copy.deepcopy(job["spec"]["template"])
    labels = {
        **(template.get("metadata") or {}).get("labels", {}),
        JOB_NAME: meta["name"],
        "batch.kubernetes.io/controller-uid": meta["uid"],
        # k8s ≥ 1.28 (PodIndexLabel) puts the index in a label too
        COMPLETION_INDEX: str(index),
    }
    pod = c.create(
        POD,
        meta["namespace"],
        {
            "metadata": {
                "name": f"{meta['name']}-{index}-{next(c._suffix):05x}",
                "labels": labels,
                "annotations": {COMPLETION_INDEX: str(index)},
                "ownerReferences": [c.owner_ref(job)],
            },
            "spec": {
                **template.get("spec", {}),
                "restartPolicy": template.get("spec", {}).get("restartPolicy", "Never"),
            },
            "status": {"phase": "Pending", "conditions": []},
        },
    )
    if c.pod_index is not None:
        c.pod_index.setdefault((meta["namespace"], meta["name"]), []).append(pod)
