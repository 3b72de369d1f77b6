"""A supervisor that skips deciding quiet jobs does exactly what one deciding every job
every tick does (S-22).

The differential test runs two identical worlds (a simulated scheduler with few nodes, a
SQLite record, one supervisor), one with ``reuse_decisions`` and one without, through the
same random course of faults and clock steps: preemptions, node losses that keep running
(the node-loss window), objects hidden from the listing (the missing window), no capacity
(the pending window), garbled answers, admin holds, cancels and resubmits of holds, an
unreachable controller. After every tick the two reports and the two records must be the
same. The windows are short and the clock steps straddle them, so a decision skipped past
a window's end would show as a missing recovery.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, Registry, Resources
from dispatch.core.interventions import cancel, current_hold, resubmit
from dispatch.job_records import create_job, load_job, request
from dispatch.model.errors import DispatchError
from dispatch.model.events import RecoveryStarted
from dispatch.store import open_store
from dispatch.supervisor import Supervisor, TickReport
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import exit_with, runs_forever, succeed

NODE_LOSS = timedelta(seconds=30)
PENDING = timedelta(seconds=45)
RULES = (
    ([CauseKind.PREEMPTED], Action.RESUBMIT, 3),
    ([CauseKind.NODE_LOST, CauseKind.NO_CAPACITY], Action.RESUBMIT, 2),
    ([CauseKind.NON_ZERO_EXIT, CauseKind.UNKNOWN], Action.HOLD, None),
)
STEPS = (1, 5, 14, 29, 31, 44, 46, 70)


class World:
    def __init__(self, where: Path, reuse: bool) -> None:
        self.sched = SimScheduler(nodes=5)
        backend = SimulatedBackend(
            self.sched, node_loss_window=NODE_LOSS, pending_windows={CauseKind.NO_CAPACITY: PENDING}
        )
        self.registry = Registry.from_plugins({"simulated": backend})
        where.mkdir()
        self.store = open_store(f"sqlite:///{where}/record.db")
        self.sup = Supervisor(
            self.store,
            self.registry,
            owner="sup",
            clock=self.sched.now,
            lease_ttl=timedelta(minutes=10),
            reuse_decisions=reuse,
        )
        self.jobs: list[str] = []

    def add_job(self, n: int, nodes: int) -> None:
        job_id = f"job-{n}"
        spec = JobSpec(command=("python", "train.py"), resources=Resources(nodes=nodes))
        create_job(
            self.store,
            self.registry,
            backend="simulated",
            spec=spec,
            policy=policy(*RULES),
            job_id=job_id,
            now=self.sched.now(),
        )
        self.jobs.append(job_id)

    def record(self) -> dict[str, list[dict[str, object]]]:
        return {j: [e.model_dump() for e in self.store.read(j)] for j in self.jobs}

    def alive(self) -> list[str]:
        return sorted(o.object_id for o in self.sched.objects() if not o.ended)


def _plan_outcomes(rng: random.Random, worlds: list[World], job_id: str) -> None:
    for sub in range(1, 8):
        outcome = rng.choice(
            [runs_forever(), runs_forever(), succeed(rng.choice(STEPS) * 3.0), exit_with(3, 40)]
        )
        for w in worlds:
            w.sched.plan(job_id, sub, outcome)


def _fault(rng: random.Random, worlds: list[World], n_jobs: list[int]) -> None:
    """One thing happening to both worlds alike, chosen from the first world's state."""
    first = worlds[0]
    alive = first.alive()
    what = rng.choice(
        ["preempt", "lose", "lose-running", "hide", "garble", "hold", "release", "cancel",
         "resubmit", "down", "new-job", "nothing", "nothing"]
    )  # fmt: skip
    oid = rng.choice(alive) if alive else None
    if what == "new-job":
        n_jobs[0] += 1
        nodes = rng.choice([1, 1, 2, 3])
        for w in worlds:
            w.add_job(n_jobs[0], nodes)
        _plan_outcomes(rng, worlds, f"job-{n_jobs[0]}")
        return
    if what in ("cancel", "resubmit"):
        job_id = rng.choice(first.jobs)
        for w in worlds:
            now = w.sched.now()
            try:
                if what == "cancel":
                    request(w.store, job_id, partial(cancel, actor="ann", now=now))
                else:
                    hold = current_hold(load_job(w.store, job_id))
                    request(w.store, job_id, partial(resubmit, actor="ann", now=now, hold=hold))
            except (DispatchError, ValueError):
                pass  # refused alike in both worlds: the record is compared after the tick
        return
    if what == "down":
        seconds = rng.choice(STEPS)
        for w in worlds:
            w.sched.go_down(seconds)
        return
    if oid is None or what == "nothing":
        return
    seconds = rng.choice(STEPS)
    for w in worlds:
        obj = next(o for o in w.sched.objects() if o.object_id == oid)
        if what == "preempt":
            w.sched.preempt(oid)
        elif what in ("lose", "lose-running") and obj.current.state == "RUNNING":
            w.sched.lose_node(oid, keeps_running=what == "lose-running")
        elif what == "hide":
            w.sched.hide(oid, seconds)
        elif what == "garble":
            w.sched.garble(oid, "SUSPENDED_BY_OPERATOR")
        elif what == "hold":
            w.sched.admin_hold(oid)
        elif what == "release":
            w.sched.admin_release(oid)


def _comparable(report: TickReport) -> dict[str, object]:
    shown = dataclasses.asdict(report)
    del shown["decided"]  # the one figure meant to differ
    return shown


@pytest.mark.parametrize("seed", range(10))
def test_skipping_quiet_decisions_changes_nothing_S22(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    worlds = [World(tmp_path / "reuse", True), World(tmp_path / "every", False)]
    n_jobs = [0]
    for _ in range(6):
        n_jobs[0] += 1
        nodes = rng.choice([1, 1, 2, 3])
        for w in worlds:
            w.add_job(n_jobs[0], nodes)
        _plan_outcomes(rng, worlds, f"job-{n_jobs[0]}")
    decided = [0, 0]
    for tick in range(60):
        for _ in range(rng.choice([0, 1, 1, 2])):
            _fault(rng, worlds, n_jobs)
        step = rng.choice(STEPS)
        reports = []
        for w in worlds:
            w.sched.advance(step)
            reports.append(w.sup.tick())
        assert _comparable(reports[0]) == _comparable(reports[1]), f"tick {tick}"
        assert worlds[0].record() == worlds[1].record(), f"tick {tick}"
        decided = [d + r.decided for d, r in zip(decided, reports, strict=True)]
    assert decided[0] < decided[1], "the reusing supervisor never skipped a decision"
    for w in worlds:
        w.store.close()


def test_a_quiet_job_is_decided_again_when_its_node_loss_window_ends_S27(tmp_path: Path) -> None:
    """Nothing the scheduler shows changes while a lost node's window runs; the job is
    still recovered on the first tick past it, not on some later change."""
    world = World(tmp_path / "w", True)
    world.add_job(1, 1)
    world.sched.plan("job-1", 1, runs_forever())
    world.sup.tick()
    world.sched.advance(1)
    world.sup.tick()
    (oid,) = world.alive()
    world.sched.lose_node(oid, keeps_running=True)
    world.sched.advance(1)
    assert world.sup.tick().decided == 1  # the object changed: decided, quiet (in window)
    for _ in range(5):
        world.sched.advance(5)
        report = world.sup.tick()
        assert (report.decided, report.appended) == (0, 0)  # skipped: nothing changed
    world.sched.advance(5)  # 31 s since the loss: past the window
    report = world.sup.tick()
    assert report.decided == 1
    events = world.store.read("job-1")
    recovered = [e for e in events if isinstance(e, RecoveryStarted)]
    assert [e.cause.kind for e in recovered] == [CauseKind.NODE_LOST]
    job = load_job(world.store, "job-1")
    assert job.outcome is None and [s.number for s in job.submissions] == [1, 2]
    world.store.close()
