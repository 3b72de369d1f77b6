"""Trainer 2.0 and 2.1 classified as 2.2 is: the same kind, exit code and words for every
ending, read from the JobSet's Jobs and Pods, in the same number of list calls.

Before 2.2 a TrainJob's ``spec.labels`` reach only its JobSet (the Trainer's
``newRuntimeInfo``; JobSet labels each Job from its replicated Job template), so its Jobs,
and on 2.0 its Pods, carry no dispatch label: discovery lists them by
``jobset.sigs.k8s.io/jobset-name``. The emulator runs in each version's mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch import CauseKind, JobSpec, Phase, Resources
from dispatch.model.discovery import ObjectView
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.store import JOB

SPEC = JobSpec(
    name="older",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=2, gpus_per_node=8, tasks_per_node=1),
    options={"image": "ghcr.io/acme/train:1.4"},
)
VERSIONS = ["2.0", "2.1", "2.2"]


class Counting:
    """The backend's Kube, counting each call by name."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.kube, name)
        if not callable(target):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return counted


@pytest.fixture(params=VERSIONS)
def plane(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Emulator, KubeflowBackend]]:
    version: str = request.param
    with Emulator(trainer_version=version) as emulator:
        config = KubeflowConfig(
            kubeconfig=str(emulator.write_kubeconfig(tmp_path / "kc")),
            retries=0,
            trainer_version=(int(version[0]), int(version[2])),
        )
        yield emulator, KubeflowBackend(config)


def _view(backend: KubeflowBackend, job_id: str) -> ObjectView:
    objects = backend.dispatch_discover(job_ids=[job_id]).objects
    assert len(objects) == 1, objects
    return objects[0]


def _submit(backend: KubeflowBackend, job_id: str) -> str:
    object_id = backend.dispatch_submit(job_id=job_id, submission=1, spec=SPEC, gated=False)
    return tags.split_object_id(object_id)[1]


def test_jobs_of_older_trainers_carry_no_dispatch_label(
    plane: tuple[Emulator, KubeflowBackend],
) -> None:
    """What makes 2.0/2.1 differ: only 2.2's runtimePatches label the Jobs."""
    emulator, backend = plane
    name = _submit(backend, "job-l")
    jobs = [
        j
        for j in emulator.store.items(JOB)
        if j["metadata"]["labels"].get(tags.JOBSET_NAME) == name
    ]
    assert jobs
    labelled = [tags.JOB in j["metadata"]["labels"] for j in jobs]
    assert all(labelled) if emulator.trainer_version >= (2, 2) else not any(labelled)


Provoke = Callable[[Emulator, str], None]
ENDINGS: dict[str, tuple[Provoke, CauseKind, int | None, str]] = {
    "exit-3": (lambda e, n: e.exit(n, 3), CauseKind.NON_ZERO_EXIT, 3, "exitCode=3"),
    "oom": (lambda e, n: e.oom(n), CauseKind.OUT_OF_MEMORY, 137, "reason=OOMKilled"),
    "evicted": (lambda e, n: e.evict(n), CauseKind.PREEMPTED, None, "DisruptionTarget"),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_trainer_version_reads_the_same_ending(
    plane: tuple[Emulator, KubeflowBackend], ending: str
) -> None:
    """A non-zero exit with its code, an OOM kill, an eviction (whose pod is gone by the
    end, so only the Job's podFailurePolicy message names it): on 2.0 and 2.1 the same kind,
    exit code and words as on 2.2, never the TrainJob's bare ``FailedJobs``."""
    emulator, backend = plane
    provoke, kind, code, words = ENDINGS[ending]
    name = _submit(backend, f"job-{ending}")
    assert _view(backend, f"job-{ending}").phase is Phase.RUNNING
    provoke(emulator, name)
    emulator.settle()
    view = _view(backend, f"job-{ending}")
    assert view.phase is Phase.ENDED
    assert view.cause is not None and view.cause.kind is kind, view.cause
    assert view.cause.exit_code == code
    assert words in view.cause.detail
    assert "FailedJobs" not in view.cause.detail


def test_every_trainer_version_reads_a_lost_node(
    plane: tuple[Emulator, KubeflowBackend],
) -> None:
    emulator, backend = plane
    name = _submit(backend, "job-n")
    node = emulator.lose_node(name)
    view = _view(backend, "job-n")
    assert view.phase is Phase.RUNNING
    assert view.cause is not None and view.cause.kind is CauseKind.NODE_LOST
    assert view.cause.nodes == (node,)


def test_discovery_makes_one_list_call_per_kind_whatever_the_version_and_job_count(
    plane: tuple[Emulator, KubeflowBackend],
) -> None:
    _, backend = plane
    ids = [f"job-c{i}" for i in range(5)]
    for job_id in ids:
        _submit(backend, job_id)
    counting = Counting(backend.kube)
    backend._kube = counting  # type: ignore[assignment]
    objects = backend.dispatch_discover(job_ids=ids).objects
    assert len(objects) == 5 and all(len(o.executions[0].nodes) == 2 for o in objects)
    lists = {k: v for k, v in counting.calls.items() if k.startswith("list_")}
    assert lists == {
        "list_trainjobs": 1,
        "list_jobsets": 1,
        "list_jobs": 1,
        "list_pods": 1,
        "list_nodes": 1,  # pods are placed: their Nodes' readiness matters
    }


def test_beyond_the_selector_limit_older_trainers_list_by_the_jobset_label_alone(
    tmp_path: Path,
) -> None:
    with Emulator(trainer_version="2.0") as emulator:
        config = KubeflowConfig(
            kubeconfig=str(emulator.write_kubeconfig(tmp_path / "kc")),
            retries=0,
            trainer_version=(2, 0),
            selector_limit=1,
        )
        backend = KubeflowBackend(config)
        names = [_submit(backend, job_id) for job_id in ("job-a", "job-b")]
        emulator.exit(names[1], 7)
        emulator.settle()
        views = {v.job_id: v for v in backend.dispatch_discover(["job-a", "job-b"]).objects}
        assert views["job-a"].phase is Phase.RUNNING
        assert views["job-b"].cause is not None and views["job-b"].cause.exit_code == 7
