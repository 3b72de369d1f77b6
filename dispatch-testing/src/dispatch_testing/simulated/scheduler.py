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

The class is built in layers, one module each: :mod:`.engine` (the clock, events, nodes,
running and ending), :mod:`.faults` (the operator's hand), this module (the client calls
and the listing); :mod:`.outcomes` and :mod:`.objects` hold its vocabulary, which this
module also exports.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from dispatch import JobSpec

from dispatch_testing.simulated.engine import EPOCH, Clock
from dispatch_testing.simulated.faults import OperatorHand
from dispatch_testing.simulated.objects import (
    ENDED_WORDS,
    KILLED,
    SHAPE,
    ExecRow,
    Row,
    SimExecution,
    SimObject,
    SimTask,
    TaskRow,
)
from dispatch_testing.simulated.outcomes import (
    Outcome,
    exit_with,
    killed_by_signal,
    launch_failure,
    node_loss,
    out_of_memory,
    rank_fails,
    runs_forever,
    succeed,
)

__all__ = [
    "ENDED_WORDS",
    "EPOCH",
    "KILLED",
    "SHAPE",
    "Clock",
    "ExecRow",
    "Outcome",
    "Row",
    "SchedulerDown",
    "SimExecution",
    "SimObject",
    "SimScheduler",
    "SimTask",
    "TaskRow",
    "exit_with",
    "killed_by_signal",
    "launch_failure",
    "node_loss",
    "out_of_memory",
    "rank_fails",
    "runs_forever",
    "succeed",
]


_new = tuple.__new__


class SchedulerDown(ConnectionError):
    """The simulated controller does not answer (the adapter translates it to Unreachable)."""


class SimScheduler(OperatorHand):
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
