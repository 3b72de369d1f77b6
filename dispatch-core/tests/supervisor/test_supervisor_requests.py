"""Requests are idempotent and survive a racing supervisor: a resubmit or
give-up names the hold it resolves, so a late one resolves nothing else; a request whose
append meets a supervisor's is made again on the new record instead of failing."""

from __future__ import annotations

import pytest
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, NotAllowed, Registry, State
from dispatch.core.interventions import (
    HoldResolvedMeanwhile,
    cancel,
    current_hold,
    give_up,
    resubmit,
)
from dispatch.job_records import create_job, load_job, request, status_of
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import exit_with, runs_forever

EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.sched = SimScheduler()
        self.registry = Registry.from_plugins({"simulated": SimulatedBackend(self.sched)})
        self.sup = Supervisor(store, self.registry, owner="sup", clock=self.sched.now)

    def held_job(self) -> str:
        job = create_job(
            self.store,
            self.registry,
            backend="simulated",
            spec=JobSpec(command=("train",)),
            policy=policy(EXIT_HOLD),
            now=self.sched.now(),
        )
        for number in (1, 2):
            self.sched.plan(job, number, exit_with(1, after=1))
        self.settle()
        return job

    def settle(self) -> None:
        for _ in range(3):
            self.sup.tick()
            self.sched.advance(2)

    def events(self, job: str) -> list[str]:
        return [e.type for e in self.store.read(job)]


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    return Rig(store)


def test_a_late_resubmit_never_resolves_the_next_hold(rig: Rig) -> None:
    job = rig.held_job()
    seen = current_hold(load_job(rig.store, job))  # both people look at hold H1
    assert seen is not None
    first = request(
        rig.store, job, lambda j: resubmit(j, actor="ann", now=rig.sched.now(), hold=seen)
    )
    assert first.hold is None
    rig.settle()  # submission 2 fails as well: a new hold H2
    held_again = load_job(rig.store, job)
    assert held_again.hold is not None and current_hold(held_again) != seen
    with pytest.raises(HoldResolvedMeanwhile) as late:
        request(rig.store, job, lambda j: resubmit(j, actor="bob", now=rig.sched.now(), hold=seen))
    assert f"the hold placed at seq {seen}" in str(late.value)
    assert "already resolved (resubmit) by ann" in str(late.value)
    assert rig.events(job).count("hold-resolved") == 1  # H2 left for a person to decide
    assert status_of(rig.store, rig.registry, job).state is State.HELD


def test_a_late_give_up_after_a_resubmit_does_nothing(rig: Rig) -> None:
    job = rig.held_job()
    seen = current_hold(load_job(rig.store, job))
    request(rig.store, job, lambda j: resubmit(j, actor="ann", now=rig.sched.now(), hold=seen))
    with pytest.raises(NotAllowed):
        request(rig.store, job, lambda j: give_up(j, actor="bob", now=rig.sched.now(), hold=seen))
    assert "outcome-committed" not in rig.events(job)


def test_a_request_racing_the_supervisor_is_made_again_not_refused(rig: Rig) -> None:
    job = create_job(
        rig.store,
        rig.registry,
        backend="simulated",
        spec=JobSpec(command=("train",)),
        policy=policy(),
        now=rig.sched.now(),
    )
    rig.sched.plan(job, 1, runs_forever())
    made: list[int] = []

    def cancel_while_the_supervisor_ticks(folded):  # type: ignore[no-untyped-def]
        made.append(folded.version)
        if len(made) == 1:
            rig.sup.tick()  # the supervisor appends between our read and our append
        return cancel(folded, actor="ann", now=rig.sched.now())

    done = request(rig.store, job, cancel_while_the_supervisor_ticks)
    assert done.cancel is not None
    assert made[1] > made[0]  # made again on the record as the supervisor left it
    rig.settle()
    assert status_of(rig.store, rig.registry, job).state is State.CANCELLED
