"""``dispatch submit -o queue=… -o priority=…`` (and from a job file) as a user runs it: a
value that is no DNS-1123 label is refused before anything is recorded or created; a
valid one reaches the TrainJob as Kueue's labels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dispatch import CauseKind, JobSpec, Phase, Resources
from dispatch.model.discovery import ObjectView
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def _env(kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DISPATCH, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_bad_queue_or_priority_is_refused_before_anything_is_recorded(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    env = _env(kubeconfig, tmp_path)
    for option, words in (
        ("queue=Team_A", "-o queue='Team_A': must be lower-case letters"),
        ("priority=high", "a Kueue priority class needs a queue"),
    ):
        done = _run(env, "submit", "--backend", "kubeflow", "-o", option, "--", "train")
        assert done.returncode != 0, done.stdout
        assert words in done.stderr
    listed = _run(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout or "[]") in ([], {"jobs": []})
    assert emulator.names() == []


def test_queue_and_priority_from_a_job_file_reach_the_trainjob_labels(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'backend = "kubeflow"\ncommand = ["train"]\n'
        '[options]\nqueue = "team-a"\npriority = "high"\n'
    )
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"}, {"high": 1000})
    done = _run(_env(kubeconfig, tmp_path), "submit", str(job))
    assert done.returncode == 0, done.stderr
    (name,) = emulator.names()
    labels = emulator.trainjob(name)["metadata"]["labels"]
    assert labels[tags.KUEUE_QUEUE] == "team-a" and labels[tags.KUEUE_PRIORITY] == "high"


# -- discovery through the emulated Kueue ---------------------------------------------


def _spec(priority: str) -> JobSpec:
    return JobSpec(
        name=f"kq-{priority}",
        command=("torchrun", "train.py"),
        resources=Resources(nodes=2, gpus_per_node=8),
        options={"queue": "team-a", "priority": priority, "image": "ghcr.io/acme/train:1.4"},
    )


def _views(backend: KubeflowBackend, *job_ids: str) -> dict[str, ObjectView]:
    return {v.job_id: v for v in backend.dispatch_discover(list(job_ids)).objects}


def test_a_kueue_preemption_is_pending_preempted_then_runs_again_once_admitted(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """The lower-priority TrainJob is pending/preempted with Kueue's words (and as its
    pending reason: not an ending to resubmit over), then runs again when the quota
    frees; the higher one ran meanwhile."""
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"}, {"low": 100, "high": 1000})
    backend = make_backend()
    low = backend.dispatch_submit(job_id="job-low", submission=1, spec=_spec("low"), gated=False)
    emulator.settle()
    assert _views(backend, "job-low")["job-low"].phase is Phase.RUNNING
    high = backend.dispatch_submit(job_id="job-high", submission=1, spec=_spec("high"), gated=False)
    emulator.settle()
    views = _views(backend, "job-low", "job-high")
    assert views["job-high"].phase is Phase.RUNNING
    cause = views["job-low"].cause
    assert views["job-low"].phase is Phase.PENDING and cause is not None
    assert cause.kind is CauseKind.PREEMPTED
    assert "Evicted Preempted (InClusterQueue): Preempted to accommodate a workload" in (
        cause.detail
    )
    assert (views["job-low"].pending_reason or "").startswith("Kueue Evicted=True Preempted:")
    backend.dispatch_stop(object_id=high, cause=cause)
    emulator.settle()
    view = _views(backend, "job-low")["job-low"]
    assert view.phase is Phase.RUNNING and view.cause is None and view.pending_reason is None
    assert tags.split_object_id(low)[1] in emulator.names()


def test_a_trainjob_waiting_for_quota_shows_kueue_words_as_its_pending_reason(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_queues({"cq-a": 8}, {"team-a": "cq-a"}, {"low": 100})
    backend = make_backend()
    backend.dispatch_submit(job_id="job-w", submission=1, spec=_spec("low"), gated=False)
    emulator.settle()
    view = _views(backend, "job-w")["job-w"]
    assert view.phase is Phase.PENDING and view.cause is not None
    assert view.cause.kind is CauseKind.NO_CAPACITY
    assert view.pending_reason == (  # 16 GPUs asked, 8 in the ClusterQueue at most
        "Kueue QuotaReserved=False Pending: couldn't assign flavors to pod set node: "
        "insufficient quota for nvidia.com/gpu in flavor default-flavor, previously "
        "considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
    )


def test_the_requeuing_limit_holds_the_job_with_kueue_words(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"}, {"low": 100})
    backend = make_backend()
    object_id = backend.dispatch_submit(
        job_id="job-r", submission=1, spec=_spec("low"), gated=False
    )
    emulator.settle()
    emulator.kueue_requeuing_limit(tags.split_object_id(object_id)[1])
    emulator.settle()
    view = _views(backend, "job-r")["job-r"]
    assert view.phase is Phase.HELD and view.cause is not None
    assert view.cause.kind is CauseKind.HELD
    assert view.cause.detail.endswith(
        "Evicted DeactivatedDueToRequeuingLimitExceeded: The workload is deactivated due to "
        "exceeding the maximum number of re-queuing retries"
    )


def test_workloads_are_read_in_one_list_call_whatever_the_number_of_jobs(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"}, {"low": 100})
    backend = make_backend()
    ids = [f"job-{i}" for i in range(4)]
    for job_id in ids:
        backend.dispatch_submit(job_id=job_id, submission=1, spec=_spec("low"), gated=False)
    emulator.settle()
    before = len([r for r in emulator.log.entries if r.resource == "workloads"])
    views = _views(backend, *ids)
    assert len(views) == 4
    assert sum(v.phase is Phase.RUNNING for v in views.values()) == 1
    assert (
        sum(v.cause is not None and v.cause.kind is CauseKind.NO_CAPACITY for v in views.values())
        == 3
    )
    assert len([r for r in emulator.log.entries if r.resource == "workloads"]) == before + 1


def test_a_queue_that_does_not_exist_is_pending_launch_failed_with_kueue_words(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"}, {"low": 100})
    backend = make_backend()
    spec = _spec("low").model_copy(update={"options": {"queue": "team-x", "image": "i:1"}})
    backend.dispatch_submit(job_id="job-x", submission=1, spec=spec, gated=False)
    emulator.settle()
    view = _views(backend, "job-x")["job-x"]
    assert view.phase is Phase.PENDING and view.cause is not None
    assert view.cause.kind is CauseKind.LAUNCH_FAILED
    assert (
        view.pending_reason
        == "Kueue QuotaReserved=False Inadmissible: LocalQueue team-x doesn't exist"
    )
