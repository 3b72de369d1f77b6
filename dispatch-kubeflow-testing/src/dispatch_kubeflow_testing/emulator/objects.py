"""Names, labels and condition helpers every emulated controller shares."""

from __future__ import annotations

from dispatch_kubeflow_testing.emulator.store import Obj

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_NAME = "batch.kubernetes.io/job-name"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
GPUS_PER_NODE = 8
#: what the torch plugin reserves (``constants.TorchRunReservedEnvNames``)
TORCH_RESERVED = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                  "PET_MASTER_PORT")  # fmt: skip
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

LAUNCH_ERRORS = {
    "ErrImagePull": (
        'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": not found'
    ),
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "CreateContainerConfigError": 'secret "missing-secret" not found',
}


def condition(obj: Obj, ctype: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Obj, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


__all__ = [
    "COMPLETION_INDEX",
    "GPUS_PER_NODE",
    "JOBSET_NAME",
    "JOB_NAME",
    "KUEUE_JOB_UID",
    "LAUNCH_ERRORS",
    "QUEUE_NAME",
    "RESTART_ATTEMPT",
    "RJOB_NAME",
    "TORCH_RESERVED",
    "TRAINER_CONTROLLER",
    "condition",
    "is_true",
]
