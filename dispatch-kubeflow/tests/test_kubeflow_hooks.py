"""The optional hooks: ``dispatch_validate`` refuses what a TrainJob cannot run before
anything is recorded, ``dispatch_render`` shows the manifest submit would send (sending
nothing), ``dispatch_logs`` reads the pods' logs through the API (S-46)."""

from __future__ import annotations

import types
from collections.abc import Callable
from datetime import timedelta

import pytest
import yaml
from dispatch import JobSpec, Resources
from dispatch.model.errors import BadInput
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.kube import LOG_CHUNK
from dispatch_kubeflow.manifest import build_trainjob
from dispatch_kubeflow_testing.emulator import Emulator

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


def test_validate_and_render_send_nothing(backend: KubeflowBackend, emulator: Emulator) -> None:
    backend.dispatch_validate(spec=SPEC)
    backend.dispatch_render(job_id="job-h", submission=1, spec=SPEC, gated=False)
    assert emulator.log.entries == [] and emulator.names() == []


# -- render --------------------------------------------------------------------------


def test_render_is_the_manifest_submit_sends_as_yaml(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """The dry run prints exactly what submit creates: parsed back, it is the body."""
    text = backend.dispatch_render(job_id="job-h", submission=3, spec=SPEC, gated=True)
    assert text.startswith("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n")
    rendered = yaml.safe_load(text)
    expected = build_trainjob(
        backend.config,
        namespace="default",
        job_id="job-h",
        submission=3,
        spec=SPEC,
        gated=True,
        replicated_jobs=["node"],
    )
    assert rendered == expected
    assert "# submit also creates TrainingRuntime default/" in text
    assert "a copy of\n# ClusterTrainingRuntime/torch-distributed with backoffLimit 0" in text
    backend.dispatch_submit(job_id="job-h", submission=3, spec=SPEC, gated=True)
    created = emulator.trainjob(rendered["metadata"]["name"])
    assert created["spec"]["trainer"] == rendered["spec"]["trainer"]


def test_render_of_what_cannot_be_sent_is_bad_input(backend: KubeflowBackend) -> None:
    with pytest.raises(BadInput, match="working directory"):
        backend.dispatch_render(
            job_id="j", submission=1, spec=SPEC.model_copy(update={"workdir": "/x"}), gated=False
        )


# -- logs ----------------------------------------------------------------------------


def started(backend: KubeflowBackend, emulator: Emulator) -> tuple[str, str]:
    object_id = backend.dispatch_submit(job_id="job-h", submission=1, spec=SPEC, gated=False)
    emulator.reconcile()
    return object_id, tags.split_object_id(object_id)[1]


def read(backend: KubeflowBackend, object_id: str, **kw: object) -> bytes:
    args = {"stream": "stdout", "node": None, "rank": None, "offset": 0, **kw}
    return b"".join(
        backend.dispatch_logs(job_id="job-h", submission=1, object_id=object_id, **args)
    )


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
        job_id="job-h",
        submission=1,
        object_id=object_id,
        stream="stdout",
        node=None,
        rank=0,
        offset=0,
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
