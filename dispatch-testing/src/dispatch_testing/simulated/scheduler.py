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

import builtins
import heapq
import itertools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from string import Template
from typing import NamedTuple

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


#: where a :class:`Row`'s fields other than its object id and tags start
SHAPE = 2
_new = tuple.__new__


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
    reporting RUNNING with ``reason`` (the FailureTarget case).

    ``rank``: a failure of that one task (rank) of a multi-task execution; the scheduler
    kills the other tasks :attr:`SimScheduler.kill_delay` seconds later (kill-on-bad-exit),
    so they are killed *in its wake*. ``node``: for a node loss, the index of the node lost
    (None: the last node of the execution, a non-batch node when there are several).
    ``{node}`` in ``reason`` is replaced by the node's name when the ending happens.
    """

    after: float
    state: str
    reason: str = ""
    exit_code: int | None = None
    keeps_running: bool = False
    rank: int | None = None
    node: int | None = None


def succeed(after: float = 1.0) -> Outcome:
    return Outcome(after, "COMPLETED", "", 0)


def exit_with(code: int, after: float = 1.0) -> Outcome:
    return Outcome(after, "FAILED", f"NonZeroExitCode: exit code {code}", code)


def killed_by_signal(signal: int = 9, after: float = 1.0) -> Outcome:
    return Outcome(after, "FAILED", f"NonZeroExitCode: killed by signal {signal}", 128 + signal)


def out_of_memory(after: float = 1.0, rank: int = 0) -> Outcome:
    return Outcome(
        after,
        "OUT_OF_MEMORY",
        f"OutOfMemory: task {rank} exceeded its memory limit",
        137,
        rank=rank,
    )


def launch_failure(
    reason: str = "BootFail: exec of /missing/bin/train failed: No such file",
) -> Outcome:
    return Outcome(0.0, "BOOT_FAIL", reason, None)


def node_loss(after: float = 1.0, keeps_running: bool = False, node: int | None = None) -> Outcome:
    if keeps_running:
        reason = "NodeNotResponding: {node} lost heartbeat"
        return Outcome(after, "RUNNING", reason, None, True, node=node)
    return Outcome(after, "NODE_FAIL", "NodeFail: {node} lost heartbeat", None, node=node)


def rank_fails(rank: int, code: int, after: float = 1.0) -> Outcome:
    """One task exits ``code``; the scheduler then kills the others (kill-on-bad-exit)."""
    return Outcome(
        after, "FAILED", f"NonZeroExitCode: task {rank} exit code {code}", code, rank=rank
    )


def runs_forever() -> Outcome:
    return Outcome(float("inf"), "COMPLETED", "", 0)


#: a task's word once the scheduler killed it because another task failed
KILLED = "KILLED"


@dataclass
class SimTask:
    """One task (rank) of an execution, on one node, with what it printed."""

    rank: int
    node: str
    local_rank: int
    state: str = "RUNNING"
    exit_code: int | None = None
    reason: str = ""
    ended_at: datetime | None = None
    stdout: bytes = b""
    stderr: bytes = b""


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
    tasks: list[SimTask] = field(default_factory=list)
    #: the nodes the scheduler blames for the ending (lost, or running the failed task)
    failed_nodes: tuple[str, ...] = ()
    failed_rank: int | None = None


@dataclass
class SimObject:
    object_id: str
    tags: dict[str, str]
    spec: JobSpec
    created_at: datetime
    gated: bool
    requeues_left: int = 0
    exclude: frozenset[str] = frozenset()
    admin_hold: str | None = None
    admin_hold_at: datetime | None = None
    garbled: str | None = None
    garbled_at: datetime | None = None
    hidden_until: datetime | None = None
    executions: list[SimExecution] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    #: how the running execution will end, once started
    in_flight: Outcome | None = None
    #: the nodes reserved for (or running) the current execution
    held_nodes: tuple[str, ...] = ()
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


class TaskRow(NamedTuple):
    rank: int
    node: str
    state: str
    exit_code: int | None
    reason: str
    ended_at: datetime | None


class ExecRow(NamedTuple):
    index: int  # type: ignore[assignment]  # shadows tuple.index, as the scheduler names it
    state: str
    reason: str
    exit_code: int | None
    started_at: datetime | None
    ended_at: datetime | None
    nodes: tuple[str, ...]
    reason_at: datetime | None = None
    tasks: tuple[TaskRow, ...] = ()
    failed_nodes: tuple[str, ...] = ()
    failed_rank: int | None = None


class Row(NamedTuple):
    """One line of the scheduler's listing: what a ``squeue``/``kubectl get`` would print.

    Rows are named tuples (immutable, made in C: a cold listing of 350,000 objects makes
    that many); ``row[SHAPE:]`` is everything but the object's id and tags."""

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
    :meth:`release`, :meth:`cancel`, :meth:`list`, :meth:`state_of`, :meth:`output`.
    Everything else is the operator's or the test's hand: it is not counted and works while
    the scheduler is down.

    Nodes are named ``<prefix>-node-001``...; an execution gets the lowest-numbered free
    nodes it is not told to avoid (``exclude``), so a resubmission lands on the node that
    just failed unless it is kept off it. A lost node comes back at once (it rebooted).

    Each task of an execution sees the scheduler's own variables (``SIM_JOB_ID``,
    ``SIM_NODELIST``, ``SIM_FIRST_NODE``, ``SIM_NNODES``, ``SIM_NODEID``, ``SIM_PROCID``,
    ``SIM_LOCALID``, ``SIM_NTASKS``, ``SIM_TASKS_PER_NODE``), and ``${SIM_...}`` in the
    values of ``spec.env`` is expanded per task, the way a pod's env can refer to its own
    fields: that is how an adapter builds a launch contract from them.

    Commands are simulated: ``sleep N`` runs N seconds, ``false`` exits 1, ``echo WORDS``
    prints WORDS, ``env`` prints the task's environment, anything else runs 1 second and
    exits 0. A *script* really runs, once per task, when its execution starts: its text is
    written to a file and exec'd, so its own ``#!`` line chooses the interpreter, as a real
    scheduler does; its exit status and output are the task's (its clock time is 1 second).
    """

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

    # -- faults and the operator's hand (not client calls) -------------------------------

    def plan(self, job_id: str, submission: int, *outcomes: Outcome) -> None:
        """Script how each execution of that submission's object will end, in order; once
        the script is spent, an execution runs as its command says (see the class)."""
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
        self._changed(obj)

    def unhide(self, object_id: str) -> None:
        obj = self._objects[object_id]
        obj.hidden_until = None
        self._changed(obj)

    def garble(self, object_id: str, raw: str) -> None:
        """From now on the scheduler answers ``raw`` for this object's state."""
        obj = self._objects[object_id]
        obj.garbled, obj.garbled_at = raw, self.clock.now()
        self._changed(obj)

    def preempt(self, object_id: str, reason: str = "Preempted by a higher priority job") -> None:
        self._end_now(self._objects[object_id], "PREEMPTED", reason, None)

    def lose_node(
        self, object_id: str, keeps_running: bool = False, node: str | None = None
    ) -> str:
        """A node of the running execution dies (default: its last node); returns its name.

        Its tasks end ``NODE_FAIL`` and the others are killed in its wake, unless
        ``keeps_running``: then the object keeps reporting RUNNING, saying the node is lost.
        """
        obj = self._objects[object_id]
        execution = obj.current
        nodes = execution.nodes or obj.held_nodes
        index = nodes.index(node) if node is not None else None
        outcome = node_loss(0.0, keeps_running, node=index)
        return self._lose(obj, outcome)

    def nodes_of(self, object_id: str) -> tuple[str, ...]:
        """The nodes the object's current execution runs on (or has reserved)."""
        obj = self._objects[object_id]
        return obj.current.nodes or obj.held_nodes

    def admin_cancel(self, object_id: str, who: str = "root") -> None:
        self._end_now(self._objects[object_id], "CANCELLED", f"cancelled by {who}", None)

    def admin_hold(self, object_id: str, reason: str = "JobHeldAdmin") -> None:
        obj = self._objects[object_id]
        if obj.current.state in ("PENDING", "GATED"):
            obj.admin_hold, obj.admin_hold_at = reason, self.clock.now()
            self._changed(obj)
            obj.epoch += 1
            if obj.object_id in self._queue:
                self._queue.remove(obj.object_id)
            self._release_nodes(obj)

    def admin_release(self, object_id: str) -> None:
        obj = self._objects[object_id]
        obj.admin_hold = None
        self._changed(obj)
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
        self,
        tags: dict[str, str],
        spec: JobSpec,
        hold: bool = False,
        requeue: int = 0,
        exclude: frozenset[str] = frozenset(),
    ) -> str:
        """Queue an object; ``hold`` keeps it GATED until :meth:`release`; ``exclude``
        names nodes it must never run on."""
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
                exclude=frozenset(exclude),
                outcomes=list(self._plans.get(key, ())),
            )
            obj.executions.append(SimExecution(index=0, state="GATED" if hold else "PENDING"))
            self._objects[object_id] = obj
            self._by_job.setdefault(key[0], []).append(object_id)
            self._listed.pop(key[0], None)
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
        self._changed(obj)
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
        rows: builtins.list[Row] = []
        for job_id in job_ids:
            rows.extend(self._rows_of(job_id))
        return rows

    def list_by_job(self, job_ids: Sequence[str]) -> dict[str, tuple[Row, ...]]:
        """:meth:`list` grouped by job id, in one answer (as ``squeue`` sorted by name):
        a job whose objects did not change gets the very tuple it got last time, so an
        adapter can map it once."""
        self._call()
        listing: dict[str, tuple[Row, ...]] = {}
        listed = self._listed
        for job_id in job_ids:
            rows = listed.get(job_id)
            if rows is None:
                rows = self._rows_of(job_id)
            if rows:
                listing[job_id] = rows
        return listing

    def _rows_of(self, job_id: str) -> tuple[Row, ...]:
        rows = self._listed.get(job_id)
        if rows is not None:
            return rows
        objects = [self._objects[i] for i in self._by_job.get(job_id, ())]
        now = self.clock.now()
        rows = tuple(
            self._row(obj) for obj in objects if obj.hidden_until is None or now >= obj.hidden_until
        )
        if all(obj.hidden_until is None for obj in objects):  # no clock in the answer
            self._listed[job_id] = rows
        return rows

    def output(
        self,
        object_id: str,
        stream: str = "stdout",
        node: str | None = None,
        rank: int | None = None,
    ) -> bytes:
        """What an object's tasks printed, every execution in order, each execution's
        tasks in node then rank order; only that node's or rank's when given. An unknown
        object printed nothing; a node or rank it never ran raises ``LookupError``."""
        self._call()
        obj = self._objects.get(object_id)
        if obj is None:
            return b""
        tasks = [t for e in obj.executions for t in e.tasks]
        if node is not None and all(t.node != node for t in tasks):
            raise LookupError(f"{object_id} never ran on node {node!r}")
        if rank is not None and all(t.rank != rank for t in tasks):
            raise LookupError(f"{object_id} has no rank {rank}")
        chosen = [
            t
            for t in tasks
            if (node is None or t.node == node) and (rank is None or t.rank == rank)
        ]
        return b"".join(t.stdout if stream == "stdout" else t.stderr for t in chosen)

    # -- the machinery -------------------------------------------------------------------

    def _row(self, obj: SimObject) -> Row:
        if obj.row is not None and obj.row_version == obj.version:
            return obj.row
        obj.row, obj.row_version = self._fresh_row(obj), obj.version
        return obj.row

    def _fresh_row(self, obj: SimObject) -> Row:
        # tuple.__new__ skips the named tuples' Python-level __new__: a cold listing of
        # 50,000 jobs makes 350,000 rows
        executions = tuple(
            [
                _new(
                    ExecRow,
                    (
                        e.index,
                        e.state,
                        e.reason,
                        e.exit_code,
                        e.started_at,
                        e.ended_at,
                        e.nodes,
                        e.reason_at,
                        tuple(
                            [
                                _new(
                                    TaskRow,
                                    (t.rank, t.node, t.state, t.exit_code, t.reason, t.ended_at),
                                )
                                for t in e.tasks
                            ]
                        ),
                        e.failed_nodes,
                        e.failed_rank,
                    ),
                )
                for e in obj.executions
            ]
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
