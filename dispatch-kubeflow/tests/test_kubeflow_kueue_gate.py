"""S-28 under Kueue in a namespace that has a LocalQueue named ``default``: Kueue's TrainJob
webhook (v0.17.0, LocalQueueDefaulting) gives every TrainJob created without a queue
label that queue, so a gated TrainJob kept out of Kueue by leaving the label off would be
admitted and resumed before its gate opens. A gated TrainJob names a prebuilt Workload
that does not exist instead: Kueue makes no Workload for it and admits nothing until
the gate opens. The emulator's Kueue does the webhook's defaulting and honours the
prebuilt-workload label as Kueue v0.17.0 does; test_kubeflow_live_kueue_gate.py shows
the same on the real Kueue."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.errors import ApiRefused
from dispatch_kubeflow_testing.emulator import Emulator

SPEC = JobSpec(
    name="llama-ft",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=2, gpus_per_node=8),
    options={"image": "ghcr.io/acme/train:1.4"},
)
CANCEL = Cause(
    kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="ana", detail="replaced"
)


def name_of(object_id: str) -> str:
    return tags.split_object_id(object_id)[1]


def live_pods(emulator: Emulator, name: str) -> list[str]:
    """The pods of TrainJob ``name`` that run or may still run (not ended)."""
    return [
        p["metadata"]["name"]
        for p in emulator.pods(name)
        if p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


@pytest.fixture
def default_queue(emulator: Emulator) -> None:
    """Quota for both submissions at once, so only the gate can keep the second out."""
    emulator.kueue_queues({"cq-a": 64}, {"default": "cq-a"})


@pytest.mark.usefixtures("default_queue")
def test_emulated_kueue_gives_a_trainjob_without_a_queue_label_the_default_queue(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """The hazard, as Kueue v0.17.0 does it: a TrainJob gated by ``suspend`` alone,
    without the queue label, gets the LocalQueue ``default``, and Kueue admits and resumes
    it although dispatch's gate is closed."""
    prepared = backend.dispatch_prepare("job-h", 1, SPEC, True)
    labels = prepared.mapping("TrainJob")["metadata"]["labels"]
    labels.pop(tags.KUEUE_QUEUE)
    labels.pop(tags.KUEUE_PREBUILT)
    name = name_of(backend.dispatch_send(prepared))
    tj = emulator.trainjob(name)
    assert tj["metadata"]["labels"][tags.KUEUE_QUEUE] == "default"
    assert tj["metadata"]["annotations"][tags.GATE] == "closed"
    emulator.settle()
    assert emulator.trainjob(name)["spec"]["suspend"] is False
    assert emulator.is_running(name)


@pytest.mark.usefixtures("default_queue")
def test_gated_replacement_never_runs_beside_the_first_under_a_default_queue_S28(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-28: submission 1 runs in the LocalQueue ``default`` (no queue chosen);
    submission 2 is created gated: it carries that queue and a prebuilt Workload nobody
    makes, so Kueue makes no Workload for it, it stays suspended with no pod, gated.
    After submission 1 is stopped and gone, opening the gate lets Kueue admit it and it
    runs. At no step do both have pods."""
    first = backend.dispatch_submit(job_id="job-r", submission=1, spec=SPEC, gated=False)
    emulator.settle()
    assert emulator.is_running(name_of(first))
    second = backend.dispatch_submit(job_id="job-r", submission=2, spec=SPEC, gated=True)
    one, two = name_of(first), name_of(second)
    labels = emulator.trainjob(two)["metadata"]["labels"]
    assert labels[tags.KUEUE_QUEUE] == "default"
    assert labels[tags.KUEUE_PREBUILT] == f"{two}-gated"

    def never_both() -> None:
        assert not (live_pods(emulator, one) and live_pods(emulator, two))

    for _ in range(10):
        emulator.advance()
        never_both()
        assert live_pods(emulator, two) == []
        assert emulator.trainjob(two)["spec"]["suspend"] is True
        with pytest.raises(LookupError):
            emulator.workload(two)
    phases = {o.submission: o.phase for o in backend.dispatch_discover(["job-r"]).objects}
    assert phases == {1: Phase.RUNNING, 2: Phase.GATED}
    backend.dispatch_stop(object_id=first, cause=CANCEL)
    for _ in range(200):
        never_both()
        if {o.submission for o in backend.dispatch_discover(["job-r"]).objects} == {2}:
            break
        emulator.advance()
    else:
        pytest.fail("submission 1 never went away")
    backend.dispatch_open_gate(object_id=second)
    for _ in range(20):
        never_both()
        emulator.advance()
    assert emulator.is_running(two)
    assert emulator.workload(two)["spec"]["queueName"] == "default"
    assert tags.KUEUE_PREBUILT not in emulator.trainjob(two)["metadata"]["labels"]
    phases = {o.submission: o.phase for o in backend.dispatch_discover(["job-r"]).objects}
    assert phases == {2: Phase.RUNNING}


def test_a_default_queue_made_after_the_prepare_still_cannot_take_a_gated_trainjob_S28(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator
) -> None:
    """S-28: the LocalQueue ``default`` appears between the prepare (which saw none, so
    the TrainJob names no queue) and the create: Kueue's webhook gives it that queue, and
    the prebuilt Workload's name still holds it. Opening the gate sees the queue on the
    TrainJob and leaves suspend to Kueue, which admits it."""
    backend = make_backend()
    prepared = backend.dispatch_prepare("job-l", 1, SPEC, True)
    assert tags.KUEUE_QUEUE not in prepared.mapping("TrainJob")["metadata"]["labels"]
    emulator.kueue_queues({"cq-a": 64}, {"default": "cq-a"})
    object_id = backend.dispatch_send(prepared)
    name = name_of(object_id)
    assert emulator.trainjob(name)["metadata"]["labels"][tags.KUEUE_QUEUE] == "default"
    emulator.settle()
    assert emulator.pods(name) == [] and emulator.trainjob(name)["spec"]["suspend"] is True
    patches = len([r for r in emulator.log.entries if r.verb == "patch"])
    backend.dispatch_open_gate(object_id=object_id)
    patch = [r for r in emulator.log.entries if r.verb == "patch"][patches]
    assert "spec" not in patch.body
    emulator.settle()
    assert emulator.is_running(name)


@pytest.mark.parametrize("kueue", [True, False])
def test_without_a_queue_the_gate_is_suspend_and_the_prebuilt_name_stays(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator, kueue: bool
) -> None:
    """No queue (none chosen, no LocalQueue ``default``), with Kueue or without: Kueue
    leaves the TrainJob alone and ``suspend`` is the gate. Opening it resumes the TrainJob
    and keeps the prebuilt-workload label, which Kueue's webhook refuses to change on a
    TrainJob that is not suspended (as the live tier showed)."""
    if not kueue:
        emulator.kueue_uninstall()
    backend = make_backend()
    object_id = backend.dispatch_submit(job_id="job-n", submission=1, spec=SPEC, gated=True)
    name = name_of(object_id)
    emulator.settle()
    assert emulator.pods(name) == []
    backend.dispatch_open_gate(object_id=object_id)
    emulator.settle()
    tj = emulator.trainjob(name)
    assert tj["spec"]["suspend"] is False
    assert tj["metadata"]["labels"][tags.KUEUE_PREBUILT] == f"{name}-gated"
    assert emulator.is_running(name)


def test_emulated_kueue_webhook_keeps_the_prebuilt_name_of_a_running_trainjob(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """Kueue v0.17.0's webhook: the prebuilt-workload label cannot change in the update
    that resumes a TrainJob (403, the live tier's words)."""
    name = name_of(backend.dispatch_submit(job_id="job-i", submission=1, spec=SPEC, gated=True))
    patch = {"metadata": {"labels": {tags.KUEUE_PREBUILT: None}}, "spec": {"suspend": False}}
    with pytest.raises(ApiRefused, match="field is immutable") as refused:
        backend.kube.patch_trainjob("default", name, patch)
    assert refused.value.status == 403
    assert emulator.trainjob(name)["spec"]["suspend"] is True
