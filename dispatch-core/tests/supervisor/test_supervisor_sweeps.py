"""Sweeps on the simulated scheduler and a real record: each member its own job, recovered
on its own; ``max_running`` bounds the members alive at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from core_bench import policy
from dispatch import Action, CauseKind, Client, JobSpec, Registry, State
from dispatch.core.interventions import cancel
from dispatch.job_records import append_request, load_group, load_job, status_of
from dispatch.listing import SWEEP_SLOT, list_jobs, waiting_for
from dispatch.model.errors import BadInput
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever, succeed

PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)
TRAIN = JobSpec(command=("python", "train.py", "--lr", "{lr}", "--seed", "{seed}"))


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.sched = SimScheduler()
        self.registry = Registry.from_plugins({"simulated": SimulatedBackend(self.sched)})
        self.store = store
        self.client = Client(store, registry=self.registry, actor="ann")
        self.sup = Supervisor(store, self.registry, owner="sup", clock=self.sched.now)

    def sweep(self, grid: str, max_running: int | None = None) -> list[str]:
        made = self.client.sweep_spec(
            TRAIN,
            grid,
            backend="simulated",
            policy=policy(PREEMPT),
            max_running=max_running,
            start=False,
        )
        return made.job_ids

    def objects(self, job_id: str) -> list:  # type: ignore[type-arg]
        return [o for o in self.sched.objects() if o.tags[SimScheduler.TAG_JOB] == job_id]

    def alive(self) -> int:
        return sum(1 for o in self.sched.objects() if not o.ended)

    def state(self, job_id: str) -> State:
        return status_of(self.store, self.registry, job_id).state


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    return Rig(store)


def test_a_2x4_sweep_is_eight_jobs_with_their_values_in_argv_name_and_environment(
    rig: Rig,
) -> None:
    ids = rig.sweep("lr=[1e-3,3e-4],seed=1..4")
    assert len(ids) == 8 and len({i.rsplit("-", 1)[0] for i in ids}) == 1
    jobs = load_group(rig.store, ids[0].rsplit("-", 1)[0])
    assert [j.job_id for j in jobs] == ids
    assert [j.group.index for j in jobs if j.group] == list(range(8))
    fifth = jobs[5]
    assert fifth.group is not None and fifth.group.values == {"lr": "3e-4", "seed": "2"}
    assert fifth.spec.command == ("python", "train.py", "--lr", "3e-4", "--seed", "2")
    assert fifth.spec.env["DISPATCH_SWEEP_LR"] == "3e-4"
    assert fifth.spec.env["DISPATCH_SWEEP_SEED"] == "2"
    assert fifth.spec.env["DISPATCH_SWEEP_INDEX"] == "5"
    assert fifth.spec.env["DISPATCH_SWEEP_SIZE"] == "8"
    rig.sup.tick()
    (obj,) = rig.objects(ids[5])
    assert obj.spec.command == fifth.spec.command
    assert obj.spec.env["DISPATCH_SWEEP_GROUP"] == fifth.group.id


def test_a_preempted_member_is_recovered_alone(rig: Rig) -> None:
    ids = rig.sweep("lr=[1e-3,3e-4],seed=1..4")
    victim = ids[3]
    for job_id in ids:
        rig.sched.plan(job_id, 1, succeed(after=30) if job_id != victim else runs_forever())
    rig.sched.plan(victim, 2, succeed(after=5))
    rig.sup.tick()
    rig.sched.advance(1)
    (obj,) = rig.objects(victim)
    rig.sched.preempt(obj.object_id)
    for _ in range(40):
        rig.sup.tick()
        rig.sched.advance(1)
    rig.sup.tick()
    for job_id in ids:
        job = load_job(rig.store, job_id)
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job_id
        made = len(job.submissions)
        assert made == (2 if job_id == victim else 1), job_id  # nobody else resubmitted
        assert len(rig.objects(job_id)) == made
        assert job.spent == ({0: 1} if job_id == victim else {}), job_id  # its own budget
    recovered = status_of(rig.store, rig.registry, victim)
    assert [h.event for h in recovered.history] == ["recovery-started", "outcome-committed"]
    assert recovered.history[0].cause is not None
    assert recovered.history[0].cause.kind is CauseKind.PREEMPTED


def _run(rig: Rig, ids: list[str], check: Callable[[], None], ticks: int = 120) -> None:
    for _ in range(ticks):
        rig.sup.tick()
        check()
        if all(load_job(rig.store, j).outcome is not None for j in ids):
            return
        rig.sched.advance(1)
        check()
    raise AssertionError("the sweep did not end within the ticks given")


def test_max_running_2_never_has_more_than_2_objects_alive(rig: Rig) -> None:
    ids = rig.sweep("lr=[1e-3,3e-4],seed=1..4", max_running=2)
    victim = ids[1]
    for index, job_id in enumerate(ids):
        rig.sched.plan(job_id, 1, succeed(after=3 + index % 3))
    rig.sched.plan(victim, 1, runs_forever())
    rig.sched.plan(victim, 2, succeed(after=2))
    peaks: list[int] = []
    submit = rig.sched.submit

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        object_id = submit(*args, **kwargs)
        peaks.append(rig.alive())  # at the moment each object is made
        return object_id

    rig.sched.submit = counted  # type: ignore[method-assign]
    order: list[str] = []

    def check() -> None:
        alive = rig.alive()
        peaks.append(alive)
        assert alive <= 2
        for job_id in ids:
            if job_id not in order and rig.objects(job_id):
                order.append(job_id)

    rig.sup.tick()
    rig.sched.advance(1)
    (obj,) = rig.objects(victim)
    rig.sched.preempt(obj.object_id)  # recovered with the slot it holds
    _run(rig, ids, check)
    assert max(peaks) == 2 and all(p <= 2 for p in peaks)
    assert order == ids  # free slots were filled in member order
    assert len(load_job(rig.store, victim).submissions) == 2
    assert all(load_job(rig.store, j).outcome.state is State.SUCCEEDED for j in ids)  # type: ignore[union-attr]


def test_a_member_waiting_for_a_slot_says_so(rig: Rig) -> None:
    ids = rig.sweep("lr=[1e-3],seed=1..3", max_running=1)
    for job_id in ids:
        rig.sched.plan(job_id, 1, runs_forever())
    rig.sup.tick()
    assert [len(rig.objects(j)) for j in ids] == [1, 0, 0]
    waiting = status_of(rig.store, rig.registry, ids[2])
    assert waiting.state is State.PENDING and waiting_for(waiting) == SWEEP_SLOT
    rows = list_jobs(rig.store, rig.registry, group=ids[0].rsplit("-", 1)[0])
    assert [r.job_id for r in rows.rows] == ids
    assert [r.waiting for r in rows.rows][1:] == [SWEEP_SLOT, SWEEP_SLOT]


def test_a_supervisor_watching_one_member_counts_the_whole_group(rig: Rig) -> None:
    ids = rig.sweep("lr=[1e-3],seed=1..3", max_running=1)
    for job_id in ids:
        rig.sched.plan(job_id, 1, runs_forever())
    rig.sup.tick()
    rig.sup.release()
    alone = Supervisor(rig.store, rig.registry, owner="one", clock=rig.sched.now, jobs=[ids[2]])
    alone.tick()
    assert rig.objects(ids[2]) == []  # the only slot is member 0's
    assert rig.alive() == 1


def test_cancel_of_every_member_stops_the_group(rig: Rig) -> None:
    ids = rig.sweep("lr=[1e-3,3e-4],seed=1..2", max_running=2)
    for job_id in ids:
        rig.sched.plan(job_id, 1, runs_forever())
    rig.sup.tick()
    rig.sched.advance(1)
    assert rig.alive() == 2
    for job_id in reversed(ids):  # waiting members first, as `cancel GROUP` does
        job = load_job(rig.store, job_id)
        append_request(rig.store, job, cancel(job, actor="ann", now=rig.sched.now()))
    for _ in range(5):
        rig.sup.tick()
        rig.sched.advance(1)
    assert [rig.state(j) for j in ids] == [State.CANCELLED] * 4
    assert rig.alive() == 0
    assert [len(rig.objects(j)) for j in ids] == [1, 1, 0, 0]  # no waiting one was started


def test_client_sweep_takes_a_mapping_and_submits_the_first_members(rig: Rig) -> None:
    made = rig.client.sweep(
        ["python", "train.py", "--lr", "{lr}"],
        {"lr": [1e-3, 3e-4, 1e-4]},
        backend="simulated",
        name="lr-{lr}",
        env={"KEEP": "1"},
        max_running=2,
    )
    assert made.values == ({"lr": "0.001"}, {"lr": "0.0003"}, {"lr": "0.0001"})
    assert [len(rig.objects(j)) for j in made.job_ids] == [1, 1, 0]  # submitted at once
    jobs = [load_job(rig.store, j) for j in made.job_ids]
    assert [j.name for j in jobs] == ["lr-0.001", "lr-0.0003", "lr-0.0001"]
    assert all(j.spec.env["KEEP"] == "1" for j in jobs)


def test_a_script_sweep_reads_its_values_from_the_environment(rig: Rig) -> None:
    made = rig.client.sweep(
        None, "seed=1..2", backend="simulated", script="#!/bin/sh\necho $DISPATCH_SWEEP_SEED\n"
    )
    jobs = [load_job(rig.store, j) for j in made.job_ids]
    assert [j.spec.env["DISPATCH_SWEEP_SEED"] for j in jobs] == ["1", "2"]
    with pytest.raises(BadInput, match=r"the name uses \{x\}"):
        rig.client.sweep(None, "seed=1..2", backend="simulated", script="#!/bin/sh\n", name="{x}")
    assert rig.client.jobs() and len(rig.client.jobs()) == 2  # the refused one recorded nothing
