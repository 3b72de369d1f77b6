"""The simulated scheduler's clock and engine: time that moves only when a test moves it,
the events due on the way (starts, endings, the kill of a failed task's siblings), node
reservation, and how each execution runs and ends."""

from __future__ import annotations

import builtins
import heapq
import itertools
import os
import subprocess
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from string import Template

from dispatch_testing.simulated.objects import (
    KILLED,
    Row,
    SimExecution,
    SimObject,
    SimTask,
)
from dispatch_testing.simulated.outcomes import (
    Outcome,
    exit_with,
    launch_failure,
    rank_fails,
    succeed,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """Time for the simulated scheduler; only :meth:`SimScheduler.advance` moves it."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def _set(self, when: datetime) -> None:
        self._now = max(self._now, when)


class Engine:
    """The scheduler's state and the machinery that moves it: the event queue run by
    :meth:`advance`, node reservation, starting executions (simulated commands, real
    scripts) and ending them. :class:`~dispatch_testing.simulated.scheduler.SimScheduler`
    adds the client calls, :class:`~dispatch_testing.simulated.faults.OperatorHand` the
    operator's faults."""

    TAG_JOB = "dispatch.core.job"
    TAG_SUBMISSION = "dispatch.submission"
    #: seconds between one task's failure and the scheduler killing the others
    kill_delay = 0.5
    #: wall-clock seconds a real script may run before the scheduler kills it
    script_timeout = 60.0

    def __init__(
        self,
        clock: Clock | None = None,
        nodes: int | None = None,
        start_delay: float = 0.0,
        prefix: str = "sim",
    ) -> None:
        self.clock = clock or Clock()
        self.total_nodes = nodes
        self.start_delay = start_delay
        self.prefix = prefix
        self.calls = 0
        self.latency = 0.0
        self._down = False
        self._down_until: datetime | None = None
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._objects: dict[str, SimObject] = {}
        self._by_job: dict[str, list[str]] = {}
        #: each job's rows as last listed, until one of its objects changes (``_changed``)
        self._listed: dict[str, tuple[Row, ...]] = {}
        self._plans: dict[tuple[str, int], list[Outcome]] = {}
        self._duplicates: dict[tuple[str, int], int] = {}
        self._queue: list[str] = []
        self._events: list[tuple[datetime, int, str, int, str]] = []
        #: free node numbers (a heap) below ``_highest``; numbers above it are free too
        #: when the cluster is unlimited
        self._free: list[int] = list(range(1, (nodes or 0) + 1))
        self._free_set = set(self._free)
        self._highest = nodes or 0

    @property
    def free_nodes(self) -> int | None:
        return None if self.total_nodes is None else len(self._free)

    def node_name(self, number: int) -> str:
        return f"{self.prefix}-node-{number:03d}"

    # -- time ----------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward, running every start and ending due on the way."""
        self._run_until(self.clock.now() + timedelta(seconds=seconds))

    def _run_until(self, until: datetime) -> None:
        while self._events and self._events[0][0] <= until:
            when, _, object_id, epoch, what = heapq.heappop(self._events)
            self.clock._set(when)
            obj = self._objects[object_id]
            if obj.epoch != epoch:
                continue
            if what == "start":
                self._start(obj)
            elif what == "kill":
                self._kill_in_wake(obj)
            else:
                self._finish(obj)
        self.clock._set(until)

    def _at(self, seconds: float, obj: SimObject, what: str) -> None:
        if seconds == float("inf"):
            return
        when = self.clock.now() + timedelta(seconds=seconds)
        heapq.heappush(self._events, (when, next(self._seq), obj.object_id, obj.epoch, what))

    def _changed(self, obj: SimObject) -> None:
        """What a listing shows of ``obj`` changed: its row and its job's rows are made
        again when next listed."""
        obj.version += 1
        self._listed.pop(obj.tags.get(self.TAG_JOB, ""), None)

    def _say(self, obj: SimObject, execution: SimExecution, reason: str) -> None:
        if reason != execution.reason:
            execution.reason, execution.reason_at = reason, self.clock.now()
            self._changed(obj)

    def _needs(self, obj: SimObject) -> int:
        return obj.spec.resources.nodes

    # -- nodes ---------------------------------------------------------------------------

    def _usable(self, obj: SimObject) -> int | None:
        """How many nodes of the whole cluster this object may ever use (None: unlimited)."""
        if self.total_nodes is None:
            return None
        if not obj.exclude:
            return self.total_nodes
        barred = sum(1 for n in range(1, self.total_nodes + 1) if self.node_name(n) in obj.exclude)
        return self.total_nodes - barred

    def _take(self, obj: SimObject) -> tuple[str, ...] | None:
        """The lowest-numbered free nodes the object may use, reserved; None if too few."""
        needs = self._needs(obj)
        taken: builtins.list[int] = []
        skipped: builtins.list[int] = []
        while len(taken) < needs and self._free:
            number = heapq.heappop(self._free)
            (skipped if self.node_name(number) in obj.exclude else taken).append(number)
        while len(taken) < needs and self.total_nodes is None:
            self._highest += 1
            number = self._highest
            (skipped if self.node_name(number) in obj.exclude else taken).append(number)
        for number in skipped:
            heapq.heappush(self._free, number)
        if len(taken) < needs:
            for number in taken:
                heapq.heappush(self._free, number)
            return None
        self._free_set.difference_update(taken)
        self._free_set.update(skipped)
        return tuple(self.node_name(n) for n in taken)

    def _release_nodes(self, obj: SimObject) -> None:
        for name in obj.held_nodes:
            number = int(name.rsplit("-", 1)[1])
            if number not in self._free_set:
                self._free_set.add(number)
                heapq.heappush(self._free, number)
        obj.held_nodes = ()

    def _try_start(self, obj: SimObject) -> None:
        if obj.gated or obj.admin_hold is not None or obj.current.state != "PENDING":
            return
        usable = self._usable(obj)
        if usable is not None and self._needs(obj) > usable:
            assert self.total_nodes is not None
            excluded = self.total_nodes - usable
            self._say(
                obj,
                obj.current,
                f"Resources: {self._needs(obj)} nodes requested, "
                f"the cluster has {self.total_nodes}"
                + (f" ({excluded} excluded)" if excluded else ""),
            )
            return
        nodes = None if self._queue else self._take(obj)
        if nodes is None:
            self._say(obj, obj.current, "Resources: waiting for free nodes")
            if obj.object_id not in self._queue:
                self._queue.append(obj.object_id)
            return
        self._begin(obj, nodes)

    def _begin(self, obj: SimObject, nodes: tuple[str, ...]) -> None:
        obj.held_nodes = nodes
        self._say(obj, obj.current, "")
        if self.start_delay:
            self._at(self.start_delay, obj, "start")
        else:
            self._start(obj)

    def _drain_queue(self) -> None:
        while self._queue:
            obj = self._objects[self._queue[0]]
            nodes = self._take(obj)
            if nodes is None:
                return
            self._queue.pop(0)
            self._begin(obj, nodes)

    # -- running -------------------------------------------------------------------------

    def _outcome(self, obj: SimObject, tasks: Sequence[SimTask]) -> Outcome:
        if obj.outcomes:
            return obj.outcomes.pop(0)
        if obj.spec.script is not None:
            return self._run_script(obj, tasks)
        command = obj.spec.command
        if len(command) == 2 and command[0] == "sleep":
            return succeed(float(command[1]))
        if command[:1] == ("false",):
            return exit_with(1)
        for task in tasks:
            if command[:1] == ("echo",):
                task.stdout += (" ".join(command[1:]) + "\n").encode()
            elif command == ("env",):
                env = sorted(self.task_env(obj, task).items())
                task.stdout += "".join(f"{k}={v}\n" for k, v in env).encode()
        return succeed(1.0)

    def _run_script(self, obj: SimObject, tasks: Sequence[SimTask]) -> Outcome:
        """Run the script for real, once per task: exec of its file, so its ``#!`` decides."""
        with tempfile.TemporaryDirectory(prefix="sim-script-") as where:
            path = Path(where, "script")
            path.write_text(obj.spec.script or "", encoding="utf-8")
            path.chmod(0o700)
            for task in tasks:
                try:
                    done = subprocess.run(
                        [str(path)],
                        env={**os.environ, **self.task_env(obj, task)},
                        capture_output=True,
                        timeout=self.script_timeout,
                        cwd=where,
                    )
                except OSError as exc:  # no #! line, an interpreter that does not exist
                    return launch_failure(f"BootFail: exec of the script failed: {exc.strerror}")
                except subprocess.TimeoutExpired:
                    task.exit_code = 137
                    return Outcome(1.0, "FAILED", "NonZeroExitCode: script timed out", 137)
                task.stdout, task.stderr = done.stdout, done.stderr
                if done.returncode != 0:
                    code = done.returncode if done.returncode > 0 else 128 - done.returncode
                    if len(tasks) == 1:
                        return exit_with(code)
                    return rank_fails(task.rank, code)
        return succeed(1.0)

    def _tasks(self, obj: SimObject, nodes: tuple[str, ...]) -> builtins.list[SimTask]:
        per_node = obj.spec.resources.tasks_per_node
        return [
            SimTask(node_id * per_node + local, node, local)
            for node_id, node in enumerate(nodes)
            for local in range(per_node)
        ]

    def task_env(self, obj: SimObject, task: SimTask) -> dict[str, str]:
        """What the task sees: the scheduler's variables, and ``spec.env`` expanded with
        them (built only for what reads it: ``env`` and scripts)."""
        nodes = obj.current.nodes or obj.held_nodes
        per_node = obj.spec.resources.tasks_per_node
        own = {
            "SIM_JOB_ID": obj.object_id,
            "SIM_NODELIST": ",".join(nodes),
            "SIM_FIRST_NODE": nodes[0] if nodes else "",
            "SIM_NNODES": str(len(nodes)),
            "SIM_NTASKS": str(len(nodes) * per_node),
            "SIM_TASKS_PER_NODE": str(per_node),
            "SIM_NODEID": str(task.rank // per_node),
            "SIM_PROCID": str(task.rank),
            "SIM_LOCALID": str(task.local_rank),
        }
        env = {k: Template(v).safe_substitute(own) for k, v in obj.spec.env.items()}
        return {**own, **env}

    def _start(self, obj: SimObject) -> None:
        execution = obj.current
        nodes = obj.held_nodes
        tasks = self._tasks(obj, nodes)
        outcome = self._outcome(obj, tasks)
        if outcome.state == "BOOT_FAIL":
            execution.nodes = ()
            self._end_now(obj, outcome.state, outcome.reason, outcome.exit_code)
            return
        execution.state = "RUNNING"
        self._changed(obj)
        execution.started_at = self.clock.now()
        execution.nodes = nodes
        execution.tasks = tasks
        limit = obj.spec.resources.time_limit
        if limit is not None and outcome.after > limit.total_seconds():
            outcome = Outcome(
                limit.total_seconds(), "TIMEOUT", "TimeLimit: job reached its time limit"
            )
        obj.epoch += 1
        obj.in_flight = outcome
        self._at(outcome.after, obj, "end")

    def _finish(self, obj: SimObject) -> None:
        outcome = obj.in_flight
        assert outcome is not None
        obj.in_flight = None
        if outcome.state in ("NODE_FAIL",) or outcome.keeps_running:
            self._lose(obj, outcome)
            return
        execution = obj.current
        if outcome.rank is not None and len(execution.tasks) > 1:
            # one task fails now; the others are killed a moment later, in its wake
            task = execution.tasks[outcome.rank]
            task.state, task.exit_code, task.reason = (
                outcome.state,
                outcome.exit_code,
                outcome.reason,
            )
            task.ended_at = self.clock.now()
            execution.failed_nodes, execution.failed_rank = (task.node,), task.rank
            self._changed(obj)
            obj.in_flight = outcome
            obj.epoch += 1
            self._at(self.kill_delay, obj, "kill")
            return
        self._end_now(obj, outcome.state, outcome.reason, outcome.exit_code, rank=outcome.rank)

    def _kill_in_wake(self, obj: SimObject) -> None:
        outcome = obj.in_flight
        assert outcome is not None and outcome.rank is not None
        self._end_now(obj, outcome.state, outcome.reason, outcome.exit_code, rank=outcome.rank)

    def _lose(self, obj: SimObject, outcome: Outcome) -> str:
        execution = obj.current
        nodes = execution.nodes or obj.held_nodes
        if not nodes:
            return ""
        lost = nodes[-1] if outcome.node is None else nodes[outcome.node]
        reason = outcome.reason.format(node=lost)
        execution.failed_nodes = (lost,)
        if outcome.keeps_running:
            self._changed(obj)
            self._say(obj, execution, reason)
            obj.in_flight = None
            obj.epoch += 1
        else:
            self._end_now(obj, "NODE_FAIL", reason, None, lost=lost)
        return lost

    def _end_tasks(
        self,
        execution: SimExecution,
        state: str,
        reason: str,
        exit_code: int | None,
        rank: int | None,
        lost: str | None,
    ) -> None:
        now = self.clock.now()
        for task in execution.tasks:
            if task.ended_at is not None:
                continue
            if lost is not None and task.node == lost:
                task.state, task.exit_code, task.reason = "NODE_FAIL", None, reason
            elif (lost is not None or rank is not None) and task.rank != rank:
                task.state, task.exit_code = KILLED, 137
                task.reason = f"killed: {reason}"
            else:
                task.state, task.exit_code, task.reason = state, exit_code, reason
            task.ended_at = now

    def _end_now(
        self,
        obj: SimObject,
        state: str,
        reason: str,
        exit_code: int | None,
        rank: int | None = None,
        lost: str | None = None,
    ) -> None:
        if obj.ended:
            return
        execution = obj.current
        obj.in_flight = None
        obj.epoch += 1
        if rank is not None and execution.tasks and not execution.failed_nodes:
            failing = execution.tasks[min(rank, len(execution.tasks) - 1)]
            execution.failed_nodes, execution.failed_rank = (failing.node,), failing.rank
        self._end_tasks(execution, state, reason, exit_code, rank, lost)
        execution.state, execution.exit_code = state, exit_code
        self._changed(obj)
        self._say(obj, execution, reason)
        execution.ended_at = self.clock.now()
        if obj.object_id in self._queue:
            self._queue.remove(obj.object_id)
        self._release_nodes(obj)
        if state in ("PREEMPTED", "NODE_FAIL") and obj.requeues_left > 0:
            obj.requeues_left -= 1
            obj.executions.append(
                SimExecution(
                    index=execution.index + 1,
                    reason=f"Requeued: {state} {reason}".strip(),
                    reason_at=self.clock.now(),
                )
            )
            self._try_start(obj)
        self._drain_queue()
