"""The TrainJob dispatch creates for one submission: pure, so tests read it without a cluster.

Tagging differs by Trainer version because TrainJob ``metadata.labels`` never reach the
JobSet, Jobs or Pods (dispatch-kubeflow/docs/research.md §1.1):

- 2.2 and later: one ``runtimePatches`` entry (manager ``dispatch.dev/dispatch``) puts
  the labels on the JobSet, on every replicated Job and on every pod template;
- 2.1: ``spec.labels`` (JobSet and Jobs) plus ``podTemplateOverrides`` metadata (pods);
- 2.0: ``spec.labels`` only; pods are found through ``jobset.sigs.k8s.io/jobset-name``.
"""

from __future__ import annotations

from typing import Any

from dispatch.errors import SubmitRefused
from dispatch.spec import JobSpec

from dispatch_kubeflow import launch, tags
from dispatch_kubeflow.config import KubeflowConfig

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"

#: Submit options this backend accepts in ``JobSpec.options`` (declared to the core).
OPTIONS = {
    "runtime": "name of the (Cluster)TrainingRuntime (default from DISPATCH_KUBEFLOW_RUNTIME)",
    "image": "container image for the trainer nodes (default: the runtime's)",
    "queue": "Kueue LocalQueue name (default from DISPATCH_KUBEFLOW_QUEUE)",
}


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


def build_trainjob(
    config: KubeflowConfig,
    *,
    namespace: str,
    job_id: str,
    submission: int,
    spec: JobSpec,
    gated: bool,
    replicated_jobs: list[str],
) -> dict[str, Any]:
    """The TrainJob body. Refuses (``SubmitRefused``) what this Trainer version cannot carry."""

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
    queue = spec.options.get("queue") or config.queue
    labels = tags.labels(job_id, submission)
    annotations = {tags.JOB_ID: job_id, tags.GATE: "closed" if gated else "open"}
    meta_labels = dict(labels)
    if queue:
        annotations[tags.QUEUE] = queue
        if not gated:
            meta_labels[tags.KUEUE_QUEUE] = queue
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
    body_spec: dict[str, Any] = {
        "runtimeRef": {
            "name": spec.options.get("runtime") or config.runtime,
            "apiGroup": GROUP,
            "kind": config.runtime_kind,
        },
        "trainer": trainer,
        # Under Kueue the webhook suspends it anyway; a gated one is left out of Kueue
        # (no queue label) and kept suspended by dispatch until the gate opens.
        "suspend": gated,
    }
    if spec.resources.time_limit is not None:
        body_spec["activeDeadlineSeconds"] = max(1, int(spec.resources.time_limit.total_seconds()))
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
            "name": tags.object_name(job_id, submission, spec.name),
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": annotations,
        },
        "spec": body_spec,
    }
