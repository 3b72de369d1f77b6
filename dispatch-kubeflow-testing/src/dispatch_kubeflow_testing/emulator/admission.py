"""What the API server and the webhooks decide before a TrainJob is stored.

The schema differs by Trainer version (dispatch-kubeflow/docs/research.md §1.1):
``runtimePatches`` and
``activeDeadlineSeconds`` exist from v2.2; ``labels``/``annotations`` only before it;
``podTemplateOverrides`` only in v2.1. With ``fieldValidation=Strict`` an unknown field is
a 400, otherwise it is silently pruned, which is why the adapter always asks for Strict.
"""

from __future__ import annotations

from typing import Any

from dispatch_kubeflow_testing.emulator.objects import QUEUE_NAME, TORCH_RESERVED
from dispatch_kubeflow_testing.emulator.store import (
    CLUSTER_RUNTIME,
    JOB,
    JOBSET,
    LOCAL_QUEUE,
    RUNTIME,
    ApiError,
    Obj,
    Resource,
    Store,
    merge_patch,
)

_COMMON_SPEC = {"runtimeRef", "initializer", "trainer", "suspend", "managedBy"}
_TRAINER = {"image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode"}
_RUNTIME_REF = {"name", "apiGroup", "kind"}
_METADATA = {
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
}
_TOP = {"apiVersion", "kind", "metadata", "spec", "status"}


def spec_fields(version: tuple[int, ...]) -> set[str]:
    fields = set(_COMMON_SPEC)
    if version >= (2, 2):
        fields |= {"activeDeadlineSeconds", "runtimePatches"}
    else:
        fields |= {"labels", "annotations"}
        fields.add("podSpecOverrides" if version < (2, 1) else "podTemplateOverrides")
    return fields


def _unknown(obj: dict[str, Any], allowed: set[str], prefix: str, strict: bool) -> list[str]:
    unknown = [k for k in obj if k not in allowed]
    if not strict:
        for k in unknown:
            del obj[k]
        return []
    return [f"{prefix}{k}" for k in unknown]


def admit_trainjob(
    store: Store,
    namespace: str,
    body: Obj,
    version: tuple[int, ...],
    strict: bool,
    *,
    kueue: bool = True,
) -> Obj:
    """Schema check (strict or pruning), then the Trainer and Kueue webhooks (``kueue``:
    Kueue is installed)."""
    if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
        raise ApiError(
            400,
            "BadRequest",
            'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: spec is required',
        )
    spec = body["spec"]
    problems = _unknown(body, _TOP, "", strict)
    problems += _unknown(body.get("metadata") or {}, _METADATA, "metadata.", strict)
    problems += _unknown(spec, spec_fields(version), "spec.", strict)
    if isinstance(spec.get("trainer"), dict):
        problems += _unknown(spec["trainer"], _TRAINER, "spec.trainer.", strict)
    if isinstance(spec.get("runtimeRef"), dict):
        problems += _unknown(spec["runtimeRef"], _RUNTIME_REF, "spec.runtimeRef.", strict)
    if problems:
        fields = ", ".join(f'unknown field "{p}"' for p in problems)
        raise ApiError(
            400,
            "BadRequest",
            'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: '
            f"strict decoding error: {fields}",
        )
    ref = spec.get("runtimeRef") or {}
    if not ref.get("name"):
        raise ApiError(
            422,
            "Invalid",
            f'TrainJob.trainer.kubeflow.org "{(body.get("metadata") or {}).get("name", "")}" '
            "is invalid: spec.runtimeRef.name: Required value",
        )
    ref.setdefault("apiGroup", "trainer.kubeflow.org")
    ref.setdefault("kind", "ClusterTrainingRuntime")
    try:
        if ref["kind"] == "TrainingRuntime":
            store.raw(RUNTIME, namespace, ref["name"])
        else:
            store.raw(CLUSTER_RUNTIME, "", ref["name"])
    except ApiError:
        kind = "trainingRuntime" if ref["kind"] == "TrainingRuntime" else "clusterTrainingRuntime"
        raise ApiError(
            422,
            "Invalid",
            'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
            f"spec.RuntimeRef: Invalid value: {ref!r}: specified {kind} must be created before "
            "the TrainJob is created",
        ) from None
    nodes = (spec.get("trainer") or {}).get("numNodes")
    if nodes is not None and (not isinstance(nodes, int) or nodes < 0):
        raise ApiError(
            422,
            "Invalid",
            f"spec.trainer.numNodes: Invalid value: {nodes!r}: "
            "should be greater than or equal to 0",
        )
    env = (spec.get("trainer") or {}).get("env") or []
    names = {str(e.get("name")) for e in env if isinstance(e, dict)}
    reserved = sorted(names & set(TORCH_RESERVED))
    if reserved:
        raise ApiError(
            422,
            "Invalid",
            'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
            f"spec.trainer.env: Invalid value: {env!r}: must not have reserved envs, "
            f"invalid envs configured: [{' '.join(reserved)}]",
        )
    spec.setdefault("suspend", False)
    spec.setdefault("managedBy", "trainer.kubeflow.org/trainjob-controller")
    if kueue:
        default_local_queue(store, namespace, body)
    if ((body.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME):
        spec["suspend"] = True
    body.setdefault("status", {})
    return body


def default_local_queue(store: Store, namespace: str, body: Obj) -> None:
    """Kueue's LocalQueueDefaulting (v0.17.0 ``jobframework.ApplyDefaultLocalQueue``, run
    by its TrainJob webhook at create, the feature locked on): a TrainJob without a queue
    label, in a namespace that has a LocalQueue named ``default``, gets that queue (unless
    its controller owner is a job kind Kueue manages; none is here)."""
    meta = body.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    if labels.get(QUEUE_NAME):
        return
    if not any(q["metadata"]["name"] == "default" for q in store.items(LOCAL_QUEUE, namespace)):
        return
    meta["labels"] = {**labels, QUEUE_NAME: "default"}


def check_trainjob_update(old: Obj, patch: Any) -> None:
    """``spec.trainer`` and ``spec.runtimeRef`` are immutable (CEL ``self == oldSelf``).
    Kueue's TrainJob webhook (v0.17.0 ``validateUpdateForPrebuiltWorkload``, run for every
    TrainJob, queued or not) keeps ``kueue.x-k8s.io/prebuilt-workload-name`` as it is
    unless the updated TrainJob is suspended (checked here with Kueue uninstalled too)."""
    spec = (patch or {}).get("spec") or {}
    for field in ("trainer", "runtimeRef"):
        if field in spec and spec[field] != old["spec"].get(field):
            raise ApiError(422, "Invalid", f"spec.{field}: Invalid value: field is immutable")
    new = merge_patch(old, patch or {})
    label = "kueue.x-k8s.io/prebuilt-workload-name"
    value = (new["metadata"].get("labels") or {}).get(label)
    if not new["spec"].get("suspend") and value != (old["metadata"].get("labels") or {}).get(label):
        raise ApiError(
            403,
            "Forbidden",
            'admission webhook "vtrainjob.kb.io" denied the request: '
            f'metadata.labels[{label}]: Invalid value: "{value or ""}": field is immutable',
        )


def default_jobset(body: Obj) -> Obj:
    """JobSet's mutating webhook (``jobset_webhook.go Default``): success policy All,
    startup AnyOrder, each replicated Job Indexed, its pods ``restartPolicy: OnFailure``
    unless the template says otherwise, DNS hostnames on, failure-policy rules named."""
    spec = body.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rj in spec.get("replicatedJobs") or []:
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for index, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{index}"
    return body


def default_job(body: Obj) -> Obj:
    """The API server's defaults for a batch/v1 Job (``SetDefaults_Job``): one completion,
    parallelism as completions, ``backoffLimit: 6``, NonIndexed, not suspended, and pods
    replaced as soon as they are terminating unless a podFailurePolicy asks for Failed."""
    spec = body.setdefault("spec", {})
    spec.setdefault("completions", spec.get("parallelism", 1))
    spec.setdefault("parallelism", spec["completions"])
    spec.setdefault("backoffLimit", 6 if spec.get("backoffLimitPerIndex") is None else 2**31 - 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy",
        "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed",
    )
    return body


def mutate(res: Resource, body: Obj) -> Obj:
    """What the API server's defaulting and the mutating webhooks do to a new object,
    whoever creates it (a client or a controller)."""
    if res is JOBSET:
        return default_jobset(body)
    if res is JOB:
        return validate_job(default_job(body))
    return body


def validate_job(body: Obj) -> Obj:
    """The two rules of ``ValidateJob`` a pod template meets here: a Job's pods restart
    OnFailure or Never, and a podFailurePolicy needs Never."""
    spec = body["spec"]
    name = (body.get("metadata") or {}).get("name", "")
    policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        raise ApiError(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Required value: '
            'valid values: "OnFailure", "Never"',
        )
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        raise ApiError(
            422,
            "Invalid",
            f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Unsupported '
            f'value: "{policy}": supported values: "Never"',
        )
    return body
