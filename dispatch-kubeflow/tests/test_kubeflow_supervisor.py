"""The real supervisor and SQLite record over the kubeflow backend and the emulated
cluster: the node-loss fence and native JobSet restarts, end to end. Time is passed in
(``tick(now)``), so nothing sleeps through a window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Registry, Resources, Rule, State
from dispatch.job_records import create_job, status_of
from dispatch.store import open_store
from dispatch.supervisor import Supervisor
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator

SPEC = JobSpec(name="fence", command=("torchrun", "train.py"), resources=Resources(nodes=2))


class Rig:
    def __init__(self, backend: KubeflowBackend, emulator: Emulator, db: Path) -> None:
        self.emulator = emulator
        self.store = open_store(f"sqlite:///{db}")
        self.registry = Registry.from_plugins({"kubeflow": backend})
        self.supervisor = Supervisor(self.store, self.registry, owner="test")
        self.now = datetime.now(UTC)
        self.live_seen: list[int] = []

    def job(self, policy: RecoveryPolicy) -> str:
        return create_job(
            self.store, self.registry, backend="kubeflow", spec=SPEC, policy=policy, now=self.now
        )

    def tick(self, after: timedelta = timedelta(seconds=5)) -> None:
        self.now += after
        report = self.supervisor.tick(self.now)
        assert not report.errors and not report.unreachable, report
        self.live_seen.append(self.live_trainjobs())

    def live_trainjobs(self) -> int:
        """TrainJobs with a pod not yet terminal: the invariant says at most one (S-28)."""
        return sum(
            1
            for name in self.emulator.names()
            if any(
                p["status"].get("phase") in ("Pending", "Running") for p in self.emulator.pods(name)
            )
        )

    def status(self, job_id: str):  # type: ignore[no-untyped-def]
        return status_of(self.store, self.registry, job_id, now=self.now)


@pytest.fixture
def rig(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator, tmp_path: Path
) -> Iterator[Rig]:
    made = Rig(
        make_backend(node_loss_window=timedelta(seconds=60)), emulator, tmp_path / "record.db"
    )
    yield made
    made.supervisor.release()


def test_lost_node_is_fenced_then_replaced_without_two_live_executions(rig: Rig) -> None:
    """S-26, S-27, S-28: running node-lost inside the window; past it the object is
    stopped, the replacement waits gated until the old one is gone, then runs."""
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.NODE_LOST,), action=Action.RESUBMIT, budget=1),)
    )
    job_id = rig.job(policy)
    rig.tick()
    (first,) = rig.emulator.names()
    assert rig.emulator.is_running(first)
    rig.emulator.lose_node(first, pod=0)
    rig.tick()
    inside = rig.status(job_id)
    assert inside.state is State.RUNNING and inside.cause.kind is CauseKind.NODE_LOST
    assert rig.emulator.names() == [first]
    for _ in range(6):
        rig.tick(timedelta(seconds=61))
    assert first not in rig.emulator.names()
    (second,) = rig.emulator.names()
    assert second.endswith("-2") and rig.emulator.is_running(second)
    assert max(rig.live_seen) == 1
    events = rig.store.read(job_id)
    requested = [e for e in events if e.type == "submission-requested" and e.submission == 2]
    opened = [e for e in events if e.type == "gate-opened"]
    assert requested and requested[0].gated and [e.submission for e in opened] == [2]
    stops = [e for e in events if e.type == "stop-requested"]
    assert [(e.submission, e.cause.kind) for e in stops] == [(1, CauseKind.NODE_LOST)]
    assert stops[0].seq < opened[0].seq
    rig.emulator.succeed(second)
    rig.tick()
    done = rig.status(job_id)
    assert done.state is State.SUCCEEDED
    assert [h.event for h in done.history] == ["recovery-started", "outcome-committed"]
    assert done.history[0].cause.kind is CauseKind.NODE_LOST


def ticks_until(rig: Rig, emulator: Emulator, job_id: str, state: State, steps: int = 30):  # type: ignore[no-untyped-def]
    """Supervise while the emulated controllers' time passes, one step per tick, until the
    job is in ``state`` (the last status otherwise, for the test's assertion to show)."""
    for _ in range(steps):
        rig.tick()
        shown = rig.status(job_id)
        if shown.state is state:
            return shown
        emulator.advance()
    return shown


def test_native_jobset_restart_spends_the_budget_then_dispatch_stops_it(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator, tmp_path: Path
) -> None:
    """S-38: each restart the JobSet does spends one unit; past the budget dispatch
    stops the object and the job fails with an escalation."""
    emulator.add_runtime("restarting", failure_policy={"maxRestarts": 5, "rules": []})
    backend = make_backend(native_restart=True, runtime="restarting")
    rig = Rig(backend, emulator, tmp_path / "record.db")
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESTART, budget=1),)
    )
    job_id = rig.job(policy)
    rig.tick()
    (name,) = emulator.names()
    emulator.preempt(name, pod=1)
    recovering = ticks_until(rig, emulator, job_id, State.RECOVERING)
    assert recovering.state is State.RECOVERING
    emulator.settle()
    rig.tick()
    assert rig.status(job_id).state is State.RUNNING
    assert emulator.jobset(name)["status"]["restarts"] == 1
    emulator.preempt(name, pod=0)
    final = ticks_until(rig, emulator, job_id, State.FAILED)
    assert final.state is State.FAILED and final.cause.kind is CauseKind.PREEMPTED
    assert final.escalations
    emulator.settle()  # dispatch's Foreground delete, one garbage-collector step at a time
    assert name not in emulator.names()
    rig.supervisor.release()


def test_native_restart_of_a_cause_the_policy_does_not_restart_is_stopped(
    make_backend: Callable[..., KubeflowBackend], emulator: Emulator, tmp_path: Path
) -> None:
    """S-15, S-38: the JobSet restarts on any failure; an execution ending with a cause no
    rule covers fails the job and dispatch stops the restarted object."""
    emulator.add_runtime("restarting", failure_policy={"maxRestarts": 5, "rules": []})
    rig = Rig(make_backend(native_restart=True, runtime="restarting"), emulator, tmp_path / "r.db")
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESTART, budget=2),)
    )
    job_id = rig.job(policy)
    rig.tick()
    (name,) = emulator.names()
    emulator.exit(name, 3, pod=0)
    final = ticks_until(rig, emulator, job_id, State.FAILED)
    assert final.state is State.FAILED
    assert final.cause.kind is CauseKind.NON_ZERO_EXIT and final.cause.exit_code == 3
    emulator.settle()
    assert emulator.names() == []
    rig.supervisor.release()
