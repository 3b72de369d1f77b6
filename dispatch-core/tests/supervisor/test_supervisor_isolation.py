"""One backend's failure never stops another backend's jobs or another job's effects, and
the error names the backend and the hook (S-50: one error boundary per
backend). Two simulated schedulers in one tick, one of them raising what no hook spec
documents."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from core_bench import policy
from dispatch import (
    Cause,
    CauseKind,
    Discovery,
    JobSpec,
    Provenance,
    Registry,
    State,
    Unreachable,
    hookimpl,
)
from dispatch.core.interventions import cancel
from dispatch.job_records import append_request, create_job, load_job, status_of
from dispatch.model.errors import BackendFailed
from dispatch.model.spec import JobSpec as Spec
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

SPEC = JobSpec(command=("python", "train.py"))


class Faulty(SimulatedBackend):
    """The simulated backend, with a bug in the hooks named in ``failing``."""

    def __init__(self, scheduler: SimScheduler, name: str) -> None:
        super().__init__(scheduler, name=name)
        self.failing: set[str] = set()

    def _maybe_fail(self, hook: str) -> None:
        if hook in self.failing:
            raise KeyError(f"{hook} of {self.name} hit a bug")

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        self._maybe_fail("dispatch_discover")
        return super().dispatch_discover(job_ids)

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: Spec, gated: bool) -> str:
        self._maybe_fail("dispatch_submit")
        return super().dispatch_submit(job_id, submission, spec, gated)

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        self._maybe_fail("dispatch_stop")
        super().dispatch_stop(object_id, cause)


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.good_sched = SimScheduler()
        self.bad_sched = SimScheduler(clock=self.good_sched.clock)
        self.good = Faulty(self.good_sched, "good")
        self.bad = Faulty(self.bad_sched, "bad")
        self.registry = Registry.from_plugins({"good": self.good, "bad": self.bad})
        self.sup = Supervisor(store, self.registry, owner="sup", clock=self.good_sched.now)

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
        sched = self.good_sched if backend == "good" else self.bad_sched
        sched.plan(job, 1, runs_forever())
        return job

    def objects(self, sched: SimScheduler, job_id: str) -> list:  # type: ignore[type-arg]
        return [o for o in sched.objects() if o.tags[SimScheduler.TAG_JOB] == job_id]


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    return Rig(store)


def test_a_backend_whose_discovery_raises_never_stops_the_other_backends_jobs_S50(
    rig: Rig,
) -> None:
    bad_job, good_job = rig.job("bad", "a-bad"), rig.job("good", "b-good")
    rig.bad.failing.add("dispatch_discover")
    report = rig.sup.tick()
    assert len(rig.objects(rig.good_sched, good_job)) == 1  # submitted all the same
    assert rig.objects(rig.bad_sched, bad_job) == []  # nothing decided without a discovery
    (error,) = report.errors
    assert "backend 'bad'" in error and "dispatch_discover raised KeyError" in error
    rig.bad.failing.clear()
    rig.sup.tick()
    assert len(rig.objects(rig.bad_sched, bad_job)) == 1  # next tick, once it answers


def test_a_stop_that_raises_never_stops_another_jobs_effects_S50(rig: Rig) -> None:
    first = rig.job("bad", "a-first")
    rig.sup.tick()
    second = rig.job("bad", "b-second")  # created later: needs its submit next tick
    folded = load_job(rig.store, first)
    append_request(rig.store, folded, cancel(folded, actor="ann", now=rig.good_sched.now()))
    rig.bad.failing.add("dispatch_stop")
    report = rig.sup.tick()
    assert any(
        f"job {first}" in e and "backend 'bad'" in e and "dispatch_stop raised KeyError" in e
        for e in report.errors
    ), report.errors
    assert len(rig.objects(rig.bad_sched, second)) == 1  # its submit was carried out
    rig.bad.failing.clear()
    rig.sup.tick()
    rig.good_sched.advance(1)
    rig.sup.tick()
    assert status_of(rig.store, rig.registry, first).state is State.CANCELLED


def test_every_hook_call_has_one_error_boundary_naming_backend_and_hook_S50(rig: Rig) -> None:
    backend = rig.registry.get("bad")
    rig.bad.failing.update({"dispatch_discover", "dispatch_submit", "dispatch_stop"})
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    calls = {
        "dispatch_discover": lambda: backend.discover(["j"]),
        "dispatch_submit": lambda: backend.submit("j", 1, SPEC, False),
        "dispatch_stop": lambda: backend.stop("x", cause),
    }
    for hook, call in calls.items():
        with pytest.raises(BackendFailed) as caught:
            call()
        assert (caught.value.backend, caught.value.hook) == ("bad", hook)
        assert f"backend 'bad': {hook} raised KeyError" in str(caught.value)


def test_a_documented_error_passes_the_boundary_as_raised_S50(rig: Rig) -> None:
    with rig.bad_sched.down():
        with pytest.raises(Unreachable):
            rig.registry.get("bad").discover(["j"])
