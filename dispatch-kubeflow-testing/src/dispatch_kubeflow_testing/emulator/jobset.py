"""The JobSet controller (v0.11.1): one Job per replicated job, suspend, and the
failurePolicy (``failure_policy.go``: the first matching rule wins, default
RestartJobSet, maxRestarts). A restart counts up ``status.restarts`` and records an
Event (JobSet sets no condition for it); the Jobs of the earlier attempt are then deleted
(Foreground) and their successors made once they are gone, so a discovery in between
sees the new attempt number with the old Jobs terminating, or no Job at all."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    JOBSET_NAME,
    RESTART_ATTEMPT,
    RJOB_NAME,
    condition,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    JOB,
    JOBSET,
    ApiError,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster


def jobsets(c: Cluster) -> None:
    for js in list(c.store.items(JOBSET)):
        meta, spec, status = js["metadata"], js["spec"], js.setdefault("status", {})
        if "deletionTimestamp" in meta or status.get("terminalState"):
            continue
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        attempt = status.get("restarts", 0)
        jobs = []
        for rj in spec.get("replicatedJobs", []):
            job_name = f"{name}-{rj['name']}-0"
            try:
                job = c.store.raw(JOB, ns, job_name)
            except ApiError:
                job = None
            if job is not None and job["metadata"]["labels"].get(RESTART_ATTEMPT) != str(attempt):
                # a Job of an earlier attempt: deleted (Foreground); its successor is made
                # once it is gone (same name), as ``deleteJobs(ownedJobs.previous)`` does
                if "deletionTimestamp" not in job["metadata"]:
                    c.store.delete(JOB, ns, job_name, "Foreground", None)
                    c.changed = True
                continue
            if job is None:
                tmpl = copy.deepcopy(rj["template"])
                extra = {
                    JOBSET_NAME: name,
                    RJOB_NAME: rj["name"],
                    RESTART_ATTEMPT: str(attempt),
                    "jobset.sigs.k8s.io/job-index": "0",
                    "jobset.sigs.k8s.io/jobset-uid": uid,
                }
                tmpl_meta = tmpl.get("metadata") or {}
                tmpl["spec"]["template"]["metadata"]["labels"].update(extra)
                job_body = {
                    "metadata": {
                        "name": job_name,
                        "labels": {**(tmpl_meta.get("labels") or {}), **extra},
                        "ownerReferences": [c.owner_ref(js)],
                    },
                    "spec": {**tmpl["spec"], "suspend": bool(spec.get("suspend"))},
                    "status": {},
                }
                try:
                    job = c.create(JOB, ns, job_body)
                except ApiError:
                    # the API server refuses the Job (its template is invalid): the real
                    # controller logs the error and retries; the JobSet stays without it
                    continue
            if bool(job["spec"].get("suspend")) != bool(spec.get("suspend")):
                job["spec"]["suspend"] = bool(spec.get("suspend"))
                c.store.touch(job)
                c.changed = True
            jobs.append((rj["name"], job))
        if spec.get("suspend"):
            c.set_condition(js, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
        elif condition(js, "Suspended"):
            c.set_condition(js, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        rstatus = []
        for rj_name, job in jobs:
            st = job.get("status") or {}
            rstatus.append(
                {
                    "name": rj_name,
                    "ready": st.get("ready", 0) and 1,
                    "succeeded": 1 if is_true(job, "Complete") else 0,
                    "failed": 1 if is_true(job, "Failed") else 0,
                    "active": 1 if st.get("active", 0) and not is_true(job, "Failed") else 0,
                    "suspended": 1 if job["spec"].get("suspend") else 0,
                }
            )
        if status.get("replicatedJobsStatus") != rstatus:
            status["replicatedJobsStatus"] = rstatus
            c.store.touch(js)
            c.changed = True
        failed = [job for _, job in jobs if is_true(job, "Failed")]
        if failed:
            fail_or_restart(c, js, failed[0])
        elif jobs and all(is_true(job, "Complete") for _, job in jobs):
            status["terminalState"] = "Completed"
            c.set_condition(
                js, "Completed", "True", "AllJobsCompleted", "jobset completed successfully"
            )


def fail_or_restart(c: Cluster, js: Obj, job: Obj) -> None:
    """``failure_policy.go``: the first rule matching the failed Job's reason decides
    (default RestartJobSet); a restart only counts up ``status.restarts`` (and
    ``restartsCountTowardsMax``) and records an Event, no condition: the Jobs of the
    earlier attempt are then deleted and made again (above)."""
    policy = js["spec"].get("failurePolicy")
    status = js["status"]
    job_name = job["metadata"]["name"]
    reason = (condition(job, "Failed") or {}).get("reason", "")
    first = f"(first failed job: {job_name})"
    if policy is None:
        return _fail(c, js, "FailedJobs", f"jobset failed due to one or more job failures {first}")
    action = "RestartJobSet"
    for rule in policy.get("rules") or []:
        reasons = rule.get("onJobFailureReasons") or []
        targets = rule.get("targetReplicatedJobs") or []
        rjob = job["metadata"]["labels"].get(RJOB_NAME)
        if (not reasons or reason in reasons) and (not targets or rjob in targets):
            action = rule["action"]
            break
    if action == "FailJobSet":
        return _fail(
            c,
            js,
            "FailJobSetFailurePolicyAction",
            f"applying FailJobSet failure policy action {first}",
        )
    counts = action == "RestartJobSet"
    if counts and status.get("restartsCountTowardsMax", 0) >= policy.get("maxRestarts", 0):
        return _fail(
            c,
            js,
            "ReachedMaxRestarts",
            f"jobset failed due to reaching max number of restarts {first}",
        )
    status["restarts"] = status.get("restarts", 0) + 1
    if counts:
        status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
    c.store.touch(js)
    c.changed = True
    c.event(
        js,
        "Warning",
        "RestartJobSetFailurePolicyAction"
        if counts
        else "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
        f"applying {action} failure policy action {first}",
    )


def _fail(c: Cluster, js: Obj, reason: str, message: str) -> None:
    """Failed, and the Jobs still active are deleted (Foreground), as ``jobSetFinished``
    does on the next reconcile."""
    js["status"]["terminalState"] = "Failed"
    c.set_condition(js, "Failed", "True", reason, message)
    ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
    for job in list(c.store.items(JOB, ns)):
        if (
            job["metadata"]["labels"].get(JOBSET_NAME) == name
            and "deletionTimestamp" not in job["metadata"]
            and not is_true(job, "Failed")
            and not is_true(job, "Complete")
        ):
            c.store.delete(JOB, ns, job["metadata"]["name"], "Foreground", None)
