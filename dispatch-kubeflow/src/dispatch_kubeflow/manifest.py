"""The TrainJob dispatch creates for one submission: pure, so tests read it without a cluster.

Tagging differs by Trainer version because TrainJob ``metadata.labels`` never reach the
JobSet, Jobs or Pods (dispatch-kubeflow/docs/research.md §1.1):

- 2.2 and later: one ``runtimePatches`` entry (manager ``dispatch.dev/dispatch``) puts
  the labels on the JobSet, on every replicated Job and on every pod template;
- 2.1: ``spec.labels`` (JobSet and Jobs) plus ``podTemplateOverrides`` metadata (pods);
- 2.0: ``spec.labels`` only; pods are found through ``jobset.sigs.k8s.io/jobset-name``.

A user's labels (``-o label``) travel the same way beside dispatch's own (so on 2.0 they
reach the TrainJob and its JobSet, not the pods); a user's annotations (``-o
annotation``) go on the TrainJob alone.

dispatch owns recovery, so Kubernetes must not retry behind its back. The shipped runtimes
leave that to the defaults: JobSet's webhook makes every pod ``restartPolicy: OnFailure``
and the Job's ``backoffLimit`` is 6, so a failing program is restarted in place six times
and a preempted pod is replaced (docs/controllers.md F-6). No TrainJob
field of any Trainer version can change that (2.2's ``runtimePatches`` and 2.0/2.1's
``podTemplateOverrides`` carry labels, env, volumes, scheduling, never a restart policy,
a backoff limit or a grace period), so each submission runs on its own copy of the runtime
(:func:`runtime_copy`, a namespaced ``TrainingRuntime`` named like the TrainJob and owned
by it): pods ``restartPolicy: Never``, Jobs ``backoffLimit: 0`` with a ``podFailurePolicy``
that fails the Job on the first non-zero exit or disruption (its message keeps the exit
code or the disruption once the pods are gone), and the job's warning (S-45) as the
grace period and a ``preStop`` hook. ``DISPATCH_KUBEFLOW_RUNTIME_COPY=0`` uses the
runtime as it is (its retries then happen, and a warning is refused).
"""

from __future__ import annotations

import copy
from typing import Any

from dispatch.model.errors import SubmitRefused
from dispatch.model.spec import JobSpec

from dispatch_kubeflow import labels as user_labels
from dispatch_kubeflow import launch, tags
from dispatch_kubeflow.config import KubeflowConfig

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"

#: Submit options this backend accepts in ``JobSpec.options`` (declared to the core).
OPTIONS = {
    "runtime": "name of the (Cluster)TrainingRuntime (default from DISPATCH_KUBEFLOW_RUNTIME)",
    "image": "container image for the trainer nodes (default: the runtime's)",
    "queue": "Kueue LocalQueue name (default from DISPATCH_KUBEFLOW_QUEUE)",
    "priority": "Kueue WorkloadPriorityClass name (needs a queue)",
    "label": "labels for the TrainJob and its pods: K=V[,K=V...]",
    "annotation": "annotations for the TrainJob: K=V[,K=V...] (\\, for a comma in a value)",
}


def deadline_seconds(spec: JobSpec) -> int:
    """``activeDeadlineSeconds``: the time limit less the warning, so the pods are deleted
    (the warning sent) then and killed at the limit, once the grace period has run."""
    limit = spec.resources.time_limit
    assert limit is not None
    before = spec.warn.before if spec.warn is not None else limit * 0
    return max(1, int((limit - before).total_seconds()))


def resources_per_node(spec: JobSpec) -> dict[str, Any]:
    r = spec.resources
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if r.cpus_per_task is not None:
        requests["cpu"] = str(r.cpus_per_task * r.tasks_per_node)
    if r.memory_mb is not None:
        requests["memory"] = limits["memory"] = f"{r.memory_mb}Mi"
    if r.gpus_per_node:
        limits["nvidia.com/gpu"] = str(r.gpus_per_node)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def trainer_resources(spec: JobSpec, runtime: dict[str, Any]) -> dict[str, set[str]]:
    """Which requests and limits the trainer container will have set: the job's
    ``resourcesPerNode`` when it gives any (the Trainer puts them in place of the
    runtime's), else the runtime's own for that container."""
    given = resources_per_node(spec)
    if not given:
        template = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
        for rj in template.get("replicatedJobs") or []:
            pod = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            for container in (pod.get("spec") or {}).get("containers") or []:
                if isinstance(container, dict) and container.get("name") == TRAINER_CONTAINER:
                    given = container.get("resources") or {}
    return {
        kind: set(values) if isinstance(values, dict) else set()
        for kind in ("requests", "limits")
        for values in [given.get(kind) if isinstance(given, dict) else None]
    }


def limit_range_notes(
    ranges: list[dict[str, Any]], namespace: str, trainer: dict[str, set[str]]
) -> list[str]:
    """For each LimitRange of the namespace, the default requests (``defaultRequest``) and
    limits (``default``) its ``Container`` limits give the trainer container for what
    ``trainer`` (:func:`trainer_resources`) leaves unset: the API server fills them in
    when the pods are created, so the TrainJob cannot show them."""
    notes = []
    for item in ranges:
        name = (item.get("metadata") or {}).get("name") if isinstance(item, dict) else None
        limits = ((item.get("spec") or {}).get("limits") or []) if isinstance(item, dict) else []
        filled: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
        for limit in limits:
            if not isinstance(limit, dict) or limit.get("type") != "Container":
                continue
            for field, kind in (("defaultRequest", "requests"), ("default", "limits")):
                for resource, value in (limit.get(field) or {}).items():
                    if resource not in trainer[kind]:
                        filled[kind][resource] = str(value)
        said = [
            f"{kind} " + ", ".join(f"{r}={v}" for r, v in sorted(values.items()))
            for kind, values in filled.items()
            if values
        ]
        if said:
            notes.append(
                f"namespace {namespace!r}: LimitRange {name!r} gives the trainer container "
                f"what this job and its runtime leave unset: {'; '.join(said)} (set by the "
                "API server when the pods are created)"
            )
    return notes


#: the node label the exclusion matches (set by the kubelet on every node)
HOSTNAME = "kubernetes.io/hostname"


def exclusion(spec: JobSpec) -> dict[str, Any]:
    """Node affinity keeping every pod off ``spec.exclude_nodes`` (S-43), or nothing."""
    if not spec.exclude_nodes:
        return {}
    term = {"key": HOSTNAME, "operator": "NotIn", "values": sorted(spec.exclude_nodes)}
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    }


#: the container the Trainer fills with the trainer's command, env and resources
TRAINER_CONTAINER = "node"
#: fail the Job at once on a disruption or a non-zero exit (both need restartPolicy Never);
#: the Job condition's message then names the pod and the exit code or the disruption
POD_FAILURE_POLICY: dict[str, Any] = {
    "rules": [
        {
            "action": "FailJob",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        },
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
}


def warning_hook(spec: JobSpec) -> dict[str, Any]:
    """The ``preStop`` hook that carries a warning signal other than SIGTERM: the kubelet
    runs it when the pod is deleted (preemption, eviction, the deadline, dispatch's stop)
    and sends SIGTERM only once it returns, so it signals the container's main process and
    sleeps out the warning. SIGTERM itself needs no hook: the kubelet sends it first."""
    warn = spec.warn
    if warn is None or warn.signal == "TERM":
        return {}
    script = f"kill -s {warn.signal} 1; sleep {warn.seconds}"
    return {"lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", script]}}}}


def runtime_copy(
    source: dict[str, Any],
    *,
    name: str,
    namespace: str,
    job_id: str,
    submission: int,
    spec: JobSpec,
) -> dict[str, Any]:
    """The submission's own ``TrainingRuntime``: ``source``'s spec with Kubernetes' own
    retries turned off and the warning as grace period and hook (see the module). A JobSet
    ``failurePolicy`` of the source is kept: restarting the whole JobSet is the runtime's
    declared native restart (``DISPATCH_KUBEFLOW_NATIVE_RESTART``)."""
    body = copy.deepcopy(source.get("spec") or {})
    template = body.setdefault("template", {}).setdefault("spec", {})
    hook = warning_hook(spec)
    for rj in template.get("replicatedJobs") or []:
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        job_spec["backoffLimit"] = 0
        job_spec["podFailurePolicy"] = copy.deepcopy(POD_FAILURE_POLICY)
        job_spec.pop("podReplacementPolicy", None)  # must be Failed (the default) with a policy
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        pod_spec["restartPolicy"] = "Never"
        if spec.warn is not None:
            pod_spec["terminationGracePeriodSeconds"] = spec.warn.seconds
        for container in pod_spec.get("containers") or []:
            if container.get("name") == TRAINER_CONTAINER and hook:
                container.update(copy.deepcopy(hook))
    source_meta = source.get("metadata") or {}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                **{k: v for k, v in (source_meta.get("labels") or {}).items()},
                **tags.labels(job_id, submission),
            },
            "annotations": {
                tags.JOB_ID: job_id,
                tags.RUNTIME: f"{source.get('kind', '')}/{source_meta.get('name', '')}",
            },
        },
        "spec": body,
    }


def build_trainjob(
    config: KubeflowConfig,
    *,
    namespace: str,
    job_id: str,
    submission: int,
    spec: JobSpec,
    gated: bool,
    replicated_jobs: list[str],
    default_queue: str | None = None,
) -> dict[str, Any]:
    """The TrainJob body. Refuses (``SubmitRefused``) what this Trainer version cannot carry.

    ``default_queue``: the LocalQueue Kueue would give a job that names none (read from
    the namespace by the caller), written out so the body is what Kueue admits."""

    version = config.trainer_version
    if spec.workdir is not None:
        raise SubmitRefused(
            "dispatch-kubeflow: a TrainJob cannot set the working directory (spec.workdir); "
            "set it in the image or in the command"
        )
    if spec.exclude_nodes and version < (2, 1):
        raise SubmitRefused(
            "dispatch-kubeflow: keeping a TrainJob off nodes needs Trainer 2.1 or later "
            f"(configured {version[0]}.{version[1]}): no pod template override before it"
        )
    if spec.resources.time_limit is not None and version < (2, 2):
        raise SubmitRefused(
            "dispatch-kubeflow: spec.activeDeadlineSeconds needs Trainer 2.2 or later "
            f"(configured {version[0]}.{version[1]}); put the limit in the runtime instead"
        )
    queue = spec.options.get("queue") or config.queue or default_queue
    name = tags.object_name(job_id, submission, spec.name)
    # the user's labels first: dispatch's own are never overridden (validate refuses that)
    labels = {
        **user_labels.given(spec.options.get("label"), "label"),
        **tags.labels(job_id, submission),
    }
    annotations = {
        **user_labels.given(spec.options.get("annotation"), "annotation"),
        tags.JOB_ID: job_id,
        tags.GATE: "closed" if gated else "open",
    }
    meta_labels = dict(labels)
    if queue:
        annotations[tags.QUEUE] = queue
        meta_labels[tags.KUEUE_QUEUE] = queue
    if gated:
        # Kueue makes no Workload for it, so admits and resumes nothing, until the gate
        # opens and removes the label; set at creation, so there is no moment Kueue could
        # act first, whatever queue its webhook gives a TrainJob that names none
        meta_labels[tags.KUEUE_PREBUILT] = tags.gate_workload(name)
    if priority := spec.options.get("priority"):
        meta_labels[tags.KUEUE_PRIORITY] = priority
    trainer: dict[str, Any] = {"numNodes": spec.resources.nodes}
    image = spec.options.get("image") or config.image
    if image:
        trainer["image"] = image
    trainer["command"] = launch.container_command(spec)
    trainer["env"] = launch.container_env(job_id, submission, spec)
    if resources := resources_per_node(spec):
        trainer["resourcesPerNode"] = resources
    trainer["numProcPerNode"] = spec.resources.tasks_per_node
    pod_spec = exclusion(spec)
    if spec.warn is not None and not config.runtime_copy:
        raise SubmitRefused(
            "dispatch-kubeflow: a warning (--warn) needs the runtime copy for its grace "
            "period and hook (DISPATCH_KUBEFLOW_RUNTIME_COPY=0 is set)"
        )
    runtime = spec.options.get("runtime") or config.runtime
    if config.runtime_copy:
        annotations[tags.RUNTIME] = f"{config.runtime_kind}/{runtime}"
    body_spec: dict[str, Any] = {
        "runtimeRef": {
            "name": name if config.runtime_copy else runtime,
            "apiGroup": GROUP,
            "kind": "TrainingRuntime" if config.runtime_copy else config.runtime_kind,
        },
        "trainer": trainer,
        # Under Kueue the webhook suspends it anyway, and a gated one stays so while its
        # prebuilt Workload does not exist; without Kueue dispatch's gate is this field.
        "suspend": gated,
    }
    if spec.resources.time_limit is not None:
        body_spec["activeDeadlineSeconds"] = deadline_seconds(spec)
    if version >= (2, 2):
        body_spec["runtimePatches"] = [
            {
                "manager": tags.PATCH_MANAGER,
                "trainingRuntimeSpec": {
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": name,
                                    "template": {
                                        "metadata": {"labels": labels},
                                        "spec": {
                                            "template": {
                                                "metadata": {"labels": labels},
                                                **({"spec": pod_spec} if pod_spec else {}),
                                            }
                                        },
                                    },
                                }
                                for name in replicated_jobs
                            ]
                        },
                    }
                },
            }
        ]
    else:
        body_spec["labels"] = labels
        if version >= (2, 1):
            body_spec["podTemplateOverrides"] = [
                {
                    "targetJobs": [{"name": name} for name in replicated_jobs],
                    "metadata": {"labels": labels},
                    **({"spec": pod_spec} if pod_spec else {}),
                }
            ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": annotations,
        },
        "spec": body_spec,
    }
