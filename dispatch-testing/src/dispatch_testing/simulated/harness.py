"""The kit harness for the simulated scheduler: every scenario, provoked by the operator's
hand on :class:`SimScheduler`, in clock time (nothing sleeps).

There is no live tier: ``--live`` reports every test not provokable. Building the harness
registers the ``simulated`` backend's entry point (:mod:`.registration`), which a plain
install of dispatch-testing does not have; closing it takes the entry point away again.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
from contextlib import contextmanager
from datetime import datetime, timedelta

from dispatch import Backend, CauseKind, JobSpec, Resources, SubmitRefused

from dispatch_testing.kit.harness import (
    MULTI_NODE_SCENARIOS,
    Harness,
    NotProvokable,
    Provoked,
    Scenario,
)
from dispatch_testing.simulated import registration
from dispatch_testing.simulated import scheduler as sim
from dispatch_testing.simulated.backend import SimulatedBackend

#: the rank the multi-node rank-failure scenario makes fail (on the job's second node)
FAILING_RANK = 3
UNMAPPABLE_ANSWER = "SUSPENDED_BY_OPERATOR (maintenance window 7)"
#: the scheduler's words this harness makes it say, which the causes must keep verbatim
WORDS = {
    Scenario.PREEMPTED: "Preempted by job 7 in partition high",
    Scenario.HELD_BY_SCHEDULER: "JobHeldAdmin: held by root",
    Scenario.CANCELLED_BY_SCHEDULER: "cancelled by root",
    Scenario.TIME_LIMIT: "TimeLimit: job reached its time limit",
    Scenario.NO_CAPACITY: "Resources: 65 nodes requested, the cluster has 64",
}


class SimulatedHarness(Harness):
    name = "simulated"
    poll_interval = 5.0
    timeout = 600.0

    def __init__(self, live: bool = False) -> None:
        super().__init__(live)
        self.scheduler = sim.SimScheduler(nodes=64, start_delay=1.0)
        self._registered_here = not registration.is_registered()
        registration.register()

    def close(self) -> None:
        if self._registered_here:
            registration.unregister()

    def plugin(self) -> object:
        if self.live:
            raise NotProvokable("the simulated scheduler exists only in this process")
        return SimulatedBackend(self.scheduler)

    def wait(self, seconds: float) -> None:
        self.scheduler.advance(seconds)

    def now(self) -> datetime:
        return self.scheduler.now()

    def calls(self) -> int:
        return self.scheduler.calls

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        with self.scheduler.down():
            yield

    def scenarios(self) -> Set[Scenario]:
        return frozenset(Scenario)

    def provoke(self, scenario: Scenario, backend: Backend, job_id: str) -> Provoked:
        scheduler = self.scheduler
        spec = self.long_spec()
        extra: dict[str, object] = {}
        plans: dict[Scenario, sim.Outcome] = {
            Scenario.SUCCESS: sim.succeed(5),
            Scenario.EXIT_NONZERO: sim.exit_with(3, 5),
            Scenario.SIGNAL: sim.killed_by_signal(9, 5),
            Scenario.TIME_LIMIT: sim.runs_forever(),
            Scenario.NODE_LOST: sim.node_loss(5, keeps_running=True),
            Scenario.OUT_OF_MEMORY: sim.out_of_memory(5),
            Scenario.LAUNCH_FAILED: sim.launch_failure(),
            Scenario.NATIVE_RECOVERY: sim.Outcome(5, "PREEMPTED", "Preempted by job 7 (high)"),
            Scenario.RANK_FAILED: sim.rank_fails(FAILING_RANK, 5, after=5),
        }
        if scenario in plans:
            # the submit below is filed under whatever submission the kit asks for, so
            # script every submission number a run could use
            for number in range(1, 10):
                scheduler.plan(job_id, number, plans[scenario], sim.runs_forever())
        if scenario is Scenario.TIME_LIMIT:
            spec = spec.model_copy(
                update={"resources": Resources(time_limit=timedelta(seconds=30))}
            )
        elif scenario is Scenario.NO_CAPACITY:
            spec = spec.model_copy(update={"resources": Resources(nodes=65)})
        elif scenario is Scenario.NATIVE_RECOVERY:
            spec = spec.model_copy(update={"options": {"requeue": "1"}})
            extra["native_cause"] = CauseKind.PREEMPTED
        elif scenario in (Scenario.EXIT_NONZERO, Scenario.SIGNAL):
            extra["exit_code"] = 3 if scenario is Scenario.EXIT_NONZERO else 137
        elif scenario in MULTI_NODE_SCENARIOS:
            spec = self.multi_node_spec()
        try:
            object_id = backend.submit(job_id, 1, spec, False)
        except SubmitRefused as exc:  # not reached: launch failures are discovered
            return Provoked(object_id=None, refused=exc)
        if scenario is Scenario.HELD_BY_SCHEDULER:
            scheduler.admin_hold(object_id, WORDS[scenario])
        self.wait(2)  # it starts after the scheduler's start delay
        nodes = scheduler.nodes_of(object_id)
        if scenario is Scenario.PREEMPTED:
            scheduler.preempt(object_id, WORDS[scenario])
        elif scenario is Scenario.NODE_LOST:
            # the planned loss comes in 5 s, on the job's last node
            extra["nodes"] = nodes[-1:]
            extra["detail"] = f"NodeNotResponding: {nodes[-1]} lost heartbeat"
        elif scenario is Scenario.NODE_LOST_OF_N:
            lost = scheduler.lose_node(object_id, node=nodes[-1])
            extra["nodes"] = (lost,)
            extra["detail"] = f"NodeFail: {lost} lost heartbeat"
        elif scenario is Scenario.RANK_FAILED:
            per_node = spec.resources.tasks_per_node
            extra.update(exit_code=5, rank=FAILING_RANK, nodes=(nodes[FAILING_RANK // per_node],))
        elif scenario is Scenario.CANCELLED_BY_SCHEDULER:
            scheduler.admin_cancel(object_id, who="root")
        elif scenario is Scenario.UNMAPPABLE:
            scheduler.garble(object_id, UNMAPPABLE_ANSWER)
            extra["raw"] = UNMAPPABLE_ANSWER
        if scenario in WORDS:
            extra["detail"] = WORDS[scenario]
        elif scenario in plans and plans[scenario].reason and "detail" not in extra:
            extra["detail"] = plans[scenario].reason
        return Provoked(object_id=object_id, timeout=120.0, **extra)  # type: ignore[arg-type]

    def long_spec(self) -> JobSpec:
        return JobSpec(name="kit-long", command=("sleep", "86400"))
