"""Provoke each ending on the real control plane the way a cluster produces it.

The emulator's driver writes the outcome into its store; this one only does what happens
to a real cluster and lets the real controllers react: a container's program ends (KWOK's
kubelet stand-in, told by a pod annotation, see ``scripts/kube/kwok-stages.yaml``), a
higher-priority pod arrives and the real scheduler preempts, the Eviction API evicts, a
node's kubelet stops heartbeating (KWOK stops managing it) and node-lifecycle taints it
and the taint-eviction controller deletes its pods, the API server freezes (SIGSTOP).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.install import GPUS_PER_NODE, MANAGED
from dispatch_kubeflow_testing.live.kubeapi import ApiError, KubeApi, Obj

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
EXIT = "dispatch.dev/live-exit"
REASON = "dispatch.dev/live-reason"
PREEMPTOR = "dispatch.dev/live-preemptor"

T = TypeVar("T")


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_true(obj: Obj, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


class LiveDriver:
    """What happens to a real cluster, done to the one ``start-kube.sh`` started."""

    def __init__(self, plane: ControlPlane, namespace: str = "default") -> None:
        self.plane = plane
        self.namespace = namespace
        self.api = KubeApi.from_kubeconfig(plane.kubeconfig)
        self._lost: set[str] = set()
        self._preemptors: set[str] = set()

    # -- reading ---------------------------------------------------------------------

    def wait(self, what: str, check: Callable[[], T | None], timeout: float = 90.0) -> T:
        result: T = self.api.wait(what, check, timeout=timeout)
        return result

    def trainjob(self, name: str) -> Obj:
        return self.api.get("TrainJob", name, self.namespace)

    def jobset(self, name: str) -> Obj:
        return self.api.get("JobSet", name, self.namespace)

    def jobs(self, name: str) -> list[Obj]:
        return self.api.list("Job", self.namespace, f"{JOBSET_NAME}={name}")

    def pods(self, name: str) -> list[Obj]:
        pods = self.api.list("Pod", self.namespace, f"{JOBSET_NAME}={name}")
        return sorted(
            pods,
            key=lambda p: (
                int((p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, 0)),
                p["metadata"]["creationTimestamp"],
            ),
        )

    def pod(self, name: str, index: int = 0) -> Obj:
        """The live (not terminating) pod of node ``index``."""
        for pod in self.pods(name):
            meta = pod["metadata"]
            if "deletionTimestamp" in meta:
                continue
            if int((meta.get("annotations") or {}).get(COMPLETION_INDEX, -1)) == index:
                return pod
        raise LookupError(f"TrainJob {name}: no live pod with completion index {index}")

    def running(self, name: str, count: int, timeout: float = 90.0) -> list[Obj]:
        """Wait until ``count`` pods of the TrainJob run (bound by the real scheduler,
        started by KWOK)."""

        def check() -> list[Obj] | None:
            pods = [
                p
                for p in self.pods(name)
                if p["status"].get("phase") == "Running"
                and "deletionTimestamp" not in p["metadata"]
                and is_true(p, "Ready")
            ]
            return pods if len(pods) >= count else None

        return self.wait(f"{count} running pods of TrainJob {name}", check, timeout)

    def running_pod(self, name: str, index: int, timeout: float = 90.0) -> Obj:
        """Wait until node ``index``'s live pod runs, whatever the others do (a pod on a
        lost node stays Terminating and, under a podFailurePolicy, is never replaced)."""

        def check() -> Obj | None:
            try:
                pod = self.pod(name, index)
            except LookupError:
                return None
            running = pod["status"].get("phase") == "Running" and is_true(pod, "Ready")
            return pod if running else None

        return self.wait(f"node {index}'s pod of TrainJob {name} running", check, timeout)

    def trainjob_condition(self, name: str, kind: str, timeout: float = 90.0) -> Obj:
        return self.wait(
            f"TrainJob {name} condition {kind}",
            lambda: (
                condition(self.trainjob(name), kind) if is_true(self.trainjob(name), kind) else None
            ),
            timeout,
        )

    def node(self, node: str) -> Obj:
        return self.api.get("Node", node)

    def events(self, involved: str) -> list[Obj]:
        return [
            e
            for e in self.api.list("Event", self.namespace)
            if (e.get("involvedObject") or {}).get("name") == involved
        ]

    # -- the application -------------------------------------------------------------

    def exit(self, name: str, code: int, *, pod: int = 0, reason: str | None = None) -> str:
        """Node ``pod``'s training process exits with ``code``. Returns the pod's name."""
        target = self.running_pod(name, pod)
        annotations = {EXIT: str(code)}
        if reason:
            annotations[REASON] = reason
        self.api.merge_patch(
            "Pod",
            target["metadata"]["name"],
            {"metadata": {"annotations": annotations}},
            self.namespace,
        )
        return str(target["metadata"]["name"])

    def oom(self, name: str, *, pod: int = 0) -> str:
        """The kernel OOM-kills node ``pod``'s container (the kubelet says OOMKilled, 137)."""
        return self.exit(name, 137, pod=pod, reason="OOMKilled")

    # -- the scheduler and the eviction API ------------------------------------------

    def preempt(self, name: str, *, pod: int = 0) -> str:
        """A pod of a higher PriorityClass that needs every GPU of the node under node
        ``pod`` arrives; the real scheduler preempts. Returns the preemptor's name."""
        victim = self.running_pod(name, pod)
        node = victim["spec"]["nodeName"]
        preemptor = f"live-preemptor-{uuid.uuid4().hex[:6]}"
        self.api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": preemptor,
                    "namespace": self.namespace,
                    "labels": {PREEMPTOR: "true"},
                },
                "spec": {
                    "priorityClassName": "dispatch-high",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "urgent",
                            "image": "registry.example/urgent:1",
                            "command": ["sleep", "infinity"],
                            "resources": {
                                "limits": {"nvidia.com/gpu": str(GPUS_PER_NODE)},
                                "requests": {"nvidia.com/gpu": str(GPUS_PER_NODE)},
                            },
                        }
                    ],
                },
            }
        )
        self._preemptors.add(preemptor)
        return preemptor

    def evict(self, name: str, *, pod: int = 0) -> str:
        """``kubectl drain``'s call: the Eviction API on node ``pod``'s pod."""
        target = self.running_pod(name, pod)
        pod_name = target["metadata"]["name"]
        self.api.request(
            "POST",
            self.api.path("Pod", self.namespace, pod_name) + "/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod_name, "namespace": self.namespace},
            },
        )
        return str(pod_name)

    # -- nodes -----------------------------------------------------------------------

    def lose_node(self, name: str, *, pod: int = 0) -> str:
        """The kubelet of the node under node ``pod`` stops heartbeating: KWOK stops
        managing it (no more lease renewals, nobody to finish its pods). Returns the node."""
        target = self.running_pod(name, pod)
        node = str(target["spec"]["nodeName"])
        self.api.merge_patch("Node", node, {"metadata": {"labels": {MANAGED[0]: None}}})
        self._lost.add(node)
        return node

    def node_not_ready(self, node: str, timeout: float = 60.0) -> Obj:
        """Wait for node-lifecycle to notice (Ready=Unknown and the unreachable taint)."""

        def check() -> Obj | None:
            obj = self.node(node)
            ready = condition(obj, "Ready") or {}
            taints = {t["key"] for t in (obj.get("spec") or {}).get("taints") or []}
            if ready.get("status") == "Unknown" and "node.kubernetes.io/unreachable" in taints:
                return obj
            return None

        return self.wait(f"node {node} NotReady and tainted", check, timeout)

    def recover_node(self, node: str) -> None:
        """The kubelet comes back: KWOK manages the node again (Ready, and it finishes the
        pods left Terminating there)."""
        self.api.merge_patch("Node", node, {"metadata": {"labels": {MANAGED[0]: MANAGED[1]}}})
        self._lost.discard(node)

    # -- the API server --------------------------------------------------------------

    @contextmanager
    def api_frozen(self) -> Iterator[None]:
        """The API server stops answering (SIGSTOP: connections open, nothing returns),
        then resumes."""
        pid = self.plane.pid("kube-apiserver")
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)
            self.wait(
                "the API server answering again", lambda: self.api.get("Namespace", "default")
            )

    # -- other people ----------------------------------------------------------------

    def suspend_behind_back(self, name: str) -> None:
        """Someone else (an admin, a queue controller) suspends the TrainJob."""
        self.api.merge_patch("TrainJob", name, {"spec": {"suspend": True}}, self.namespace)

    def delete_behind_back(self, name: str, *, propagation: str = "Background") -> None:
        self.api.delete("TrainJob", name, self.namespace, propagation=propagation)

    # -- between tests ---------------------------------------------------------------

    def remove_trainjobs(self, selector: str = "dispatch.dev/managed=true") -> None:
        """Delete every TrainJob dispatch made, without waiting for what they leave."""
        for tj in self.api.list("TrainJob", self.namespace, selector):
            try:
                # Background, said explicitly: it also releases a TrainJob stuck in a
                # Foreground deletion the real Trainer keeps re-creating the JobSet of
                self.api.delete(
                    "TrainJob", tj["metadata"]["name"], self.namespace, propagation="Background"
                )
            except ApiError as exc:
                if exc.status != 404:
                    raise

    def cleanup(self, selector: str = "dispatch.dev/managed=true") -> None:
        """Bring lost nodes back, remove preemptors and every TrainJob dispatch made, and
        wait until their pods are gone (so the next test has every GPU)."""
        for node in list(self._lost):
            self.recover_node(node)
        for pod in list(self._preemptors):
            try:
                self.api.delete("Pod", pod, self.namespace)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        self._preemptors.clear()
        self.remove_trainjobs(selector)
        self.wait(
            "no TrainJob pods or preemptors left",
            lambda: not self.api.list("Pod", self.namespace),
            timeout=120,
        )
        if "kueue" in self.plane.versions:
            # a Workload holds its quota until the garbage collector removes it
            self.wait(
                "no Kueue Workload left",
                lambda: not self.api.list("Workload", self.namespace),
                timeout=120,
            )

    def workload(self, name: str) -> Obj:
        """The Kueue Workload of the TrainJob ``name`` (by Kueue's job-uid label)."""
        uid = self.trainjob(name)["metadata"]["uid"]
        (found,) = self.api.list("Workload", self.namespace, f"kueue.x-k8s.io/job-uid={uid}")
        return found

    def settle(self, seconds: float) -> None:
        """Let the real controllers run for a while (only where a test checks that
        something does *not* happen)."""
        time.sleep(seconds)


def annotations_of(obj: Obj) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})
