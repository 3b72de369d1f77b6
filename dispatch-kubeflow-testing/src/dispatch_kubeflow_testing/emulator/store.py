"""The emulated API server's object store: resources, metadata, conflicts, deletion.

It keeps what the adapter relies on from a real API server: ``uid``, ``resourceVersion``,
``creationTimestamp``, 404 and 409 with Kubernetes ``Status`` bodies, the status
subresource kept apart from the main resource, and deletion that honours finalizers and
``ownerReferences`` (Background, Foreground and Orphan propagation).
"""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dispatch_kubeflow_testing.emulator import selectors

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


POD = Resource("", "v1", "pods", "Pod")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENT = Resource("", "v1", "events", "Event")
JOB = Resource("batch", "v1", "jobs", "Job")
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
TRAINJOB = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
RUNTIME = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
CLUSTER_RUNTIME = Resource(
    "trainer.kubeflow.org",
    "v1alpha1",
    "clustertrainingruntimes",
    "ClusterTrainingRuntime",
    namespaced=False,
)
WORKLOAD = Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")
LOCAL_QUEUE = Resource("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue")
PRIORITY_CLASS = Resource(
    "kueue.x-k8s.io",
    "v1beta1",
    "workloadpriorityclasses",
    "WorkloadPriorityClass",
    namespaced=False,
)
LIMIT_RANGE = Resource("", "v1", "limitranges", "LimitRange")
#: the API group Kueue's CRDs serve (absent from a cluster without Kueue)
KUEUE_GROUP = "kueue.x-k8s.io"

RESOURCES = {
    (r.group, r.version, r.plural): r
    for r in (
        POD,
        NODE,
        EVENT,
        JOB,
        JOBSET,
        TRAINJOB,
        RUNTIME,
        CLUSTER_RUNTIME,
        WORKLOAD,
        LOCAL_QUEUE,
        PRIORITY_CLASS,
        LIMIT_RANGE,
    )
}


class ApiError(Exception):
    """An error answer: HTTP code, Kubernetes reason and message, as a ``Status`` body."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.plural}.{res.group or "core"} "{name}" not found')


def timestamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _terminal_pod(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Clock:
    """Wall time plus an offset the scenario driver can advance (deadlines, windows)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


class Store:
    """Objects by resource and (namespace, name). Every method takes the one lock."""

    def __init__(self, clock: Clock) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self._objects: dict[Resource, dict[tuple[str, str], Obj]] = {
            r: {} for r in RESOURCES.values()
        }
        self._rv = itertools.count(1)

    def _bump(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def create(self, res: Resource, namespace: str, obj: Obj) -> Obj:
        with self.lock:
            meta = obj.setdefault("metadata", {})
            name = meta.get("name")
            if not name and meta.get("generateName"):
                name = meta["generateName"] + uuid.uuid4().hex[:5]
                meta["name"] = name
            if not name:
                raise ApiError(
                    422,
                    "Invalid",
                    f"{res.kind}.{res.group} is invalid: metadata.name: Required value",
                )
            key = (namespace if res.namespaced else "", name)
            if key in self._objects[res]:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{res.plural}.{res.group or "core"} "{name}" already exists',
                )
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            if res.namespaced:
                meta["namespace"] = namespace
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = timestamp(self.clock.now())
            meta["generation"] = 1
            meta.setdefault("labels", {})
            self._bump(obj)
            self._objects[res][key] = obj
            return copy.deepcopy(obj)

    def raw(self, res: Resource, namespace: str, name: str) -> Obj:
        """The stored object itself, for controllers that mutate it in place (then ``touch``)."""
        key = (namespace if res.namespaced else "", name)
        try:
            return self._objects[res][key]
        except KeyError:
            raise not_found(res, name) from None

    def exists(self, res: Resource, namespace: str, name: str) -> bool:
        return (namespace if res.namespaced else "", name) in self._objects[res]

    def get(self, res: Resource, namespace: str, name: str) -> Obj:
        with self.lock:
            return copy.deepcopy(self.raw(res, namespace, name))

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        for (ns, _), obj in list(self._objects[res].items()):
            if namespace is None or not res.namespaced or ns == namespace:
                yield obj

    def listing(self, res: Resource, namespace: str | None, label_selector: str | None) -> Obj:
        with self.lock:
            try:
                match = selectors.parse(label_selector)
            except selectors.SelectorError as exc:
                raise ApiError(400, "BadRequest", str(exc)) from None
            items = [
                copy.deepcopy(o)
                for o in self.items(res, namespace)
                if match(o["metadata"].get("labels") or {})
            ]
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            return {
                "apiVersion": res.api_version,
                "kind": res.kind + "List",
                "metadata": {"resourceVersion": str(next(self._rv))},
                "items": items,
            }

    def touch(self, obj: Obj) -> None:
        self._bump(obj)

    def patch(self, res: Resource, namespace: str, name: str, patch: Any, *, status: bool) -> Obj:
        """Merge-patch the main resource (status is ignored there) or the status subresource."""
        with self.lock:
            obj = self.raw(res, namespace, name)
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "the patch body must be a JSON object")
            if status:
                updated = merge_patch(obj, {"status": patch.get("status", {})})
            else:
                patch = {
                    k: v for k, v in patch.items() if k not in ("status", "apiVersion", "kind")
                }
                meta = patch.get("metadata") or {}
                for frozen in ("name", "namespace", "uid", "creationTimestamp"):
                    if frozen in meta and meta[frozen] != obj["metadata"].get(frozen):
                        raise ApiError(422, "Invalid", f"metadata.{frozen}: field is immutable")
                updated = merge_patch(obj, patch)
                if updated.get("spec") != obj.get("spec"):
                    updated["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
            obj.clear()
            obj.update(updated)
            self._bump(obj)
            return copy.deepcopy(obj)

    def remove(self, res: Resource, namespace: str, name: str) -> None:
        self._objects[res].pop((namespace if res.namespaced else "", name), None)

    def delete(
        self, res: Resource, namespace: str, name: str, policy: str | None, grace: int | None
    ) -> Obj:
        """Start deleting: Foreground keeps the owner (finalizer) until its dependents are gone;
        Background and Orphan remove it now (dependents go in the next GC pass, or stay).
        Pods keep a ``deletionTimestamp`` until the kubelet confirms, unless ``grace == 0``."""
        with self.lock:
            obj = self.raw(res, namespace, name)
            meta = obj["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            if policy == "Orphan":
                for dep in self.dependents(meta["uid"]):
                    dep["metadata"]["ownerReferences"] = [
                        r
                        for r in dep["metadata"].get("ownerReferences", [])
                        if r["uid"] != meta["uid"]
                    ]
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if "deletionTimestamp" not in meta:
                meta["deletionTimestamp"] = timestamp(self.clock.now())
            if res is POD:
                if grace == 0:
                    finalizers = [f for f in finalizers if f != "emulator/kubelet"]
                elif "emulator/kubelet" not in finalizers and not _terminal_pod(obj):
                    finalizers.append("emulator/kubelet")
            meta["finalizers"] = finalizers
            self._bump(obj)
            answer = copy.deepcopy(obj)
            if not finalizers:
                self.remove(res, namespace, name)
            return answer

    def dependents(self, uid: str) -> list[Obj]:
        found = []
        for res in RESOURCES.values():
            for obj in self.items(res):
                if any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or []):
                    found.append(obj)
        return found

    def all_uids(self) -> set[str]:
        return {o["metadata"]["uid"] for res in RESOURCES.values() for o in self.items(res)}

    def collect_garbage(
        self, kubelet_done: Callable[[Obj], bool], *, owner_lags: bool = False
    ) -> bool:
        """One garbage-collector pass; True if anything changed.

        Dependents of a gone owner, or of a Foreground-deleting one, are deleted; an owner
        waiting in Foreground deletion goes once it has no dependent left; a deleting pod
        goes once ``kubelet_done`` says its kubelet confirmed (its node Ready). With
        ``owner_lags`` an owner whose last dependent went in this pass goes in the next
        one, leaving its controller the moment the real collector leaves it.
        """
        changed = False
        uids = self.all_uids()
        foreground = {
            o["metadata"]["uid"]
            for res in RESOURCES.values()
            for o in self.items(res)
            if "foregroundDeletion" in (o["metadata"].get("finalizers") or [])
        }
        waited = {u for u in foreground if self.dependents(u)} if owner_lags else set()
        for res in RESOURCES.values():
            for obj in list(self.items(res)):
                meta = obj["metadata"]
                owners = [r["uid"] for r in meta.get("ownerReferences") or []]
                ns = meta.get("namespace", "")
                if owners and (
                    all(u not in uids for u in owners) or any(u in foreground for u in owners)
                ):
                    if "deletionTimestamp" not in meta:
                        policy = (
                            "Foreground"
                            if any(u in foreground for u in owners) and res is not POD
                            else None
                        )
                        self.delete(res, ns, meta["name"], policy, None)
                        changed = True
                fins = meta.get("finalizers") or []
                if (
                    "foregroundDeletion" in fins
                    and meta["uid"] not in waited
                    and not self.dependents(meta["uid"])
                ):
                    fins.remove("foregroundDeletion")
                    changed = True
                if "emulator/kubelet" in fins and kubelet_done(obj):
                    fins.remove("emulator/kubelet")
                    changed = True
                if "deletionTimestamp" in meta and not fins:
                    self.remove(res, ns, meta["name"])
                    changed = True
        return changed
