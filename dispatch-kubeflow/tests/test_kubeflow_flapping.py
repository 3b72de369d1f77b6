"""A flapping API server, over real HTTP to the emulated cluster: the client honours
``Retry-After`` up to a bound, a hung server costs one timeout and then short probes, an
error answer is never taken for an ending, and a short flapping campaign under a real
``dispatch supervise`` process ends every job as it would have (S-5)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dispatch import Cause, CauseKind, JobSpec, Provenance, Resources, Unreachable
from dispatch_kubeflow import kube
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.kube import MAX_RETRY_AFTER
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.flapping import Campaign, Plan

SPEC = JobSpec(
    name="flap",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=1, gpus_per_node=8),
    options={"image": "ghcr.io/acme/train:1.4"},
)
CANCEL = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="ana", detail="")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clocked(make_backend: Callable[..., KubeflowBackend]) -> tuple[KubeflowBackend, Clock]:
    backend = make_backend(read_timeout=0.5, retries=0)
    clock = Clock()
    backend.kube.clock = clock
    return backend, clock


@pytest.mark.parametrize("kind", ["429", "503"])
def test_retry_after_is_honoured_calls_between_fail_at_once_S5(
    clocked: tuple[KubeflowBackend, Clock], emulator: Emulator, kind: str
) -> None:
    """S-5: after a 429/503 with Retry-After, the API server is not asked again before
    the time it gave; the calls between are Unreachable at once, with its words and since
    when; then it is asked again."""
    backend, clock = clocked
    emulator.misbehave(kind, retry_after=30)
    with pytest.raises(Unreachable, match=r"please try again later.*not asked again for 30 s"):
        backend.dispatch_discover(job_ids=["job-1"])
    assert emulator.faults.answered == 1
    clock.now += 29
    for call in (
        lambda: backend.dispatch_discover(job_ids=["job-1"]),
        lambda: backend.dispatch_submit(job_id="job-1", submission=1, spec=SPEC, gated=False),
        lambda: backend.dispatch_stop(object_id="default/flap-x", cause=CANCEL),
    ):
        with pytest.raises(Unreachable, match=r"unreachable since .*for another 1 s"):
            call()
    assert emulator.faults.answered == 1 and emulator.names() == []
    emulator.behave()
    clock.now += 1.5
    assert backend.dispatch_discover(job_ids=["job-1"]).objects == ()


def test_a_retry_after_beyond_the_bound_is_honoured_up_to_it_S5(
    clocked: tuple[KubeflowBackend, Clock], emulator: Emulator
) -> None:
    backend, clock = clocked
    emulator.misbehave("429", retry_after=86400)
    with pytest.raises(Unreachable, match=f"not asked again for {MAX_RETRY_AFTER:.0f} s"):
        backend.dispatch_discover(job_ids=["job-1"])
    clock.now += MAX_RETRY_AFTER + 0.1
    with pytest.raises(Unreachable, match="please try again later"):
        backend.dispatch_discover(job_ids=["job-1"])
    assert emulator.faults.answered == 2


def test_errors_without_retry_after_and_refusals_are_asked_again_at_once(
    clocked: tuple[KubeflowBackend, Clock], emulator: Emulator
) -> None:
    backend, _ = clocked
    emulator.misbehave("500")
    for _ in range(3):
        with pytest.raises(Unreachable, match="etcdserver: request timed out"):
            backend.dispatch_discover(job_ids=["job-1"])
    assert emulator.faults.answered == 3
    emulator.misbehave("refuse")
    with pytest.raises(Unreachable, match="Connection refused") as refused:
        backend.dispatch_discover(job_ids=["job-1"])
    assert "Max retries" not in str(refused.value)  # urllib3's wrapper and URL left out
    emulator.behave()
    assert backend.dispatch_discover(job_ids=["job-1"]).objects == ()


def test_after_a_timeout_calls_are_short_probes_and_a_server_back_is_used_at_once_S5(
    make_backend: Callable[..., KubeflowBackend],
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S-5: once a call timed out, the next calls are still sent (a server that is back
    must be used at once: a `status` right after a blip answers) but wait only
    PROBE_TIMEOUT for an answer, so a hung server costs one full timeout, then short ones;
    the first answer ends the outage."""
    monkeypatch.setattr(kube, "PROBE_TIMEOUT", 0.2)
    backend = make_backend(read_timeout=1.0, retries=0)
    object_id = backend.dispatch_submit(job_id="job-h", submission=1, spec=SPEC, gated=False)
    emulator.misbehave("hang")
    with pytest.raises(Unreachable, match=r"did not answer .* within 1 s.*wait 0\.2 s for an"):
        backend.dispatch_discover(job_ids=["job-h"])
    assert emulator.faults.held == 1
    for sent in range(2, 5):
        with pytest.raises(Unreachable, match=r"did not answer .* within 0\.2 s"):
            backend.dispatch_stop(object_id=object_id, cause=CANCEL)
        assert emulator.faults.held == sent, "a probe was not sent"
    assert backend.kube.outage is not None and backend.kube.outage.timed_out
    emulator.behave()
    assert [v.object_id for v in backend.dispatch_discover(job_ids=["job-h"]).objects] == [
        object_id
    ]
    assert backend.kube.outage is None, "the answer did not end the outage"


@pytest.mark.parametrize("resource", ["trainjobs", "jobsets", "jobs", "pods", "nodes"])
@pytest.mark.parametrize("code", [500, 429, 503])
def test_an_error_answer_on_any_listing_is_no_discovery_never_an_ending_S5(
    backend: KubeflowBackend, emulator: Emulator, resource: str, code: int
) -> None:
    """S-5: a listing answered with an error makes the whole discovery Unreachable: never
    a view without its pods, nodes or TrainJob, which would read as an ending."""
    backend.dispatch_submit(job_id="job-e", submission=1, spec=SPEC, gated=False)
    emulator.inject(code, "Failing", "the apiserver is failing", resource=resource)
    with pytest.raises(Unreachable, match="the apiserver is failing"):
        backend.dispatch_discover(job_ids=["job-e"])
    (view,) = backend.dispatch_discover(job_ids=["job-e"]).objects
    assert view.phase.value == "running"


def test_a_short_flapping_campaign_breaks_nothing_S5() -> None:
    """S-5: TrainJobs under a real ``dispatch supervise`` while the API server refuses,
    hangs, answers 500 and 429 in turns: no recovery, no cause changed, no event lost,
    every job succeeded with one TrainJob, status during each outage shows the record and
    the API server's words and exits 3. (benchmarks/kube_flapping.py runs the full one.)"""
    plan = Plan(jobs=6, flaps=4, span=24.0, down=3.0, job_seconds=(4.0, 30.0), read_timeout=2.0)
    campaign = Campaign(plan)
    try:
        result = campaign.run()
    finally:
        campaign.cancel()
    assert result.broke == 0, f"{result.table()}\n{result.details}"
    tried = {str(r["what"]): int(str(r["tried"])) for r in result.rows}
    assert tried["jobs: no recovery"] == 6
    assert all(tried[k] == 1 for k in tried if k.startswith("flap:"))
    campaign.remove()
