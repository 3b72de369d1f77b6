"""What submit sets on a cluster people share, and what it refuses there, as a user runs
it: a Kueue queue or priority class that does not exist (or Kueue itself absent) is
refused before anything is recorded, naming it and what exists; ``-o label`` and ``-o
annotation`` are checked by Kubernetes' rules and put where the Trainer version carries
them; the namespace's defaults (Kueue's default LocalQueue, a LimitRange's defaults) show
in the dry run, the queue written into the TrainJob that is sent (S-30, S-36)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dispatch import BadInput, JobSpec
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.manifest import build_trainjob
from dispatch_kubeflow_testing.emulator import Emulator

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
QUEUES = ({"cq-a": 16, "cq-b": 16}, {"team-a": "cq-a", "team-b": "cq-b"})
PRIORITIES = {"low": 100, "high": 10_000}


def _env(kubeconfig: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        **extra,
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DISPATCH, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _nothing_recorded(env: dict[str, str], emulator: Emulator) -> None:
    listed = _run(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout or "[]") in ([], {"jobs": []})
    assert emulator.names() == []


# -- the queue and the priority class must exist ----------------------------------------


@pytest.mark.parametrize("dry", [False, True], ids=["submit", "dry-run"])
def test_a_queue_that_does_not_exist_is_refused_naming_the_ones_that_do_S36(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path, dry: bool
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    env = _env(kubeconfig, tmp_path)
    extra = ["--dry-run"] if dry else []
    done = _run(env, "submit", *extra, "--backend", "kubeflow", "-o", "queue=team-x", "--", "t")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "-o queue='team-x': no Kueue LocalQueue of that name in namespace 'default' "
        "(it has: team-a, team-b)"
    ) in done.stderr
    _nothing_recorded(env, emulator)


def test_a_priority_class_that_does_not_exist_is_refused_with_their_values_S36(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    env = _env(kubeconfig, tmp_path)
    done = _run(
        env,
        "submit",
        "--backend",
        "kubeflow",
        "-o",
        "queue=team-a",
        "-o",
        "priority=urgent",
        "--",
        "t",
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "-o priority='urgent': no Kueue WorkloadPriorityClass of that name "
        "(the cluster has: high (10000), low (100))"
    ) in done.stderr
    _nothing_recorded(env, emulator)


def test_the_check_lists_each_kind_once_and_reads_nothing_else(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    backend = make_backend()
    spec = JobSpec(command=("t",), options={"queue": "team-b", "priority": "high"})
    emulator.log.clear()
    assert backend.dispatch_check(spec=spec) is None
    assert [(r.verb, r.resource) for r in emulator.log.entries] == [
        ("list", "localqueues"),
        ("list", "workloadpriorityclasses"),
    ]
    emulator.log.clear()
    backend.dispatch_check(spec=JobSpec(command=("t",)))  # names no queue: nothing to read
    assert emulator.log.entries == []


def test_the_queue_from_the_environment_is_checked_and_named_so_S36(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    env = _env(kubeconfig, tmp_path, DISPATCH_KUBEFLOW_QUEUE="team-z")
    done = _run(env, "submit", "--backend", "kubeflow", "--", "t")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "DISPATCH_KUBEFLOW_QUEUE='team-z': no Kueue LocalQueue" in done.stderr
    _nothing_recorded(env, emulator)


def test_kueue_not_installed_but_a_queue_asked_for_is_a_clear_refusal_S36(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    emulator.kueue_uninstall()
    env = _env(kubeconfig, tmp_path)
    done = _run(env, "submit", "--backend", "kubeflow", "-o", "queue=team-a", "--", "t")
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "-o queue='team-a': Kueue is not installed on this cluster (the API server serves no "
        "kueue.x-k8s.io API), so no queue can take the job; drop -o queue"
    ) in done.stderr
    _nothing_recorded(env, emulator)
    # without a queue the same cluster takes the job (no Kueue listing is needed)
    done = _run(env, "submit", "--backend", "kubeflow", "--no-start", "--", "t")
    assert done.returncode == 0, done.stderr


def test_a_check_that_cannot_reach_the_cluster_records_nothing_S5(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    env = _env(kubeconfig, tmp_path)
    emulator.go_unreachable()
    done = _run(env, "submit", "--backend", "kubeflow", "-o", "queue=team-a", "--", "t")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "could not check -o queue='team-a' against the cluster (nothing recorded)" in (
        done.stderr
    )
    emulator.come_back()
    _nothing_recorded(env, emulator)


# -- labels and annotations from the user ---------------------------------------------


@pytest.mark.parametrize(
    "options,words",
    [
        ({"label": "team"}, "-o label: 'team' is not KEY=VALUE"),
        ({"label": "team=a,team=b"}, "-o label: 'team' is given twice"),
        ({"label": "Team Name=x"}, "the key 'Team Name' has a name that is not letters"),
        ({"label": "team=ml/vision"}, "the value of 'team' ('ml/vision') must be letters"),
        ({"label": "team=" + "x" * 64}, "is 64 characters long; at most 63"),
        ({"label": "Acme.io/team=x"}, "has a prefix that is not a DNS subdomain"),
        ({"label": "dispatch.dev/job=x"}, "is in dispatch.dev, which is dispatch's own"),
        ({"annotation": "x.dispatch.dev/gate=open"}, "is in dispatch.dev, which is dispatch's"),
        ({"label": "kueue.x-k8s.io/queue-name=q"}, "which is Kueue's (use -o queue and -o"),
        ({"label": "jobset.sigs.k8s.io/jobset-name=j"}, "dispatch finds a job's pods by them"),
        ({"annotation": "/note=x"}, "has an empty prefix before '/'"),
    ],
)
def test_a_bad_label_or_annotation_is_refused_with_the_rule_it_breaks_S36(
    backend: KubeflowBackend, options: dict[str, str], words: str
) -> None:
    with pytest.raises(BadInput) as refused:
        backend.dispatch_validate(spec=JobSpec(command=("t",), options=options))
    assert words in str(refused.value)


def test_annotation_values_are_free_text_and_a_backslash_keeps_a_comma(
    backend: KubeflowBackend,
) -> None:
    note = r"owner=alice,acme.io/ticket=ML-42: retry\, then page"
    spec = JobSpec(command=("t",), options={"annotation": note, "label": "team=ml"})
    backend.dispatch_validate(spec=spec)
    body = _trainjob((2, 2), spec)
    annotations = body["metadata"]["annotations"]
    assert annotations["owner"] == "alice"
    assert annotations["acme.io/ticket"] == "ML-42: retry, then page"
    assert annotations[tags.JOB_ID] == "job-l"


def _trainjob(version: tuple[int, int], spec: JobSpec) -> dict[str, Any]:
    return build_trainjob(
        KubeflowConfig(trainer_version=version),
        namespace="default",
        job_id="job-l",
        submission=1,
        spec=spec,
        gated=False,
        replicated_jobs=["node"],
    )


LABELLED = JobSpec(
    command=("t",),
    options={"label": "team=ml,acme.io/cost-center=42", "annotation": "owner=alice"},
)
MINE = {"team": "ml", "acme.io/cost-center": "42"}


def _has(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def test_labels_go_where_each_trainer_version_carries_dispatch_own() -> None:
    """2.2: the TrainJob and the runtime patch (JobSet, Jobs, pods); 2.1: the TrainJob,
    ``spec.labels`` and the pod template override; 2.0: the TrainJob and ``spec.labels``
    only. Annotations: the TrainJob only. dispatch's own labels stay beside them."""
    new = _trainjob((2, 2), LABELLED)
    assert _has(new["metadata"]["labels"], {**MINE, tags.MANAGED: "true"})
    template = new["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
    (job,) = template["spec"]["replicatedJobs"]
    for labels in (
        template["metadata"]["labels"],
        job["template"]["metadata"]["labels"],
        job["template"]["spec"]["template"]["metadata"]["labels"],
    ):
        assert _has(labels, {**MINE, tags.MANAGED: "true"})
    assert new["metadata"]["annotations"]["owner"] == "alice"
    assert "owner" not in json.dumps(new["spec"])

    mid = _trainjob((2, 1), LABELLED)
    assert _has(mid["spec"]["labels"], MINE)
    assert _has(mid["spec"]["podTemplateOverrides"][0]["metadata"]["labels"], MINE)
    assert _has(mid["metadata"]["labels"], MINE)

    old = _trainjob((2, 0), LABELLED)
    assert _has(old["spec"]["labels"], MINE) and _has(old["metadata"]["labels"], MINE)
    assert "podTemplateOverrides" not in old["spec"]


@pytest.mark.parametrize("version", ["2.2", "2.1"])
def test_a_user_label_reaches_the_pods_on_the_emulator(tmp_path: Path, version: str) -> None:
    emulator = Emulator(trainer_version=version).start()
    try:
        config = KubeflowConfig(
            kubeconfig=str(emulator.write_kubeconfig(tmp_path / "kubeconfig")),
            retries=1,
            trainer_version=(2, int(version[-1])),
        )
        backend = KubeflowBackend(config)
        object_id = backend.dispatch_submit(
            job_id="job-pods", submission=1, spec=LABELLED, gated=False
        )
        emulator.settle()
        name = tags.split_object_id(object_id)[1]
        pods = emulator.pods(name)
        assert pods and all(_has(p["metadata"]["labels"], MINE) for p in pods)
        assert _has(emulator.trainjob(name)["metadata"]["labels"], MINE)
        assert emulator.trainjob(name)["metadata"]["annotations"]["owner"] == "alice"
    finally:
        emulator.stop()


def test_trainer_2_0_says_its_labels_do_not_reach_the_pods(
    make_backend: Callable[..., KubeflowBackend],
) -> None:
    prepared = make_backend(trainer_version=(2, 0)).dispatch_prepare(
        job_id="job-o", submission=1, spec=LABELLED, gated=False
    )
    assert any("not to the pods" in note for note in prepared.notes)
    assert _has(prepared.mapping("TrainJob")["metadata"]["labels"], MINE)


# -- the dry run shows all of it, exactly as sent --------------------------------------


def test_the_dry_run_shows_labels_annotations_priority_and_namespace_defaults(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    emulator.kueue_queues(*QUEUES, PRIORITIES)
    emulator.limit_range(
        "container-defaults",
        default={"cpu": "2", "memory": "1Gi"},
        default_request={"cpu": "500m", "memory": "512Mi"},
    )
    env = _env(kubeconfig, tmp_path)
    done = _run(
        env,
        "submit",
        "--dry-run",
        "--json",
        "--backend",
        "kubeflow",
        "--mem",
        "4G",
        "-o",
        "queue=team-a",
        "-o",
        "priority=high",
        "-o",
        "label=team=ml,acme.io/cost-center=42",
        "-o",
        "annotation=owner=alice",
        "--",
        "t",
    )
    assert done.returncode == 0, done.stderr
    prepared = json.loads(done.stdout)["prepared"]
    body = prepared["parts"]["TrainJob"]
    assert body["metadata"]["labels"] == {
        **MINE,
        **tags.labels(json.loads(done.stdout)["job_id"], 1),
        tags.KUEUE_QUEUE: "team-a",
        tags.KUEUE_PRIORITY: "high",
    }
    assert body["metadata"]["annotations"]["owner"] == "alice"
    (note,) = [n for n in prepared["notes"] if "LimitRange" in n]
    # the job sets memory (request and limit): only the CPU defaults fill anything
    assert "LimitRange 'container-defaults'" in note
    assert "requests cpu=500m; limits cpu=2" in note and "memory" not in note
    _nothing_recorded(env, emulator)


def test_kueue_default_local_queue_is_written_into_what_is_sent(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """Kueue gives a job that names no queue the namespace's LocalQueue ``default``: the
    prepared TrainJob names it, so the dry run shows the queue the job will wait in."""
    emulator.kueue_queues({"cq-a": 16}, {"default": "cq-a"})
    backend = make_backend()
    prepared = backend.dispatch_prepare(
        job_id="job-d", submission=1, spec=JobSpec(command=("t",)), gated=False
    )
    body = prepared.mapping("TrainJob")
    assert body["metadata"]["labels"][tags.KUEUE_QUEUE] == "default"
    assert any("LocalQueueDefaulting" in note for note in prepared.notes)
    object_id = backend.dispatch_send(prepared)
    name = tags.split_object_id(object_id)[1]
    assert emulator.trainjob(name)["metadata"]["labels"][tags.KUEUE_QUEUE] == "default"
    # a namespace without that LocalQueue (or a cluster without Kueue) defaults nothing
    emulator.kueue_queues({"cq-a": 16}, {"team-a": "cq-a"})
    again = backend.dispatch_prepare(
        job_id="job-e", submission=1, spec=JobSpec(command=("t",)), gated=False
    )
    assert tags.KUEUE_QUEUE not in again.mapping("TrainJob")["metadata"]["labels"]
    emulator.kueue_uninstall()
    assert (
        tags.KUEUE_QUEUE
        not in backend.dispatch_prepare(
            job_id="job-f", submission=1, spec=JobSpec(command=("t",)), gated=False
        ).mapping("TrainJob")["metadata"]["labels"]
    )
