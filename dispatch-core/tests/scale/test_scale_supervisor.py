"""The supervisor's scale measures change nothing it decides (S-35), on both stores.

A fresh lease is not written again each tick, one running short is; a feed read page by
page folds the same jobs as one read whole.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, Registry
from dispatch import supervisor as supervisor_module
from dispatch.job_records import create_job
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

SPEC = JobSpec(command=("python", "train.py"))
PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)
TTL = timedelta(seconds=60)


class Counting:
    """The real store, noting which leases it was asked to write."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.asked: list[list[str]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def acquire_leases(self, job_ids, owner, ttl, now):  # type: ignore[no-untyped-def]
        ids = sorted(job_ids)
        self.asked.append(ids)
        return self.store.acquire_leases(ids, owner, ttl, now)


@pytest.fixture
def rig(store: RecordStore):  # type: ignore[no-untyped-def]
    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    ids = [
        create_job(
            store,
            registry,
            backend="simulated",
            spec=SPEC,
            policy=policy(PREEMPT),
            now=sched.now(),
        )
        for _ in range(3)
    ]
    for job_id in ids:
        sched.plan(job_id, 1, runs_forever())  # active all along
    return sched, registry, store, sorted(ids)


def test_a_fresh_lease_is_not_written_again_one_running_short_is_S35(rig) -> None:  # type: ignore[no-untyped-def]
    sched, registry, store, ids = rig
    counting = Counting(store)
    sup = Supervisor(counting, registry, owner="a", clock=sched.now, lease_ttl=TTL)  # type: ignore[arg-type]
    first = sup.tick()
    assert first.leased == 3 and counting.asked == [ids]
    sched.advance(10)
    again = sup.tick()
    assert again.leased == 3 and counting.asked == [ids]  # 50 s of 60 left: not rewritten
    sched.advance(25)  # 25 s left, less than half: renewed
    sup.tick()
    assert counting.asked[1:] == [ids]
    # a second supervisor still cannot take them: the leases the first relied on are live
    other = Supervisor(store, registry, owner="b", clock=sched.now, lease_ttl=TTL)
    assert other.tick().leased == 0


def test_a_lease_lost_to_a_takeover_is_asked_for_again_S35(rig) -> None:  # type: ignore[no-untyped-def]
    sched, registry, store, ids = rig
    counting = Counting(store)
    sup = Supervisor(counting, registry, owner="a", clock=sched.now, lease_ttl=TTL)  # type: ignore[arg-type]
    sup.tick()
    sched.advance(61)  # expired: another supervisor takes every job
    other = Supervisor(store, registry, owner="b", clock=sched.now, lease_ttl=TTL)
    assert other.tick().leased == 3
    report = sup.tick()
    assert report.leased == 0 and counting.asked[-1] == ids


def test_a_feed_read_page_by_page_folds_the_same_jobs(rig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sched, registry, store, ids = rig
    Supervisor(store, registry, owner="a", clock=sched.now, lease_ttl=TTL).tick()
    sched.advance(1)
    whole = Supervisor(store, registry, owner="a", clock=sched.now, lease_ttl=TTL)
    whole._refresh()
    monkeypatch.setattr(supervisor_module, "FEED_PAGE", 2)
    paged = Supervisor(store, registry, owner="a", clock=sched.now, lease_ttl=TTL)
    paged._refresh()
    assert sorted(paged._jobs) == ids
    assert {j: paged.job(j) for j in ids} == {j: whole.job(j) for j in ids}
    assert all(whole.job(j).version >= 3 for j in ids)


def test_aging_leases_are_renewed_a_few_a_tick_before_they_run_short_S35(rig) -> None:  # type: ignore[no-untyped-def]
    sched, registry, store, _ = rig
    counting = Counting(store)
    sup = Supervisor(counting, registry, owner="a", clock=sched.now, lease_ttl=TTL)  # type: ignore[arg-type]
    sup.tick()
    sched.advance(20)  # 40 s of 60 left: past three quarters, not yet short
    sup.tick()
    assert len(counting.asked) == 2 and len(counting.asked[1]) == 1  # one of 3 jobs
    sched.advance(1)
    sup.tick()
    assert len(counting.asked[2]) == 1 and counting.asked[2] != counting.asked[1]


def test_the_supervisor_holds_its_jobs_packed_and_each_reads_back_as_folded_S20(rig) -> None:  # type: ignore[no-untyped-def]
    """Memory per job: between ticks every folded job is a packed tuple holding no model
    of its own (dispatch.core.compact), and unpacks to the fold of its record."""
    from dispatch.core.compact import pack
    from dispatch.core.folding import fold
    from dispatch.model.base import Model

    sched, registry, store, ids = rig
    sup = Supervisor(store, registry, owner="a", clock=sched.now, lease_ttl=TTL)
    for _ in range(3):
        sup.tick()
        sched.advance(5)
    held = sup._jobs.packed
    assert sorted(held) == ids
    for job_id in ids:
        job = fold(store.read(job_id))
        assert len(job.submissions) >= 1 and sup.job(job_id) == job
        assert held[job_id] == pack(job)
        own = [v for v in held[job_id] if isinstance(v, Model)]
        assert own == [v for v in (job.spec, job.plan, job.submitter, job.group) if v is not None]
