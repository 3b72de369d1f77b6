"""Every closed vocabulary of dispatch, in one place.

Each enum encodes as its documented name (hyphenated) and decodes strictly (S-6): a name this
build does not know is refused by the models that hold it, never mapped to a neighbour.
"""

from __future__ import annotations

from enum import StrEnum


class _Named(StrEnum):
    """A string enum whose value is the public name; ``str()`` gives the name too."""


class State(_Named):
    """S-1: the eight states of a job, exactly."""

    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    RECOVERING = "recovering"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})


class CauseKind(_Named):
    """S-3: why a job or object is where it is; a closed list."""

    NONE = "none"
    PREEMPTED = "preempted"
    NODE_LOST = "node-lost"
    OUT_OF_MEMORY = "out-of-memory"
    TIME_LIMIT = "time-limit"
    NON_ZERO_EXIT = "non-zero-exit"
    LAUNCH_FAILED = "launch-failed"
    NO_CAPACITY = "no-capacity"
    HELD = "held"
    RELEASED = "released"
    REQUEUED = "requeued"
    CANCELLED = "cancelled"
    DUPLICATE = "duplicate"
    UNKNOWN = "unknown"


#: Causes that never end an object, so no rule may be written on them (S-8).
NON_ENDING_CAUSES = frozenset(
    {CauseKind.HELD, CauseKind.RELEASED, CauseKind.REQUEUED, CauseKind.DUPLICATE}
)
#: Causes a rule may never cover: success, and a cancel that reached the scheduler (S-8, S-12).
UNCOVERABLE_CAUSES = frozenset({CauseKind.NONE, CauseKind.CANCELLED})
#: Causes that can end an object and that a rule could cover (the universe of S-10).
COVERABLE_ENDINGS = frozenset(CauseKind) - NON_ENDING_CAUSES - UNCOVERABLE_CAUSES


class Provenance(_Named):
    """S-2: who said so."""

    SCHEDULER = "scheduler"
    APPLICATION = "application"
    ACTOR = "actor"


class Action(_Named):
    """S-7: what a rule does when its cause ends an object."""

    RESUBMIT = "resubmit"
    HOLD = "hold"
    ESCALATE = "escalate"
    RESTART = "restart"
    REQUEUE = "requeue"

    @property
    def needs_budget(self) -> bool:
        return self in BUDGETED_ACTIONS


BUDGETED_ACTIONS = frozenset({Action.RESUBMIT, Action.RESTART, Action.REQUEUE})
#: Actions only a backend can carry out, by its own mechanism (S-9).
NATIVE_ACTIONS = frozenset({Action.RESTART, Action.REQUEUE})


class Enforcer(_Named):
    """S-9: who carries out a rule."""

    SUPERVISOR = "supervisor"
    BACKEND = "backend"


class Level(_Named):
    """How much a Status knows: the record and the scheduler, or only the scheduler (S-29)."""

    RECORD = "record"
    OBJECT_ONLY = "object-only"


class Phase(_Named):
    """An object's liveness as the scheduler shows it, normalised by the adapter (S-19).

    ``gated`` is dispatch's own gate (S-37); ``held`` is a hold dispatch did not place.
    ``pending`` includes an object waiting to run again after a native requeue/restart.
    """

    GATED = "gated"
    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    ENDED = "ended"

    @property
    def alive(self) -> bool:
        return self is not Phase.ENDED


class Capability(_Named):
    """What a backend can do beyond the required hooks; the conformance kit tests each one
    it declares and checks each one it does not is refused cleanly."""

    GATING = "gating"
    TIME_LIMIT = "time-limit"
    MULTI_NODE = "multi-node"
    GPUS = "gpus"
    EXCLUDE_NODES = "exclude-nodes"
    LOGS = "logs"
    #: a sweep's first submissions go as one scheduler object with one task per member
    #: (a Slurm job array); a backend without it gets one object per member
    ARRAYS = "arrays"


class Stream(_Named):
    """Which output of a job ``dispatch logs`` reads (S-46)."""

    STDOUT = "stdout"
    STDERR = "stderr"


class Launcher(_Named):
    """How a multi-node command is started (S-41).

    ``tasks``: the command runs once per task (nodes x tasks-per-node), each task with the
    torch.distributed contract in its environment (RANK, LOCAL_RANK, WORLD_SIZE...).
    ``torchrun``: the command (``torchrun train.py``) runs once per node, with torchrun's
    own ``PET_*`` variables set so its rendezvous needs no arguments.
    """

    TASKS = "tasks"
    TORCHRUN = "torchrun"


class Resolution(_Named):
    """How an actor resolves a recovery hold (S-14)."""

    RESUBMIT = "resubmit"
    CANCEL = "cancel"
    GIVE_UP = "give-up"
