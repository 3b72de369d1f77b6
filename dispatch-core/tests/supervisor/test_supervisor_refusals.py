"""A job its backend cannot run never sits pending for ever: what the
declarations refuse is refused before anything is recorded, and any submit error but
``Unreachable`` becomes a recorded, visible failed submission in the backend's words."""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_bench import policy
from core_plugins import Recording
from dispatch import BadInput, JobSpec, Registry, Resources, State, hookimpl
from dispatch.job_records import create_job, status_of
from dispatch.model.spec import JobSpec as Spec
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend


@pytest.mark.parametrize(
    ("resources", "words"),
    [
        (Resources(time_limit=timedelta(minutes=5)), "resources.time_limit=0:05:00 needs the "),
        (Resources(gpus_per_node=1), "resources.gpus_per_node=1 needs the 'gpus' capability"),
        (Resources(nodes=2), "resources.nodes=2 needs the 'multi-node' capability"),
    ],
)
def test_a_capability_the_backend_lacks_is_refused_before_anything_is_recorded_S36(
    store: RecordStore, resources: Resources, words: str
) -> None:
    registry = Registry.from_plugins({"alpha": Recording()})  # declares gating only
    spec = JobSpec(command=("train",), resources=resources)
    with pytest.raises(BadInput) as refused:
        create_job(store, registry, backend="alpha", spec=spec, policy=policy())
    assert words in str(refused.value)
    assert "backend 'alpha' cannot run this job" in str(refused.value)
    assert store.jobs() == []  # nothing recorded


class Picky(SimulatedBackend):
    """Refuses every submit with an error other than SubmitRefused, as a third party's
    first adapter might (``raise BadInput``), or with a bug."""

    def __init__(self, scheduler: SimScheduler, error: Exception) -> None:
        super().__init__(scheduler, name="picky")
        self.error = error
        self.submits = 0

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: Spec, gated: bool) -> str:
        self.submits += 1
        raise self.error


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (BadInput("atq cannot do: gpus"), "atq cannot do: gpus"),
        (KeyError("queue"), "backend 'picky': dispatch_submit raised KeyError: 'queue'"),
    ],
)
def test_a_submit_error_is_a_recorded_failed_submission_never_an_endless_retry(
    store: RecordStore, error: Exception, words: str
) -> None:
    sched = SimScheduler()
    backend = Picky(sched, error)
    registry = Registry.from_plugins({"picky": backend})
    job = create_job(
        store,
        registry,
        backend="picky",
        spec=JobSpec(command=("train",)),
        policy=policy(),
        now=sched.now(),
    )
    sup = Supervisor(store, registry, owner="sup", clock=sched.now)
    for _ in range(4):
        sup.tick()
        sched.advance(30)
    status = status_of(store, registry, job)
    assert (status.state, status.settled) == (State.FAILED, True)
    assert status.cause is not None and status.cause.kind.value == "launch-failed"
    assert words in status.cause.detail
    assert backend.submits == 1  # refused once, recorded, not asked again
