"""Each ending of docs/mapping.md provoked through the emulated cluster and classified by
the backend over HTTP: the scenario driver acts like the cluster would (a scheduler
preemption, an OOM kill, a lost node...), the backend only reads the API."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from dispatch import Action, CauseKind, JobSpec, Phase, Provenance, Resources, SubmitRefused
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.store import JOB

LONG = JobSpec(
    name="train", command=("torchrun", "train.py"), resources=Resources(nodes=3, gpus_per_node=8)
)
RESTARTING = {"maxRestarts": 2, "rules": []}


def submit(backend: KubeflowBackend, spec: JobSpec = LONG, job_id: str = "job-e") -> str:
    return tags.split_object_id(
        backend.dispatch_submit(job_id=job_id, submission=1, spec=spec, gated=False)
    )[1]


def view(backend: KubeflowBackend, job_id: str = "job-e"):  # type: ignore[no-untyped-def]
    (obj,) = backend.dispatch_discover(job_ids=[job_id]).objects
    return obj


def until(backend: KubeflowBackend, emulator: Emulator, check, steps: int = 40):  # type: ignore[no-untyped-def]
    """Discover after each step of the emulated controllers (as a supervisor polls while
    time passes) until ``check`` holds: the states a real cluster shows for a moment."""
    for _ in range(steps):
        obj = view(backend)
        if check(obj):
            return obj
        emulator.advance()
    raise AssertionError(f"not reached in {steps} steps; last view: {obj}")


def test_success_is_none_from_the_application(backend: KubeflowBackend, emulator: Emulator) -> None:
    """S-12: all nodes exit 0 → ended, none, exit code 0."""
    name = submit(backend, LONG.model_copy(update={"command": ("true",)}))
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.NONE
    assert obj.cause.provenance is Provenance.APPLICATION and obj.executions[-1].cause == obj.cause
    assert emulator.trainjob(name)["status"]["conditions"][-1]["type"] == "Complete"


@pytest.mark.parametrize("code", [1, 3, 137])
def test_exit_code_is_non_zero_exit(
    backend: KubeflowBackend, emulator: Emulator, code: int
) -> None:
    name = submit(backend)
    emulator.exit(name, code, pod=2)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.NON_ZERO_EXIT
    assert obj.cause.exit_code == code and obj.cause.provenance is Provenance.APPLICATION


@pytest.mark.parametrize("restart_policy", ["Never", "OnFailure"])
def test_oom_kill_is_out_of_memory_not_the_sigterms_after_it(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator, restart_policy: str
) -> None:
    """Root cause across pods: node 1's OOM, not the 143s the Job sent nodes 0 and 2.
    Never: dispatch's runtime copy (the OOM-killed pod stays Failed, the Job deletes the
    others); OnFailure: the runtime as shipped (no copy), where the OOM is only in
    lastState while the container crash-loops and the Job deletes every pod once its
    backoff runs out: a discovery while it crash-loops keeps the ending on the TrainJob."""
    backend = make_backend(runtime_copy=restart_policy == "Never")
    name = submit(backend)
    emulator.oom(name, pod=1, restart_policy=restart_policy)
    assert view(backend).phase is Phase.RUNNING
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.OUT_OF_MEMORY
    assert obj.cause.exit_code == 137 and "node-0-1-" in obj.cause.detail


def test_scheduler_preemption_is_preempted(backend: KubeflowBackend, emulator: Emulator) -> None:
    name = submit(backend)
    emulator.preempt(name, pod=0)
    # the victim terminates (DisruptionTarget): running, its ending kept on the TrainJob,
    # which is all that names the reason once the Job has failed and the pods are gone
    assert view(backend).phase is Phase.RUNNING
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.PREEMPTED
    assert (
        "PreemptionByScheduler" in obj.cause.detail and obj.cause.provenance is Provenance.SCHEDULER
    )


def test_eviction_api_is_preempted(backend: KubeflowBackend, emulator: Emulator) -> None:
    name = submit(backend)
    emulator.preempt(name, reason="EvictionByEvictionAPI", message="Eviction API: evicting")
    emulator.settle()
    assert view(backend).cause.kind is CauseKind.PREEMPTED


def test_trainjob_deadline_is_time_limit(backend: KubeflowBackend, emulator: Emulator) -> None:
    name = submit(
        backend,
        LONG.model_copy(update={"resources": Resources(nodes=2, time_limit=timedelta(minutes=5))}),
    )
    assert emulator.trainjob(name)["spec"]["activeDeadlineSeconds"] == 300
    emulator.expire_deadline(name)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.TIME_LIMIT
    assert "TrainJob exceeded its active deadline" in obj.cause.detail
    assert emulator.pods(name) == []


def test_runtime_job_deadline_is_time_limit(backend: KubeflowBackend, emulator: Emulator) -> None:
    emulator.add_runtime("deadline-runtime", job_deadline_seconds=600)
    name = submit(backend, LONG.model_copy(update={"options": {"runtime": "deadline-runtime"}}))
    emulator.expire_job_deadline(name)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.TIME_LIMIT
    assert "Job was active longer than specified deadline" in obj.cause.detail


@pytest.mark.parametrize(
    "reason", ["ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"]
)
def test_container_that_cannot_start_is_pending_launch_failed(
    backend: KubeflowBackend, emulator: Emulator, reason: str
) -> None:
    """S-39: the Job never fails for it; pending with the kubelet's words, and the
    declared launch window bounds the wait."""
    name = submit(backend, LONG.model_copy(update={"options": {"image": "ghcr.io/acme/nope:0"}}))
    emulator.launch_error(name, reason)
    obj = view(backend)
    assert obj.phase is Phase.PENDING and obj.cause.kind is CauseKind.LAUNCH_FAILED
    assert reason in obj.cause.detail
    assert backend.dispatch_declare().pending_windows[CauseKind.LAUNCH_FAILED] > timedelta(0)


def test_refused_create_is_submit_refused(backend: KubeflowBackend) -> None:
    """A refused create is launch-failed with the server's words (the core records it)."""
    with pytest.raises(SubmitRefused, match="not found"):
        submit(backend, LONG.model_copy(update={"options": {"runtime": "gone"}}))


def test_more_gpus_than_a_node_has_is_pending_no_capacity(backend: KubeflowBackend) -> None:
    """S-39: Unschedulable while pending is no-capacity, with the scheduler's message."""
    submit(backend, LONG.model_copy(update={"resources": Resources(nodes=2, gpus_per_node=16)}))
    obj = view(backend)
    assert obj.phase is Phase.PENDING and obj.cause.kind is CauseKind.NO_CAPACITY
    assert "Insufficient nvidia.com/gpu" in obj.cause.detail


def test_lost_node_is_running_node_lost_until_stopped(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-26: the pod on the lost node Terminating for ever; under the runtime copy's
    podFailurePolicy the Job neither counts nor replaces it (no FailureTarget, no Failed);
    the TrainJob alone would look running."""
    name = submit(backend)
    node = emulator.lose_node(name, pod=1)
    emulator.settle()
    tj = emulator.trainjob(name)
    assert not any(c["type"] in ("Failed", "Complete") for c in tj["status"].get("conditions", []))
    jobs = [
        c["type"]
        for c in emulator.store.get(JOB, "default", f"{name}-node-0")["status"].get(
            "conditions", []
        )
    ]
    assert "Failed" not in jobs
    obj = view(backend)
    assert obj.phase is Phase.RUNNING and obj.cause.kind is CauseKind.NODE_LOST
    assert node in obj.cause.detail and "Kubelet stopped posting node status." in obj.cause.detail
    emulator.recover_node(node)


def test_delete_behind_dispatchs_back_is_unknown_while_listed(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """Pods first (Foreground), the TrainJob kept by someone's finalizer: it ended, and
    nothing says who or why (Kubernetes records no cancel)."""
    name = submit(backend)
    emulator.delete_behind_back(name, policy="Foreground", finalizer="example.com/backup")
    emulator.settle()
    assert emulator.pods(name) == []
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.UNKNOWN
    assert "without a stop recorded by dispatch" in obj.cause.detail


def test_delete_behind_dispatchs_back_then_gone_is_absent(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """An object that is gone is absent from discovery; the core's object-missing rule
    decides what that means."""
    name = submit(backend)
    emulator.delete_behind_back(name)
    emulator.settle()
    assert backend.dispatch_discover(job_ids=["job-e"]).objects == ()


def test_unmappable_failure_reason_is_unknown_verbatim(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-4."""
    name = submit(backend)
    emulator.fail_unmappable(name, "QuotaWizardRejected", "rejected at 03:14")
    obj = view(backend)
    assert obj.phase is Phase.ENDED and obj.cause.kind is CauseKind.UNKNOWN
    assert "QuotaWizardRejected: rejected at 03:14" in obj.cause.detail


def test_suspended_by_someone_else_is_held(backend: KubeflowBackend, emulator: Emulator) -> None:
    """S-37: a hold dispatch did not place."""
    name = submit(backend)
    emulator.suspend_behind_back(name)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.HELD and obj.cause.kind is CauseKind.HELD
    assert "TrainJob is suspended" in obj.cause.detail
    assert emulator.pods(name) == []


def test_kueue_preemption_is_pending_preempted_then_runs_again(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    backend = make_backend(queue="team-a")
    name = submit(backend)
    assert view(backend).phase is Phase.RUNNING
    emulator.kueue_preempt(name)
    emulator.settle()
    obj = view(backend)
    assert obj.phase is Phase.PENDING and obj.cause.kind is CauseKind.PREEMPTED
    assert "Preempted to accommodate a workload" in obj.cause.detail
    assert backend.dispatch_declare().pending_windows[CauseKind.PREEMPTED] > timedelta(0)
    emulator.kueue_set_quota(True)
    emulator.settle()
    assert view(backend).phase is Phase.RUNNING


def test_kueue_deactivation_is_held(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    backend = make_backend(queue="team-a")
    name = submit(backend)
    emulator.kueue_deactivate(name)
    obj = view(backend)
    assert obj.phase is Phase.HELD and obj.cause.kind is CauseKind.HELD


def test_jobset_restart_is_observed_as_executions(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-38: with a runtime whose JobSet failurePolicy restarts, restart is native and each
    restart is a new execution; the ended one keeps its root cause."""
    emulator.add_runtime("restarting", failure_policy=RESTARTING)
    backend = make_backend(native_restart=True, runtime="restarting")
    assert backend.dispatch_declare().native_actions == {Action.RESTART}
    name = submit(backend)
    emulator.preempt(name, pod=2)
    # JobSet 0.11.1 counts the restart at once (status.restarts, no RestartingJobSet
    # condition) and deletes attempt 0's Jobs: its ending is the one discovery kept
    waiting = until(backend, emulator, lambda o: len(o.executions) == 2)
    assert waiting.executions[0].cause.kind is CauseKind.PREEMPTED
    emulator.settle()
    again = view(backend)
    assert again.phase is Phase.RUNNING and [e.index for e in again.executions] == [0, 1]
    assert (
        again.executions[0].cause.kind is CauseKind.PREEMPTED and again.executions[1].cause is None
    )
    assert emulator.jobset(name)["status"]["restarts"] == 1
    emulator.oom(name, pod=0)
    emulator.settle()
    emulator.exit(name, 2)
    emulator.settle()
    final = view(backend)
    assert final.phase is Phase.ENDED and "ReachedMaxRestarts" not in final.cause.detail
    assert [e.cause.kind.value for e in final.executions] == [
        "preempted",
        "unknown",
        "non-zero-exit",
    ]


def test_native_restart_without_a_restarting_runtime_is_refused(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    backend = make_backend(native_restart=True)
    with pytest.raises(SubmitRefused, match="no JobSet failurePolicy that restarts"):
        submit(backend)
    assert emulator.names() == []


def test_children_the_garbage_collector_has_not_removed_yet_are_no_object(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """The TrainJob of an ended job is gone (Background deletion) while its JobSet, Jobs
    and ended pods wait for the garbage collector: nothing runs, so there is no object
    (absent, as once the GC is done); had a pod still run, it would stay alive (S-28)."""
    name = submit(backend, LONG.model_copy(update={"command": ("true",)}))
    emulator.settle()
    assert view(backend).phase is Phase.ENDED
    emulator.delete_behind_back(name)
    assert emulator.pods(name)  # the ended pods wait for the garbage collector
    assert backend.dispatch_discover(job_ids=["job-e"]).objects == ()
