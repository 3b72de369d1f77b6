"""The emulated cluster's state and its reconcile loop over the controllers (kueue.py,
trainer.py, jobset.py, job.py, kubelet.py) and the store's garbage collector.

Each pass reads and writes the store the way the real controller does, with the strings
the real controllers write (dispatch-kubeflow/docs/research.md §1-§3), so the adapter's
classifier meets the
same evidence chain it meets on a cluster: TrainJob → JobSet → Jobs → Pods → Nodes.

Time is in steps: each mutating request (or driver call, or ``Emulator.advance``) is one
step. What a real cluster does after a delay happens a step later: a crash-looping
container restarts, a failed pod is replaced, a deleted pod's kubelet stops it and
confirms, the garbage collector goes one ownership level further, a JobSet restarts.
So a discovery between two steps sees what a client polling a real cluster sees in
between (checked against the real controllers: tests/test_kubeflow_promises.py).
Simplifications, on purpose: pods start as soon as they are scheduled; the Job's
pod-failure back-off is one step; GPUs already taken are not counted by the scheduler.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from dispatch_kubeflow_testing.emulator.admission import mutate
from dispatch_kubeflow_testing.emulator.job import jobs
from dispatch_kubeflow_testing.emulator.jobset import jobsets
from dispatch_kubeflow_testing.emulator.kubelet import kubelet
from dispatch_kubeflow_testing.emulator.kueue import kueue
from dispatch_kubeflow_testing.emulator.objects import JOB_NAME, is_true
from dispatch_kubeflow_testing.emulator.store import (
    CLUSTER_RUNTIME,
    EVENT,
    NODE,
    POD,
    RUNTIME,
    ApiError,
    Clock,
    Obj,
    Store,
    timestamp,
)
from dispatch_kubeflow_testing.emulator.trainer import trainer


class Cluster:
    """All controllers over one store; ``reconcile`` runs them until nothing changes."""

    def __init__(self, store: Store, clock: Clock, trainer_version: str) -> None:
        self.store = store
        self.clock = clock
        self.trainer_version = tuple(int(p) for p in trainer_version.split("."))
        self.step = 0
        self.capacity = True
        self.kueue_quota = True
        # False: Kueue is not installed (its API group answers 404, its controller idles)
        self.kueue_installed = True
        # Kueue's queues (kueue.py): LocalQueue -> ClusterQueue, ClusterQueue -> its
        # nominal nvidia.com/gpu quota, WorkloadPriorityClass -> value. Without
        # ClusterQueues every queue is admitted while ``kueue_quota`` holds.
        self.kueue_local_queues: dict[str, str] = {}
        self.kueue_cluster_queues: dict[str, int] = {}
        self.kueue_priorities: dict[str, int] = {}
        # ClusterQueue -> its cohort; ClusterQueue -> its GPU borrowing limit (absent: none)
        self.kueue_cohorts: dict[str, str] = {}
        self.kueue_borrowing: dict[str, int] = {}
        self.launch_errors: dict[str, tuple[str, str]] = {}
        self.deadline_expired: set[str] = set()
        self.unschedulable: set[str] = set()
        self.started: dict[str, int] = {}
        # pod uid -> how its program ends, every time it runs: (exit code, reason), from a
        # command the kubelet ran for real or from the driver (a deterministic failure
        # fails the same way after each restart, as the live tier's KWOK stage does)
        self.exits: dict[str, tuple[int, str]] = {}
        # pod uid -> the step its container crashed (it restarts from the next one)
        self.crashed: dict[str, int] = {}
        # pod uid -> the step the garbage collector first saw it deleting (the kubelet
        # confirms from the next one)
        self.deleting: dict[str, int] = {}
        # job uid -> uids of its failed/succeeded pods already counted in its status
        self.counted: dict[str, set[str]] = {}
        # (job uid, completion index) -> the step its last pod failed (replaced after it)
        self.replace_after: dict[tuple[str, str], int] = {}
        self.reconciling = False
        # the real Trainer's race, off unless a test turns it on (Emulator.remake_while_deleting):
        # a TrainJob being deleted gets its JobSet made once more after the collector removed
        # it; the uids of the TrainJobs it was made again for
        self.remakes_while_deleting = False
        self.remade: set[str] = set()
        # (namespace, pod name) -> what each run of its container printed (last: current)
        self.logs: dict[tuple[str, str], list[bytearray]] = {}
        self._suffix = itertools.count(1)
        self.changed = False
        self.pod_index: dict[tuple[str, str], list[Obj]] | None = None

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
        self.changed = True

    def event(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        """A core/v1 Event about ``obj``, as a controller's recorder writes it."""
        meta = obj["metadata"]
        self.store.create(
            EVENT,
            meta.get("namespace", ""),
            {
                "metadata": {"generateName": f"{meta['name']}."},
                "involvedObject": {
                    "apiVersion": obj["apiVersion"],
                    "kind": obj["kind"],
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta["uid"],
                },
                "type": kind,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": self.now(),
                "lastTimestamp": self.now(),
            },
        )

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
        self.store.create(res, namespace, mutate(res, obj))
        self.changed = True
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
        if self.pod_index is None:
            self.pod_index = {}
            for pod in self.store.items(POD):
                key = (pod["metadata"]["namespace"], pod["metadata"]["labels"].get(JOB_NAME, ""))
                self.pod_index.setdefault(key, []).append(pod)
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        pods = [
            p
            for p in self.pod_index.get(key, [])
            if self.store.exists(POD, key[0], p["metadata"]["name"])
        ]
        self.pod_index[key] = pods
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    # -- the loop ----------------------------------------------------------------------

    def reconcile(self) -> bool:
        """One step: every controller, repeated until the cluster is quiet (bounded), then
        one garbage-collector pass. True if anything changed.

        The collector acts one ownership level per step and the kubelet confirms a pod's
        deletion a step after it was asked, so what a delete leaves behind (a JobSet, Jobs,
        Terminating pods) lingers for a few steps, as it does for a real collector.
        """
        with self.store.lock:
            self.step += 1
            self.reconciling = True
            moved = False
            try:
                for _ in range(20):
                    self.changed = False
                    self.pod_index = None
                    for controller in (kueue, trainer, jobsets, jobs, kubelet):
                        if controller is not kueue or self.kueue_installed:
                            controller(self)
                    moved = moved or self.changed
                    if not self.changed:
                        break
                self.pod_index = None
                if self.store.collect_garbage(
                    self.kubelet_confirms, owner_lags=self.remakes_while_deleting
                ):
                    moved = True
            finally:
                self.reconciling = False
            return moved

    def kubelet_confirms(self, pod: Obj) -> bool:
        """A deleting pod's kubelet (its node Ready) confirms, one step after the collector
        first saw it, once it has stopped the pod (``stop_for_deletion``)."""
        uid = pod["metadata"]["uid"]
        mark = self.deleting.setdefault(uid, self.step)
        return self.node_ready(pod["spec"].get("nodeName")) and self.due(mark)

    def write_log(self, pod: Obj, data: bytes) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        runs = self.logs.setdefault(key, [bytearray()])
        runs[-1].extend(data)

    @staticmethod
    def pod_terminal(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def mark(self) -> int:
        """The step an event belongs to: the current one inside a reconcile, the next one
        for a driver or client acting between steps (so what it did is seen first)."""
        return self.step if self.reconciling else self.step + 1

    def due(self, mark: int | None) -> bool:
        """A delayed action marked at ``mark`` happens from the step after it."""
        return mark is not None and self.step > mark

    def terminate(self, pod: Obj, *, reason: str, exit_code: int, after: int = 0) -> None:
        """The container ends and the kubelet honours the pod's ``restartPolicy``: Never
        (or a 0 under OnFailure) makes it terminal (``state.terminated``, phase Succeeded
        or Failed); OnFailure/Always restart it in place: ``lastState.terminated``,
        ``restartCount`` + 1, ``waiting: CrashLoopBackOff``, the pod still Running, and
        the container starts again one step later."""
        status = pod["status"]
        uid = pod["metadata"]["uid"]
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
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and exit_code != 0):
            cs["lastState"] = {"terminated": terminated}
            cs["restartCount"] = cs.get("restartCount", 0) + 1
            cs["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 10s restarting failed "
                    f"container={cs['name']} pod={pod['metadata']['name']}",
                }
            }
            self.crashed[uid] = self.mark()
            self.set_condition(pod, "Ready", "False", "ContainersNotReady", "")
        else:
            cs["state"] = {"terminated": terminated}
            status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            self.set_condition(pod, "Ready", "False", "PodCompleted", "")
        cs["ready"] = False
        cs["started"] = False
        status["containerStatuses"] = [cs]
        self.store.touch(pod)
        self.changed = True

    def stop_for_deletion(self, pod: Obj) -> None:
        """A deleted pod's kubelet stops its container (SIGTERM: 143) and reports the pod
        Failed before it goes (k8s ≥ 1.27); conditions such as DisruptionTarget stay."""
        status = pod["status"]
        cs = (status.get("containerStatuses") or [None])[0]
        if cs is not None and "running" in (cs.get("state") or {}):
            cs["state"] = {
                "terminated": {
                    "reason": "Error",
                    "exitCode": 143,
                    "startedAt": cs["state"]["running"].get("startedAt", self.now()),
                    "finishedAt": self.now(),
                    "containerID": "containerd://emulated",
                }
            }
            cs["ready"] = cs["started"] = False
        status["phase"] = "Failed"
        self.crashed.pop(pod["metadata"]["uid"], None)
        self.set_condition(pod, "Ready", "False", "PodCompleted", "")

    def restart(self, pod: Obj) -> None:
        """The kubelet's back-off is over: the container runs again (a new log run)."""
        uid = pod["metadata"]["uid"]
        del self.crashed[uid]
        cs = pod["status"]["containerStatuses"][0]
        cs.update(ready=True, started=True, state={"running": {"startedAt": self.now()}})
        self.logs.setdefault(
            (pod["metadata"]["namespace"], pod["metadata"]["name"]), [bytearray()]
        ).append(bytearray())
        self.started[uid] = self.step
        self.set_condition(pod, "Ready", "True", "", "")
        self.store.touch(pod)
        self.changed = True
