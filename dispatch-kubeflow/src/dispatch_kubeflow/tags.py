"""How dispatch tags what it creates, so discovery finds it after a crash (S-30, S-34).

Labels are for selection, so they must be valid label values; the exact job id travels
in an annotation beside a label derived from it deterministically.
"""

from __future__ import annotations

import hashlib
import re

DOMAIN = "dispatch.dev"
JOB = f"{DOMAIN}/job"
SUBMISSION = f"{DOMAIN}/submission"
MANAGED = f"{DOMAIN}/managed"
JOB_ID = f"{DOMAIN}/job-id"
GATE = f"{DOMAIN}/gate"
QUEUE = f"{DOMAIN}/queue"
STOP = f"{DOMAIN}/stop"
#: on a TrainJob and its runtime copy: the (Cluster)TrainingRuntime it was copied from
RUNTIME = f"{DOMAIN}/runtime"
#: ``dispatch.dev/attempt-N``: the ending of JobSet restart attempt N, kept on the TrainJob
#: because the restart deletes the pods that showed it
ATTEMPT_PREFIX = f"{DOMAIN}/attempt-"
PATCH_MANAGER = f"{DOMAIN}/dispatch"

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: Kueue's ``WorkloadPriorityClassLabel``: the WorkloadPriorityClass of the job's Workload
KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
#: Kueue's ``PrebuiltWorkloadLabel``: Kueue makes no Workload for a job that carries it and
#: admits the job only through the Workload it names; a gated TrainJob names one that is
#: never created (:func:`gate_workload`), so Kueue holds it until the gate opens (S-28)
KUEUE_PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_CHARS = re.compile(r"[^a-z0-9-]+")


def job_label(job_id: str) -> str:
    """The job id itself when it is a valid label value, else a stable digest of it."""
    if len(job_id) <= 63 and _LABEL_VALUE.match(job_id) and not job_id.startswith("h-"):
        return job_id
    return "h-" + hashlib.sha256(job_id.encode()).hexdigest()[:40]


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns1123_problem(value: str) -> str | None:
    """What keeps ``value`` from being a DNS-1123 label (the name of a Kueue LocalQueue
    or WorkloadPriorityClass, carried as a label value), or None."""
    if not value:
        return "is empty"
    if len(value) > 63:
        return f"is {len(value)} characters long; at most 63"
    if not _DNS1123_LABEL.match(value):
        return (
            "must be lower-case letters, digits and '-', starting and ending with a letter "
            "or digit (a DNS-1123 label)"
        )
    return None


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def labels(job_id: str, submission: int) -> dict[str, str]:
    return {JOB: job_label(job_id), SUBMISSION: str(submission), MANAGED: "true"}


def object_name(job_id: str, submission: int, name: str) -> str:
    """Deterministic, so retrying a submit after a crash meets 409 instead of a duplicate.

    Short (≤ 40) because JobSet, Job and pod names are built from it.
    """
    prefix = _NAME_CHARS.sub("-", name.lower()).strip("-")[:16].strip("-") or "job"
    if not prefix[0].isalpha():
        prefix = "j" + prefix[:15]
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:10]
    return f"{prefix}-{digest}-{submission}"


def gate_workload(name: str) -> str:
    """The Workload a gated TrainJob ``name`` names in :data:`KUEUE_PREBUILT`: nobody
    creates it, and Kueue never names one so (its names are ``trainjob-<name>-<5 hex
    digits>``, and ``gated`` is not hex). A DNS-1123 subdomain and a label value (≤ 46)."""
    return f"{name}-gated"


def object_id(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def split_object_id(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        raise ValueError(f"not a kubeflow object id (namespace/name): {value!r}")
    return namespace, name
