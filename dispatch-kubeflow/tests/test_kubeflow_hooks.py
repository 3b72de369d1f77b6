"""The optional hooks: ``dispatch_validate`` refuses what a TrainJob cannot run before
anything is recorded, ``dispatch_prepare`` builds the TrainJob and runtime copy that
``dispatch_send`` creates (the dry run), ``dispatch_logs`` reads the pods' logs through the
API (S-46)."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from dispatch import JobSpec, LogSelection, Resources, SubmitRefused
from dispatch.model.errors import BadInput
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.kube import LOG_CHUNK
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.store import CLUSTER_RUNTIME

SPEC = JobSpec(name="hooks", command=("torchrun", "train.py"), resources=Resources(nodes=2))


# -- validate ------------------------------------------------------------------------


def test_validate_refuses_a_workdir_with_words_to_act_on_S36(backend: KubeflowBackend) -> None:
    """S-36: --workdir cannot be carried by a TrainJob: refused before the job exists."""
    with pytest.raises(BadInput, match="--workdir: a TrainJob has no working directory"):
        backend.dispatch_validate(spec=SPEC.model_copy(update={"workdir": "/data"}))


def test_validate_refuses_the_reserved_launch_variables_S36(backend: KubeflowBackend) -> None:
    """S-36: PET_* belong to the torch runtime and DISPATCH_JOB_ID to dispatch."""
    spec = SPEC.model_copy(update={"env": {"PET_NNODES": "9", "DISPATCH_JOB_ID": "x"}})
    with pytest.raises(BadInput, match="DISPATCH_JOB_ID, PET_NNODES"):
        backend.dispatch_validate(spec=spec)


def test_validate_refuses_a_time_limit_trainer_2_1_cannot_carry_S36(
    make_backend,  # type: ignore[no-untyped-def]
) -> None:
    old = make_backend(trainer_version=(2, 1))
    spec = SPEC.model_copy(update={"resources": Resources(time_limit=timedelta(hours=1))})
    with pytest.raises(BadInput, match=r"--time: Trainer 2\.1"):
        old.dispatch_validate(spec=spec)
    assert make_backend().dispatch_validate(spec=spec) is None


def test_validate_and_prepare_change_nothing(backend: KubeflowBackend, emulator: Emulator) -> None:
    backend.dispatch_validate(spec=SPEC)
    backend.dispatch_prepare(job_id="job-h", submission=1, spec=SPEC, gated=False)
    # read only: the runtime, and the namespace's defaults (its LocalQueues, LimitRanges)
    assert [(r.verb, r.resource) for r in emulator.log.entries] == [
        ("get", "clustertrainingruntimes"),
        ("list", "localqueues"),
        ("list", "limitranges"),
    ]
    assert emulator.names() == []


# -- prepare and send ----------------------------------------------------------------

#: what the API server adds to an object it creates
SERVER_SET = {
    "metadata.resourceVersion",
    "metadata.generation",
    "metadata.creationTimestamp",
    "metadata.uid",
    "spec.managedBy",
    "status",
}


def _differences(got: Any, want: Any, path: str = "") -> set[str]:
    """The paths where ``got`` differs from ``want`` (a key only one of them has too)."""
    if isinstance(got, dict) and isinstance(want, dict):
        found: set[str] = set()
        for key in set(got) | set(want):
            found |= _differences(got.get(key), want.get(key), f"{path}.{key}".lstrip("."))
        return found
    return set() if got == want else {path}


def test_the_prepared_trainjob_and_runtime_copy_are_what_the_server_received_S30(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """The dry run is what is sent: the objects the API server received are the prepared
    ones, and they are made from the runtime on the cluster (here one whose replicated job
    is not named ``node``: the patches name the runtime's own job)."""
    emulator.add_runtime("renamed")
    with emulator.store.lock:
        runtime = emulator.store.raw(CLUSTER_RUNTIME, "", "renamed")
        runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "trainer"
    backend = make_backend(runtime="renamed")
    prepared = backend.dispatch_prepare(job_id="job-p", submission=3, spec=SPEC, gated=True)
    assert not [r for r in emulator.log.entries if r.verb not in ("get", "list")]
    object_id = backend.dispatch_send(prepared)
    received = {r.resource: r.body for r in emulator.log.entries if r.verb == "create"}
    assert set(received) == {"trainingruntimes", "trainjobs"}
    # the emulator logs the body it then stores: only fields the server sets may differ
    # (and the copy's owner, patched once the TrainJob exists, as the prepared note says)
    assert _differences(received["trainjobs"], prepared.mapping("TrainJob")) <= SERVER_SET
    assert _differences(
        received["trainingruntimes"], prepared.mapping("runtime copy")
    ) <= SERVER_SET | {"metadata.ownerReferences"}
    name = prepared.mapping("TrainJob")["metadata"]["name"]
    assert object_id == tags.object_id("default", name)
    patched = json.dumps(prepared.mapping("TrainJob")["spec"])
    assert '"name": "trainer"' in patched and '"name": "node"' not in patched
    shown = prepared.render()
    assert "--- TrainJob ---" in shown and "--- runtime copy ---" in shown


def test_prepare_of_a_missing_runtime_is_a_refusal_in_the_servers_words_S30(
    make_backend: Callable[..., KubeflowBackend],
) -> None:
    with pytest.raises(SubmitRefused, match="not found"):
        make_backend(runtime="no-such-runtime").dispatch_prepare(
            job_id="j", submission=1, spec=SPEC, gated=False
        )


# -- logs ----------------------------------------------------------------------------


def started(backend: KubeflowBackend, emulator: Emulator) -> tuple[str, str]:
    object_id = backend.dispatch_submit(job_id="job-h", submission=1, spec=SPEC, gated=False)
    emulator.reconcile()
    return object_id, tags.split_object_id(object_id)[1]


def read(backend: KubeflowBackend, object_id: str, **kw: Any) -> bytes:
    selection = LogSelection(**kw).of("job-h", 1, kw.get("offset", 0))
    return b"".join(backend.dispatch_logs(object_id=object_id, selection=selection))


def test_logs_are_the_pods_logs_in_node_rank_order_per_node_and_rank_S46(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-46: every node's output, node rank 0 first; --node and --rank select one pod."""
    object_id, name = started(backend, emulator)
    emulator.print_log(name, "rank 0 says hello\n", pod=0)
    emulator.print_log(name, "rank 1 says hello\n", pod=1)
    node1 = emulator.pods(name)[1]["spec"]["nodeName"]
    assert read(backend, object_id) == b"rank 0 says hello\nrank 1 says hello\n"
    assert read(backend, object_id, node=node1) == b"rank 1 says hello\n"
    assert read(backend, object_id, rank=0) == b"rank 0 says hello\n"
    assert read(backend, object_id, offset=5) == b"0 says hello\nrank 1 says hello\n"
    assert any(r.resource == "pods/log" for r in emulator.log.entries)


def test_logs_after_a_container_restart_keep_the_previous_run_first_S46(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-46: a container restarted (OnFailure: the runtime as shipped, without dispatch's
    runtime copy) keeps its previous run's log: read first."""
    backend = make_backend(runtime_copy=False)
    object_id, name = started(backend, emulator)
    emulator.print_log(name, "before the OOM\n", pod=0)
    emulator.oom(name, pod=0, restart_policy="OnFailure")
    emulator.print_log(name, "after the restart\n", pod=0)
    assert read(backend, object_id, rank=0) == b"before the OOM\nafter the restart\n"
    previous = [r for r in emulator.log.entries if r.query.get("previous") == "true"]
    assert previous, "the previous run is read with previous=true"


def test_a_large_log_streams_in_bounded_chunks_S46(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-46: the hook returns a lazy generator of chunks no larger than the read size, so
    memory stays flat whatever the log's size."""
    object_id, name = started(backend, emulator)
    line = "x" * 1023 + "\n"
    emulator.print_log(name, line * 8192, pod=0)
    chunks = backend.dispatch_logs(
        object_id=object_id, selection=LogSelection(rank=0).of("job-h", 1)
    )
    assert isinstance(chunks, types.GeneratorType)
    total = 0
    for chunk in chunks:
        assert len(chunk) <= LOG_CHUNK
        total += len(chunk)
    assert total == 8192 * 1024


def test_logs_refuse_stderr_and_nodes_or_ranks_the_job_never_had(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    object_id, _ = started(backend, emulator)
    with pytest.raises(BadInput, match="stdout and stderr in one log"):
        read(backend, object_id, stream="stderr")
    with pytest.raises(BadInput, match="--node nowhere: this submission has no pod"):
        read(backend, object_id, node="nowhere")
    with pytest.raises(BadInput, match=r"--rank 7: not a rank of this submission \(ranks 0..1\)"):
        read(backend, object_id, rank=7)


def test_logs_of_nothing_printed_yet_are_empty(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    object_id, _ = started(backend, emulator)
    assert read(backend, object_id) == b""


# -- Kueue queue and priority ---------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"queue": "Team_A"}, "-o queue='Team_A': must be lower-case letters"),
        ({"queue": "a" * 64}, "is 64 characters long; at most 63"),
        ({"queue": "team-a", "priority": "-high"}, "-o priority='-high': must be lower-case"),
        ({"priority": "high"}, "a Kueue priority class needs a queue"),
    ],
)
def test_validate_refuses_a_queue_or_priority_that_is_no_dns1123_label(
    backend: KubeflowBackend, options: dict[str, str], words: str
) -> None:
    """Refused before anything is recorded, saying what is wrong with which value."""
    with pytest.raises(BadInput) as refused:
        backend.dispatch_validate(spec=SPEC.model_copy(update={"options": options}))
    assert words in str(refused.value)


def test_validate_accepts_a_queue_and_priority(backend: KubeflowBackend) -> None:
    spec = SPEC.model_copy(update={"options": {"queue": "team-a", "priority": "high-2"}})
    backend.dispatch_validate(spec=spec)


def test_a_queue_from_the_environment_is_validated_too(
    make_backend: Callable[..., KubeflowBackend],
) -> None:
    backend = make_backend(queue="Bad Queue")
    with pytest.raises(BadInput, match="DISPATCH_KUBEFLOW_QUEUE='Bad Queue'"):
        backend.dispatch_validate(spec=SPEC)
    backend.dispatch_validate(spec=SPEC.model_copy(update={"options": {"queue": "ok"}}))


def test_the_trainjob_carries_kueue_queue_and_priority_labels_in_the_dry_run(
    backend: KubeflowBackend,
) -> None:
    """What is prepared is what is sent: the labels Kueue reads, in the TrainJob's
    metadata; a gated one (S-28) carries its queue too, and names a prebuilt Workload
    nobody creates, which holds it at Kueue until the gate opens."""
    spec = SPEC.model_copy(update={"options": {"queue": "team-a", "priority": "high"}})
    labels = backend.dispatch_prepare("job-q", 1, spec, False).mapping("TrainJob")["metadata"][
        "labels"
    ]
    assert labels[tags.KUEUE_QUEUE] == "team-a" and labels[tags.KUEUE_PRIORITY] == "high"
    assert tags.KUEUE_PREBUILT not in labels
    gated = backend.dispatch_prepare("job-q", 1, spec, True).mapping("TrainJob")
    assert gated["metadata"]["labels"][tags.KUEUE_QUEUE] == "team-a"
    assert gated["metadata"]["labels"][tags.KUEUE_PRIORITY] == "high"
    assert gated["metadata"]["labels"][tags.KUEUE_PREBUILT] == (
        gated["metadata"]["name"] + "-gated"
    )
    assert gated["metadata"]["annotations"][tags.QUEUE] == "team-a"
