"""How an execution of the simulated scheduler ends: :class:`Outcome`, and a helper per
ending a test scripts with :meth:`SimScheduler.plan` (``succeed``, ``exit_with``,
``killed_by_signal``, ``out_of_memory``, ``launch_failure``, ``node_loss``, ``rank_fails``,
``runs_forever``); any other word is an ``Outcome`` of its own. What the operator does
to a running object (preempt, lose a node, cancel or hold it) is in :mod:`.faults`."""

from __future__ import annotations

from dataclasses import dataclass


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
