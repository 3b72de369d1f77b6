"""Submit, gate, stop, discover and unreachable, over real HTTP to the emulated cluster."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch import (
    Cause,
    CauseKind,
    JobSpec,
    Phase,
    Provenance,
    Resources,
    SubmitRefused,
    Unreachable,
)
from dispatch.model.errors import BadInput
from dispatch_kubeflow import launch, tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.errors import ApiRefused
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.store import RUNTIME

SPEC = JobSpec(
    name="llama-ft",
    command=("torchrun", "train.py", "--epochs", "3"),
    env={"WANDB_MODE": "offline"},
    resources=Resources(
        nodes=2, gpus_per_node=8, cpus_per_task=4, tasks_per_node=2, memory_mb=64000
    ),
    options={"image": "ghcr.io/acme/train:1.4"},
)
CANCEL = Cause(
    kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="ana", detail="no longer needed"
)


def name_of(object_id: str) -> str:
    return tags.split_object_id(object_id)[1]


def only(backend: KubeflowBackend, job_id: str):  # type: ignore[no-untyped-def]
    objects = backend.dispatch_discover(job_ids=[job_id]).objects
    assert len(objects) == 1, objects
    return objects[0]


# -- submit --------------------------------------------------------------------------


def test_submit_creates_a_tagged_trainjob_with_strict_validation(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-30: the TrainJob carries the spec and is tagged down to its pods."""
    object_id = backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    assert object_id.startswith("default/llama-ft-")
    create = next(r for r in emulator.log.entries if r.verb == "create")
    assert create.query.get("fieldValidation") == "Strict"
    tj = emulator.trainjob(name_of(object_id))
    trainer = tj["spec"]["trainer"]
    assert trainer["image"] == "ghcr.io/acme/train:1.4"
    assert trainer["command"][:3] == ["/bin/sh", "-c", launch.LAUNCHER]
    assert trainer["command"][3:] == [
        launch.NAME,
        "tasks",
        "--",
        "torchrun",
        "train.py",
        "--epochs",
        "3",
    ]
    assert trainer["env"][0] == {"name": "WANDB_MODE", "value": "offline"}
    assert {e["name"]: e.get("value") for e in trainer["env"][1:3]} == {
        "DISPATCH_JOB_ID": "job-1",
        "DISPATCH_SUBMISSION": "1",
    }
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 2
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "8", "memory": "64000Mi"},
        "limits": {"memory": "64000Mi", "nvidia.com/gpu": "8"},
    }
    # its own runtime copy (Kubernetes' retries off), copied from the configured one
    assert tj["spec"]["runtimeRef"] == {
        "name": name_of(object_id),
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
    }
    assert tj["metadata"]["annotations"][tags.RUNTIME] == "ClusterTrainingRuntime/torch-distributed"
    assert tj["spec"]["suspend"] is False
    for pod in emulator.pods(name_of(object_id)):
        assert pod["spec"]["restartPolicy"] == "Never"
    pods = emulator.pods(name_of(object_id))
    assert len(pods) == 2
    for pod in pods:
        assert pod["metadata"]["labels"][tags.JOB] == "job-1"
        assert pod["metadata"]["labels"][tags.SUBMISSION] == "1"
    view = only(backend, "job-1")
    assert (view.object_id, view.submission, view.phase) == (object_id, 1, Phase.RUNNING)
    assert len(view.executions[0].nodes) == 2


def test_submit_to_a_missing_runtime_is_refused_with_the_servers_words(
    backend: KubeflowBackend,
) -> None:
    spec = SPEC.model_copy(update={"options": {"runtime": "no-such-runtime"}})
    with pytest.raises(SubmitRefused) as refused:
        backend.dispatch_submit(job_id="job-1", submission=1, spec=spec, gated=False)
    assert (
        'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found'
        in refused.value.detail
    )


def test_second_create_of_the_same_submission_is_refused_409(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-34: deterministic names make a retried submit meet AlreadyExists, not a duplicate."""
    backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    with pytest.raises(SubmitRefused) as refused:
        backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    assert "already exists" in refused.value.detail
    assert len(emulator.names()) == 1


def test_create_denied_by_the_webhook_is_refused_422_with_its_words(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    words = (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
        "spec.trainer.numProcPerNode: Invalid value: 2: must be 1 for this runtime"
    )
    emulator.inject(422, "Invalid", words, resource="trainjobs")
    with pytest.raises(SubmitRefused) as refused:
        backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    assert refused.value.detail == words
    assert emulator.names() == []


#: the real Trainer webhook's words for a runtime its informer cache has not seen yet
NOT_SEEN = (
    'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
    'spec.runtimeRef: Invalid value: {"name":"%s","kind":"TrainingRuntime"}: specified '
    "trainingRuntime must be created before the TrainJob is created"
)


def test_create_waits_for_the_webhook_to_see_the_runtime_copy_it_just_made(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-30: the live tier's race (the webhook validates runtimeRef against its cache): the
    denial of a copy made a moment before is tried again, and the submit succeeds."""
    emulator.inject(422, "Invalid", NOT_SEEN % "llama-ft", times=2, resource="trainjobs")
    object_id = backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    creates = [r for r in emulator.log.entries if (r.verb, r.resource) == ("create", "trainjobs")]
    assert len(creates) == 3  # two denied, the third created
    assert emulator.names() == [name_of(object_id)]


def test_a_runtime_the_webhook_never_sees_is_refused_with_its_words_and_the_copy_dropped(
    make_backend: Callable[..., KubeflowBackend],
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S-30: a denial that never clears is a refusal with the webhook's words, and the
    runtime copy made for it is removed (nothing is left behind)."""
    from dispatch_kubeflow import backend as module

    monkeypatch.setattr(module, "RUNTIME_CACHE_WAIT", 0.5)
    words = NOT_SEEN % "llama-ft"
    emulator.inject(422, "Invalid", words, times=100, resource="trainjobs")
    with pytest.raises(SubmitRefused) as refused:
        make_backend().dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
    assert refused.value.detail == words
    assert emulator.names() == []
    with emulator.store.lock:
        assert list(emulator.store.items(RUNTIME, "default")) == []  # the copy is dropped


def test_version_mismatch_is_a_400_not_a_silently_pruned_field(
    make_backend: Callable[..., KubeflowBackend], tmp_path: Path
) -> None:
    """An adapter speaking 2.2 to a 2.1 Trainer: strict validation refuses runtimePatches."""
    with Emulator(trainer_version="2.1") as old:
        backend = KubeflowBackend(
            KubeflowConfig(kubeconfig=str(old.write_kubeconfig(tmp_path / "kc")), retries=0)
        )
        with pytest.raises(SubmitRefused) as refused:
            backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False)
        assert 'strict decoding error: unknown field "spec.runtimePatches"' in refused.value.detail
        assert old.names() == []


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_older_trainers_are_tagged_and_discovered(version: str, tmp_path: Path) -> None:
    """2.1: spec.labels + podTemplateOverrides; 2.0: spec.labels, pods by jobset-name."""
    with Emulator(trainer_version=version) as old:
        config = KubeflowConfig(
            kubeconfig=str(old.write_kubeconfig(tmp_path / "kc")),
            retries=0,
            trainer_version=tuple(int(p) for p in version.split(".")),
        )  # type: ignore[arg-type]
        backend = KubeflowBackend(config)
        object_id = backend.dispatch_submit(job_id="job-old", submission=1, spec=SPEC, gated=False)
        tj = old.trainjob(name_of(object_id))
        assert "runtimePatches" not in tj["spec"] and tj["spec"]["labels"][tags.JOB] == "job-old"
        view = only(backend, "job-old")
        assert view.phase is Phase.RUNNING and len(view.executions[0].nodes) == 2
        old.oom(name_of(object_id))
        assert only(backend, "job-old").phase is Phase.RUNNING  # the Job has not acted yet
        old.settle()
        assert only(backend, "job-old").cause.kind is CauseKind.OUT_OF_MEMORY


def test_time_limit_on_trainer_before_2_2_is_refused_before_anything_is_created(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    from datetime import timedelta

    backend = make_backend(trainer_version=(2, 1))
    spec = SPEC.model_copy(update={"resources": Resources(time_limit=timedelta(hours=1))})
    with pytest.raises(SubmitRefused, match=r"activeDeadlineSeconds needs Trainer 2\.2"):
        backend.dispatch_submit(job_id="job-1", submission=1, spec=spec, gated=False)
    assert emulator.names() == []


# -- gate ----------------------------------------------------------------------------


def test_gated_submission_is_suspended_until_its_gate_opens(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-28, S-37: gated shows Phase.GATED (never held), no pod starts, then it runs."""
    object_id = backend.dispatch_submit(job_id="job-g", submission=2, spec=SPEC, gated=True)
    view = only(backend, "job-g")
    assert view.phase is Phase.GATED and view.cause is None
    assert emulator.pods(name_of(object_id)) == []
    backend.dispatch_open_gate(object_id=object_id)
    backend.dispatch_open_gate(object_id=object_id)
    assert only(backend, "job-g").phase is Phase.RUNNING
    assert emulator.trainjob(name_of(object_id))["spec"]["suspend"] is False
    backend.dispatch_open_gate(object_id="default/never-existed-1")


@pytest.mark.parametrize(
    "served", [b'["x"]', b'{"metadata": "x"}', b'{"metadata": {"annotations": ["closed"]}}']
)
def test_a_trainjob_that_cannot_be_read_has_no_gate_to_open_S36(
    backend: KubeflowBackend, emulator: Emulator, served: bytes
) -> None:
    """Opening the gate of an object that cannot be read is not an error (the hook's
    contract for an unknown object) and changes nothing; it raised AttributeError before."""
    object_id = backend.dispatch_submit(job_id="job-g", submission=1, spec=SPEC, gated=True)
    emulator.log.clear()
    emulator.garble(served, resource="trainjobs")
    backend.dispatch_open_gate(object_id=object_id)
    assert [r.verb for r in emulator.log.entries] == ["get"]
    assert emulator.trainjob(name_of(object_id))["spec"]["suspend"] is True


def test_gate_under_kueue_is_a_prebuilt_workload_that_does_not_exist_S28(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-28: under Kueue, which owns suspend, a gated TrainJob carries its queue and names
    a prebuilt Workload nobody creates, so Kueue makes no Workload and admits nothing;
    opening the gate removes that name and leaves suspend to Kueue, which admits it and
    resumes it."""
    backend = make_backend(queue="team-a")
    object_id = backend.dispatch_submit(job_id="job-k", submission=1, spec=SPEC, gated=True)
    name = name_of(object_id)
    tj = emulator.trainjob(name)
    assert tj["metadata"]["labels"][tags.KUEUE_QUEUE] == "team-a"
    assert tj["metadata"]["labels"][tags.KUEUE_PREBUILT] == f"{name}-gated"
    assert tj["spec"]["suspend"] is True
    emulator.advance(5)
    with pytest.raises(LookupError):
        emulator.workload(name)
    assert only(backend, "job-k").phase is Phase.GATED
    patches_before = [r for r in emulator.log.entries if r.verb == "patch"]
    backend.dispatch_open_gate(object_id=object_id)
    patch = [r for r in emulator.log.entries if r.verb == "patch"][len(patches_before)]
    assert patch.body["metadata"]["labels"] == {
        tags.KUEUE_PREBUILT: None,
        tags.KUEUE_QUEUE: "team-a",
    }
    assert "spec" not in patch.body
    assert emulator.workload(name)["status"]["conditions"]
    assert only(backend, "job-k").phase is Phase.RUNNING


def test_ungated_under_kueue_waits_for_quota(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_set_quota(False)
    backend = make_backend(queue="team-a")
    object_id = backend.dispatch_submit(job_id="job-q", submission=1, spec=SPEC, gated=False)
    view = only(backend, "job-q")
    assert view.phase is Phase.PENDING and view.cause.kind is CauseKind.NO_CAPACITY
    assert "insufficient unused quota" in view.cause.detail
    emulator.kueue_set_quota(True)
    assert only(backend, "job-q").phase is Phase.RUNNING
    assert emulator.is_running(name_of(object_id))


# -- stop ----------------------------------------------------------------------------


def test_a_stop_asked_again_while_the_trainjob_is_being_deleted_deletes_it_background(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-28/S-30: the live tier's endless Foreground deletion (the real Trainer re-creates
    the JobSet while the garbage collector removes it): the core asks the stop again while
    the object still shows alive, and that second delete is Background, which lets the
    TrainJob go; its pods still end before the object is absent."""
    object_id = backend.dispatch_submit(job_id="job-s", submission=1, spec=SPEC, gated=False)
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    assert emulator.trainjob(name_of(object_id))["metadata"].get("deletionTimestamp")
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    deletes = [r.body["propagationPolicy"] for r in emulator.log.entries if r.verb == "delete"]
    assert deletes[:2] == ["Foreground", "Background"]
    emulator.settle()
    assert backend.dispatch_discover(job_ids=["job-s"]).objects == ()
    assert emulator.pods(name_of(object_id)) == []


def test_a_jobset_made_again_while_the_trainjob_is_deleted_runs_no_pod_S28(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-28: the real Trainer makes the JobSet of a TrainJob being deleted again once the
    collector removed it; its pods ran after discovery had shown the stopped object ended,
    beside whatever the gate let start then. The stop suspends the TrainJob after the
    delete, so what is made again is suspended: once ended, the object stays ended (or
    absent) and no pod of it runs again. (On the shared runtime: the emulator's collector
    takes a runtime copy at once, where the real Trainer's finalizer keeps it.)"""
    emulator.remake_while_deleting()
    backend = make_backend(runtime_copy=False)
    object_id = backend.dispatch_submit(job_id="job-r", submission=1, spec=SPEC, gated=False)
    name = name_of(object_id)
    assert emulator.is_running(name)
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    seen: list[str] = []
    for _ in range(40):
        emulator.advance()
        views = backend.dispatch_discover(job_ids=["job-r"]).objects
        seen.append(",".join(v.phase.value for v in views) or "absent")
        if seen[-1] == "absent":
            break
    ended = seen.index("ended")
    assert set(seen[ended:]) <= {"ended", "absent"}, seen
    assert seen[-1] == "absent", seen
    patches = [r for r in emulator.log.entries if r.verb == "patch" and r.resource == "trainjobs"]
    assert patches[-1].body == {"spec": {"suspend": True}}
    assert emulator.cluster.remade, "the emulator never made the JobSet again"
    assert emulator.pods(name) == []


def test_stop_records_why_then_deletes_in_foreground_and_is_idempotent(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-30: stop is idempotent; a stopped object that is gone is absent."""
    object_id = backend.dispatch_submit(job_id="job-s", submission=1, spec=SPEC, gated=False)
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    patch = next(r for r in emulator.log.entries if r.verb == "patch" and r.resource == "trainjobs")
    assert Cause.model_validate_json(patch.body["metadata"]["annotations"][tags.STOP]) == CANCEL
    delete = next(r for r in emulator.log.entries if r.verb == "delete")
    assert delete.body["propagationPolicy"] == "Foreground"
    emulator.settle()  # the garbage collector and the kubelet take their steps
    assert backend.dispatch_discover(job_ids=["job-s"]).objects == ()
    assert emulator.pods(name_of(object_id)) == []
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)


def test_stop_finishes_although_a_pod_is_stuck_on_a_lost_node(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-28: Foreground deletion waits for the pod stuck Terminating on a NotReady node;
    stop force-deletes it (grace 0), so the object goes and the fence can open."""
    object_id = backend.dispatch_submit(job_id="job-n", submission=1, spec=SPEC, gated=False)
    emulator.lose_node(name_of(object_id))
    fence = Cause(
        kind=CauseKind.NODE_LOST,
        provenance=Provenance.ACTOR,
        actor="supervisor",
        detail="window passed",
    )
    backend.dispatch_stop(object_id=object_id, cause=fence)
    forced = [r for r in emulator.log.entries if r.verb == "delete" and r.resource == "pods"]
    assert forced and all(r.body.get("gracePeriodSeconds") == 0 for r in forced)
    emulator.settle()
    assert backend.dispatch_discover(job_ids=["job-n"]).objects == ()


def test_stop_skips_listed_pods_and_nodes_it_cannot_read_S36(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """A pod or Node item of the wrong shape is skipped by stop (it raised AttributeError
    and KeyError before); the pods it can read on a node that is not Ready are still
    force-deleted, so the object goes."""
    object_id = backend.dispatch_submit(job_id="job-n", submission=1, spec=SPEC, gated=False)
    emulator.lose_node(name_of(object_id))
    pods = emulator.pods(name_of(object_id))
    garbled = {"kind": "PodList", "items": ["garbage", {"spec": "x"}, {"spec": {}}, *pods]}
    emulator.garble(json.dumps(garbled).encode(), resource="pods")
    nodes = {"kind": "NodeList", "items": [7, {"status": []}, *emulator.nodes()]}
    emulator.garble(json.dumps(nodes).encode(), resource="nodes")
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    forced = [r for r in emulator.log.entries if r.verb == "delete" and r.resource == "pods"]
    assert forced, "the pod on the lost node was not force-deleted"
    emulator.settle()
    assert backend.dispatch_discover(job_ids=["job-n"]).objects == ()


def test_stopped_object_still_listed_shows_cancelled(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """A finalizer keeps the stopped TrainJob listed: it ended cancelled, by dispatch."""
    object_id = backend.dispatch_submit(job_id="job-f", submission=1, spec=SPEC, gated=False)
    emulator.add_finalizer(name_of(object_id), "example.com/audit")
    backend.dispatch_stop(object_id=object_id, cause=CANCEL)
    emulator.settle()  # the pods go (Foreground); the finalizer keeps the TrainJob
    view = only(backend, "job-f")
    assert view.phase is Phase.ENDED and view.cause.kind is CauseKind.CANCELLED
    assert view.cause.actor == "ana" and "no longer needed" in view.cause.detail


# -- discovery -----------------------------------------------------------------------


def _lists(emulator: Emulator, action: Callable[[], object]) -> list[str]:
    emulator.log.clear()
    action()
    return sorted(r.resource for r in emulator.log.lists())


def test_discovery_costs_the_same_list_calls_for_one_job_or_many(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-32: one list per kind whatever the number of jobs, with or without the id selector."""
    limit = 20
    backend = make_backend(selector_limit=limit)
    jobs = [f"job-{i}" for i in range(limit + 5)]
    with emulator.paused():
        for job in jobs:
            backend.dispatch_submit(job_id=job, submission=1, spec=SPEC, gated=False)
    one = _lists(emulator, lambda: backend.dispatch_discover(job_ids=jobs[:1]))
    few = _lists(emulator, lambda: backend.dispatch_discover(job_ids=jobs[:limit]))
    many = _lists(emulator, lambda: backend.dispatch_discover(job_ids=jobs))
    assert one == few == many == ["jobs", "jobsets", "nodes", "pods", "trainjobs"]
    found = backend.dispatch_discover(job_ids=[*jobs, "never-submitted"])
    assert sorted(o.job_id for o in found.objects) == sorted(jobs)
    few_selector = _lists(emulator, lambda: backend.dispatch_discover(job_ids=jobs[:limit]))
    assert few_selector == one
    assert {r.query.get("labelSelector") for r in emulator.log.lists() if r.resource == "pods"} == {
        f"{tags.JOB} in ({','.join(sorted(jobs[:limit]))})"
    }
    emulator.log.clear()
    backend.dispatch_discover(job_ids=jobs)
    selectors = {
        r.query.get("labelSelector") for r in emulator.log.lists() if r.resource == "trainjobs"
    }
    assert selectors == {f"{tags.MANAGED}=true"}


def test_discovery_of_nothing_calls_nothing(backend: KubeflowBackend, emulator: Emulator) -> None:
    assert _lists(emulator, lambda: backend.dispatch_discover(job_ids=[])) == []


def test_discovery_finds_its_objects_after_a_lost_submit_answer(
    make_backend: Callable[..., KubeflowBackend],
) -> None:
    """S-34: a fresh backend (a restarted supervisor) finds the object by its tags."""
    object_id = make_backend().dispatch_submit(job_id="job-c", submission=3, spec=SPEC, gated=False)
    view = only(make_backend(), "job-c")
    assert (view.object_id, view.submission) == (object_id, 3)


# -- unreachable and refusals --------------------------------------------------------


def test_unreachable_api_raises_unreachable_from_every_hook(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-5: an API that is down is an error, never a state; back up, the object is there."""
    object_id = backend.dispatch_submit(job_id="job-u", submission=1, spec=SPEC, gated=False)
    emulator.go_unreachable()
    calls = {
        "discover": lambda: backend.dispatch_discover(job_ids=["job-u"]),
        "submit": lambda: backend.dispatch_submit(
            job_id="job-u", submission=2, spec=SPEC, gated=False
        ),
        "open_gate": lambda: backend.dispatch_open_gate(object_id=object_id),
        "stop": lambda: backend.dispatch_stop(object_id=object_id, cause=CANCEL),
    }
    for what, call in calls.items():
        with pytest.raises(Unreachable, match="Kubernetes API"):
            call()
            pytest.fail(f"{what} answered with the API down")
    emulator.come_back()
    assert only(backend, "job-u").phase is Phase.RUNNING


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections and never answers: only a read timeout ends the wait."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_silent_api_times_out_as_unreachable(silent_server: int, tmp_path: Path) -> None:
    """S-5: every call has an explicit read timeout; a hung API server is Unreachable."""
    emu = Emulator(port=silent_server)
    config = KubeflowConfig(
        kubeconfig=str(emu.write_kubeconfig(tmp_path / "kc")),
        retries=0,
        connect_timeout=1.0,
        read_timeout=0.5,
    )
    backend = KubeflowBackend(config)
    with pytest.raises(Unreachable) as caught:
        backend.dispatch_discover(job_ids=["job-1"])
    words = str(caught.value)
    assert "did not answer list TrainJobs within 0.5 s" in words, words
    assert "DISPATCH_KUBEFLOW_READ_TIMEOUT" in words
    assert "HTTPSConnectionPool" not in words and "read timeout=" not in words


@pytest.mark.parametrize(
    ("code", "reason"),
    [(500, "InternalError"), (503, "ServiceUnavailable"), (429, "TooManyRequests")],
)
def test_an_api_server_that_cannot_answer_now_is_unreachable(
    backend: KubeflowBackend, emulator: Emulator, code: int, reason: str
) -> None:
    """S-5: 5xx and 429 are the server failing to answer, retryable: Unreachable."""
    emulator.inject(code, reason, "etcdserver: request timed out")
    with pytest.raises(Unreachable, match="etcdserver: request timed out"):
        backend.dispatch_discover(job_ids=["job-1"])
    assert backend.dispatch_discover(job_ids=["job-1"]).objects == ()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"<html><body>502 Bad Gateway</body></html>", "is not JSON: b'<html><body>502 Bad"),
        (b'{"items": "none"}', "without a list of items: {'items': 'none'}"),
        (b'{"items": {"a": 1}}', "without a list of items: {'items': {'a': 1}}"),
        (b"[1, 2]", "without a list of items: [1, 2]"),
        (b'"items"', "without a list of items: 'items'"),
        (b'{"kind": "TrainJobList", "items": ' + b"[" * 100_000, "is not JSON"),
    ],
)
def test_a_listing_that_is_no_list_of_items_is_unreachable_with_its_words_S36(
    backend: KubeflowBackend, emulator: Emulator, body: bytes, words: str
) -> None:
    """S-36, S-5: an answer about no object in particular (not JSON, no list of items) is
    no answer: Unreachable with its words cut short, never a partial discovery; the next
    discovery reads the cluster again."""
    emulator.garble(body, resource="trainjobs")
    with pytest.raises(Unreachable) as unreachable:
        backend.dispatch_discover(job_ids=["job-1"])
    assert words in str(unreachable.value) and len(str(unreachable.value)) < 400
    assert backend.dispatch_discover(job_ids=["job-1"]).objects == ()


def test_an_empty_listing_as_go_writes_it_is_no_object(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    emulator.garble(b'{"kind": "TrainJobList", "items": null}', resource="trainjobs")
    assert backend.dispatch_discover(job_ids=["job-1"]).objects == ()


def test_a_listed_pod_that_is_not_an_object_makes_the_trainjob_unknown_S4(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """A pod list item that is a string (it raised AttributeError once) over real HTTP:
    unknown with its words, alive."""
    backend.dispatch_submit(job_id="job-g", submission=1, spec=SPEC, gated=False)
    emulator.garble(b'{"kind": "PodList", "items": ["garbage"]}', resource="pods")
    (obj,) = backend.dispatch_discover(job_ids=["job-g"]).objects
    assert obj.alive and obj.cause is not None and obj.cause.kind is CauseKind.UNKNOWN
    assert "a Pod listed cannot be told apart: Pod: the item is 'garbage'" in obj.cause.detail


def test_a_forbidden_list_is_an_api_refusal_with_the_servers_words(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    message = (
        'trainjobs.trainer.kubeflow.org is forbidden: User "ci" cannot list resource "trainjobs"'
    )
    emulator.inject(403, "Forbidden", message)
    with pytest.raises(ApiRefused) as refused:
        backend.dispatch_discover(job_ids=["job-1"])
    assert refused.value.status == 403 and message in str(refused.value)


def test_nodes_forbidden_by_rbac_still_discovers_a_lost_node_from_the_pod(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """Listing nodes is optional: without it the pod's DisruptionTarget still tells."""
    object_id = backend.dispatch_submit(job_id="job-r", submission=1, spec=SPEC, gated=False)
    emulator.lose_node(name_of(object_id))
    emulator.inject(
        403,
        "Forbidden",
        'nodes is forbidden: User "ci" cannot list resource "nodes"',
        resource="nodes",
    )
    emulator.log.clear()
    view = only(backend, "job-r")
    assert view.phase is Phase.RUNNING and view.cause.kind is CauseKind.NODE_LOST
    assert "DeletionByTaintManager" in view.cause.detail
    assert "nodes" in [r.resource for r in emulator.log.lists()]


def test_a_rejected_token_is_an_api_refusal_not_unreachable(
    emulator: Emulator, tmp_path: Path
) -> None:
    path = emulator.write_kubeconfig(tmp_path / "kc")
    path.write_text(path.read_text().replace("dispatch-emulator-token", "wrong"))
    backend = KubeflowBackend(KubeflowConfig(kubeconfig=str(path), retries=0))
    with pytest.raises(ApiRefused) as refused:
        backend.dispatch_discover(job_ids=["job-1"])
    assert refused.value.status == 401 and "Unauthorized" in str(refused.value)


# -- configuration and import cost ---------------------------------------------------


def test_namespace_comes_from_the_kubeconfig_context(emulator: Emulator, tmp_path: Path) -> None:
    emulator.namespace = "research"
    path = emulator.write_kubeconfig(tmp_path / "kc")
    object_id = KubeflowBackend(KubeflowConfig(kubeconfig=str(path))).dispatch_submit(
        job_id="job-ns", submission=1, spec=SPEC, gated=False
    )
    assert object_id.startswith("research/")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("READ_TIMEOUT", "soon"),
        ("TRAINER_VERSION", "two"),
        ("RUNTIME_KIND", "Runtime"),
        ("NATIVE_RESTART", "maybe"),
    ],
)
def test_bad_environment_is_refused_naming_the_variable(name: str, value: str) -> None:
    """S-36."""
    with pytest.raises(BadInput, match=f"DISPATCH_KUBEFLOW_{name}"):
        KubeflowConfig.from_env({f"DISPATCH_KUBEFLOW_{name}": value})


def test_missing_kubeconfig_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    backend = KubeflowBackend(KubeflowConfig(kubeconfig=str(tmp_path / "absent")))
    with pytest.raises(BadInput, match="absent"):
        backend.dispatch_discover(job_ids=["job-1"])


def test_entry_point_module_does_not_import_the_kubernetes_client() -> None:
    """S-31: importing and declaring the backend costs no ``import kubernetes``."""
    code = (
        "import sys\n"
        "from dispatch import Registry\n"
        "backend = Registry.from_entry_points().get('kubeflow')\n"
        "assert backend.declarations.name == 'kubeflow'\n"
        "print('kubernetes' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
