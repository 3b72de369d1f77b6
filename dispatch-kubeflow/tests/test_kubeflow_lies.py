"""A cluster whose TrainJob conditions contradict its own Jobs and Pods, served over HTTP
by the emulator and read by the backend: each case is a row of the classification table
(docs/mapping.md) and gives unknown, or keeps the object alive, never the ending one side
claims (S-4)."""

from __future__ import annotations

from dispatch import CauseKind, JobSpec, Phase, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.classify import TABLE
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.store import JOB, TRAINJOB

SPEC = JobSpec(
    name="train", command=("torchrun", "train.py"), resources=Resources(nodes=2, gpus_per_node=8)
)
COMPLETE = ("Complete", "True", "AllJobsCompleted", "jobset completed successfully")


def submit(backend: KubeflowBackend) -> str:
    object_id = backend.dispatch_submit(job_id="job-l", submission=1, spec=SPEC, gated=False)
    return tags.split_object_id(object_id)[1]


def view(backend: KubeflowBackend):  # type: ignore[no-untyped-def]
    (obj,) = backend.dispatch_discover(job_ids=["job-l"]).objects
    return obj


def claim(emulator: Emulator, name: str, kind: object, ctype: str, *condition: str) -> None:
    """Write a condition on an object behind the controllers' back (a controller that
    lies); the controllers do not run until the emulator is advanced."""
    with emulator.store.lock:
        for obj in emulator.store.items(kind, emulator.namespace):  # type: ignore[arg-type]
            if obj["metadata"]["name"].startswith(name):
                emulator.cluster.set_condition(obj, ctype, *condition)
                if kind is TRAINJOB:
                    return


def row_of(state: str, *when: str) -> int:
    return next(i for i, r in enumerate(TABLE) if r.state == state and r.when == when)


def test_trainjob_complete_while_its_pods_run_is_alive_and_unknown_over_http_S4(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    name = submit(backend)
    emulator.settle()
    assert emulator.is_running(name)
    claim(emulator, name, TRAINJOB, *COMPLETE)
    obj = view(backend)
    assert obj.scheduler_state == TABLE[row_of("Contradictory", "complete", "pod-runs")].state
    assert obj.phase is Phase.RUNNING and obj.alive, obj
    assert obj.cause is not None and obj.cause.kind is CauseKind.UNKNOWN
    assert "AllJobsCompleted" in obj.cause.detail and "is still Running" in obj.cause.detail


def test_trainjob_complete_while_a_job_failed_is_unknown_over_http_S4(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    name = submit(backend)
    emulator.settle()
    claim(
        emulator, name, JOB, "Failed", "True", "BackoffLimitExceeded", "Job has reached the limit"
    )
    claim(emulator, name, TRAINJOB, *COMPLETE)
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause is not None, obj
    assert obj.cause.kind is CauseKind.UNKNOWN
    assert "BackoffLimitExceeded" in obj.cause.detail and "AllJobsCompleted" in obj.cause.detail


def test_trainjob_complete_and_failed_at_once_is_unknown_over_http_S4(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    name = submit(backend)
    emulator.settle()
    emulator.succeed(name)
    emulator.settle()
    assert view(backend).cause.kind is CauseKind.NONE  # the honest ending first
    claim(emulator, name, TRAINJOB, "Failed", "True", "FailedJobs", "jobset failed")
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause is not None
    assert obj.cause.kind is CauseKind.UNKNOWN, obj.cause
    assert "FailedJobs: jobset failed" in obj.cause.detail
