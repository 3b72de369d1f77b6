"""The emulated cluster and its scenario driver: start it, point a kubeconfig at it, and
provoke each ending the way the cluster would produce it. What each REST request does is
the server's (:class:`dispatch_kubeflow_testing.emulator.server.Api`); this module starts
it and acts on the cluster as its controllers, nodes and operators would.

Why an emulator of our own and not kmock: kmock (dispatch-kubeflow/docs/research.md §5)
ignores label selectors,
does not keep the status subresource apart, has no uid/resourceVersion, no propagation
policy or garbage collection, and no controllers. Discovery by label, Foreground deletion
blocked by a pod on a lost node, and the TrainJob → JobSet → Job → Pod chain are exactly
what the adapter must get right, so the emulator models them; it is stdlib only so the
conformance kit can start it anywhere.

Over 500 lines on purpose: each ending the emulator can provoke is one method of
:class:`Emulator`, so the driver's whole vocabulary is one class a test author reads.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dispatch_kubeflow_testing.emulator import kueue
from dispatch_kubeflow_testing.emulator.cluster import Cluster
from dispatch_kubeflow_testing.emulator.faults import Faults
from dispatch_kubeflow_testing.emulator.objects import (
    COMPLETION_INDEX,
    GPUS_PER_NODE,
    JOBSET_NAME,
    KUEUE_JOB_UID,
    LAUNCH_ERRORS,
    is_true,
)
from dispatch_kubeflow_testing.emulator.server import Api, RequestLog, make_server
from dispatch_kubeflow_testing.emulator.store import (
    CLUSTER_RUNTIME,
    JOB,
    JOBSET,
    LIMIT_RANGE,
    LOCAL_QUEUE,
    NODE,
    POD,
    PRIORITY_CLASS,
    RUNTIME,
    TRAINJOB,
    WORKLOAD,
    Clock,
    Obj,
    Store,
)

TOKEN = "dispatch-emulator-token"


def torch_runtime(
    name: str,
    *,
    failure_policy: dict[str, Any] | None = None,
    job_deadline_seconds: int | None = None,
) -> Obj:
    """A ClusterTrainingRuntime shaped like the shipped ``torch-distributed`` one."""
    job_spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "containers": [
                    {
                        "name": "node",
                        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                        "command": ["torchrun", "train.py"],
                    }
                ]
            },
        }
    }
    if job_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = job_deadline_seconds
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {"name": "node", "template": {"metadata": {"labels": {}}, "spec": job_spec}}
        ]
    }
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return {
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"metadata": {"labels": {}}, "spec": spec},
        },
    }


class Emulator:
    """An emulated Kubeflow Trainer cluster on 127.0.0.1, with a driver to provoke endings."""

    def __init__(
        self,
        *,
        trainer_version: str = "2.2",
        nodes: int = 4,
        namespace: str = "default",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.clock = Clock()
        self.store = Store(self.clock)
        self.cluster = Cluster(self.store, self.clock, trainer_version)
        self.trainer_version = self.cluster.trainer_version
        self.namespace = namespace
        self.log = RequestLog()
        self.faults = Faults()
        self.host, self.port = host, port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._paused = False
        self.api = Api(self.store, self.cluster, self.reconcile, self._evict_pod)
        for i in range(nodes):
            self.store.create(
                NODE,
                "",
                {
                    "metadata": {
                        "name": f"gpu-node-{i}",
                        "labels": {"kubernetes.io/hostname": f"gpu-node-{i}"},
                    },
                    "spec": {},
                    "status": {
                        "capacity": {"nvidia.com/gpu": str(GPUS_PER_NODE)},
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                                "lastTransitionTime": "2026-01-01T00:00:00Z",
                            }
                        ],
                    },
                },
            )
        self.add_runtime("torch-distributed")

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Emulator:
        if self._server is not None:
            return self
        self._server = make_server(
            self.host, self.port, self.api.handle, self.log, TOKEN, self.faults
        )
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="k8s-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.faults.clear()  # requests held by a hang go unanswered
        if self._server is not None:
            self._server.close_everything()
            self._server = None

    def go_unreachable(self) -> None:
        """Stop listening: connections to the API are refused, as when it is down."""
        self.stop()

    def come_back(self) -> None:
        """Listen again on the same port, with the same objects."""
        self.start()

    def misbehave(self, kind: str, *, retry_after: int = 5) -> None:
        """Switch the API server as a whole to one way of failing, until :meth:`behave`:
        ``"500"`` (etcd timing out), ``"429"`` (too many requests, ``Retry-After``),
        ``"503"`` (shutting down, ``Retry-After``), ``"hang"`` (accepts, never answers) or
        ``"refuse"`` (not listening). See :mod:`dispatch_kubeflow_testing.emulator.faults`."""
        self.behave()
        if kind == "500":
            self.faults.answer(500, "InternalError", "etcdserver: request timed out")
        elif kind == "429":
            self.faults.answer(
                429,
                "TooManyRequests",
                "too many requests, please try again later",
                retry_after=retry_after,
            )
        elif kind == "503":
            self.faults.answer(
                503,
                "ServiceUnavailable",
                "the apiserver is shutting down, please try again later",
                retry_after=retry_after,
            )
        elif kind == "hang":
            self.faults.hang()
        elif kind == "refuse":
            self.go_unreachable()
        else:
            raise ValueError(f"no such misbehaviour: {kind!r}")

    def behave(self) -> None:
        """Every fault switch off, listening again on the same port."""
        self.faults.clear()
        self.come_back()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def write_kubeconfig(self, path: str | Path) -> Path:
        """A kubeconfig (JSON is YAML) pointing at this emulator, with its bearer token."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": TOKEN}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {
                        "cluster": "emulator",
                        "user": "emulator",
                        "namespace": self.namespace,
                    },
                }
            ],
        }
        path.write_text(json.dumps(config, indent=2))
        return path

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the API -----------------------------------------------------------------------

    def inject(
        self, code: int, reason: str, message: str, *, times: int = 1, resource: str | None = None
    ) -> None:
        """The next ``times`` requests (on ``resource``, a plural, if given) are answered
        with this error instead: an overloaded API server (503, 429) or RBAC (403)."""
        self.api.inject(code, reason, message, times=times, resource=resource)

    def garble(self, body: bytes, *, times: int = 1, resource: str | None = None) -> None:
        """The next ``times`` requests (on ``resource``, a plural, if given) are answered
        200 with ``body`` as it is, JSON or not."""
        self.api.garble(body, times=times, resource=resource)

    # -- set-up ------------------------------------------------------------------------

    def add_runtime(
        self,
        name: str,
        *,
        namespace: str | None = None,
        failure_policy: dict[str, Any] | None = None,
        job_deadline_seconds: int | None = None,
    ) -> None:
        """Install a (Cluster)TrainingRuntime; a JobSet ``failure_policy`` makes it restart."""
        body = torch_runtime(
            name, failure_policy=failure_policy, job_deadline_seconds=job_deadline_seconds
        )
        with self.store.lock:
            if namespace is None:
                self.store.create(CLUSTER_RUNTIME, "", body)
            else:
                self.store.create(RUNTIME, namespace, body)

    def reconcile(self) -> None:
        if not self._paused:
            self.cluster.reconcile()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Controllers lag: requests inside are stored but reconciled once, on the way out
        (a bulk load of hundreds of TrainJobs without one reconcile per create)."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False
            self.reconcile()

    # -- looking -----------------------------------------------------------------------

    def trainjob(self, name: str) -> Obj:
        return self.store.get(TRAINJOB, self.namespace, name)

    def jobset(self, name: str) -> Obj:
        return self.store.get(JOBSET, self.namespace, name)

    def pods(self, name: str) -> list[Obj]:
        with self.store.lock:
            return sorted(
                (
                    copy.deepcopy(p)
                    for p in self.store.items(POD, self.namespace)
                    if p["metadata"]["labels"].get(JOBSET_NAME) == name
                ),
                key=lambda p: p["metadata"]["name"],
            )

    def nodes(self) -> list[Obj]:
        with self.store.lock:
            return sorted(
                (copy.deepcopy(n) for n in self.store.items(NODE)),
                key=lambda n: n["metadata"]["name"],
            )

    def names(self) -> list[str]:
        with self.store.lock:
            return sorted(t["metadata"]["name"] for t in self.store.items(TRAINJOB, self.namespace))

    def _pod(self, name: str, index: int) -> Obj:
        """Node ``index``'s pod: the newest live one with that completion index, else the
        newest not Succeeded (a Failed or Terminating one)."""
        pods = sorted(
            (
                p
                for p in self.store.items(POD, self.namespace)
                if p["metadata"]["labels"].get(JOBSET_NAME) == name
                and p["status"].get("phase") != "Succeeded"
                and (p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX) == str(index)
            ),
            key=lambda p: p["metadata"]["name"],
            reverse=True,
        )
        for pod in pods:
            if (
                "deletionTimestamp" not in pod["metadata"]
                and pod["status"].get("phase") != "Failed"
            ):
                return pod
        if not pods:
            raise LookupError(f"TrainJob {name!r} has no pod {index} to act on")
        return pods[0]

    # -- provoking endings -------------------------------------------------------------

    def print_log(self, name: str, text: str, *, pod: int = 0) -> None:
        """A node's container prints ``text`` (what ``kubectl logs`` then shows)."""
        with self.store.lock:
            self.cluster.write_log(self._pod(name, pod), text.encode())

    def succeed(self, name: str) -> None:
        """Every node exits 0."""
        with self.store.lock:
            for pod in self.store.items(POD, self.namespace):
                if (
                    pod["metadata"]["labels"].get(JOBSET_NAME) == name
                    and pod["status"].get("phase") == "Running"
                ):
                    self.cluster.exits[pod["metadata"]["uid"]] = (0, "Completed")
                    self.cluster.terminate(pod, reason="Completed", exit_code=0)
            self.reconcile()

    def exit(
        self, name: str, code: int, *, pod: int = 0, restart_policy: str | None = None
    ) -> None:
        """One node's training process exits with ``code``, and does so again each time it
        is restarted. The pod's own ``restartPolicy`` decides what follows: Never ends it
        Failed (the Job replaces it while ``backoffLimit`` allows); OnFailure restarts it
        in place, crash-looping until the restarts reach ``backoffLimit`` (``advance``).
        ``restart_policy`` is what the caller expects the pod to say, checked."""
        self._crash(name, pod, code, "Completed" if code == 0 else "Error", restart_policy)

    def oom(self, name: str, *, pod: int = 0, restart_policy: str | None = None) -> None:
        """One node's container is OOMKilled (137), again after each restart; as ``exit``."""
        self._crash(name, pod, 137, "OOMKilled", restart_policy)

    def _crash(
        self, name: str, pod: int, code: int, reason: str, restart_policy: str | None
    ) -> None:
        with self.store.lock:
            target = self._pod(name, pod)
            actual = target["spec"].get("restartPolicy")
            if restart_policy is not None and restart_policy != actual:
                raise ValueError(
                    f"TrainJob {name!r} pod {pod}: its restartPolicy is {actual!r}, not "
                    f"{restart_policy!r}; the kubelet follows the pod spec (JobSet's webhook "
                    "defaults it to OnFailure)"
                )
            self.cluster.exits[target["metadata"]["uid"]] = (code, reason)
            if (
                target["status"].get("phase") == "Running"
                and target["metadata"]["uid"] not in self.cluster.crashed
            ):
                self.cluster.terminate(target, reason=reason, exit_code=code)
            self.reconcile()

    def advance(self, steps: int = 1) -> None:
        """Time passes: ``steps`` rounds of the controllers' delayed work (a crash-looping
        container restarts or crashes again, a failed pod is replaced, the garbage
        collector goes one level further, a deleted pod's kubelet confirms)."""
        for _ in range(steps):
            self.cluster.reconcile()

    def settle(self, limit: int = 200) -> int:
        """Advance until two steps in a row change nothing; the steps it took."""
        quiet = 0
        for step in range(1, limit + 1):
            quiet = 0 if self.cluster.reconcile() else quiet + 1
            if quiet == 2:
                return step
        raise RuntimeError(f"the emulated cluster did not settle in {limit} steps")

    def _disrupt(self, target: Obj, reason: str, message: str) -> None:
        self.cluster.set_condition(target, "DisruptionTarget", "True", reason, message)
        self.store.delete(
            POD, target["metadata"]["namespace"], target["metadata"]["name"], None, None
        )
        self.reconcile()

    def _evict_pod(self, target: Obj) -> None:
        """``POST pods/NAME/eviction`` (no PodDisruptionBudget here: always allowed)."""
        self._disrupt(target, "EvictionByEvictionAPI", "Eviction API: evicting")

    def preempt(
        self,
        name: str,
        *,
        pod: int = 0,
        reason: str = "PreemptionByScheduler",
        message: str = "default-scheduler: preempting to accommodate a higher priority pod",
    ) -> None:
        """The scheduler takes a pod for a higher-priority one: DisruptionTarget, then
        the pod is deleted (its kubelet confirms a step later) and the Job replaces it
        while its ``backoffLimit`` / ``podFailurePolicy`` allow; the TrainJob runs on."""
        with self.store.lock:
            self._disrupt(self._pod(name, pod), reason, message)

    def evict(self, name: str, *, pod: int = 0) -> None:
        """``kubectl drain``'s Eviction API call on one pod (also served over HTTP as
        ``POST .../pods/NAME/eviction``): as ``preempt``, reason EvictionByEvictionAPI."""
        with self.store.lock:
            self._evict_pod(self._pod(name, pod))

    def expire_deadline(self, name: str) -> None:
        """The TrainJob's ``activeDeadlineSeconds`` passes (Trainer ≥ 2.2)."""
        with self.store.lock:
            tj = self.store.raw(TRAINJOB, self.namespace, name)
            if not tj["spec"].get("activeDeadlineSeconds"):
                raise ValueError(f"TrainJob {name!r} has no activeDeadlineSeconds")
            self.cluster.deadline_expired.add(tj["metadata"]["uid"])
            self.reconcile()

    def expire_job_deadline(self, name: str) -> None:
        """The runtime's Job-level ``activeDeadlineSeconds`` passes."""
        with self.store.lock:
            for job in self.store.items(JOB, self.namespace):
                if job["metadata"]["labels"].get(JOBSET_NAME) == name:
                    self.cluster.deadline_expired.add(job["metadata"]["uid"])
            self.reconcile()

    def launch_error(self, name: str, reason: str = "ErrImagePull") -> None:
        """The kubelet cannot start the container: pods stay Pending with ``reason``."""
        with self.store.lock:
            tj = self.store.raw(TRAINJOB, self.namespace, name)
            image = (tj["spec"].get("trainer") or {}).get("image", "")
            self.cluster.launch_errors[name] = (
                reason,
                LAUNCH_ERRORS.get(reason, reason).format(image=image),
            )
            for pod in list(self.store.items(POD, self.namespace)):
                if pod["metadata"]["labels"].get(JOBSET_NAME) == name:
                    pod["status"] = {
                        "phase": "Pending",
                        "conditions": pod["status"].get("conditions", []),
                    }
            self.reconcile()

    def suspend_behind_back(self, name: str) -> None:
        """Someone else suspends the TrainJob (``kubectl patch ... suspend: true``)."""
        with self.store.lock:
            self.store.patch(
                TRAINJOB, self.namespace, name, {"spec": {"suspend": True}}, status=False
            )
            self.reconcile()

    def remake_while_deleting(self) -> None:
        """From now on the Trainer makes the JobSet of a TrainJob being deleted once more
        after the collector removed it (with the TrainJob's ``suspend``), as the real one
        does when it wins the race with the collector."""
        with self.store.lock:
            self.cluster.remakes_while_deleting = True

    def lose_node(self, name: str, *, pod: int = 0) -> str:
        """The node under one pod stops reporting: Ready=Unknown, NoExecute taint, the pod
        gets DisruptionTarget/DeletionByTaintManager and stays Terminating; the Job reaches
        FailureTarget and never Failed. Returns the node's name."""
        with self.store.lock:
            target = self._pod(name, pod)
            node_name: str = target["spec"]["nodeName"]
            node = self.store.raw(NODE, "", node_name)
            self.cluster.set_condition(
                node,
                "Ready",
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
            )
            node["spec"]["taints"] = [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "effect": "NoExecute",
                    "timeAdded": self.cluster.now(),
                }
            ]
            for pod_obj in list(self.store.items(POD)):
                if (
                    pod_obj["spec"].get("nodeName") == node_name
                    and pod_obj["status"].get("phase") == "Running"
                ):
                    self.cluster.set_condition(
                        pod_obj,
                        "DisruptionTarget",
                        "True",
                        "DeletionByTaintManager",
                        "Taint manager: deleting due to NoExecute taint",
                    )
                    self.store.delete(
                        POD,
                        pod_obj["metadata"]["namespace"],
                        pod_obj["metadata"]["name"],
                        None,
                        None,
                    )
            self.reconcile()
            return node_name

    def recover_node(self, node_name: str) -> None:
        with self.store.lock:
            node = self.store.raw(NODE, "", node_name)
            self.cluster.set_condition(
                node, "Ready", "True", "KubeletReady", "kubelet is posting ready status"
            )
            node["spec"].pop("taints", None)
            self.reconcile()

    def delete_behind_back(
        self, name: str, *, policy: str = "Background", finalizer: str | None = None
    ) -> None:
        """Someone else deletes the TrainJob (``kubectl delete``); a ``finalizer`` keeps it
        visible with a deletionTimestamp."""
        with self.store.lock:
            if finalizer:
                self.add_finalizer(name, finalizer)
            self.store.delete(TRAINJOB, self.namespace, name, policy, None)
            self.reconcile()

    def add_finalizer(self, name: str, finalizer: str) -> None:
        """Another controller puts its finalizer on the TrainJob (it then stays listed,
        with a deletionTimestamp, after a delete)."""
        with self.store.lock:
            tj = self.store.raw(TRAINJOB, self.namespace, name)
            tj["metadata"].setdefault("finalizers", []).append(finalizer)
            self.store.touch(tj)

    def fail_unmappable(
        self,
        name: str,
        reason: str = "QuotaWizardRejected",
        message: str = "the quota wizard rejected this TrainJob at 03:14",
    ) -> None:
        """The TrainJob fails with a reason nobody documented."""
        with self.store.lock:
            tj = self.store.raw(TRAINJOB, self.namespace, name)
            self.cluster.set_condition(tj, "Failed", "True", reason, message)
            self.reconcile()

    def kueue_set_quota(self, available: bool) -> None:
        """Without ClusterQueues (``kueue_queues``): whether every queue has quota."""
        with self.store.lock:
            self.cluster.kueue_quota = available
            self.reconcile()

    def kueue_queues(
        self,
        cluster_queues: dict[str, int],
        local_queues: dict[str, str],
        priorities: dict[str, int] | None = None,
        *,
        cohorts: dict[str, str] | None = None,
        borrowing_limits: dict[str, int] | None = None,
    ) -> None:
        """Kueue's objects, as an administrator creates them: ClusterQueues with their
        nominal ``nvidia.com/gpu`` quota (one ResourceFlavor ``default-flavor``), the
        cohort each belongs to (ClusterQueue -> cohort) and its GPU borrowing limit
        (none: it may borrow all its cohort lends), LocalQueues in this namespace pointing
        at them, WorkloadPriorityClasses. Every ClusterQueue preempts lower priorities
        within itself and reclaims what others of its cohort borrow."""
        with self.store.lock:
            self.cluster.kueue_cluster_queues = dict(cluster_queues)
            self.cluster.kueue_local_queues = dict(local_queues)
            self.cluster.kueue_priorities = dict(priorities or {})
            self.cluster.kueue_cohorts = dict(cohorts or {})
            self.cluster.kueue_borrowing = dict(borrowing_limits or {})
            self._serve_kueue_objects()
            self.reconcile()

    def _serve_kueue_objects(self) -> None:
        """The LocalQueues and WorkloadPriorityClasses the API server lists, as Kueue's
        CRDs serve them (``spec.clusterQueue``; a class's ``value``)."""
        for res in (LOCAL_QUEUE, PRIORITY_CLASS):
            for obj in list(self.store.items(res)):
                meta = obj["metadata"]
                self.store.remove(res, meta.get("namespace", ""), meta["name"])
        for name, cq in self.cluster.kueue_local_queues.items():
            body = {"metadata": {"name": name}, "spec": {"clusterQueue": cq}}
            self.store.create(LOCAL_QUEUE, self.namespace, body)
        for name, value in self.cluster.kueue_priorities.items():
            self.store.create(PRIORITY_CLASS, "", {"metadata": {"name": name}, "value": value})

    def kueue_uninstall(self) -> None:
        """A cluster without Kueue: its API group (``kueue.x-k8s.io``) answers 404 and no
        controller acts on the queue-name label."""
        with self.store.lock:
            self.cluster.kueue_installed = False

    def limit_range(
        self,
        name: str,
        *,
        default: dict[str, str] | None = None,
        default_request: dict[str, str] | None = None,
    ) -> None:
        """A LimitRange in this namespace whose ``Container`` limit gives containers that
        set none these limits (``default``) and requests (``defaultRequest``)."""
        limit: dict[str, Any] = {"type": "Container"}
        if default:
            limit["default"] = dict(default)
        if default_request:
            limit["defaultRequest"] = dict(default_request)
        with self.store.lock:
            self.store.create(
                LIMIT_RANGE,
                self.namespace,
                {"metadata": {"name": name}, "spec": {"limits": [limit]}},
            )

    def workload(self, name: str) -> Obj:
        with self.store.lock:
            tj = self.store.raw(TRAINJOB, self.namespace, name)
            for wl in self.store.items(WORKLOAD, self.namespace):
                if wl["metadata"]["labels"].get(KUEUE_JOB_UID) == tj["metadata"]["uid"]:
                    return wl
        raise LookupError(f"TrainJob {name!r} has no Kueue workload")

    def kueue_preempt(self, name: str) -> None:
        """Kueue evicts the workload to admit a higher-priority one (``InClusterQueue``);
        without ClusterQueues the quota is taken with it."""
        with self.store.lock:
            wl = self.workload(name)
            if not self.cluster.kueue_cluster_queues:
                self.cluster.kueue_quota = False
            preemptor = {"metadata": {"uid": "5c1d", "labels": {KUEUE_JOB_UID: "77aa"}}}
            message = kueue.preemption_message(preemptor, "InClusterQueue", "/cluster-queue")
            self.cluster.set_condition(wl, "Evicted", "True", "Preempted", message)
            self.cluster.set_condition(wl, "Preempted", "True", "InClusterQueue", message)
            self.reconcile()

    def kueue_evict(self, name: str, reason: str, message: str) -> None:
        """Kueue evicts the workload for ``reason`` (``PodsReadyTimeout``,
        ``AdmissionCheck``, ``ClusterQueueStopped``, ``NodeFailures``...) with Kueue's
        ``message``; it is requeued and admitted again when it fits."""
        with self.store.lock:
            wl = self.workload(name)
            self.cluster.set_condition(wl, "Evicted", "True", reason, message)
            self.reconcile()

    def kueue_requeuing_limit(self, name: str) -> None:
        """waitForPodsReady's ``backoffLimitCount`` is reached: Kueue marks the workload
        ``DeactivationTarget`` (``RequeuingLimitExceeded``) and deactivates it."""
        with self.store.lock:
            wl = self.workload(name)
            self.cluster.set_condition(
                wl, "DeactivationTarget", "True", "RequeuingLimitExceeded", kueue.REQUEUE_LIMIT
            )
            wl["spec"]["active"] = False
            self.store.touch(wl)
            self.reconcile()

    def kueue_deactivate(self, name: str) -> None:
        """An administrator deactivates the workload (``spec.active: false``)."""
        with self.store.lock:
            wl = self.workload(name)
            wl["spec"]["active"] = False
            self.store.touch(wl)
            self.reconcile()

    def is_running(self, name: str) -> bool:
        pods = self.pods(name)
        return bool(pods) and all(p["status"].get("phase") == "Running" for p in pods)

    def is_suspended(self, name: str) -> bool:
        return is_true(self.trainjob(name), "Suspended")
