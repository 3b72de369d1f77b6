"""Live tier: on the real control plane (``start-kube.sh`` with Trainer v2.2 and Kueue
v0.17.0, its queues install.py's ``kueue_setup``: LocalQueues ``team-a`` and ``team-b``,
WorkloadPriorityClasses ``low`` and ``high``), a queue or priority class that does not
exist is refused by ``dispatch_check`` naming what exists, and a user's label reaches the
pods the Trainer, JobSet and Job controllers create (S-30, S-36)."""

from __future__ import annotations

import pytest
from dispatch import BadInput, JobSpec, Phase, Resources
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.observe import submit, until

pytestmark = pytest.mark.live(server="kubeflow")

IMAGE = "registry.example/acme/train:1.4"


def test_live_check_refuses_a_missing_queue_and_priority_naming_what_exists_S36(
    live_backend: KubeflowBackend, live: LiveDriver
) -> None:
    assert "kueue" in live.plane.versions, f"no Kueue on this plane ({live.plane.versions})"
    with pytest.raises(BadInput) as refused:
        live_backend.dispatch_check(spec=JobSpec(command=("t",), options={"queue": "team-x"}))
    assert (
        "-o queue='team-x': no Kueue LocalQueue of that name in namespace "
        f"{live.namespace!r} (it has: team-a, team-b)"
    ) in str(refused.value)
    spec = JobSpec(command=("t",), options={"queue": "team-a", "priority": "urgent"})
    with pytest.raises(BadInput) as refused:
        live_backend.dispatch_check(spec=spec)
    assert "-o priority='urgent': no Kueue WorkloadPriorityClass of that name" in str(refused.value)
    assert "high (10000)" in str(refused.value) and "low (100)" in str(refused.value)
    for queue, priority in (("team-a", "low"), ("team-b", "high")):
        live_backend.dispatch_check(
            spec=JobSpec(command=("t",), options={"queue": queue, "priority": priority})
        )


def test_live_a_user_label_reaches_the_pods_and_the_annotation_the_trainjob(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    spec = JobSpec(
        name="labelled",
        command=("torchrun", "train.py"),
        resources=Resources(nodes=2),
        options={
            "image": IMAGE,
            "label": "team=ml,acme.io/cost-center=42",
            "annotation": "owner=alice",
        },
    )
    live_backend.dispatch_validate(spec=spec)
    name = submit(live_backend, job_id, spec)
    until(live_backend, job_id, "running", lambda o: o.phase is Phase.RUNNING, live=live)
    pods = live.wait("both pods", lambda: p if len(p := live.pods(name)) >= 2 else None)
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels.get("team") == "ml" and labels.get("acme.io/cost-center") == "42", labels
    trainjob = live.trainjob(name)
    assert trainjob["metadata"]["labels"]["team"] == "ml"
    assert trainjob["metadata"]["annotations"]["owner"] == "alice"
