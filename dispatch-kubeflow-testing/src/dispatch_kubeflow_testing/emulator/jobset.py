"""The JobSet controller: one Job per replicated job, suspend, and the failurePolicy
(``failure_policy.go``: first matching rule wins, default RestartJobSet, maxRestarts).
A restart happens one reconcile step after the failure, so a discovery in between sees
the failed pods, as during a real restart's termination grace period."""

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
    POD,
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
        if uid in c.pending_restarts and c.step > c.pending_restarts[uid]:
            del c.pending_restarts[uid]
            for job in list(c.store.items(JOB, ns)):
                if job["metadata"]["labels"].get(JOBSET_NAME) == name:
                    for pod in c.pods_of_job(job):
                        c.store.remove(POD, ns, pod["metadata"]["name"])
                    c.store.remove(JOB, ns, job["metadata"]["name"])
            status["restarts"] = attempt + 1
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
            c.store.touch(js)
            c.changed = True
            continue
        if uid in c.pending_restarts:
            continue
        jobs = []
        for rj in spec.get("replicatedJobs", []):
            job_name = f"{name}-{rj['name']}-0"
            try:
                job = c.store.raw(JOB, ns, job_name)
            except ApiError:
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
    """``failure_policy.go``: first matching rule wins, default RestartJobSet, max restarts."""
    policy = js["spec"].get("failurePolicy")
    status = js["status"]
    job_name = job["metadata"]["name"]
    reason = (condition(job, "Failed") or {}).get("reason", "")
    if policy is None:
        return _fail(
            c,
            js,
            "FailedJobs",
            f"jobset failed due to one or more job failures (first failed job: {job_name})",
        )
    action, rule_name = "RestartJobSet", None
    for rule in policy.get("rules") or []:
        reasons = rule.get("onJobFailureReasons") or []
        if not reasons or reason in reasons:
            action, rule_name = rule["action"], rule.get("name")
            break
    if action == "FailJobSet":
        return _fail(
            c,
            js,
            "FailJobSetFailurePolicyAction",
            f"jobset failed due to FailJobSet action by rule {rule_name} (job {job_name})",
        )
    if action == "RestartJobSet" and status.get("restartsCountTowardsMax", 0) >= policy.get(
        "maxRestarts", 0
    ):
        return _fail(
            c, js, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
        )
    c.pending_restarts[js["metadata"]["uid"]] = c.step
    c.set_condition(
        js,
        "RestartingJobSet",
        "True",
        f"FailurePolicy_{rule_name}" if rule_name else "DefaultFailurePolicy",
        f"restarting jobset after job {job_name} failed: {reason}",
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
