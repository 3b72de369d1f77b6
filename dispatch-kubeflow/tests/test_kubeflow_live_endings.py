"""Live tier: each ending provoked on a real control plane (kube-apiserver, controller
manager, scheduler, JobSet and Trainer controllers, KWOK nodes) started by
``dispatch-kubeflow-testing/scripts/start-kube.sh``, and classified by the adapter over
HTTP. The same endings as test_kubeflow_endings.py states for the emulator; where the two
disagree, the real controllers are right."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dispatch import CauseKind, JobSpec, Phase, Provenance, Resources, SubmitRefused
from dispatch.core.warning import EndWarning
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.driver import LiveDriver, condition
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.kubeapi import Obj
from dispatch_kubeflow_testing.live.observe import ended, submit, until

pytestmark = pytest.mark.live(server="kubeflow")

LONG = JobSpec(name="train", command=("torchrun", "train.py"), resources=Resources(nodes=2))
IMAGE = {"image": "registry.example/acme/train:1.4"}


def long(**resources: object) -> JobSpec:
    return LONG.model_copy(
        update={"resources": Resources(**{"nodes": 2, **resources}), "options": IMAGE}
    )


def test_live_success_is_none_from_the_application(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: every node exits 0 → ended, none, exit 0; the real Trainer marks Complete."""
    name = submit(live_backend, job_id, LONG.model_copy(update={"command": ("true",)}))
    obj = until(live_backend, job_id, "ended", ended, live=live)
    assert obj.cause is not None and obj.cause.kind is CauseKind.NONE, obj
    assert obj.cause.provenance is Provenance.APPLICATION
    assert condition(live.trainjob(name), "Complete") is not None


@pytest.mark.parametrize("code", [1, 3])
def test_live_exit_code_is_non_zero_exit(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str, code: int
) -> None:
    """S-12: a node's program exits non-zero; the Job's backoff runs out for real."""
    submit(live_backend, job_id, LONG.model_copy(update={"command": ("sh", "-c", f"exit {code}")}))
    obj = until(live_backend, job_id, "ended", ended, live=live, timeout=180)
    assert obj.cause is not None and obj.cause.kind is CauseKind.NON_ZERO_EXIT, obj
    assert obj.cause.exit_code == code and obj.cause.provenance is Provenance.APPLICATION


def test_live_oom_kill_is_out_of_memory(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: node 1's container is OOMKilled (137) over and over; the Job fails."""
    name = submit(live_backend, job_id, long())
    live.oom(name, pod=1)
    obj = until(live_backend, job_id, "ended", ended, live=live, timeout=180)
    assert obj.cause is not None and obj.cause.kind is CauseKind.OUT_OF_MEMORY, obj
    assert obj.cause.exit_code == 137


def test_live_image_that_cannot_be_pulled_is_pending_launch_failed(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-39: the kubelet cannot pull; the Job never fails for it, the pods stay Pending."""
    submit(
        live_backend,
        job_id,
        LONG.model_copy(update={"options": {"image": "dispatch.invalid/acme/nope:0"}}),
    )
    obj = until(
        live_backend,
        job_id,
        "pending launch-failed",
        lambda o: (
            o.phase is Phase.PENDING
            and o.cause is not None
            and o.cause.kind is CauseKind.LAUNCH_FAILED
        ),
        live=live,
    )
    assert obj.cause is not None
    assert "ErrImagePull" in obj.cause.detail or "ImagePullBackOff" in obj.cause.detail


def test_live_trainjob_deadline_is_time_limit(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: spec.activeDeadlineSeconds passes on a running TrainJob (Trainer 2.2)."""
    name = submit(live_backend, job_id, long(time_limit=timedelta(seconds=15)))
    assert live.trainjob(name)["spec"]["activeDeadlineSeconds"] == 15
    live.running(name, 2)
    obj = until(live_backend, job_id, "ended", ended, live=live, timeout=120)
    assert obj.cause is not None and obj.cause.kind is CauseKind.TIME_LIMIT, obj


def test_live_more_gpus_than_a_node_has_is_pending_no_capacity(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-39: the real scheduler's Unschedulable, with its own message."""
    submit(live_backend, job_id, long(gpus_per_node=16))
    obj = until(
        live_backend,
        job_id,
        "pending no-capacity",
        lambda o: (
            o.phase is Phase.PENDING
            and o.cause is not None
            and o.cause.kind is CauseKind.NO_CAPACITY
        ),
        live=live,
    )
    assert obj.cause is not None and "Insufficient nvidia.com/gpu" in obj.cause.detail


def test_live_scheduler_preemption_is_preempted(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: a dispatch-high pod needs node 0's GPUs; the real scheduler preempts it."""
    name = submit(live_backend, job_id, long(gpus_per_node=8))
    live.preempt(name, pod=0)
    obj = until(
        live_backend,
        job_id,
        "preempted",
        lambda o: o.cause is not None and o.cause.kind is CauseKind.PREEMPTED,
        live=live,
    )
    assert obj.cause is not None and "PreemptionByScheduler" in obj.cause.detail
    assert obj.cause.provenance is Provenance.SCHEDULER


def test_live_eviction_api_is_preempted(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-12: ``kubectl drain``'s Eviction API call."""
    name = submit(live_backend, job_id, long())
    live.evict(name, pod=1)
    obj = until(
        live_backend,
        job_id,
        "preempted",
        lambda o: o.cause is not None and o.cause.kind is CauseKind.PREEMPTED,
        live=live,
    )
    assert obj.cause is not None and "EvictionByEvictionAPI" in obj.cause.detail


def test_live_refused_create_is_submit_refused(live_backend: KubeflowBackend, job_id: str) -> None:
    """A runtime that does not exist: the real API server's 404, in its words."""
    with pytest.raises(SubmitRefused, match="not found"):
        submit(live_backend, job_id, LONG.model_copy(update={"options": {"runtime": "gone"}}))


def test_live_gated_submission_is_suspended_until_the_gate_opens(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-37: a gated TrainJob is created suspended (no pods) and runs once opened."""
    object_id = live_backend.dispatch_submit(job_id=job_id, submission=1, spec=long(), gated=True)
    name = tags.split_object_id(object_id)[1]
    obj = until(
        live_backend, job_id, "held by dispatch's gate", lambda o: o.phase is not Phase.ENDED
    )
    assert obj.phase is Phase.GATED, obj
    live.wait("the JobSet suspended", lambda: live.jobset(name)["spec"].get("suspend") is True)
    assert live.pods(name) == []
    live_backend.dispatch_open_gate(object_id)
    live.running(name, 2)
    until(live_backend, job_id, "running", lambda o: o.phase is Phase.RUNNING, live=live)


def test_live_suspended_by_someone_else_is_held(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-37: a hold dispatch did not place; the real controllers delete the pods."""
    name = submit(live_backend, job_id, long())
    live.running(name, 2)
    live.suspend_behind_back(name)
    obj = until(
        live_backend,
        job_id,
        "held",
        lambda o: o.phase is Phase.HELD and o.cause is not None and o.cause.kind is CauseKind.HELD,
        live=live,
    )
    assert obj.cause is not None
    live.wait("the pods gone", lambda: live.pods(name) == [])


WARN = EndWarning(signal="USR1", before=timedelta(seconds=20))


def test_live_warning_is_the_grace_period_an_eviction_honours(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-45: USR1@20s: the pods carry terminationGracePeriodSeconds 20 and a preStop hook
    that signals the program (the runtime copy); the Eviction API deletes the pod with
    that grace (deletionGracePeriodSeconds 20, what the kubelet waits before SIGKILL).
    KWOK runs no program, so the signal itself is not observed here (pure tests)."""
    name = submit(live_backend, job_id, long().model_copy(update={"warn": WARN}))
    pod = live.running_pod(name, 1)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 20
    (container,) = pod["spec"]["containers"]
    assert container["lifecycle"]["preStop"]["exec"]["command"] == [
        "/bin/sh",
        "-c",
        "kill -s USR1 1; sleep 20",
    ]
    assert pod["spec"]["restartPolicy"] == "Never"
    victim = live.evict(name, pod=1)

    def deleting() -> Obj | None:
        found = [p for p in live.pods(name) if p["metadata"]["name"] == victim]
        return found[0] if found and "deletionTimestamp" in found[0]["metadata"] else None

    taken = live.wait("the evicted pod terminating", deleting)
    assert taken["metadata"]["deletionGracePeriodSeconds"] == 20
    obj = until(live_backend, job_id, "ended", ended, live=live)
    assert obj.cause is not None and obj.cause.kind is CauseKind.PREEMPTED, obj


def test_live_deadline_lands_the_warning_before_the_time_limit(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-45: a 30 s limit with USR1@20s: activeDeadlineSeconds is 10, so the Trainer deletes
    the pods (their 20 s grace: the warning) and the kill lands at the limit; the ending is
    the time limit whatever the pods' exit codes."""
    spec = long(time_limit=timedelta(seconds=30)).model_copy(update={"warn": WARN})
    name = submit(live_backend, job_id, spec)
    assert live.trainjob(name)["spec"]["activeDeadlineSeconds"] == 10
    assert live.running_pod(name, 0)["spec"]["terminationGracePeriodSeconds"] == 20
    obj = until(live_backend, job_id, "ended", ended, live=live, timeout=120)
    assert obj.cause is not None and obj.cause.kind is CauseKind.TIME_LIMIT, obj
