"""The ``kubeflow`` backend: Kubeflow Trainer v2 TrainJobs through the Kubernetes API.

This module is the entry point (``dispatch.backends: kubeflow``), so it stays light: the
``kubernetes`` client is imported by :mod:`dispatch_kubeflow.kube` on first use.

- submit: one TrainJob, tagged (labels + runtimePatches) so discovery finds it and its
  JobSet, Jobs and Pods by job id and submission number; created with strict field
  validation; a refusal is ``SubmitRefused`` with the server's words (launch-failed).
- gate: ``spec.suspend: true``, opened by patching it false. Under Kueue, which owns
  ``suspend``, a gated TrainJob is created without the queue-name label (Kueue ignores it)
  and opening the gate adds the label: Kueue then admits and resumes it.
- stop: the stop's cause is written on the object, then a Foreground delete (the
  TrainJob stays listed until its pods are gone, which is what the gate fence needs);
  pods stuck on a NotReady node are force-deleted so the delete finishes. 404 = done.
- discover: one list per kind (TrainJobs, JobSets, Jobs, Pods; Nodes and Kueue Workloads
  when needed) for any number of jobs; classification in :mod:`dispatch_kubeflow.classify`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dispatch.cause import Cause
from dispatch.declarations import Declarations
from dispatch.discovery import Discovery
from dispatch.enums import Action, Capability, CauseKind
from dispatch.errors import SubmitRefused
from dispatch.plugin import hookimpl
from dispatch.spec import JobSpec

from dispatch_kubeflow import tags
from dispatch_kubeflow.classify import read
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.errors import ApiRefused
from dispatch_kubeflow.evidence import group
from dispatch_kubeflow.manifest import OPTIONS, build_trainjob

if TYPE_CHECKING:
    from dispatch_kubeflow.kube import Kube

NAME = "kubeflow"

REPORTS = frozenset(
    {
        CauseKind.NONE,
        CauseKind.PREEMPTED,
        CauseKind.NODE_LOST,
        CauseKind.OUT_OF_MEMORY,
        CauseKind.TIME_LIMIT,
        CauseKind.NON_ZERO_EXIT,
        CauseKind.LAUNCH_FAILED,
        CauseKind.NO_CAPACITY,
        CauseKind.HELD,
        CauseKind.CANCELLED,
        CauseKind.UNKNOWN,
    }
)


def _restarts(runtime: dict[str, Any]) -> bool:
    """Whether the runtime's JobSet failurePolicy restarts a failed JobSet at least once."""
    policy = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "failurePolicy"
    )
    if not policy:
        return False
    if int(policy.get("maxRestarts") or 0) > 0:
        return True
    return any("IgnoreMaxRestarts" in (r.get("action") or "") for r in policy.get("rules") or [])


class KubeflowBackend:
    """The plugin object; built with no arguments from the environment, or given a config."""

    def __init__(self, config: KubeflowConfig | None = None) -> None:
        self.config = config if config is not None else KubeflowConfig.from_env()
        self._kube: Kube | None = None
        self._lock = threading.Lock()

    @property
    def kube(self) -> Kube:
        with self._lock:
            if self._kube is None:
                from dispatch_kubeflow.kube import Kube

                self._kube = Kube(self.config)
            return self._kube

    # -- declaration -----------------------------------------------------------------

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        capabilities = {Capability.GATING, Capability.MULTI_NODE, Capability.GPUS}
        if self.config.trainer_version >= (2, 2):
            capabilities.add(Capability.TIME_LIMIT)
        return Declarations(
            name=NAME,
            description="Kubeflow Trainer v2 TrainJobs (JobSet, Kueue) via the Kubernetes API",
            node_loss_window=self.config.node_loss_window,
            pending_windows={CauseKind(k): v for k, v in self.config.pending_windows.items()},
            native_actions=frozenset({Action.RESTART})
            if self.config.native_restart
            else frozenset(),
            reports=REPORTS,
            capabilities=frozenset(capabilities),
            options=dict(OPTIONS),
        )

    # -- submit, gate, stop ----------------------------------------------------------

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        kube = self.kube
        runtime_name = spec.options.get("runtime") or self.config.runtime
        try:
            runtime = kube.get_runtime(self.config.runtime_kind, runtime_name)
        except ApiRefused as exc:
            raise SubmitRefused(exc.message) from exc
        template = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
        replicated = [
            rj["name"] for rj in template.get("replicatedJobs") or [] if rj.get("name")
        ] or ["node"]
        if self.config.native_restart and not _restarts(runtime):
            raise SubmitRefused(
                f"dispatch-kubeflow: runtime {runtime_name!r} has no JobSet failurePolicy that "
                "restarts, but this backend declares restart native "
                "(DISPATCH_KUBEFLOW_NATIVE_RESTART)"
            )
        body = build_trainjob(
            self.config,
            namespace=kube.namespace,
            job_id=job_id,
            submission=submission,
            spec=spec,
            gated=gated,
            replicated_jobs=replicated,
        )
        try:
            kube.create_trainjob(body)
        except ApiRefused as exc:
            raise SubmitRefused(exc.message) from exc
        return tags.object_id(kube.namespace, body["metadata"]["name"])

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        namespace, name = tags.split_object_id(object_id)
        kube = self.kube
        try:
            tj = kube.get_trainjob(namespace, name)
        except ApiRefused as exc:
            if exc.status == 404:
                return
            raise
        meta = tj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if meta.get("deletionTimestamp") or annotations.get(tags.GATE) != "closed":
            return
        patch: dict[str, Any] = {"metadata": {"annotations": {tags.GATE: "open"}}}
        queue = annotations.get(tags.QUEUE)
        if queue:
            patch["metadata"]["labels"] = {tags.KUEUE_QUEUE: queue}
        else:
            patch["spec"] = {"suspend": False}
        try:
            kube.patch_trainjob(namespace, name, patch)
        except ApiRefused as exc:
            if exc.status != 404:
                raise

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        namespace, name = tags.split_object_id(object_id)
        kube = self.kube
        try:
            kube.patch_trainjob(
                namespace, name, {"metadata": {"annotations": {tags.STOP: cause.model_dump_json()}}}
            )
            kube.delete_trainjob(namespace, name, "Foreground")
        except ApiRefused as exc:
            if exc.status != 404:
                raise
        pods = kube.list_pods(f"{tags.JOBSET_NAME}={name}")
        if not any((p.get("spec") or {}).get("nodeName") for p in pods):
            return
        ready = {
            n["metadata"]["name"]
            for n in self._nodes()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        }
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and node not in ready:
                try:
                    kube.force_delete_pod(namespace, pod["metadata"]["name"])
                except ApiRefused as exc:
                    if exc.status != 404:
                        raise

    # -- discovery -------------------------------------------------------------------

    def _nodes(self) -> list[dict[str, Any]]:
        """Nodes, or none if RBAC forbids listing them (the pods' own conditions remain)."""
        try:
            return self.kube.list_nodes()
        except ApiRefused as exc:
            if exc.status in (401, 403):
                return []
            raise

    def _keep(self, namespace: str, name: str, keep: dict[str, str]) -> None:
        """Write a failed attempt's ending on its TrainJob before a JobSet restart deletes
        the pods that show it (once per attempt: the next discovery reads it back). A
        refusal (gone, forbidden) only loses that evidence: the attempt is then reported
        as one whose ending was not seen, by every reader alike."""
        try:
            self.kube.patch_trainjob(namespace, name, {"metadata": {"annotations": keep}})
        except ApiRefused:
            return

    def selector(self, job_ids: set[str]) -> str:
        """Up to ``selector_limit`` job ids go into an ``in (...)`` selector (≤ 64 characters
        each, far below the API server's 1 MiB request-line limit); beyond it, discovery
        lists every object dispatch manages in the namespace and filters locally. One call
        per kind either way."""
        if len(job_ids) > self.config.selector_limit:
            return f"{tags.MANAGED}=true"
        values = ",".join(sorted({tags.job_label(j) for j in job_ids}))
        return f"{tags.JOB} in ({values})"

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        at = datetime.now(UTC)
        wanted = set(job_ids)
        if not wanted:
            return Discovery(backend=NAME, at=at)
        kube = self.kube
        selector = self.selector(wanted)
        trainjobs = kube.list_trainjobs(selector)
        jobsets = kube.list_jobsets(selector)
        jobs = kube.list_jobs(selector)
        if self.config.trainer_version >= (2, 1):
            pods = kube.list_pods(selector)
        else:
            names = sorted({j["metadata"]["labels"].get(tags.JOBSET_NAME, "") for j in jobs} - {""})
            pods = kube.list_pods(f"{tags.JOBSET_NAME} in ({','.join(names)})") if names else []
        needs_nodes = any(
            (p.get("spec") or {}).get("nodeName")
            and (
                (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                or (p.get("metadata") or {}).get("deletionTimestamp")
            )
            for p in pods
        )
        nodes = self._nodes() if needs_nodes else []
        queued = [
            t["metadata"]["uid"]
            for t in trainjobs
            if (
                (t["metadata"].get("annotations") or {}).get(tags.QUEUE)
                or (t["metadata"].get("labels") or {}).get(tags.KUEUE_QUEUE)
            )
        ]
        workloads: list[dict[str, Any]] = []
        if queued:
            wl_selector = (
                f"{tags.KUEUE_JOB_UID} in ({','.join(sorted(queued))})"
                if len(queued) <= self.config.selector_limit
                else tags.KUEUE_JOB_UID
            )
            try:
                workloads = kube.list_workloads(wl_selector)
            except ApiRefused as exc:
                if exc.status not in (403, 404):
                    raise
        objects = []
        for ev in group(trainjobs, jobsets, jobs, pods, nodes, workloads, wanted):
            view, keep = read(ev)
            objects.append(view)
            if keep:
                self._keep(ev.namespace, ev.name, keep)
        return Discovery(backend=NAME, at=at, objects=tuple(objects))
