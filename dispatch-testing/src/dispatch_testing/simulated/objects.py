"""What the simulated scheduler keeps (objects, their executions and tasks) and what its
listing prints (:class:`Row`, :class:`ExecRow`, :class:`TaskRow`), in its own words."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from dispatch import JobSpec

from dispatch_testing.simulated.outcomes import Outcome

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
