"""The supervisor on the simulated scheduler and a real SQLite record (S-22, S-32..S-35)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, Registry, State
from dispatch.job_records import create_job, load_job, status_of
from dispatch.model.errors import RecordConflict
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import exit_with, runs_forever, succeed

SPEC = JobSpec(command=("python", "train.py"))
PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)
EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


class Rig:
    def __init__(self, store: RecordStore) -> None:
        self.sched = SimScheduler()
        self.registry = Registry.from_plugins({"simulated": SimulatedBackend(self.sched)})
        self.store = store
        self.sup = self.supervisor("sup-a")

    def supervisor(self, owner: str) -> Supervisor:
        return Supervisor(self.store, self.registry, owner=owner, clock=self.sched.now)

    def job(self, *rules, job_id: str | None = None) -> str:  # type: ignore[no-untyped-def]
        return create_job(
            self.store,
            self.registry,
            backend="simulated",
            spec=SPEC,
            policy=policy(*rules),
            job_id=job_id,
            now=self.sched.now(),
        )

    def status(self, job_id: str):  # type: ignore[no-untyped-def]
        return status_of(self.store, self.registry, job_id)

    def objects(self, job_id: str) -> list:  # type: ignore[type-arg]
        return [o for o in self.sched.objects() if o.tags[SimScheduler.TAG_JOB] == job_id]


@pytest.fixture
def rig(store: RecordStore) -> Rig:
    """On both stores: a SQLite file and a schema of the real PostgreSQL server."""
    return Rig(store)


def test_one_discovery_call_for_all_jobs_of_a_tick_S32(rig: Rig) -> None:
    ids = [rig.job(PREEMPT) for _ in range(60)]
    rig.sup.tick()
    rig.sched.advance(0.5)
    before = rig.sched.calls
    report = rig.sup.tick()
    assert report.discovery_calls == {"simulated": 1}
    assert rig.sched.calls - before == 1  # nothing else to do: one listing for 60 jobs
    assert all(rig.status(j).state is State.RUNNING for j in ids)


def test_preempted_job_is_resubmitted_by_the_supervisor_S13_S22(rig: Rig) -> None:
    job = rig.job(PREEMPT, EXIT_HOLD)
    rig.sched.plan(job, 1, runs_forever())
    rig.sched.plan(job, 2, succeed(after=5))
    rig.sup.tick()
    rig.sched.advance(1)
    (obj,) = rig.objects(job)
    rig.sched.preempt(obj.object_id)
    rig.sup.tick()
    assert rig.status(job).state in (State.RECOVERING, State.RUNNING)
    rig.sched.advance(10)
    rig.sup.tick()
    st = rig.status(job)
    assert (st.state, st.settled) == (State.SUCCEEDED, True)
    assert [h.event for h in st.history] == ["recovery-started", "outcome-committed"]
    assert st.budgets == {"rule 1": 1}


def test_exit_1_is_held_then_released_by_a_person_S14(rig: Rig) -> None:
    from dispatch.core.interventions import resubmit
    from dispatch.job_records import append_request

    job = rig.job(PREEMPT, EXIT_HOLD)
    rig.sched.plan(job, 1, exit_with(1, after=2))
    rig.sched.plan(job, 2, succeed(after=1))
    rig.sup.tick()
    rig.sched.advance(3)
    rig.sup.tick()
    assert rig.status(job).state is State.HELD
    rig.sched.advance(60)
    rig.sup.tick()
    assert rig.status(job).state is State.HELD and len(rig.objects(job)) == 1  # stays held
    append_request(
        rig.store,
        load_job(rig.store, job),
        resubmit(load_job(rig.store, job), actor="ann", now=rig.sched.now()),
    )
    rig.sup.tick()
    rig.sched.advance(2)
    rig.sup.tick()
    assert rig.status(job).state is State.SUCCEEDED


def test_submit_lost_in_a_crash_is_adopted_not_repeated_S34(rig: Rig) -> None:
    job = rig.job(PREEMPT)
    rig.sched.plan(job, 1, runs_forever())

    class Crash(Exception):
        pass

    def crash(step: str) -> None:
        if step == "submitted":
            raise Crash(step)

    dying = Supervisor(
        rig.store,
        rig.registry,
        owner="dying",
        clock=rig.sched.now,
        step=crash,
        lease_ttl=timedelta(seconds=10),
    )
    with pytest.raises(Crash):
        dying.tick()
    assert len(rig.objects(job)) == 1
    assert load_job(rig.store, job).current.object_id is None  # type: ignore[union-attr]
    rig.sched.advance(11)  # the dead supervisor's lease runs out
    fresh = rig.supervisor("fresh")
    fresh.tick()
    sub = load_job(rig.store, job).current
    assert sub is not None and sub.adopted and sub.object_id == rig.objects(job)[0].object_id
    assert len(rig.objects(job)) == 1  # nothing submitted twice


def test_second_object_for_one_submission_is_stopped_as_duplicate_S34(rig: Rig) -> None:
    job = rig.job(PREEMPT)
    rig.sched.plan(job, 1, runs_forever(), runs_forever())
    rig.sched.duplicate_next(job, 1)
    rig.sup.tick()
    rig.sched.advance(1)
    rig.sup.tick()
    objs = rig.objects(job)
    assert len(objs) == 2
    kept = load_job(rig.store, job).current.object_id  # type: ignore[union-attr]
    other = next(o for o in objs if o.object_id != kept)
    assert other.ended and "second object for submission 1" in " ".join(
        str(e.reason) for e in other.executions
    )
    assert rig.status(job).state is State.RUNNING


def test_intent_is_recorded_before_the_submit_S34(rig: Rig) -> None:
    job = rig.job(PREEMPT)
    seen: list[list[str]] = []

    def step(name: str) -> None:
        if name == "intent-recorded":
            seen.append([e.type for e in rig.store.read(job)])

    Supervisor(rig.store, rig.registry, owner="x", clock=rig.sched.now, step=step).tick()
    assert seen[0] == ["job-created", "submission-requested"]
    assert len(rig.objects(job)) == 1
    assert [e.type for e in rig.store.read(job)][-1] == "submission-created"


def test_only_one_supervisor_acts_on_a_job_S35(rig: Rig) -> None:
    job = rig.job(PREEMPT)
    other = rig.supervisor("sup-b")
    first = rig.sup.tick()
    second = other.tick()
    assert (first.leased, second.leased) == (1, 0)
    assert len(rig.objects(job)) == 1


def test_stale_supervisor_cannot_append_after_takeover_S35(rig: Rig) -> None:
    from dispatch.store.base import Lease

    job = rig.job(PREEMPT)
    now = rig.sched.now()
    (old,) = rig.store.acquire_leases([job], "old", timedelta(seconds=5), now).values()
    rig.store.acquire_leases([job], "new", timedelta(seconds=5), now + timedelta(seconds=6))
    version = load_job(rig.store, job).version
    from dispatch.core.interventions import cancel

    events = cancel(load_job(rig.store, job), actor="old-sup", now=now)
    with pytest.raises(RecordConflict):
        rig.store.append(job, version, events, lease=Lease(job, "old", old.token, old.expires_at))
    assert load_job(rig.store, job).version == version


def test_unreachable_scheduler_changes_nothing_and_backs_off_S5(rig: Rig) -> None:
    job = rig.job(PREEMPT)
    rig.sched.plan(job, 1, runs_forever())
    rig.sup.tick()
    rig.sched.advance(1)
    version = load_job(rig.store, job).version
    rig.sched.go_down()
    report = rig.sup.tick()
    assert "simulated" in report.unreachable and report.appended == 0
    assert load_job(rig.store, job).version == version
    calls = rig.sched.calls
    rig.sup.tick()  # inside the back-off: not even asked
    assert rig.sched.calls == calls
    rig.sched.come_up()
    rig.sched.advance(5)
    assert rig.sup.tick().unreachable == {}
    assert rig.status(job).state is State.RUNNING


def test_cancel_through_the_record_stops_the_object_S12(rig: Rig) -> None:
    from dispatch.core.interventions import cancel
    from dispatch.job_records import append_request

    job = rig.job(PREEMPT)
    rig.sched.plan(job, 1, runs_forever())
    rig.sup.tick()
    rig.sched.advance(1)
    append_request(
        rig.store,
        load_job(rig.store, job),
        cancel(load_job(rig.store, job), actor="bob", now=rig.sched.now()),
    )
    rig.sup.tick()
    rig.sched.advance(1)
    rig.sup.tick()
    st = rig.status(job)
    assert st.state is State.CANCELLED and st.cause is not None and st.cause.actor == "bob"


def test_two_supervisors_racing_never_both_act_on_a_job_S35(harness) -> None:  # type: ignore[no-untyped-def]
    """Two supervisors, each with its own connection to the store, tick at the same time
    over the same jobs: every submission has exactly one object and no record has a gap."""
    import threading

    sched = SimScheduler()
    lock = threading.Lock()

    class Serialised(SimulatedBackend):
        """The simulated scheduler is single-threaded; a real one serialises calls too."""

        def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
            attr = super().__getattribute__(name)
            if name.startswith("dispatch_") and callable(attr):

                def call(*a, **k):  # type: ignore[no-untyped-def]
                    with lock:
                        return attr(*a, **k)

                return call
            return attr

    stores = [harness.open(), harness.open()]
    registry = Registry.from_plugins({"simulated": Serialised(sched)})
    jobs = [
        create_job(
            stores[0],
            registry,
            backend="simulated",
            spec=SPEC,
            policy=policy(PREEMPT),
            now=sched.now(),
        )
        for _ in range(20)
    ]
    for job in jobs:
        sched.plan(job, 1, runs_forever())
    sups = [
        Supervisor(
            s,
            Registry.from_plugins({"simulated": registry.get("simulated").plugin}),
            owner=f"sup-{n}",
            clock=sched.now,
            lease_ttl=timedelta(seconds=30),
        )
        for n, s in enumerate(stores)
    ]
    barrier = threading.Barrier(2)
    leased: list[list[int]] = [[], []]

    def run(n: int) -> None:
        for _ in range(5):
            barrier.wait()
            leased[n].append(sups[n].tick().leased)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [sum(x) for x in zip(*leased, strict=True)] == [
        20
    ] * 5  # each job had one owner per tick
    for job in jobs:
        objs = [o for o in sched.objects() if o.tags[SimScheduler.TAG_JOB] == job]
        assert len(objs) == 1, job
        events = stores[0].read(job)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for s in stores:
        s.close()


def test_cli_status_and_supervisor_see_the_same_S24_S40(rig: Rig) -> None:
    import json
    import subprocess
    import sys

    from dispatch import Discovery, project
    from dispatch.model.events import encode_event

    job = rig.job(PREEMPT, EXIT_HOLD)
    rig.sched.plan(job, 1, exit_with(2, after=1))
    rig.sup.tick()
    rig.sched.advance(2)  # ended, not yet committed: both must show the same unsettled view
    backend = rig.registry.get("simulated")
    discovery = backend.discover([job])
    now = discovery.at
    cli_view = status_of(rig.store, rig.registry, job, now=now)
    supervisor_view = project(rig.sup.job(job), discovery, now)
    assert (
        cli_view == supervisor_view and cli_view.settled is False and cli_view.state is State.HELD
    )
    # ... and in another process, from the encoded record and discovery (S-24)
    code = (
        "import json, sys; from datetime import datetime\n"
        "from dispatch import Discovery, fold, project\n"
        "from dispatch.model.events import decode_event\n"
        "d = json.load(sys.stdin)\n"
        "job = fold([decode_event(e) for e in d['events']])\n"
        "disc = Discovery.model_validate_json(d['discovery'])\n"
        "print(project(job, disc, datetime.fromisoformat(d['now'])).model_dump_json())\n"
    )
    payload = json.dumps(
        {
            "events": [encode_event(e) for e in rig.store.read(job)],
            "discovery": discovery.model_dump_json(),
            "now": now.isoformat(),
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == supervisor_view.model_dump_json()
    assert Discovery.model_validate_json(discovery.model_dump_json()) == discovery


def test_the_plan_tells_the_backend_which_rules_it_enforces_natively_S9(rig: Rig) -> None:
    native = rig.job(([CauseKind.PREEMPTED], Action.REQUEUE, 2), EXIT_HOLD)
    plain = rig.job(PREEMPT)
    assert load_job(rig.store, native).spec.native_actions == {Action.REQUEUE}
    assert load_job(rig.store, plain).spec.native_actions == frozenset()
