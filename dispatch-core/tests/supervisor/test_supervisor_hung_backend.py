"""A backend whose discovery never returns does not hold up the others (S-5, S-50): the
tick waits for each backend's discovery up to ``discovery_timeout``, treats one that has
not answered as unreachable for that tick, never asks it again while its call still runs,
and uses the answer at a later tick once it comes.

The hung discovery blocks on an event the test sets; the supervisor's clock is the
simulated scheduler's, moved by hand. Nothing here measures time: the deadline only has to
be long enough for an in-memory discovery to answer."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta

import pytest
from core_bench import policy
from dispatch import Discovery, JobSpec, Registry, State, hookimpl
from dispatch.core.interventions import cancel
from dispatch.job_records import append_request, create_job, load_job
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

SPEC = JobSpec(command=("python", "train.py"))
DEADLINE = timedelta(seconds=3)


class Hanging(SimulatedBackend):
    """The simulated backend, whose discovery waits for ``released`` once ``hang`` is set
    (as a third-party adapter with no timeout of its own would wait for a frozen server)."""

    def __init__(self, scheduler: SimScheduler, name: str) -> None:
        super().__init__(scheduler, name=name)
        self.hang = False
        self.released = threading.Event()
        self.calls = 0

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        self.calls += 1
        answer = super().dispatch_discover(job_ids)  # what the scheduler showed when asked
        if self.hang:
            self.released.wait()
        return answer


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.good_sched = SimScheduler()
        self.hung_sched = SimScheduler(clock=self.good_sched.clock)
        self.good = Hanging(self.good_sched, "good")
        self.hung = Hanging(self.hung_sched, "hung")
        self.registry = Registry.from_plugins({"good": self.good, "hung": self.hung})
        self.sup = Supervisor(
            store,
            self.registry,
            owner="sup",
            clock=self.good_sched.now,
            discovery_timeout=DEADLINE,
        )

    def job(self, backend: str, job_id: str) -> str:
        job = create_job(
            self.store,
            self.registry,
            backend=backend,
            spec=SPEC,
            policy=policy(),
            job_id=job_id,
            now=self.good_sched.now(),
        )
        sched = self.good_sched if backend == "good" else self.hung_sched
        sched.plan(job, 1, runs_forever())
        return job

    def objects(self, sched: SimScheduler, job_id: str) -> list[object]:
        return [o for o in sched.objects() if o.tags[SimScheduler.TAG_JOB] == job_id]

    def advance(self, seconds: float) -> None:
        self.good_sched.advance(seconds)


@pytest.fixture
def rig(store: RecordStore) -> Iterator[Rig]:
    made = Rig(store)
    try:
        yield made
    finally:
        made.hung.released.set()  # the daemon thread a failed test left waiting ends


def test_a_hung_discovery_never_holds_up_another_backends_jobs_S5_S50(rig: Rig) -> None:
    hung_job = rig.job("hung", "a-hung")
    good_job = rig.job("good", "b-good")
    rig.hung.hang = True
    version = load_job(rig.store, hung_job).version

    report = rig.sup.tick()
    assert len(rig.objects(rig.good_sched, good_job)) == 1  # decided within the tick
    assert report.discovery_calls == {"good": 1}
    assert "no answer within 3 s" in report.unreachable["hung"]
    assert rig.objects(rig.hung_sched, hung_job) == []  # left alone, nothing recorded
    assert load_job(rig.store, hung_job).version == version

    rig.advance(0.5)  # inside the back-off: not waited for, not asked again
    report = rig.sup.tick()
    assert "no answer within 3 s" in report.unreachable["hung"]
    rig.advance(1)  # after it: waited for again, still without a second call
    report = rig.sup.tick()
    assert "no answer within 3 s" in report.unreachable["hung"]
    assert rig.hung.calls == 1
    assert rig.good.calls == 3  # the healthy backend asked every tick
    assert load_job(rig.store, hung_job).version == version

    rig.hung.released.set()
    rig.advance(2.5)  # past the back-off again; the answer is 4 s old, still fresh
    report = rig.sup.tick()
    assert "hung" not in report.unreachable
    assert report.discovery_calls == {"good": 1, "hung": 1}
    assert rig.hung.calls == 1  # the late answer was used, not a new call
    assert len(rig.objects(rig.hung_sched, hung_job)) == 1  # submitted on it

    rig.advance(1)
    report = rig.sup.tick()
    assert report.unreachable == {} and rig.hung.calls == 2  # asked as usual again
    assert load_job(rig.store, hung_job).current is not None


def test_a_late_answer_never_decides_a_job_whose_record_moved_since_S5(rig: Rig) -> None:
    """The late answer was taken before the cancel was recorded: the cancelled job waits
    for an answer asked after it, while the job whose record did not move is decided."""
    kept = rig.job("hung", "a-kept")
    cancelled = rig.job("hung", "b-cancelled")
    rig.hung.hang = True
    assert "hung" in rig.sup.tick().unreachable

    folded = load_job(rig.store, cancelled)
    append_request(rig.store, folded, cancel(folded, actor="ann", now=rig.good_sched.now()))
    rig.hung.released.set()
    rig.advance(2)
    report = rig.sup.tick()
    assert "hung" not in report.unreachable and rig.hung.calls == 1
    assert len(rig.objects(rig.hung_sched, kept)) == 1
    assert load_job(rig.store, cancelled).outcome is None  # not decided on the old answer

    rig.advance(1)
    rig.sup.tick()  # asked afresh: the cancel is carried out on what it shows
    assert rig.hung.calls == 2
    outcome = load_job(rig.store, cancelled).outcome
    assert outcome is not None and outcome.state is State.CANCELLED


def test_an_answer_older_than_half_the_lease_is_not_used_S5(rig: Rig) -> None:
    """A discovery that answers after the margin every decision is acted on within is
    dropped; the job is decided only on one asked afresh."""
    job = rig.job("hung", "a-job")
    rig.hung.hang = True
    assert "hung" in rig.sup.tick().unreachable
    rig.hung.released.set()
    rig.advance(rig.sup.effect_window.total_seconds() + 1)
    for _ in range(2):  # dropped at the tick's start (asked afresh) or during its wait
        if rig.objects(rig.hung_sched, job):
            break
        rig.sup.tick()
        rig.advance(1)
    assert rig.hung.calls == 2
    assert len(rig.objects(rig.hung_sched, job)) == 1
