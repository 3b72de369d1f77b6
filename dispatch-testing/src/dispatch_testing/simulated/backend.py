"""The ``simulated`` backend: a dispatch adapter over :class:`SimScheduler`.

It is written the way a real adapter is: it tags objects so discovery finds them after a
crash, lists many jobs in one scheduler call, maps the scheduler's words through one table,
reports what it cannot map as ``unknown`` with the words verbatim, and translates a silent
controller into :class:`dispatch.Unreachable`. The supervisor's tests and benchmarks run on it.

Multi-node: it builds the launch contract (S-41) from the scheduler's per-task variables,
keeps a resubmission off the nodes ``spec.exclude_nodes`` names (S-43), attributes an
ending to the node and rank the scheduler blames (S-42) and takes an execution's cause
from its tasks' endings by the core's root-cause rule. It serves what the tasks printed
through ``dispatch_logs`` (S-46).

Its ``dispatch.backends: simulated`` entry point exists only while registered (see
:mod:`.registration`); loaded from it the backend gets a fresh in-memory scheduler of its
own, so share one by constructing it yourself::

    scheduler = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(scheduler)})
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import ClassVar

from dispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    Execution,
    JobSpec,
    Launcher,
    LogSelection,
    ObjectView,
    Phase,
    Provenance,
    SubmitRefused,
    Unreachable,
    hookimpl,
)
from dispatch.core.cause import root_cause
from dispatch.model.base import build
from dispatch.model.errors import BadInput

from dispatch_testing.simulated.scheduler import (
    KILLED,
    SHAPE,
    ExecRow,
    Row,
    SchedulerDown,
    SimScheduler,
    TaskRow,
)

#: the scheduler's word -> (phase, the cause kind it means, who says so); None: no cause
_ENDINGS: dict[str, tuple[CauseKind, Provenance]] = {
    "COMPLETED": (CauseKind.NONE, Provenance.APPLICATION),
    "FAILED": (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION),
    "TIMEOUT": (CauseKind.TIME_LIMIT, Provenance.SCHEDULER),
    "PREEMPTED": (CauseKind.PREEMPTED, Provenance.SCHEDULER),
    "NODE_FAIL": (CauseKind.NODE_LOST, Provenance.SCHEDULER),
    "OUT_OF_MEMORY": (CauseKind.OUT_OF_MEMORY, Provenance.SCHEDULER),
    "BOOT_FAIL": (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER),
    "CANCELLED": (CauseKind.CANCELLED, Provenance.ACTOR),
}
#: reason prefixes that give a waiting or running object a cause
_WAITING: dict[tuple[str, str], CauseKind] = {
    ("PENDING", "Resources"): CauseKind.NO_CAPACITY,
    ("PENDING", "Requeued"): CauseKind.REQUEUED,
    ("RUNNING", "NodeNotResponding"): CauseKind.NODE_LOST,
    ("HELD", ""): CauseKind.HELD,
}
_ALIVE = {
    "PENDING": Phase.PENDING,
    "GATED": Phase.GATED,
    "HELD": Phase.HELD,
    "RUNNING": Phase.RUNNING,
}

REPORTS = (
    frozenset(kind for kind, _ in _ENDINGS.values())
    | frozenset(_WAITING.values())
    | {CauseKind.UNKNOWN}
)

#: S-41, built from the scheduler's per-task variables (expanded by the scheduler per task)
CONTRACT = {
    "MASTER_ADDR": "${SIM_FIRST_NODE}",
    "WORLD_SIZE": "${SIM_NTASKS}",
    "RANK": "${SIM_PROCID}",
    "LOCAL_RANK": "${SIM_LOCALID}",
    "NODE_RANK": "${SIM_NODEID}",
    "NNODES": "${SIM_NNODES}",
    "LOCAL_WORLD_SIZE": "${SIM_TASKS_PER_NODE}",
}
#: torchrun's own variables, for ``launcher = torchrun`` (one torchrun per node)
TORCHRUN = {
    "PET_NNODES": "${SIM_NNODES}",
    "PET_NODE_RANK": "${SIM_NODEID}",
    "PET_NPROC_PER_NODE": "${SIM_TASKS_PER_NODE}",
    "PET_MASTER_ADDR": "${SIM_FIRST_NODE}",
}
#: distinct row shapes whose validated view is kept (then forgotten all at once)
SHAPES = 20_000
#: the kit reads a log in chunks of this size at most
CHUNK = 64 * 1024

OPTIONS = {
    "requeue": "how many times the scheduler itself requeues the object after a "
    "preemption or a node failure (native requeue)"
}


class SimulatedBackend:
    """The adapter. ``scheduler`` defaults to a fresh in-memory one."""

    #: the name an instance made from the entry point (no arguments) declares
    default_name: ClassVar[str] = "simulated"
    #: the launch contract every task gets (MASTER_PORT is added per submission)
    contract: ClassVar[dict[str, str]] = CONTRACT

    def __init__(
        self,
        scheduler: SimScheduler | None = None,
        name: str | None = None,
        node_loss_window: timedelta = timedelta(minutes=10),
        pending_windows: dict[CauseKind, timedelta] | None = None,
    ) -> None:
        self.scheduler = scheduler or SimScheduler()
        self._views: dict[str, tuple[Row, ObjectView | None]] = {}
        #: per job, its rows as last listed and their views: the scheduler hands out the
        #: same tuple of rows until one of the job's objects changes
        self._job_views: dict[str, tuple[tuple[Row, ...], tuple[ObjectView, ...]]] = {}
        self._shapes: dict[tuple[object, ...], ObjectView | None] = {}
        self._causes: dict[tuple[tuple[str, object], ...], Cause] = {}
        self.name = name or self.default_name
        self.node_loss_window = node_loss_window
        if pending_windows is None:
            pending_windows = {CauseKind.NO_CAPACITY: timedelta(hours=1)}
        self.pending_windows = pending_windows

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=self.name,
            description="in-memory simulated scheduler with fault injection (dispatch-testing)",
            node_loss_window=self.node_loss_window,
            pending_windows=self.pending_windows,
            native_actions=frozenset({Action.REQUEUE}),
            reports=REPORTS,
            # every capability but arrays: a sweep's members are one object each here
            capabilities=frozenset(Capability) - {Capability.ARRAYS},
            options=OPTIONS,
        )

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        try:
            listing = self.scheduler.list_by_job(job_ids)
        except SchedulerDown as exc:
            raise Unreachable(f"simulated scheduler: {exc}") from exc
        objects: list[ObjectView] = []
        for job_id, rows in listing.items():
            cached = self._job_views.get(job_id)
            if cached is None or cached[0] is not rows:
                views = tuple(view for view in map(self._view, rows) if view is not None)
                self._job_views[job_id] = cached = (rows, views)
            objects.extend(cached[1])
        return Discovery(backend=self.name, at=self.scheduler.now(), objects=tuple(objects))

    @hookimpl
    def dispatch_validate(self, spec: JobSpec) -> None:
        raw = spec.options.get("requeue", "0")
        if not raw.isdigit():
            raise BadInput(f"option requeue={raw!r}: expected a whole number of requeues")

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        raw = spec.options.get("requeue", "0")
        if not raw.isdigit():
            raise SubmitRefused(f"option requeue={raw!r} of job {job_id}: expected a whole number")
        tags = {SimScheduler.TAG_JOB: job_id, SimScheduler.TAG_SUBMISSION: str(submission)}
        port = str(29500 + zlib.crc32(f"{job_id}/{submission}".encode()) % 20000)
        contract = {**self.contract, "MASTER_PORT": port}
        if spec.launcher is Launcher.TORCHRUN:
            contract |= {**TORCHRUN, "PET_MASTER_PORT": port}
        spec = spec.model_copy(update={"env": {**spec.env, **contract}})
        try:
            return self.scheduler.submit(
                tags, spec, hold=gated, requeue=int(raw), exclude=spec.exclude_nodes
            )
        except SchedulerDown as exc:
            raise Unreachable(f"simulated scheduler: {exc}") from exc

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        try:
            self.scheduler.release(object_id)
        except SchedulerDown as exc:
            raise Unreachable(f"simulated scheduler: {exc}") from exc

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        try:
            self.scheduler.cancel(object_id, cause.detail, who=cause.actor or "dispatch")
        except SchedulerDown as exc:
            raise Unreachable(f"simulated scheduler: {exc}") from exc

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        try:
            printed = self.scheduler.output(
                object_id, selection.stream.value, node=selection.node, rank=selection.rank
            )
        except SchedulerDown as exc:
            raise Unreachable(f"simulated scheduler: {exc}") from exc
        except LookupError as exc:
            where = f"job {selection.job_id} submission {selection.submission}"
            raise BadInput(f"logs of {where}: {exc}") from exc
        rest = printed[selection.offset :]
        return (rest[i : i + CHUNK] for i in range(0, len(rest), CHUNK))

    # -- mapping the scheduler's words ---------------------------------------------------

    def _view(self, row: Row) -> ObjectView | None:
        """The row mapped; memoised per object, because a view is a pure function of its
        row, the scheduler hands out the same row until the object changes, and a
        10,000-job tick mostly sees objects that did not change."""
        cached = self._views.get(row.object_id)
        if cached is not None and cached[0] is row:
            return cached[1]
        view = self._shaped(row)
        self._views[row.object_id] = (row, view)
        return view

    def _shaped(self, row: Row) -> ObjectView | None:
        """The row mapped and validated once per shape (every field but the object's id
        and tags): a view is a function of its shape, with the object's id, job id and
        submission filled in, so rows alike (a cold start lists 50,000 jobs' preempted
        objects, 300,000 of one shape) share one validation and differ in those three,
        which are checked here as ``_map_row`` checks them (``build``, ``Model.trusted``
        without the keywords: the rest is a validated view's)."""
        job_id = row.tags.get(SimScheduler.TAG_JOB)
        submission = row.tags.get(SimScheduler.TAG_SUBMISSION, "")
        if not job_id or not submission.isdigit() or int(submission) < 1:
            return None  # not one of ours: the tags are how we know
        shape = row[SHAPE:]
        like = self._shapes.get(shape)
        if like is None:
            if len(self._shapes) >= SHAPES:
                self._shapes.clear()
            like = self._shapes[shape] = self._map_row(row)
            if like is None:
                return None
        values = like.__dict__.copy()
        values.update(object_id=row.object_id, job_id=job_id, submission=int(submission))
        return build(ObjectView, values)

    def _map_row(self, row: Row) -> ObjectView | None:
        job_id = row.tags.get(SimScheduler.TAG_JOB)
        submission = row.tags.get(SimScheduler.TAG_SUBMISSION, "")
        if not job_id or not submission.isdigit() or int(submission) < 1:
            return None  # not one of ours: the tags are how we know
        executions = tuple(self._execution(e) for e in row.executions)
        last = row.executions[-1]
        phase, cause = self._map(row.state, row.reason, row.exit_code, last, row.since)
        if phase is Phase.ENDED and executions[-1].node_causes and row.state in _ENDINGS:
            cause = executions[-1].cause  # the root cause of its tasks' endings (S-42)
        return ObjectView(
            object_id=row.object_id,
            job_id=job_id,
            submission=int(submission),
            phase=phase,
            scheduler_state=row.state,
            cause=cause,
            executions=executions,
            created_at=row.created_at,
        )

    def _execution(self, e: ExecRow) -> Execution:
        _, cause = self._map(e.state, e.reason, e.exit_code, e, e.reason_at)
        ended = e.state in _ENDINGS or (
            cause is not None and cause.kind is CauseKind.UNKNOWN and e.ended_at is not None
        )
        node_causes: tuple[Cause, ...] = ()
        if ended and len(e.tasks) > 1 and all(t.ended_at is not None for t in e.tasks):
            node_causes = tuple(self._task_cause(t) for t in e.tasks)
            cause = self._root(node_causes) or cause
        return Execution(
            index=e.index,
            started_at=e.started_at,
            ended_at=e.ended_at,
            nodes=e.nodes,
            cause=cause if ended else None,
            node_causes=node_causes,
        )

    def _cause(self, **fields: object) -> Cause:
        """``Cause(**fields)``, validated once per distinct fields: the endings of many
        objects read alike (a cold start maps 300,000 preempted executions)."""
        key = tuple(fields.items())
        cause = self._causes.get(key)
        if cause is None:
            if len(self._causes) >= SHAPES:
                self._causes.clear()
            cause = self._causes[key] = Cause(**fields)
        return cause

    def _root(self, node_causes: tuple[Cause, ...]) -> Cause | None:
        """Which task's ending ended the execution: the core's rule (S-21, S-42)."""
        return root_cause(node_causes)

    def _task_cause(self, task: TaskRow) -> Cause:
        if task.state == KILLED:
            kind, provenance = CauseKind.CANCELLED, Provenance.SCHEDULER
        else:
            kind, provenance = _ENDINGS.get(task.state, (CauseKind.UNKNOWN, Provenance.SCHEDULER))
        return self._cause(
            kind=kind,
            provenance=provenance,
            detail=task.reason or task.state,
            exit_code=task.exit_code,
            at=task.ended_at,
            nodes=(task.node,),
            rank=task.rank,
        )

    def _map(
        self,
        state: str,
        reason: str,
        exit_code: int | None,
        last: ExecRow,
        since: datetime | None,
    ) -> tuple[Phase, Cause | None]:
        at = last.ended_at or since
        blamed = {"nodes": last.failed_nodes, "rank": last.failed_rank}
        if state in _ENDINGS:
            kind, provenance = _ENDINGS[state]
            actor = None
            if kind is CauseKind.CANCELLED:
                actor = reason.removeprefix("cancelled by ").split(":", 1)[0] or None
            return Phase.ENDED, self._cause(
                kind=kind,
                provenance=provenance,
                actor=actor,
                detail=reason or state,
                exit_code=exit_code,
                at=at,
                **(blamed if kind not in (CauseKind.NONE, CauseKind.CANCELLED) else {}),
            )
        if state in _ALIVE:
            for (word, prefix), kind in _WAITING.items():
                if word == state and reason.startswith(prefix) and (reason or word == "HELD"):
                    cause = self._cause(
                        kind=kind,
                        provenance=Provenance.SCHEDULER,
                        detail=reason or state,
                        at=at,
                        **(blamed if kind is CauseKind.NODE_LOST else {}),
                    )
                    return _ALIVE[state], cause
            return _ALIVE[state], None
        # S-4: an answer we cannot map is unknown, verbatim; alive unless the scheduler
        # shows the execution ended, so nothing is ever started beside it
        if last.ended_at is not None:
            phase = Phase.ENDED
        else:
            phase = Phase.RUNNING if last.started_at is not None else Phase.PENDING
        detail = f"{state} {reason}".strip()
        unknown = self._cause(
            kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail, at=at
        )
        return phase, unknown
