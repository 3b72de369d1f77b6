"""The submission's own TrainingRuntime and the warning it carries (S-45): pure, the
manifests as submit builds them. What the real controllers do with them is the live tier's
(test_kubeflow_live_*.py; docs/controllers.md F-1..F-7)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dispatch import JobSpec, Resources, SubmitRefused
from dispatch.core.warning import EndWarning
from dispatch_kubeflow import tags
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow.manifest import build_trainjob, runtime_copy

SOURCE: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {
        "name": "torch-distributed",
        "labels": {"trainer.kubeflow.org/framework": "torch"},
        "uid": "source-uid",
        "resourceVersion": "7",
    },
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": "node", "image": "pytorch:2"}]}
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}
SPEC = JobSpec(name="train", command=("torchrun", "train.py"), resources=Resources(nodes=2))


def copied(spec: JobSpec = SPEC) -> dict[str, Any]:
    return runtime_copy(
        SOURCE, name="train-abc-1", namespace="research", job_id="job-7", submission=1, spec=spec
    )


def job_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    rj = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    spec: dict[str, Any] = rj["template"]["spec"]
    return spec


def test_copy_turns_kubernetes_retries_off() -> None:
    """dispatch owns recovery: the pods never restart in place, the Job never replaces a
    pod, and its failure names the exit code or the disruption."""
    rt = copied()
    assert rt["kind"] == "TrainingRuntime"
    assert rt["metadata"]["name"] == "train-abc-1" and rt["metadata"]["namespace"] == "research"
    js = job_spec(rt)
    assert js["backoffLimit"] == 0
    assert js["template"]["spec"]["restartPolicy"] == "Never"
    rules = js["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "FailJob",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert rules[1]["onExitCodes"] == {"operator": "NotIn", "values": [0]}
    assert "terminationGracePeriodSeconds" not in js["template"]["spec"]
    assert "lifecycle" not in js["template"]["spec"]["containers"][0]


def test_copy_keeps_the_source_and_is_tagged() -> None:
    rt = copied()
    assert rt["spec"]["mlPolicy"] == SOURCE["spec"]["mlPolicy"]
    assert rt["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert rt["metadata"]["labels"][tags.JOB] == "job-7"
    assert rt["metadata"]["annotations"][tags.RUNTIME] == "ClusterTrainingRuntime/torch-distributed"
    assert "uid" not in rt["metadata"] and "resourceVersion" not in rt["metadata"]
    # the source itself is untouched
    assert "backoffLimit" not in job_spec(SOURCE)


def test_warning_is_the_grace_period_and_a_prestop_that_signals_the_program() -> None:
    """S-45: USR1@90s: the kubelet runs the hook at the deletion (preemption, eviction,
    deadline, stop), which signals the container's main process and sleeps out the
    warning; SIGTERM then SIGKILL come at the end of the 90 s grace."""
    spec = SPEC.model_copy(update={"warn": EndWarning(signal="USR1", before=timedelta(seconds=90))})
    pod = job_spec(copied(spec))["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 90
    hook = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == ["/bin/sh", "-c", "kill -s USR1 1; sleep 90"]


def test_sigterm_warning_needs_no_hook() -> None:
    spec = SPEC.model_copy(update={"warn": EndWarning(signal="TERM", before=timedelta(minutes=2))})
    pod = job_spec(copied(spec))["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    assert "lifecycle" not in pod["containers"][0]


def test_trainjob_refers_to_its_copy() -> None:
    tj = build_trainjob(
        KubeflowConfig(),
        namespace="research",
        job_id="job-7",
        submission=1,
        spec=SPEC,
        gated=False,
        replicated_jobs=["node"],
    )
    assert tj["spec"]["runtimeRef"] == {
        "name": tj["metadata"]["name"],
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
    }
    assert tj["metadata"]["annotations"][tags.RUNTIME] == "ClusterTrainingRuntime/torch-distributed"


def test_without_the_copy_the_runtime_is_referred_to_as_configured() -> None:
    tj = build_trainjob(
        KubeflowConfig(runtime_copy=False),
        namespace="research",
        job_id="job-7",
        submission=1,
        spec=SPEC,
        gated=False,
        replicated_jobs=["node"],
    )
    assert tj["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert tj["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert tags.RUNTIME not in tj["metadata"]["annotations"]


@pytest.mark.parametrize("version", [(2, 0), (2, 1), (2, 2)])
def test_copy_is_the_same_for_every_trainer_version(version: tuple[int, int]) -> None:
    """TrainingRuntime (namespaced, a full JobSet template) is in every Trainer 2.x: the
    copy and the runtimeRef do not depend on the tagging scheme."""
    tj = build_trainjob(
        KubeflowConfig(trainer_version=version),
        namespace="research",
        job_id="job-7",
        submission=1,
        spec=SPEC,
        gated=False,
        replicated_jobs=["node"],
    )
    assert tj["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"


def test_deadline_is_the_limit_less_the_warning() -> None:
    """S-45: the Trainer deletes the pods at activeDeadlineSeconds; their grace period is
    the warning, so the kill lands at the time limit."""
    spec = SPEC.model_copy(
        update={
            "resources": Resources(nodes=2, time_limit=timedelta(hours=1)),
            "warn": EndWarning(signal="USR1", before=timedelta(seconds=90)),
        }
    )
    tj = build_trainjob(
        KubeflowConfig(),
        namespace="research",
        job_id="job-7",
        submission=1,
        spec=spec,
        gated=False,
        replicated_jobs=["node"],
    )
    assert tj["spec"]["activeDeadlineSeconds"] == 3600 - 90
    no_warning = spec.model_copy(update={"warn": None})
    tj = build_trainjob(
        KubeflowConfig(),
        namespace="research",
        job_id="job-7",
        submission=1,
        spec=no_warning,
        gated=False,
        replicated_jobs=["node"],
    )
    assert tj["spec"]["activeDeadlineSeconds"] == 3600


def test_warning_without_the_copy_is_refused() -> None:
    spec = SPEC.model_copy(update={"warn": EndWarning(signal="USR1", before=timedelta(seconds=90))})
    with pytest.raises(SubmitRefused, match="RUNTIME_COPY=0"):
        build_trainjob(
            KubeflowConfig(runtime_copy=False),
            namespace="research",
            job_id="job-7",
            submission=1,
            spec=spec,
            gated=False,
            replicated_jobs=["node"],
        )


def test_runtime_copy_setting_is_read_from_the_environment() -> None:
    assert KubeflowConfig.from_env({}).runtime_copy is True
    assert KubeflowConfig.from_env({"DISPATCH_KUBEFLOW_RUNTIME_COPY": "0"}).runtime_copy is False
