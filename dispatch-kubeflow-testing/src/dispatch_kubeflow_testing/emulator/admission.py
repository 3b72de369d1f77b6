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
from dispatch_kubeflow_testing.emulator.store import CLUSTER_RUNTIME, RUNTIME, ApiError, Obj, Store

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
    store: Store, namespace: str, body: Obj, version: tuple[int, ...], strict: bool
) -> Obj:
    """Schema check (strict or pruning), then the Trainer and Kueue webhooks."""
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
    if ((body.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME):
        spec["suspend"] = True
    body.setdefault("status", {})
    return body


def check_trainjob_update(old: Obj, patch: Any) -> None:
    """``spec.trainer`` and ``spec.runtimeRef`` are immutable (CEL ``self == oldSelf``)."""
    spec = (patch or {}).get("spec") or {}
    for field in ("trainer", "runtimeRef"):
        if field in spec and spec[field] != old["spec"].get(field):
            raise ApiError(422, "Invalid", f"spec.{field}: Invalid value: field is immutable")
