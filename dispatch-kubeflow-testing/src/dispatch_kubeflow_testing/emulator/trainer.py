"""The Trainer controller: TrainJob + runtime (+ runtimePatches, or spec.labels and
podTemplateOverrides before v2.2) → JobSet; suspend, deadline and terminal conditions
copied back (dispatch-kubeflow/docs/research.md §1-§2)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    TRAINER_CONTROLLER,
    condition,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    JOBSET,
    TRAINJOB,
    ApiError,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster


def trainer(c: Cluster) -> None:
    for tj in list(c.store.items(TRAINJOB)):
        meta, spec = tj["metadata"], tj["spec"]
        if spec.get("managedBy", TRAINER_CONTROLLER) != TRAINER_CONTROLLER:
            continue
        if "deletionTimestamp" in meta and not _reconciles_deleting(c, tj):
            continue
        if is_true(tj, "Complete") or is_true(tj, "Failed"):
            continue
        runtime = c.runtime_of(tj)
        if runtime is None:
            ref = spec.get("runtimeRef") or {}
            c.set_condition(
                tj,
                "Failed",
                "True",
                "TrainingRuntimeNotSupported",
                f"unsupported runtime: {ref.get('kind')}.{ref.get('apiGroup')}",
            )
            continue
        suspend = bool(spec.get("suspend"))
        if suspend:
            c.set_condition(tj, "Suspended", "True", "Suspended", "TrainJob is suspended")
        elif condition(tj, "Suspended") is not None:
            c.set_condition(tj, "Suspended", "False", "Resumed", "TrainJob is resumed")
        if meta["uid"] in c.deadline_expired:
            c.set_condition(
                tj,
                "Failed",
                "True",
                "DeadlineExceeded",
                "TrainJob exceeded its active deadline",
            )
            try:
                c.store.delete(JOBSET, meta["namespace"], meta["name"], "Background", None)
            except ApiError:
                pass
            continue
        try:
            js = c.store.raw(JOBSET, meta["namespace"], meta["name"])
        except ApiError:
            js = c.create(JOBSET, meta["namespace"], build_jobset(c, tj, runtime))
        if "deletionTimestamp" in js["metadata"]:
            continue
        if bool(js["spec"].get("suspend")) != suspend:
            js["spec"]["suspend"] = suspend
            c.store.touch(js)
            c.changed = True
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
            c.store.touch(tj)
            c.changed = True
        if (done := condition(js, "Completed")) and done["status"] == "True":
            c.set_condition(tj, "Complete", "True", done["reason"], done["message"])
        elif (failed := condition(js, "Failed")) and failed["status"] == "True":
            c.set_condition(tj, "Failed", "True", failed["reason"], failed["message"])


def _reconciles_deleting(c: Cluster, tj: Obj) -> bool:
    """The real Trainer reconciles a TrainJob being deleted like any other, so it makes
    the JobSet again (with the TrainJob's ``suspend``) once the collector has removed it.
    Racing the collector, it did so now and then on the live tier; here once per TrainJob,
    and only when a test asks for it (``Emulator.remake_while_deleting``)."""
    if not c.remakes_while_deleting:
        return False
    meta = tj["metadata"]
    if c.store.exists(JOBSET, meta["namespace"], meta["name"]):
        return True  # a JobSet still there: its suspend follows the TrainJob's
    if meta["uid"] in c.remade or c.runtime_of(tj) is None:
        return False  # without its runtime (a copy the collector took) nothing is made
    c.remade.add(meta["uid"])
    return True


MASTER_PORT = 29500


def torch_env(tj: Obj, num_nodes: int) -> list[Obj]:
    """The variables Trainer 2.2's torch plugin gives the trainer node container
    (``plugins/torch/torch.go``): torchrun's ``PET_*``, the node rank by downward API."""
    trainer = tj["spec"].get("trainer") or {}
    name = tj["metadata"]["name"]
    procs = trainer.get("numProcPerNode")
    if procs is None:
        requests = (trainer.get("resourcesPerNode") or {}).get("requests") or {}
        procs = max(1, int(str(requests.get("cpu", "1")).rstrip("m") or 1))
    return [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(procs)},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {
                "fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                }
            },
        },
        {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]


def _pod_fields(spec: object) -> dict[str, object]:
    """The pod-level fields a runtime patch or override may set (affinity, selectors...)."""
    if not isinstance(spec, dict):
        return {}
    keep = ("affinity", "nodeSelector", "tolerations", "serviceAccountName")
    return {k: copy.deepcopy(spec[k]) for k in keep if k in spec}


def build_jobset(c: Cluster, tj: Obj, runtime: Obj) -> Obj:
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
    pod_specs: dict[str, dict[str, object]] = {}
    for patch in spec.get("runtimePatches") or []:
        tmpl = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        labels.update(((tmpl.get("metadata") or {}).get("labels")) or {})
        for rj in (tmpl.get("spec") or {}).get("replicatedJobs") or []:
            rtmpl = rj.get("template") or {}
            job_labels.setdefault(rj["name"], {}).update(
                (rtmpl.get("metadata") or {}).get("labels") or {}
            )
            pod_tmpl = (rtmpl.get("spec") or {}).get("template") or {}
            pod_labels.setdefault(rj["name"], {}).update(
                (pod_tmpl.get("metadata") or {}).get("labels") or {}
            )
            pod_specs.setdefault(rj["name"], {}).update(_pod_fields(pod_tmpl.get("spec")))
    labels.update(spec.get("labels") or {})
    for override in spec.get("podTemplateOverrides") or []:
        for target in override.get("targetJobs") or []:
            pod_labels.setdefault(target["name"], {}).update(
                (override.get("metadata") or {}).get("labels") or {}
            )
            pod_specs.setdefault(target["name"], {}).update(_pod_fields(override.get("spec")))
    for rj in js_spec.get("replicatedJobs", []):
        rj["replicas"] = 1
        rtmpl = rj.setdefault("template", {})
        rmeta = rtmpl.setdefault("metadata", {})
        # spec.labels (Trainer 2.0/2.1) reach only the JobSet's metadata: the Trainer's
        # newRuntimeInfo gives them to the JobSet, and JobSet labels each Job from its
        # replicated Job template, never from the JobSet's own labels
        rmeta["labels"] = {**(rmeta.get("labels") or {}), **job_labels.get(rj["name"], {})}
        jspec = rtmpl.setdefault("spec", {})
        pmeta = jspec.setdefault("template", {}).setdefault("metadata", {})
        pmeta["labels"] = {**(pmeta.get("labels") or {}), **pod_labels.get(rj["name"], {})}
        jspec["template"].setdefault("spec", {}).update(pod_specs.get(rj["name"], {}))
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
            if (runtime["spec"].get("mlPolicy") or {}).get("torch") is not None:
                container["env"] = [*(container.get("env") or []), *torch_env(tj, num_nodes)]
    return {
        "metadata": {
            "name": meta["name"],
            "labels": labels,
            "ownerReferences": [c.owner_ref(tj)],
        },
        "spec": {**js_spec, "suspend": bool(spec.get("suspend"))},
        "status": {"restarts": 0, "restartsCountTowardsMax": 0},
    }
