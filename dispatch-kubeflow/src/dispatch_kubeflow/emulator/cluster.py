"""The controllers the emulator runs: Trainer, JobSet, Job, scheduler/kubelet, Kueue, GC.

Each pass reads and writes the store the way the real controller does, with the strings
the real controllers write (RESEARCH.md §1-§3), so the adapter's classifier meets the
same evidence chain it meets on a cluster: TrainJob → JobSet → Jobs → Pods → Nodes.

Simplifications, on purpose: a Job fails on its first failed pod (backoffLimit 0, what
multi-node training wants); pods start as soon as they are scheduled; a JobSet restart
happens one reconcile after the failure that caused it, so a discovery in between sees
the failed pods, as it would during a real restart's termination grace period.
"""

from __future__ import annotations

import copy
import itertools
import re
from datetime import timedelta
from typing import Any

from dispatch_kubeflow.emulator.store import (
    CLUSTER_RUNTIME,
    JOB,
    JOBSET,
    NODE,
    POD,
    RUNTIME,
    TRAINJOB,
    WORKLOAD,
    ApiError,
    Clock,
    Obj,
    Store,
    merge_patch,
    timestamp,
)

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_NAME = "batch.kubernetes.io/job-name"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
GPUS_PER_NODE = 8

LAUNCH_ERRORS = {
    "ErrImagePull": (
        'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": not found'
    ),
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "CreateContainerConfigError": 'secret "missing-secret" not found',
}


_SHELL_EXIT = re.compile(r"\s*exit\s+(\d+)\s*")


def command_exit(container: Obj) -> int | None:
    """The emulated kubelet runs a few trivial commands for real: ``true``/``false`` and
    ``sh -c 'exit N'`` end one step after they start; anything else runs until told."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if argv[:1] == ["true"]:
        return 0
    if argv[:1] == ["false"]:
        return 1
    if len(argv) == 3 and argv[0] in ("sh", "/bin/sh", "bash", "/bin/bash") and argv[1] == "-c":
        if argv[2].strip() == "true":
            return 0
        if m := _SHELL_EXIT.fullmatch(argv[2]):
            return int(m.group(1))
    return None


def condition(obj: Obj, ctype: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Obj, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


class Cluster:
    """All controllers over one store; ``reconcile`` runs them until nothing changes."""

    def __init__(self, store: Store, clock: Clock, trainer_version: str) -> None:
        self.store = store
        self.clock = clock
        self.trainer_version = tuple(int(p) for p in trainer_version.split("."))
        self.step = 0
        self.capacity = True
        self.kueue_quota = True
        self.launch_errors: dict[str, tuple[str, str]] = {}
        self.deadline_expired: set[str] = set()
        self.pending_restarts: dict[str, int] = {}
        self.unschedulable: set[str] = set()
        self.started: dict[str, int] = {}
        self._suffix = itertools.count(1)
        self._changed = False
        self._pod_index: dict[tuple[str, str], list[Obj]] | None = None

    # -- helpers -----------------------------------------------------------------------

    def now(self) -> str:
        return timestamp(self.clock.now())

    def later(self, seconds: int) -> str:
        return timestamp(self.clock.now() + timedelta(seconds=seconds))

    def set_condition(self, obj: Obj, ctype: str, status: str, reason: str, message: str) -> None:
        conds = obj.setdefault("status", {}).setdefault("conditions", [])
        for cond in conds:
            if cond["type"] == ctype:
                if (cond["status"], cond.get("reason"), cond.get("message")) == (
                    status,
                    reason,
                    message,
                ):
                    return
                if cond["status"] != status:
                    cond["lastTransitionTime"] = self.now()
                cond.update(status=status, reason=reason, message=message)
                break
        else:
            conds.append(
                {
                    "type": ctype,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": self.now(),
                }
            )
        self.store.touch(obj)
        self._changed = True

    def owner_ref(self, owner: Obj) -> Obj:
        return {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def create(self, res: Any, namespace: str, obj: Obj) -> Obj:
        self._changed = True
        self.store.create(res, namespace, obj)
        return self.store.raw(res, namespace, obj["metadata"]["name"])

    def node_ready(self, name: str | None) -> bool:
        if not name:
            return True
        try:
            node = self.store.raw(NODE, "", name)
        except ApiError:
            return False
        return is_true(node, "Ready")

    def runtime_of(self, tj: Obj) -> Obj | None:
        ref = tj["spec"].get("runtimeRef") or {}
        kind = ref.get("kind", "ClusterTrainingRuntime")
        try:
            if kind == "TrainingRuntime":
                return self.store.raw(RUNTIME, tj["metadata"]["namespace"], ref.get("name", ""))
            return self.store.raw(CLUSTER_RUNTIME, "", ref.get("name", ""))
        except ApiError:
            return None

    def pods_of_job(self, job: Obj) -> list[Obj]:
        """A job's pods, through an index rebuilt once per pass (a scan per job is O(N²))."""
        if self._pod_index is None:
            self._pod_index = {}
            for pod in self.store.items(POD):
                key = (pod["metadata"]["namespace"], pod["metadata"]["labels"].get(JOB_NAME, ""))
                self._pod_index.setdefault(key, []).append(pod)
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        pods = [
            p
            for p in self._pod_index.get(key, [])
            if self.store.exists(POD, key[0], p["metadata"]["name"])
        ]
        self._pod_index[key] = pods
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    # -- the loop ----------------------------------------------------------------------

    def reconcile(self) -> None:
        """One step: every controller, repeated until the cluster is quiet (bounded)."""
        with self.store.lock:
            self.step += 1
            for _ in range(20):
                self._changed = False
                self._pod_index = None
                self.kueue()
                self.trainer()
                self.jobsets()
                self.jobs()
                self.kubelet()
                if self.store.collect_garbage(
                    lambda pod: self.node_ready(pod["spec"].get("nodeName"))
                ):
                    self._changed = True
                if not self._changed:
                    return

    # -- Kueue -------------------------------------------------------------------------

    def kueue(self) -> None:
        for tj in list(self.store.items(TRAINJOB)):
            meta = tj["metadata"]
            if not meta["labels"].get(QUEUE_NAME) or "deletionTimestamp" in meta:
                continue
            if is_true(tj, "Complete") or is_true(tj, "Failed"):
                continue
            wl = next(
                (
                    w
                    for w in self.store.items(WORKLOAD, meta["namespace"])
                    if w["metadata"]["labels"].get(KUEUE_JOB_UID) == meta["uid"]
                ),
                None,
            )
            if wl is None:
                wl = self.create(
                    WORKLOAD,
                    meta["namespace"],
                    {
                        "metadata": {
                            "name": f"trainjob-{meta['name']}-{meta['uid'][:5]}",
                            "labels": {KUEUE_JOB_UID: meta["uid"]},
                            "ownerReferences": [self.owner_ref(tj)],
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
                    self.set_condition(
                        wl, "Evicted", "True", "Deactivated", "The workload is deactivated"
                    )
                self.set_condition(
                    wl, "QuotaReserved", "False", "Pending", "The workload is deactivated"
                )
                self.set_condition(
                    wl, "Admitted", "False", "NoReservation", "The workload has no reservation"
                )
                self._suspend(tj, True)
            elif admitted:
                self._suspend(tj, False)
            elif self.kueue_quota and not evicted:
                self.set_condition(
                    wl,
                    "QuotaReserved",
                    "True",
                    "QuotaReserved",
                    "Quota reserved in ClusterQueue cluster-queue",
                )
                self.set_condition(wl, "Admitted", "True", "Admitted", "The workload is admitted")
                self._suspend(tj, False)
            else:
                message = (
                    "couldn't assign flavors to pod set node: insufficient unused quota for "
                    "nvidia.com/gpu in flavor default-flavor, 8 more needed"
                )
                if not evicted:
                    self.set_condition(wl, "QuotaReserved", "False", "Pending", message)
                self._suspend(tj, True)

    def kueue_readmit(self) -> None:
        """Quota came back: evicted workloads are requeued and admitted again."""
        for wl in self.store.items(WORKLOAD):
            if is_true(wl, "Evicted") and wl["spec"].get("active", True):
                self.set_condition(wl, "Evicted", "False", "QuotaReserved", "Previously: Preempted")
                self.set_condition(wl, "Requeued", "True", "Preempted", "Requeued after preemption")

    def _suspend(self, tj: Obj, value: bool) -> None:
        if bool(tj["spec"].get("suspend")) != value:
            tj["spec"]["suspend"] = value
            self.store.touch(tj)
            self._changed = True

    # -- Trainer -----------------------------------------------------------------------

    def trainer(self) -> None:
        for tj in list(self.store.items(TRAINJOB)):
            meta, spec = tj["metadata"], tj["spec"]
            if (
                "deletionTimestamp" in meta
                or spec.get("managedBy", TRAINER_CONTROLLER) != TRAINER_CONTROLLER
            ):
                continue
            if is_true(tj, "Complete") or is_true(tj, "Failed"):
                continue
            runtime = self.runtime_of(tj)
            if runtime is None:
                ref = spec.get("runtimeRef") or {}
                self.set_condition(
                    tj,
                    "Failed",
                    "True",
                    "TrainingRuntimeNotSupported",
                    f"unsupported runtime: {ref.get('kind')}.{ref.get('apiGroup')}",
                )
                continue
            suspend = bool(spec.get("suspend"))
            if suspend:
                self.set_condition(tj, "Suspended", "True", "Suspended", "TrainJob is suspended")
            elif condition(tj, "Suspended") is not None:
                self.set_condition(tj, "Suspended", "False", "Resumed", "TrainJob is resumed")
            if meta["uid"] in self.deadline_expired:
                self.set_condition(
                    tj,
                    "Failed",
                    "True",
                    "DeadlineExceeded",
                    "TrainJob exceeded its active deadline",
                )
                try:
                    self.store.delete(JOBSET, meta["namespace"], meta["name"], "Background", None)
                except ApiError:
                    pass
                continue
            try:
                js = self.store.raw(JOBSET, meta["namespace"], meta["name"])
            except ApiError:
                js = self.create(JOBSET, meta["namespace"], self.build_jobset(tj, runtime))
            if "deletionTimestamp" in js["metadata"]:
                continue
            if bool(js["spec"].get("suspend")) != suspend:
                js["spec"]["suspend"] = suspend
                self.store.touch(js)
                self._changed = True
            rstatus = (js.get("status") or {}).get("replicatedJobsStatus") or []
            jobs_status = [
                {
                    k: r.get(k, 0)
                    for k in ("name", "ready", "succeeded", "failed", "active", "suspended")
                }
                for r in rstatus
            ]
            if (tj.get("status") or {}).get("jobsStatus") != jobs_status:
                tj.setdefault("status", {})["jobsStatus"] = jobs_status
                self.store.touch(tj)
                self._changed = True
            if (done := condition(js, "Completed")) and done["status"] == "True":
                self.set_condition(tj, "Complete", "True", done["reason"], done["message"])
            elif (failed := condition(js, "Failed")) and failed["status"] == "True":
                self.set_condition(tj, "Failed", "True", failed["reason"], failed["message"])

    def build_jobset(self, tj: Obj, runtime: Obj) -> Obj:
        """TrainJob + runtime (+ runtimePatches on v2.2, spec.labels and
        podTemplateOverrides on older versions) → JobSet, as ``jobset.go Build()`` does."""
        meta, spec = tj["metadata"], tj["spec"]
        template = copy.deepcopy(runtime["spec"]["template"])
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        js_spec = template["spec"]
        trainer = spec.get("trainer") or {}
        num_nodes = trainer.get("numNodes") or (runtime["spec"].get("mlPolicy") or {}).get(
            "numNodes", 1
        )
        job_labels: dict[str, dict[str, str]] = {}
        pod_labels: dict[str, dict[str, str]] = {}
        for patch in spec.get("runtimePatches") or []:
            tmpl = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
            labels.update(((tmpl.get("metadata") or {}).get("labels")) or {})
            for rj in (tmpl.get("spec") or {}).get("replicatedJobs") or []:
                rtmpl = rj.get("template") or {}
                job_labels.setdefault(rj["name"], {}).update(
                    (rtmpl.get("metadata") or {}).get("labels") or {}
                )
                pod_meta = ((rtmpl.get("spec") or {}).get("template") or {}).get("metadata") or {}
                pod_labels.setdefault(rj["name"], {}).update(pod_meta.get("labels") or {})
        labels.update(spec.get("labels") or {})
        for override in spec.get("podTemplateOverrides") or []:
            for target in override.get("targetJobs") or []:
                pod_labels.setdefault(target["name"], {}).update(
                    (override.get("metadata") or {}).get("labels") or {}
                )
        for rj in js_spec.get("replicatedJobs", []):
            rj["replicas"] = 1
            rtmpl = rj.setdefault("template", {})
            rmeta = rtmpl.setdefault("metadata", {})
            rmeta["labels"] = {
                **(rmeta.get("labels") or {}),
                **(spec.get("labels") or {}),
                **job_labels.get(rj["name"], {}),
            }
            jspec = rtmpl.setdefault("spec", {})
            pmeta = jspec.setdefault("template", {}).setdefault("metadata", {})
            pmeta["labels"] = {**(pmeta.get("labels") or {}), **pod_labels.get(rj["name"], {})}
            if rj["name"] == "node":
                jspec["parallelism"] = jspec["completions"] = num_nodes
                container = (
                    jspec["template"]
                    .setdefault("spec", {})
                    .setdefault("containers", [{"name": "node"}])[0]
                )
                for field in ("image", "command", "args", "env"):
                    if field in trainer:
                        container[field] = trainer[field]
                if "resourcesPerNode" in trainer:
                    container["resources"] = trainer["resourcesPerNode"]
        return {
            "metadata": {
                "name": meta["name"],
                "labels": labels,
                "ownerReferences": [self.owner_ref(tj)],
            },
            "spec": {**js_spec, "suspend": bool(spec.get("suspend"))},
            "status": {"restarts": 0, "restartsCountTowardsMax": 0},
        }

    # -- JobSet ------------------------------------------------------------------------

    def jobsets(self) -> None:
        for js in list(self.store.items(JOBSET)):
            meta, spec, status = js["metadata"], js["spec"], js.setdefault("status", {})
            if "deletionTimestamp" in meta or status.get("terminalState"):
                continue
            ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
            attempt = status.get("restarts", 0)
            if uid in self.pending_restarts and self.step > self.pending_restarts[uid]:
                del self.pending_restarts[uid]
                for job in list(self.store.items(JOB, ns)):
                    if job["metadata"]["labels"].get(JOBSET_NAME) == name:
                        for pod in self.pods_of_job(job):
                            self.store.remove(POD, ns, pod["metadata"]["name"])
                        self.store.remove(JOB, ns, job["metadata"]["name"])
                status["restarts"] = attempt + 1
                status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
                self.store.touch(js)
                self._changed = True
                continue
            if uid in self.pending_restarts:
                continue
            jobs = []
            for rj in spec.get("replicatedJobs", []):
                job_name = f"{name}-{rj['name']}-0"
                try:
                    job = self.store.raw(JOB, ns, job_name)
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
                    job = self.create(
                        JOB,
                        ns,
                        {
                            "metadata": {
                                "name": job_name,
                                "labels": {**(tmpl_meta.get("labels") or {}), **extra},
                                "ownerReferences": [self.owner_ref(js)],
                            },
                            "spec": {**tmpl["spec"], "suspend": bool(spec.get("suspend"))},
                            "status": {},
                        },
                    )
                if bool(job["spec"].get("suspend")) != bool(spec.get("suspend")):
                    job["spec"]["suspend"] = bool(spec.get("suspend"))
                    self.store.touch(job)
                    self._changed = True
                jobs.append((rj["name"], job))
            if spec.get("suspend"):
                self.set_condition(js, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
            elif condition(js, "Suspended"):
                self.set_condition(js, "Suspended", "False", "ResumeJobs", "jobset is resumed")
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
                self.store.touch(js)
                self._changed = True
            failed = [job for _, job in jobs if is_true(job, "Failed")]
            if failed:
                self.fail_or_restart(js, failed[0])
            elif jobs and all(is_true(job, "Complete") for _, job in jobs):
                status["terminalState"] = "Completed"
                self.set_condition(
                    js, "Completed", "True", "AllJobsCompleted", "jobset completed successfully"
                )

    def fail_or_restart(self, js: Obj, job: Obj) -> None:
        """``failure_policy.go``: first matching rule wins, default RestartJobSet, max restarts."""
        policy = js["spec"].get("failurePolicy")
        status = js["status"]
        job_name = job["metadata"]["name"]
        reason = (condition(job, "Failed") or {}).get("reason", "")
        if policy is None:
            return self._fail(
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
            return self._fail(
                js,
                "FailJobSetFailurePolicyAction",
                f"jobset failed due to FailJobSet action by rule {rule_name} (job {job_name})",
            )
        if action == "RestartJobSet" and status.get("restartsCountTowardsMax", 0) >= policy.get(
            "maxRestarts", 0
        ):
            return self._fail(
                js, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
            )
        self.pending_restarts[js["metadata"]["uid"]] = self.step
        self.set_condition(
            js,
            "RestartingJobSet",
            "True",
            f"FailurePolicy_{rule_name}" if rule_name else "DefaultFailurePolicy",
            f"restarting jobset after job {job_name} failed: {reason}",
        )

    def _fail(self, js: Obj, reason: str, message: str) -> None:
        js["status"]["terminalState"] = "Failed"
        self.set_condition(js, "Failed", "True", reason, message)

    # -- Job ---------------------------------------------------------------------------

    def jobs(self) -> None:
        for job in list(self.store.items(JOB)):
            meta, spec = job["metadata"], job["spec"]
            if "deletionTimestamp" in meta or is_true(job, "Failed") or is_true(job, "Complete"):
                continue
            status = job.setdefault("status", {})
            pods = self.pods_of_job(job)
            if spec.get("suspend"):
                for pod in pods:
                    if "deletionTimestamp" not in pod["metadata"]:
                        self.store.delete(
                            POD, meta["namespace"], pod["metadata"]["name"], None, None
                        )
                        self._changed = True
                self.set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended")
                self._counts(job, pods)
                continue
            if condition(job, "Suspended"):
                self.set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
            status.setdefault("startTime", self.now())
            indices = {
                p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                for p in pods
            }
            if not is_true(job, "FailureTarget"):
                for index in range(spec.get("completions", 1)):
                    if str(index) not in indices:
                        self.create_pod(job, index)
                pods = self.pods_of_job(job)
            if meta["uid"] in self.deadline_expired:
                self.set_condition(
                    job,
                    "FailureTarget",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                )
                self.kill(job, pods, delete=True)
            elif any(self.pod_failed(p) for p in pods) and not is_true(job, "FailureTarget"):
                self.set_condition(
                    job,
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                )
                self.kill(job, pods, delete=False)
            pods = self.pods_of_job(job)
            if is_true(job, "FailureTarget"):
                if all(self.pod_terminal(p) for p in pods):
                    target = condition(job, "FailureTarget") or {}
                    self.set_condition(job, "Failed", "True", target["reason"], target["message"])
            elif pods and all(p["status"].get("phase") == "Succeeded" for p in pods):
                self.set_condition(
                    job,
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                )
                self.set_condition(
                    job,
                    "Complete",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                )
            self._counts(job, self.pods_of_job(job))

    def _counts(self, job: Obj, pods: list[Obj]) -> None:
        status = job["status"]
        counts = {
            "active": sum(
                1
                for p in pods
                if not self.pod_terminal(p) and "deletionTimestamp" not in p["metadata"]
            ),
            "ready": sum(
                1
                for p in pods
                if p["status"].get("phase") == "Running"
                and "deletionTimestamp" not in p["metadata"]
            ),
            "failed": sum(1 for p in pods if self.pod_failed(p)),
            "succeeded": sum(1 for p in pods if p["status"].get("phase") == "Succeeded"),
            "terminating": sum(
                1 for p in pods if "deletionTimestamp" in p["metadata"] and not self.pod_terminal(p)
            ),
        }
        if any(status.get(k) != v for k, v in counts.items()):
            status.update(counts)
            self.store.touch(job)
            self._changed = True

    @staticmethod
    def pod_terminal(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def pod_failed(self, pod: Obj) -> bool:
        """``isPodFailed`` without a podFailurePolicy: a terminating pod counts as failed."""
        return pod["status"].get("phase") == "Failed" or "deletionTimestamp" in pod["metadata"]

    def kill(self, job: Obj, pods: list[Obj], *, delete: bool) -> None:
        """The Job terminates its other active pods; those on a lost node stay Terminating."""
        for pod in pods:
            if self.pod_terminal(pod):
                continue
            if not self.node_ready(pod["spec"].get("nodeName")):
                if "deletionTimestamp" not in pod["metadata"]:
                    self.store.delete(
                        POD, pod["metadata"]["namespace"], pod["metadata"]["name"], None, None
                    )
                continue
            if delete:
                self.store.remove(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
            else:
                self.terminate(pod, reason="Error", exit_code=143, after=1)
            self._changed = True

    def create_pod(self, job: Obj, index: int) -> None:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            JOB_NAME: meta["name"],
            "batch.kubernetes.io/controller-uid": meta["uid"],
        }
        pod = self.create(
            POD,
            meta["namespace"],
            {
                "metadata": {
                    "name": f"{meta['name']}-{index}-{next(self._suffix):05x}",
                    "labels": labels,
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                    "ownerReferences": [self.owner_ref(job)],
                },
                "spec": {
                    **template.get("spec", {}),
                    "restartPolicy": template.get("spec", {}).get("restartPolicy", "OnFailure"),
                },
                "status": {"phase": "Pending", "conditions": []},
            },
        )
        if self._pod_index is not None:
            self._pod_index.setdefault((meta["namespace"], meta["name"]), []).append(pod)

    # -- scheduler and kubelet ---------------------------------------------------------

    def kubelet(self) -> None:
        ready_nodes = sorted(
            n["metadata"]["name"] for n in self.store.items(NODE) if is_true(n, "Ready")
        )
        for pod in list(self.store.items(POD)):
            status, spec = pod["status"], pod["spec"]
            uid = pod["metadata"]["uid"]
            if status.get("phase") == "Running" and "deletionTimestamp" not in pod["metadata"]:
                code = command_exit((spec.get("containers") or [{}])[0])
                if code is not None and self.step > self.started.get(uid, self.step):
                    self.terminate(
                        pod, reason="Completed" if code == 0 else "Error", exit_code=code
                    )
                continue
            if status.get("phase") != "Pending" or "deletionTimestamp" in pod["metadata"]:
                continue
            jobset_name = pod["metadata"]["labels"].get(JOBSET_NAME, "")
            if not spec.get("nodeName"):
                gpus = int(
                    (
                        ((spec.get("containers") or [{}])[0].get("resources") or {}).get("limits")
                        or {}
                    ).get("nvidia.com/gpu", 0)
                )
                if (
                    not self.capacity
                    or not ready_nodes
                    or jobset_name in self.unschedulable
                    or gpus > GPUS_PER_NODE
                ):
                    total = len(list(self.store.items(NODE)))
                    self.set_condition(
                        pod,
                        "PodScheduled",
                        "False",
                        "Unschedulable",
                        f"0/{total} nodes are available: {total} Insufficient nvidia.com/gpu. "
                        f"preemption: 0/{total} nodes are available: {total} No preemption "
                        "victims found for incoming pod.",
                    )
                    continue
                index = int(
                    pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                )
                spec["nodeName"] = ready_nodes[index % len(ready_nodes)]
                self.set_condition(pod, "PodScheduled", "True", "", "")
            container = (spec.get("containers") or [{"name": "node"}])[0]
            launch = self.launch_errors.get(pod["metadata"]["labels"].get(JOBSET_NAME, ""))
            if launch:
                reason, message = launch
                status["containerStatuses"] = [
                    {
                        "name": container.get("name", "node"),
                        "image": container.get("image", ""),
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": reason, "message": message}},
                    }
                ]
                self.store.touch(pod)
                continue
            status["phase"] = "Running"
            status["startTime"] = self.now()
            self.started[uid] = self.step
            status["containerStatuses"] = [
                {
                    "name": container.get("name", "node"),
                    "image": container.get("image", ""),
                    "imageID": f"docker.io/library/emulated@sha256:{'0' * 64}",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": self.now()}},
                }
            ]
            self.set_condition(pod, "Ready", "True", "", "")

    def terminate(
        self, pod: Obj, *, reason: str, exit_code: int, after: int = 0, last_state: bool = False
    ) -> None:
        """The container ends: ``state.terminated`` (restartPolicy Never), or
        ``lastState.terminated`` + CrashLoopBackOff (OnFailure) with ``last_state``."""
        status = pod["status"]
        cs = (
            status.get("containerStatuses")
            or [{"name": "node", "image": "", "imageID": "", "ready": False, "restartCount": 0}]
        )[0]
        started = (cs.get("state") or {}).get("running", {}).get("startedAt", self.now())
        terminated = {
            "reason": reason,
            "exitCode": exit_code,
            "startedAt": started,
            "finishedAt": self.later(after),
            "containerID": "containerd://emulated",
        }
        if last_state:
            cs["lastState"] = {"terminated": terminated}
            cs["restartCount"] = cs.get("restartCount", 0) + 1
            cs["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 10s restarting failed "
                    f"container={cs['name']} pod={pod['metadata']['name']}",
                }
            }
            status["phase"] = "Failed"
        else:
            cs["state"] = {"terminated": terminated}
            status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        cs["ready"] = False
        status["containerStatuses"] = [cs]
        self.store.touch(pod)
        self._changed = True

    def patch_runtime_failure_policy(self, runtime: Obj, policy: dict[str, Any]) -> None:
        runtime["spec"]["template"]["spec"] = merge_patch(
            runtime["spec"]["template"]["spec"], {"failurePolicy": policy}
        )
