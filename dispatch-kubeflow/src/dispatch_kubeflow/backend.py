"""The ``kubeflow`` backend: Kubeflow Trainer v2 TrainJobs through the Kubernetes API.

This module is the entry point (``dispatch.backends: kubeflow``), so it stays light: the
``kubernetes`` client is imported by :mod:`dispatch_kubeflow.kube` on first use.

- submit: one TrainJob, tagged (labels + runtimePatches) so discovery finds it and its
  JobSet, Jobs and Pods by job id and submission number; created with strict field
  validation; a refusal is ``SubmitRefused`` with the server's words (launch-failed).
- gate: ``spec.suspend: true``, opened by patching it false. Under Kueue, which owns
  ``suspend``, a gated TrainJob carries its queue and names a prebuilt Workload that does
  not exist (Kueue makes none, so admits nothing); opening the gate removes that name:
  Kueue then makes the Workload, admits it and resumes the TrainJob.
- stop: the stop's cause is written on the object, then a Foreground delete (the
  TrainJob stays listed until its pods are gone, which is what the gate fence needs;
  asked again of a TrainJob still being deleted, a Background one, see ``_propagation``),
  then ``suspend`` (what the Trainer makes again while it is deleted runs nothing); pods
  stuck on a NotReady node are force-deleted so the delete finishes. 404 = done.
- discover: one list per kind (TrainJobs, JobSets, Jobs, Pods; Nodes and Kueue Workloads
  when needed) for any number of jobs; classification in :mod:`dispatch_kubeflow.classify`.
  The one write: a failed attempt's ending kept on its TrainJob before a JobSet restart
  deletes its pods (S-40).
- validate: what a TrainJob cannot carry is refused before anything is recorded, without
  the cluster; check: a Kueue queue or priority class the cluster does not have (or Kueue
  absent), refused before anything is recorded. prepare: the TrainJob and the runtime
  copy, built from the runtime read from the cluster, with the namespace's defaults
  (Kueue's default LocalQueue written in, LimitRange defaults as notes); send creates
  exactly those, and ``--dry-run`` prints them.
- logs: the pods' logs through the API (:mod:`dispatch_kubeflow.logs`).
- multi-node: the launch contract through the torch runtime's own variables
  (:mod:`dispatch_kubeflow.launch`); ``exclude_nodes`` as a required node affinity.

One module for the hooks (each a short method over kube, classify, launch, logs); the
list above is why it runs long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dispatch.core.cause import Cause
from dispatch.hookspecs import API_VERSION
from dispatch.model.declarations import Declarations
from dispatch.model.discovery import Discovery
from dispatch.model.enums import Action, Capability, CauseKind, Stream
from dispatch.model.errors import BadInput, SubmitRefused, Unreachable
from dispatch.model.prepared import Prepared
from dispatch.model.selection import LogSelection
from dispatch.model.spec import JobSpec
from dispatch.plugin import hookimpl

from dispatch_kubeflow import labels as user_labels
from dispatch_kubeflow import launch, logs, tags
from dispatch_kubeflow.classify import read
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.errors import ApiRefused
from dispatch_kubeflow.evidence import (
    annotations_of,
    group,
    jobset_names,
    labels,
    meta,
    name_of,
    needs_nodes,
    node_of,
    pod_terminal,
    queued_uids,
    text,
    true,
)
from dispatch_kubeflow.manifest import (
    GROUP,
    OPTIONS,
    VERSION,
    build_trainjob,
    limit_range_notes,
    runtime_copy,
    trainer_resources,
)

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
        capabilities = {
            Capability.GATING,
            Capability.MULTI_NODE,
            Capability.GPUS,
            Capability.LOGS,
        }
        if self.config.trainer_version >= (2, 2):
            capabilities.add(Capability.TIME_LIMIT)
        if self.config.trainer_version >= (2, 1):
            capabilities.add(Capability.EXCLUDE_NODES)
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
            api_version=API_VERSION,
        )

    # -- before anything is recorded -------------------------------------------------

    @hookimpl
    def dispatch_validate(self, spec: JobSpec) -> None:
        """What a TrainJob cannot run, refused in words a user can act on."""
        problems = []
        if spec.workdir is not None:
            problems.append(
                "--workdir: a TrainJob has no working directory; set it in the image "
                "(WORKDIR) or cd inside the command"
            )
        version = self.config.trainer_version
        if spec.resources.time_limit is not None and version < (2, 2):
            problems.append(
                f"--time: Trainer {version[0]}.{version[1]} has no TrainJob deadline "
                "(activeDeadlineSeconds needs 2.2); put the limit in the runtime"
            )
        if spec.warn is not None and not self.config.runtime_copy:
            problems.append(
                "--warn: the grace period and hook that carry a warning live in dispatch's "
                "runtime copy, which DISPATCH_KUBEFLOW_RUNTIME_COPY=0 turns off"
            )
        if spec.exclude_nodes and version < (2, 1):
            problems.append(
                f"excluded nodes: Trainer {version[0]}.{version[1]} has no pod template "
                "override to carry a node affinity (needs 2.1)"
            )
        problems += self._kueue_problems(spec)
        for option in ("label", "annotation"):
            problems += user_labels.problems(option, spec.options.get(option))
        taken = sorted((launch.RESERVED | launch.OWN) & set(spec.env))
        if taken:
            problems.append(
                f"--env {', '.join(taken)}: set by the torch runtime or by dispatch for every "
                "pod (the launch contract); the Trainer refuses a TrainJob that sets them"
            )
        if problems:
            raise BadInput("dispatch-kubeflow cannot run this job:\n  " + "\n  ".join(problems))

    def _kueue_problems(self, spec: JobSpec) -> list[str]:
        """The Kueue queue and priority class, each a DNS-1123 label (they travel as the
        TrainJob's ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class``
        labels); a priority class needs a queue (Kueue ignores a job sent to none)."""
        problems = []
        queue = spec.options.get("queue")
        named = {
            "-o queue": queue,
            "DISPATCH_KUBEFLOW_QUEUE": None if queue else self.config.queue,
            "-o priority": spec.options.get("priority"),
        }
        for where, value in named.items():
            if value is not None and (problem := tags.dns1123_problem(value)) is not None:
                problems.append(f"{where}={value!r}: {problem}")
        if spec.options.get("priority") and not (queue or self.config.queue):
            problems.append(
                f"-o priority={spec.options['priority']!r}: a Kueue priority class needs a "
                "queue (-o queue=... or DISPATCH_KUBEFLOW_QUEUE); without one Kueue ignores "
                "the job"
            )
        return problems

    @hookimpl
    def dispatch_check(self, spec: JobSpec) -> None:
        """The Kueue queue (``-o queue``, else ``DISPATCH_KUBEFLOW_QUEUE``) must be a
        LocalQueue of the namespace and the priority a WorkloadPriorityClass: one list of
        each (so a refusal names the ones that exist), only for what the job names. A
        cluster that does not serve Kueue's API (404) has no queue to send a job to. A
        listing RBAC forbids (401, 403) is not checked: the submit is then refused or left
        pending with Kueue's words, as without this check. A Kubernetes configuration that
        cannot be loaded means the cluster cannot be asked from here, whatever the job
        names: ``Unreachable`` with what to set, so a submit records nothing (the job
        would fail at every submission) while ``--no-start`` still records for a
        supervisor that has the configuration."""
        try:
            kube = self.kube  # loads the configuration (no call to the API server)
        except BadInput as exc:
            raise Unreachable(str(exc)) from exc
        queue = spec.options.get("queue")
        where = "-o queue" if queue else "DISPATCH_KUBEFLOW_QUEUE"
        queue = queue or self.config.queue
        priority = spec.options.get("priority")
        if not queue:
            return  # a priority needs a queue: dispatch_validate refused that already
        problems = []
        queues = self._kueue_listing(kube.list_local_queues, where, queue)
        if queues is not None and queue not in (names := _names(queues)):
            problems.append(
                f"{where}={queue!r}: no Kueue LocalQueue of that name in namespace "
                f"{kube.namespace!r} ({_listed(names, 'LocalQueues')})"
            )
        if priority:
            classes = self._kueue_listing(kube.list_priority_classes, "-o priority", priority)
            if classes is not None and priority not in _names(classes):
                values = {name: item.get("value") for item in classes if (name := name_of(item))}
                named = [
                    f"{name} ({values[name]})" if values[name] is not None else name
                    for name in sorted(values)
                ]
                problems.append(
                    f"-o priority={priority!r}: no Kueue WorkloadPriorityClass of that name "
                    f"({_listed(named, 'WorkloadPriorityClasses', 'the cluster')})"
                )
        if problems:
            raise BadInput("dispatch-kubeflow cannot run this job:\n  " + "\n  ".join(problems))

    def _kueue_listing(
        self, listing: Callable[[], list[dict[str, Any]]], where: str, value: str
    ) -> list[dict[str, Any]] | None:
        """One Kueue listing for :meth:`dispatch_check`; None when RBAC forbids it."""
        try:
            return listing()
        except ApiRefused as exc:
            if exc.status == 404:
                raise BadInput(
                    f"{where}={value!r}: Kueue is not installed on this cluster (the API "
                    "server serves no kueue.x-k8s.io API), so no queue can take the job; "
                    f"drop {where}"
                ) from exc
            if exc.status in (401, 403):
                return None
            raise Unreachable(
                f"dispatch-kubeflow could not check {where}={value!r} against the cluster "
                f"(nothing recorded): {exc.message}"
            ) from exc
        except Unreachable as exc:
            raise Unreachable(
                f"dispatch-kubeflow could not check {where}={value!r} against the cluster "
                f"(nothing recorded): {exc}"
            ) from exc

    def _namespace_defaults(
        self, kube: Kube, spec: JobSpec, runtime: dict[str, Any]
    ) -> tuple[str | None, list[str]]:
        """What the namespace applies to this job that it did not choose: Kueue's default
        LocalQueue (returned, to be written into the TrainJob) and the LimitRanges'
        default requests and limits for the trainer container (as notes)."""
        notes: list[str] = []
        default_queue = None
        if not (spec.options.get("queue") or self.config.queue):
            try:
                names = _names(kube.list_local_queues())
            except ApiRefused:
                names = []  # no Kueue (404), or not ours to read (403): nothing defaulted
            if DEFAULT_QUEUE in names:
                default_queue = DEFAULT_QUEUE
                notes.append(
                    f"no queue chosen: namespace {kube.namespace!r} has a Kueue LocalQueue "
                    f"named {DEFAULT_QUEUE!r}, which Kueue gives every job that names none "
                    "(LocalQueueDefaulting); written out as kueue.x-k8s.io/queue-name"
                )
        try:
            ranges = kube.list_limit_ranges()
        except ApiRefused as exc:
            if exc.status in (401, 403):
                notes.append(
                    f"the LimitRanges of namespace {kube.namespace!r} could not be read "
                    f"({exc.message}): defaults they give containers are not shown"
                )
            ranges = []
        notes += limit_range_notes(ranges, kube.namespace, trainer_resources(spec, runtime))
        return default_queue, notes

    @hookimpl
    def dispatch_prepare(
        self, job_id: str, submission: int, spec: JobSpec, gated: bool
    ) -> Prepared:
        """The TrainJob and the runtime copy exactly as :meth:`dispatch_send` creates them.
        Reads the runtime the TrainJob names (the replicated jobs its patches name, and
        the spec the copy is made from), so it needs the cluster; it changes nothing."""
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
        default_queue, defaults = self._namespace_defaults(kube, spec, runtime)
        body = build_trainjob(
            self.config,
            namespace=kube.namespace,
            job_id=job_id,
            submission=submission,
            spec=spec,
            gated=gated,
            replicated_jobs=replicated,
            default_queue=default_queue,
        )
        parts: dict[str, Any] = {"TrainJob": body}
        if self.config.runtime_copy:
            parts["runtime copy"] = runtime_copy(
                runtime,
                name=body["metadata"]["name"],
                namespace=kube.namespace,
                job_id=job_id,
                submission=submission,
                spec=spec,
            )
        return Prepared(
            backend=NAME,
            job_id=job_id,
            submission=submission,
            gated=gated,
            parts=parts,
            notes=(
                *(
                    (
                        "the runtime copy is created first and made the TrainJob's dependent "
                        "once the TrainJob exists (so it is removed after it)",
                    )
                    if self.config.runtime_copy
                    else ()
                ),
                *defaults,
                *(
                    (
                        f"gated: created suspended and labelled {tags.KUEUE_PREBUILT}="
                        f"{tags.gate_workload(body['metadata']['name'])}, a Kueue Workload "
                        "nobody creates, so Kueue makes none and admits nothing, whatever "
                        "queue the TrainJob has; opening the gate removes the label (or, "
                        "when it has no queue, resumes it)",
                    )
                    if gated
                    else ()
                ),
                *(
                    (
                        f"Trainer {self.config.trainer_version[0]}."
                        f"{self.config.trainer_version[1]} carries -o label to the TrainJob "
                        "and its JobSet, not to the pods (2.1 and later carry them there)",
                    )
                    if spec.options.get("label") and self.config.trainer_version < (2, 1)
                    else ()
                ),
            ),
        )

    # -- submit, gate, stop ----------------------------------------------------------

    @hookimpl
    def dispatch_send(self, prepared: Prepared) -> str:
        kube = self.kube
        body = prepared.mapping("TrainJob")
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        copied = "runtime copy" in prepared.parts
        if copied:
            try:
                kube.create_runtime_copy(prepared.mapping("runtime copy"))
            except ApiRefused as exc:
                if exc.status != 409:  # 409: a retried submit made it already
                    raise SubmitRefused(exc.message) from exc
        try:
            created = self._create_trainjob(body, copied)
        except ApiRefused as exc:
            if copied and exc.status != 409:
                self._drop_copy(namespace, name)
            raise SubmitRefused(exc.message) from exc
        if copied:
            self._own_copy(namespace, name, created)
        return tags.object_id(namespace, name)

    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        """Prepare and send at once, for a caller holding the backend itself (not a hook:
        dispatch calls :meth:`dispatch_prepare` and :meth:`dispatch_send`)."""
        return self.dispatch_send(self.dispatch_prepare(job_id, submission, spec, gated))

    def _create_trainjob(self, body: dict[str, Any], copied: bool) -> dict[str, Any]:
        """Create the TrainJob, waiting out the Trainer webhook's view of a runtime copy made
        a moment before: the webhook checks ``spec.runtimeRef`` against its informer cache,
        which may not have seen the copy yet, and denies the create (found on the live
        tier). Only that denial, for a copy this submit made, is tried again, for at most
        :data:`RUNTIME_CACHE_WAIT` seconds; any other refusal is final at once."""
        deadline = time.monotonic() + RUNTIME_CACHE_WAIT
        pause = 0.1
        while True:
            try:
                return self.kube.create_trainjob(body)
            except ApiRefused as exc:
                if not (copied and _copy_not_seen_yet(exc)):
                    raise
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _own_copy(self, namespace: str, name: str, trainjob: dict[str, Any]) -> None:
        """The runtime copy is the TrainJob's dependent, so the garbage collector removes
        it after the TrainJob (the Trainer's ``resource-in-use`` finalizer holds it until
        then). It does not block the TrainJob's Foreground deletion. A refusal leaves it
        behind, harmless (nothing else refers to it)."""
        uid = (trainjob.get("metadata") or {}).get("uid")
        if not uid:
            return
        owner = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TrainJob",
            "name": name,
            "uid": uid,
            "blockOwnerDeletion": False,
        }
        try:
            self.kube.patch_runtime_copy(
                namespace, name, {"metadata": {"ownerReferences": [owner]}}
            )
        except ApiRefused:
            return

    def _drop_copy(self, namespace: str, name: str) -> None:
        try:
            self.kube.delete_runtime_copy(namespace, name)
        except ApiRefused:
            return

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
        # a TrainJob that cannot be read is not one whose gate is closed (discovery shows
        # it unknown): nothing to open
        annotations = annotations_of(tj)
        if meta(tj).get("deletionTimestamp") or annotations.get(tags.GATE) != "closed":
            return
        # the queue as the TrainJob carries it (its own, or the one Kueue's webhook gave
        # it), else as dispatch kept it (a TrainJob gated without the label)
        queue = text(labels(tj).get(tags.KUEUE_QUEUE)) or text(annotations.get(tags.QUEUE))
        patch: dict[str, Any] = {"metadata": {"annotations": {tags.GATE: "open"}}}
        if queue:
            # Kueue owns suspend: without the prebuilt Workload's name it makes a Workload,
            # admits it and resumes the TrainJob
            patch["metadata"]["labels"] = {tags.KUEUE_PREBUILT: None, tags.KUEUE_QUEUE: queue}
        else:
            # no queue: Kueue leaves it alone. The label stays: Kueue's webhook refuses to
            # change it on a TrainJob that is not suspended, even one it does not manage
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
            kube.delete_trainjob(namespace, name, _propagation(kube.get_trainjob(namespace, name)))
        except ApiRefused as exc:
            if exc.status != 404:
                raise
        else:
            self._suspend_while_deleted(namespace, name)
        # read defensively (evidence.py): a listed item of the wrong shape is skipped, a
        # Node whose readiness cannot be read is not Ready
        placed = [
            (pod_name, node)
            for p in kube.list_pods(f"{tags.JOBSET_NAME}={name}")
            if (node := node_of(p)) and (pod_name := name_of(p))
        ]
        if not placed:
            return
        ready = {name_of(n) for n in self._nodes() if true(n, "Ready") is not None}
        for pod_name, node in placed:
            if node not in ready:
                try:
                    kube.force_delete_pod(namespace, pod_name)
                except ApiRefused as exc:
                    if exc.status != 404:
                        raise

    def _suspend_while_deleted(self, namespace: str, name: str) -> None:
        """Suspend the TrainJob once its deletion has begun, so nothing of it runs again.

        The Trainer reconciles a TrainJob being deleted like any other: when the garbage
        collector has removed its JobSet, it makes the JobSet again (with the TrainJob's
        ``suspend``), whose pods would run after discovery had shown the object ended, beside
        the next submission (S-28). Suspended, what it makes again runs no pod, and a JobSet
        still there is suspended (its pods stopped). After the delete, not before: Kueue
        resumes a suspended job it has admitted unless the job is being deleted. A refusal
        (gone: nothing to re-create; a webhook that forbids it) leaves the stop as it was."""
        try:
            self.kube.patch_trainjob(namespace, name, {"spec": {"suspend": True}})
        except ApiRefused:
            return

    # -- logs ------------------------------------------------------------------------

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        if selection.stream is not Stream.STDOUT:
            raise BadInput(
                f"--{selection.stream}: Kubernetes keeps a container's stdout and stderr in one "
                "log; read it without --stderr"
            )
        namespace, name = tags.split_object_id(object_id)
        kube = self.kube
        pods = [
            p
            for p in kube.list_pods(f"{tags.JOBSET_NAME}={name}")
            if (p.get("metadata") or {}).get("namespace", namespace) == namespace
        ]
        chosen = logs.select(pods, selection.node, selection.rank)
        return logs.skip(logs.read(kube, chosen), selection.offset)

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
        if self.config.trainer_version >= (2, 2):
            jobs = kube.list_jobs(selector)
            pods = kube.list_pods(selector)
        else:
            # Trainer 2.0/2.1 label only the JobSet: its Jobs (and on 2.0 its Pods) are
            # found by the JobSet's name, one list of each kind as on 2.2
            names = jobset_names(trainjobs, jobsets)
            by_jobset = (
                f"{tags.JOBSET_NAME} in ({','.join(names)})"
                if len(names) <= self.config.selector_limit
                else tags.JOBSET_NAME
            )
            jobs = kube.list_jobs(by_jobset) if names else []
            pods = kube.list_pods(by_jobset) if names else []
        nodes = self._nodes() if needs_nodes(pods) else []
        queued = queued_uids(trainjobs)
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
            if ev.trainjob is None and not ev.unreadable and all(pod_terminal(p) for p in ev.pods):
                # the TrainJob is gone and nothing of it runs: what is left (a JobSet, Jobs,
                # ended pods) is the garbage collector's to remove, not an object (unless an
                # unreadable item of the listing may be that TrainJob)
                continue
            view, keep = read(ev)
            objects.append(view)
            if keep:
                self._keep(ev.namespace, ev.name, keep)
        return Discovery(backend=NAME, at=at, objects=tuple(objects))


#: the LocalQueue Kueue gives a job that names none (its LocalQueueDefaulting feature)
DEFAULT_QUEUE = "default"


def _names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(name for item in items if (name := name_of(item)))


def _listed(names: list[str], kind: str, owner: str = "it") -> str:
    return f"{owner} has: {', '.join(names)}" if names else f"{owner} has no {kind}"


def _propagation(trainjob: dict[str, Any]) -> str:
    """Foreground the first time (the TrainJob stays listed until its pods are gone);
    Background when it is asked again of a TrainJob already being deleted. The real
    Trainer (2.2.0) re-creates the JobSet of a TrainJob under Foreground deletion whenever
    the garbage collector has removed it, so under load the deletion can go round for
    ever (found on the live tier); a second delete with Background replaces the
    ``foregroundDeletion`` finalizer and lets the TrainJob go, and the collector then
    removes what is left. Pods still running keep the object alive meanwhile (S-28)."""
    deleting = meta(trainjob).get("deletionTimestamp")
    return "Background" if deleting else "Foreground"


#: how long a submit waits for the Trainer's webhook to see the runtime copy it just made
RUNTIME_CACHE_WAIT = 10.0


def _copy_not_seen_yet(exc: ApiRefused) -> bool:
    """The Trainer webhook's denial of a TrainJob whose TrainingRuntime it has not seen
    ("specified trainingRuntime must be created before the TrainJob is created")."""
    words = exc.message.lower()
    return "validator.trainjob.trainer.kubeflow.org" in words and "runtimeref" in words
