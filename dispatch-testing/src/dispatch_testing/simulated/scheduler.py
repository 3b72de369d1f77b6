"""An in-memory batch scheduler with its own vocabulary, a clock tests move, and faults.

It is a *scheduler*, not an adapter: it speaks in its own state words (``PENDING``,
``RUNNING``, ``PREEMPTED``, ``NODE_FAIL``...) with free-text reasons, the way Slurm does, and
knows nothing of dispatch's causes. :mod:`dispatch_testing.simulated.backend` is the adapter
that maps those words, so the mapping is exercised for real and an answer it cannot map
(``garble``) really is unmappable.

Time never passes by itself: :meth:`SimScheduler.advance` moves the clock and runs every
event due, so tests and benchmarks never sleep. Discovery is a dict lookup per job id, so a
10,000-job tick costs one call and O(jobs asked) work.

Faults a test can inject: an unreachable period (every client call raises
:class:`SchedulerDown`), slow answers (each call moves the clock by ``latency``), duplicate
objects for one submission, objects vanishing from listings, answers nobody can map,
preemption, node loss that keeps reporting running (like a Kubeflow FailureTarget), OOM,
time limit, exit N, launch failure, no capacity, an admin's cancel or hold.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dispatch import JobSpec

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

#: The scheduler's words for an execution that is over.
ENDED_WORDS = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "PREEMPTED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "CANCELLED",
    }
)


class SchedulerDown(ConnectionError):
    """The simulated controller does not answer (the adapter translates it to Unreachable)."""


class Clock:
    """Time for the simulated scheduler; only :meth:`SimScheduler.advance` moves it."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def _set(self, when: datetime) -> None:
        self._now = max(self._now, when)


@dataclass(frozen=True)
class Outcome:
    """How one execution ends, ``after`` seconds of running: the scheduler's word, its
    reason text and exit code. ``keeps_running``: the node is gone but the object keeps
    reporting RUNNING with ``reason`` (the FailureTarget case)."""

    after: float
    state: str
    reason: str = ""
    exit_code: int | None = None
    keeps_running: bool = False


def succeed(after: float = 1.0) -> Outcome:
    return Outcome(after, "COMPLETED", "", 0)


def exit_with(code: int, after: float = 1.0) -> Outcome:
    return Outcome(after, "FAILED", f"NonZeroExitCode: exit code {code}", code)


def killed_by_signal(signal: int = 9, after: float = 1.0) -> Outcome:
    return Outcome(after, "FAILED", f"NonZeroExitCode: killed by signal {signal}", 128 + signal)


def out_of_memory(after: float = 1.0) -> Outcome:
    return Outcome(after, "OUT_OF_MEMORY", "OutOfMemory: task 0 exceeded its memory limit", 137)


def launch_failure(
    reason: str = "BootFail: exec of /missing/bin/train failed: No such file",
) -> Outcome:
    return Outcome(0.0, "BOOT_FAIL", reason, None)


def node_loss(after: float = 1.0, keeps_running: bool = False) -> Outcome:
    if keeps_running:
        return Outcome(after, "RUNNING", "NodeNotResponding: sim-node lost heartbeat", None, True)
    return Outcome(after, "NODE_FAIL", "NodeFail: sim-node lost heartbeat", None)


def runs_forever() -> Outcome:
    return Outcome(float("inf"), "COMPLETED", "", 0)


@dataclass
class SimExecution:
    index: int
    state: str = "PENDING"
    reason: str = ""
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    nodes: tuple[str, ...] = ()
    #: when the scheduler started giving the current reason
    reason_at: datetime | None = None


@dataclass
class SimObject:
    object_id: str
    tags: dict[str, str]
    spec: JobSpec
    created_at: datetime
    gated: bool
    requeues_left: int = 0
    admin_hold: str | None = None
    admin_hold_at: datetime | None = None
    garbled: str | None = None
    garbled_at: datetime | None = None
    hidden_until: datetime | None = None
    executions: list[SimExecution] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    #: how the running execution will end, once started
    in_flight: Outcome | None = None
    #: bumped whenever a scheduled event of this object becomes stale
    epoch: int = 0
    #: bumped whenever what a listing shows of it changes; its row is cached per version
    version: int = 0
    row: Row | None = None
    row_version: int = -1

    @property
    def current(self) -> SimExecution:
        return self.executions[-1]

    @property
    def ended(self) -> bool:
        return self.current.state in ENDED_WORDS


@dataclass(frozen=True)
class ExecRow:
    index: int
    state: str
    reason: str
    exit_code: int | None
    started_at: datetime | None
    ended_at: datetime | None
    nodes: tuple[str, ...]
    reason_at: datetime | None = None


@dataclass(frozen=True)
class Row:
    """One line of the scheduler's listing: what a ``squeue``/``kubectl get`` would print."""

    object_id: str
    tags: dict[str, str]
    state: str
    reason: str
    exit_code: int | None
    created_at: datetime
    executions: tuple[ExecRow, ...]
    #: since when the scheduler has given this state's reason
    since: datetime | None = None


class SimScheduler:
    """The scheduler. Client calls (counted in :attr:`calls`): :meth:`submit`,
    :meth:`release`, :meth:`cancel`, :meth:`list`. Everything else is the operator's or
    the test's hand: it is not counted and works while the scheduler is down."""

    TAG_JOB = "dispatch.job"
    TAG_SUBMISSION = "dispatch.submission"

    def __init__(
        self,
        clock: Clock | None = None,
        nodes: int | None = None,
        start_delay: float = 0.0,
        prefix: str = "sim",
    ) -> None:
        self.clock = clock or Clock()
        self.total_nodes = nodes
        self.free_nodes = nodes
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
        self._plans: dict[tuple[str, int], list[Outcome]] = {}
        self._duplicates: dict[tuple[str, int], int] = {}
        self._queue: list[str] = []
        self._events: list[tuple[datetime, int, str, int, str]] = []

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
            else:
                self._finish(obj)
        self.clock._set(until)

    def _at(self, seconds: float, obj: SimObject, what: str) -> None:
        if seconds == float("inf"):
            return
        when = self.clock.now() + timedelta(seconds=seconds)
        heapq.heappush(self._events, (when, next(self._seq), obj.object_id, obj.epoch, what))

    # -- faults and the operator's hand (not client calls) -------------------------------

    def plan(self, job_id: str, submission: int, *outcomes: Outcome) -> None:
        """Script how each execution of that submission's object will end, in order; once
        the script is spent, an execution runs as its command says (``sleep N``: N seconds,
        ``false``: exit 1, anything else: 1 second then exit 0)."""
        self._plans[(job_id, submission)] = list(outcomes)

    def duplicate_next(self, job_id: str, submission: int, extra: int = 1) -> None:
        """The next submit of that submission creates ``extra`` more objects with the same tags."""
        self._duplicates[(job_id, submission)] = extra

    def go_down(self, seconds: float | None = None) -> None:
        """The controller stops answering for ``seconds`` of clock time, or until
        :meth:`come_up`."""
        if seconds is None:
            self._down = True
        else:
            self._down_until = self.clock.now() + timedelta(seconds=seconds)

    def come_up(self) -> None:
        self._down = False
        self._down_until = None

    @contextmanager
    def down(self) -> Iterator[None]:
        self.go_down()
        try:
            yield
        finally:
            self.come_up()

    def hide(self, object_id: str, seconds: float | None = None) -> None:
        """The object vanishes from listings (for ``seconds``, or until :meth:`unhide`)."""
        obj = self._objects[object_id]
        obj.hidden_until = (
            datetime.max.replace(tzinfo=UTC)
            if seconds is None
            else self.clock.now() + timedelta(seconds=seconds)
        )

    def unhide(self, object_id: str) -> None:
        self._objects[object_id].hidden_until = None

    def garble(self, object_id: str, raw: str) -> None:
        """From now on the scheduler answers ``raw`` for this object's state."""
        obj = self._objects[object_id]
        obj.garbled, obj.garbled_at = raw, self.clock.now()
        obj.version += 1

    def preempt(self, object_id: str, reason: str = "Preempted by a higher priority job") -> None:
        self._end_now(self._objects[object_id], "PREEMPTED", reason, None)

    def lose_node(self, object_id: str, keeps_running: bool = False) -> None:
        obj = self._objects[object_id]
        outcome = node_loss(0.0, keeps_running)
        if keeps_running:
            self._say(obj, obj.current, outcome.reason)
            obj.in_flight = None
            obj.epoch += 1
        else:
            self._end_now(obj, outcome.state, outcome.reason, None)

    def kill_oom(self, object_id: str) -> None:
        outcome = out_of_memory()
        self._end_now(self._objects[object_id], outcome.state, outcome.reason, outcome.exit_code)

    def admin_cancel(self, object_id: str, who: str = "root") -> None:
        self._end_now(self._objects[object_id], "CANCELLED", f"cancelled by {who}", None)

    def admin_hold(self, object_id: str, reason: str = "JobHeldAdmin") -> None:
        obj = self._objects[object_id]
        if obj.current.state in ("PENDING", "GATED"):
            obj.admin_hold, obj.admin_hold_at = reason, self.clock.now()
            obj.version += 1
            obj.epoch += 1
            if obj.object_id in self._queue:
                self._queue.remove(obj.object_id)

    def admin_release(self, object_id: str) -> None:
        obj = self._objects[object_id]
        obj.admin_hold = None
        obj.version += 1
        self._try_start(obj)

    def objects(self) -> Iterable[SimObject]:
        return self._objects.values()

    # -- client calls --------------------------------------------------------------------

    def _call(self) -> None:
        self.calls += 1
        if self.latency:
            self.advance(self.latency)
        if self._down or (self._down_until is not None and self.clock.now() < self._down_until):
            raise SchedulerDown(f"{self.prefix}ctld: connection refused")

    def submit(
        self, tags: dict[str, str], spec: JobSpec, hold: bool = False, requeue: int = 0
    ) -> str:
        """Queue an object; ``hold`` keeps it GATED until :meth:`release`."""
        self._call()
        key = (tags.get(self.TAG_JOB, ""), int(tags.get(self.TAG_SUBMISSION, "0") or 0))
        copies = 1 + self._duplicates.pop(key, 0)
        first = ""
        for _ in range(copies):
            object_id = f"{self.prefix}-{next(self._ids)}"
            obj = SimObject(
                object_id=object_id,
                tags=dict(tags),
                spec=spec,
                created_at=self.clock.now(),
                gated=hold,
                requeues_left=requeue,
                outcomes=list(self._plans.get(key, ())),
            )
            obj.executions.append(SimExecution(index=0, state="GATED" if hold else "PENDING"))
            self._objects[object_id] = obj
            self._by_job.setdefault(key[0], []).append(object_id)
            self._try_start(obj)
            first = first or object_id
        return first

    def release(self, object_id: str) -> None:
        """Open the gate; releasing an open gate, an ended or unknown object is a no-op."""
        self._call()
        obj = self._objects.get(object_id)
        if obj is None or not obj.gated:
            return
        obj.gated = False
        obj.version += 1
        if obj.current.state == "GATED":
            obj.current.state = "PENDING"
            self._try_start(obj)

    def cancel(self, object_id: str, comment: str = "", who: str = "dispatch") -> None:
        """Cancel an object; cancelling an ended or unknown object is a no-op."""
        self._call()
        obj = self._objects.get(object_id)
        if obj is None or obj.ended:
            return
        reason = f"cancelled by {who}" + (f": {comment}" if comment else "")
        self._end_now(obj, "CANCELLED", reason, None)

    def state_of(self, object_id: str) -> str | None:
        """One object's state word (None for an id it never had), like ``squeue -j``."""
        self._call()
        obj = self._objects.get(object_id)
        return None if obj is None else self._row(obj).state

    def list(self, job_ids: Sequence[str]) -> list[Row]:
        """Every object tagged with one of these job ids, in one answer."""
        self._call()
        now = self.clock.now()
        rows = []
        for job_id in job_ids:
            for object_id in self._by_job.get(job_id, ()):
                obj = self._objects[object_id]
                if obj.hidden_until is not None and now < obj.hidden_until:
                    continue
                rows.append(self._row(obj))
        return rows

    # -- the machinery -------------------------------------------------------------------

    def _row(self, obj: SimObject) -> Row:
        if obj.row is not None and obj.row_version == obj.version:
            return obj.row
        obj.row, obj.row_version = self._fresh_row(obj), obj.version
        return obj.row

    def _fresh_row(self, obj: SimObject) -> Row:
        executions = tuple(
            ExecRow(
                e.index,
                e.state,
                e.reason,
                e.exit_code,
                e.started_at,
                e.ended_at,
                e.nodes,
                e.reason_at,
            )
            for e in obj.executions
        )
        current = obj.current
        state, reason, since = current.state, current.reason, current.reason_at
        if obj.admin_hold is not None and state in ("PENDING", "GATED"):
            state, reason, since = "HELD", obj.admin_hold, obj.admin_hold_at
        if obj.garbled is not None:
            state, reason, since = obj.garbled, "", obj.garbled_at
        return Row(
            obj.object_id,
            obj.tags,
            state,
            reason,
            current.exit_code,
            obj.created_at,
            executions,
            since,
        )

    def _say(self, obj: SimObject, execution: SimExecution, reason: str) -> None:
        if reason != execution.reason:
            execution.reason, execution.reason_at = reason, self.clock.now()
            obj.version += 1

    def _needs(self, obj: SimObject) -> int:
        return obj.spec.resources.nodes

    def _try_start(self, obj: SimObject) -> None:
        if obj.gated or obj.admin_hold is not None or obj.current.state != "PENDING":
            return
        if self.free_nodes is not None:
            assert self.total_nodes is not None
            if self._needs(obj) > self.total_nodes:
                self._say(
                    obj,
                    obj.current,
                    f"Resources: {self._needs(obj)} nodes requested, "
                    f"the cluster has {self.total_nodes}",
                )
                return
            if self._needs(obj) > self.free_nodes or self._queue:
                self._say(obj, obj.current, "Resources: waiting for free nodes")
                if obj.object_id not in self._queue:
                    self._queue.append(obj.object_id)
                return
            self.free_nodes -= self._needs(obj)
        self._say(obj, obj.current, "")
        if self.start_delay:
            self._at(self.start_delay, obj, "start")
        else:
            self._start(obj)

    def _outcome(self, obj: SimObject) -> Outcome:
        if obj.outcomes:
            return obj.outcomes.pop(0)
        command = obj.spec.command
        if len(command) == 2 and command[0] == "sleep":
            return succeed(float(command[1]))
        if command[:1] == ("false",):
            return exit_with(1)
        return succeed(1.0)

    def _start(self, obj: SimObject) -> None:
        execution = obj.current
        outcome = self._outcome(obj)
        if outcome.state == "BOOT_FAIL":
            execution.nodes = ()
            self._end_now(obj, outcome.state, outcome.reason, outcome.exit_code)
            return
        execution.state = "RUNNING"
        obj.version += 1
        execution.started_at = self.clock.now()
        count = self._needs(obj)
        execution.nodes = tuple(f"{self.prefix}-node-{n:03d}" for n in range(1, count + 1))
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
        if outcome.keeps_running:
            self._say(obj, obj.current, outcome.reason)
            obj.epoch += 1
            return
        self._end_now(obj, outcome.state, outcome.reason, outcome.exit_code)

    def _end_now(self, obj: SimObject, state: str, reason: str, exit_code: int | None) -> None:
        if obj.ended:
            return
        execution = obj.current
        was_running = execution.state == "RUNNING"
        obj.in_flight = None
        obj.epoch += 1
        execution.state, execution.exit_code = state, exit_code
        obj.version += 1
        self._say(obj, execution, reason)
        execution.ended_at = self.clock.now()
        if obj.object_id in self._queue:
            self._queue.remove(obj.object_id)
        if was_running and self.free_nodes is not None:
            self.free_nodes += self._needs(obj)
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

    def _drain_queue(self) -> None:
        while self._queue and self.free_nodes is not None:
            obj = self._objects[self._queue[0]]
            if self._needs(obj) > self.free_nodes:
                return
            self._queue.pop(0)
            self.free_nodes -= self._needs(obj)
            self._say(obj, obj.current, "")
            if self.start_delay:
                self._at(self.start_delay, obj, "start")
            else:
                self._start(obj)
