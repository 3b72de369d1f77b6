"""Everything that turns an ending into a verdict, and a job into the state it shows.

Four tables, each read top to bottom, first match wins (h11's ``_state.py`` and our own
``dispatch_slurm/classify.py`` are the model): :data:`ENDING_TABLE`,
:data:`EXECUTION_TABLE`, :data:`STALL_TABLE` and :data:`SHOWN_TABLE`. ``decide`` and
``project`` (and the stall check) only look rows up; ``docs/model.md`` is rendered from
the rows (``python -m dispatch.core.table``) and a test checks that the two agree.

An *ending* is the current object of a job ending with a cause, or the core treating its
execution as ended: past the node-loss window (S-27), past a pending window (S-39),
missing from the listing for longer than the node-loss window. An ending of an object
that still lives stops the object first. An *execution* ending is one run of a
still-live object ending while the backend recovers it natively (S-38).

Budgets are per rule (S-16): a verdict only ever spends the budget of the rule that
covers the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from dispatch.core.cause import Cause
from dispatch.core.job import Job, Submission
from dispatch.core.policy import Binding, Plan
from dispatch.model.discovery import ObjectView
from dispatch.model.enums import (
    NON_ENDING_CAUSES,
    UNCOVERABLE_CAUSES,
    Action,
    CauseKind,
    Enforcer,
    Phase,
    Provenance,
    State,
)


class Verdict(Enum):
    SUCCEED = "succeed"
    CANCEL = "cancel"
    RESUBMIT = "resubmit"
    HOLD = "hold"
    FAIL = "fail"
    NATIVE = "native"
    IGNORE = "ignore"
    ENDING = "as the ending table says"
    ESCALATE = "escalate"
    STOP_RESUBMIT = "stop and resubmit"


#: The outcome a terminal verdict commits.
OUTCOME: Mapping[Verdict, State] = {
    Verdict.SUCCEED: State.SUCCEEDED,
    Verdict.CANCEL: State.CANCELLED,
    Verdict.FAIL: State.FAILED,
}
#: What each verdict records, for the docs (``decisions._apply`` writes it).
RECORDS: Mapping[Verdict, str] = {
    Verdict.SUCCEED: "outcome succeeded",
    Verdict.CANCEL: "outcome cancelled",
    Verdict.RESUBMIT: "recovering: spend 1, request the next submission",
    Verdict.HOLD: "held (a recovery hold)",
    Verdict.FAIL: "escalation, then outcome failed",
    Verdict.NATIVE: "recovering: spend 1 (the backend runs it again)",
    Verdict.IGNORE: "nothing (not an ending)",
    Verdict.ENDING: "stop the object, then the ending table",
    Verdict.ESCALATE: "escalation (no cause); state and cause unchanged",
    Verdict.STOP_RESUBMIT: "escalation (no cause); stop the object with cause cancelled by "
    "actor dispatch; recovering: spend 1, request the next submission",
}


class Ending(Enum):
    """What kind of cause ended it."""

    SUCCESS = "none"
    CANCELLED = "cancelled"
    NOT_AN_END = "held, released, requeued, duplicate"
    OTHER = "any other"


class Cover(Enum):
    """The rule that covers the cause, by what it does and who enforces it (S-9)."""

    NO_RULE = "no rule"
    RESUBMIT = "resubmit (supervisor)"
    HOLD = "hold (supervisor)"
    ESCALATE = "escalate (supervisor)"
    UNENFORCED = "restart/requeue, the backend lacks it"
    NATIVE = "restart/requeue, native"


class Budget(Enum):
    """The covering rule's budget, where its action has one."""

    NONE = "none"
    LEFT = "left"
    SPENT = "spent"


@dataclass(frozen=True)
class Row:
    """One line of the ending or execution table; ``None`` in a match column is *any*."""

    ending: Ending | None
    cover: Cover | None
    budget: Budget | None
    verdict: Verdict
    reason: str = ""

    def matches(self, ending: Ending, cover: Cover, budget: Budget) -> bool:
        return (
            self.ending in (None, ending)
            and self.cover in (None, cover)
            and self.budget in (None, budget)
        )


E, C, B, V = Ending, Cover, Budget, Verdict
SPENT = "budget of rule {rule} ({describe}) is spent"

#: The ending table (S-12 .. S-17).
ENDING_TABLE: tuple[Row, ...] = (
    Row(E.SUCCESS, None, None, V.SUCCEED),
    Row(E.CANCELLED, None, None, V.CANCEL),
    Row(None, C.NO_RULE, None, V.FAIL, "no rule covers '{kind}'"),
    Row(None, C.RESUBMIT, B.LEFT, V.RESUBMIT, "resubmit on '{kind}'"),
    Row(None, C.RESUBMIT, B.SPENT, V.FAIL, SPENT),
    Row(None, C.HOLD, None, V.HOLD, "recovery hold on '{kind}'"),
    Row(None, C.ESCALATE, None, V.FAIL, "rule {rule} escalates '{kind}'"),
    Row(
        None,
        C.UNENFORCED,
        None,
        V.FAIL,
        "supervisor recovery for {action} is not implemented "
        "(backend '{backend}' does not enforce {action} natively)",
    ),
    Row(
        None,
        C.NATIVE,
        None,
        V.FAIL,
        "the backend ended the object with '{kind}' instead of its native {action}",
    ),
)

#: The execution table: one execution of a live object ended (S-38).
EXECUTION_TABLE: tuple[Row, ...] = (
    Row(E.NOT_AN_END, None, None, V.IGNORE),
    Row(None, C.NATIVE, B.LEFT, V.NATIVE, "native {action} on '{kind}'"),
    Row(
        None,
        C.NATIVE,
        B.SPENT,
        V.FAIL,
        SPENT + "; dispatch stopped the backend from recovering again",
    ),
    Row(None, None, None, V.ENDING),
)


#: The stall table: a running job made no progress for its window (S-47). A stall is not
#: an ending: ``ending`` is always *any*, and only the policy's stall rule covers it.
STALL_TABLE: tuple[Row, ...] = (
    Row(None, C.NO_RULE, None, V.ESCALATE, "state and cause unchanged, a person decides"),
    Row(
        None,
        C.RESUBMIT,
        B.LEFT,
        V.STOP_RESUBMIT,
        "stall rule ({describe}): dispatch stops it and resubmits it ({spent} of {budget})",
    ),
    Row(
        None,
        C.RESUBMIT,
        B.SPENT,
        V.ESCALATE,
        "budget of the stall rule ({describe}) is spent; state and cause unchanged, "
        "a person decides",
    ),
)


@dataclass(frozen=True)
class Ruling:
    verdict: Verdict
    binding: Binding | None = None
    reason: str = ""
    row: int = 0


def _ending(kind: CauseKind) -> Ending:
    if kind is CauseKind.NONE:
        return Ending.SUCCESS
    if kind is CauseKind.CANCELLED:
        return Ending.CANCELLED
    return Ending.NOT_AN_END if kind in NON_ENDING_CAUSES else Ending.OTHER


_SUPERVISED = {Action.RESUBMIT: Cover.RESUBMIT, Action.HOLD: Cover.HOLD}


def _cover(binding: Binding | None) -> Cover:
    if binding is None:
        return Cover.NO_RULE
    if not binding.enforced:
        return Cover.UNENFORCED
    if binding.enforcer is Enforcer.BACKEND:
        return Cover.NATIVE
    return _SUPERVISED.get(binding.rule.action, Cover.ESCALATE)


def _rule(table: tuple[Row, ...], job: Job, plan: Plan, cause: Cause, spending: int = 0) -> Ruling:
    kind = cause.kind
    binding = None if kind in UNCOVERABLE_CAUSES else plan.binding_for(kind)
    budget = Budget.NONE
    if binding is not None and binding.rule.action.needs_budget:
        left = job.budget_left(binding.index) - spending
        budget = Budget.LEFT if left >= 1 else Budget.SPENT
    ending, cover = _ending(kind), _cover(binding)
    index, row = next((i, r) for i, r in enumerate(table) if r.matches(ending, cover, budget))
    reason = row.reason
    if binding is not None and reason:
        reason = reason.format(
            kind=kind.value,
            action=binding.rule.action.value,
            backend=plan.declarations.name,
            rule=binding.index + 1,
            describe=binding.rule.describe(),
        )
    elif reason:
        reason = reason.format(kind=kind.value)
    return Ruling(row.verdict, binding, reason, index)


def rule_on_ending(job: Job, plan: Plan, cause: Cause) -> Ruling:
    """The ending table: the current object (or the execution the core fenced off) ended."""
    return _rule(ENDING_TABLE, job, plan, cause)


def rule_on_execution(job: Job, plan: Plan, cause: Cause, spending: int = 0) -> Ruling:
    """The execution table, falling through to the ending table; ``spending`` is what this
    decision already spends of the job's budgets on earlier executions of the same object."""
    ruling = _rule(EXECUTION_TABLE, job, plan, cause, spending)
    return rule_on_ending(job, plan, cause) if ruling.verdict is Verdict.ENDING else ruling


def rule_on_stall(job: Job, plan: Plan) -> Ruling:
    """The stall table, for the policy's stall rule (``RecoveryPolicy.resubmit_on_stall``)."""
    policy = plan.policy
    given = policy.resubmit_on_stall
    spent = job.spent.get(policy.stall_index, 0)
    cover, budget = Cover.NO_RULE, Budget.NONE
    if given is not None:
        cover = Cover.RESUBMIT
        budget = Budget.LEFT if spent < given else Budget.SPENT
    index, row = next(
        (i, r) for i, r in enumerate(STALL_TABLE) if r.matches(Ending.OTHER, cover, budget)
    )
    reason = row.reason.format(describe=policy.describe_stall(), spent=spent + 1, budget=given)
    return Ruling(row.verdict, None, reason, index)


# -- the state a job shows (S-17, S-21, S-26, S-37, S-38, S-39) --------------------------


class View:
    """What the shown-state table reads: the job (record plus what ``decide`` would
    commit now) and the object of its current submission, if the discovery lists it."""

    def __init__(self, job: Job, objects: tuple[ObjectView, ...]) -> None:
        self.job = job
        self.current: Submission | None = job.current
        current = self.current
        self.obj: ObjectView | None = None
        if current is not None:
            self.obj = next(
                (
                    o
                    for o in objects
                    if o.submission == current.number
                    and (current.object_id is None or o.object_id == current.object_id)
                ),
                None,
            )

    def recovered(self) -> bool:
        job = self.job
        return (
            len(job.submissions) > 1
            or job.awaiting_submission
            or any(s.native_recoveries for s in job.submissions)
        )

    def last_recovery(self) -> Cause | None:
        for step in reversed(self.job.history):
            if step.state in (State.RECOVERING, State.HELD) and step.cause is not None:
                return step.cause
        return None

    def phase_is(self, phase: Phase) -> bool:
        return self.obj is not None and self.obj.phase is phase


class Shows(Enum):
    """A state read off the job rather than fixed by the row."""

    COMMITTED = "the committed outcome"
    WAITING = "pending; recovering once the job has recovered (S-17)"


def _not_listed(v: View) -> Cause | None:
    current = v.current
    assert current is not None and current.object_id is not None
    return Cause(
        kind=CauseKind.UNKNOWN,
        provenance=Provenance.SCHEDULER,
        detail=f"object {current.object_id} is not listed by the backend",
        at=current.missing_since,
    )


def _object_cause(v: View) -> Cause | None:
    return v.obj.cause if v.obj is not None else None


def _node_lost(v: View) -> Cause | None:
    why = _object_cause(v)
    return why if why is not None and why.kind is CauseKind.NODE_LOST else None


def _last_execution(v: View) -> Cause | None:
    ended = [e.cause for e in v.obj.executions if e.cause is not None] if v.obj else []
    return ended[-1] if ended else None


#: Where a row takes the shown cause from: (what the docs say, how).
CAUSES: Mapping[str, tuple[str, Callable[[View], Cause | None]]] = {
    "outcome": ("the outcome's", lambda v: v.job.outcome.cause if v.job.outcome else None),
    "hold": ("the hold's", lambda v: v.job.hold.cause if v.job.hold else None),
    "recovery": ("the last recovery's or hold's", lambda v: v.last_recovery()),
    "refusal": ("the scheduler's refusal", lambda v: v.current.failed if v.current else None),
    "not-listed": ("unknown: not listed by the backend", _not_listed),
    "object": ("the object's", _object_cause),
    "node-lost": ("node-lost if the object reports it (S-26), else none", _node_lost),
    "execution": ("the last ended execution's (S-38)", _last_execution),
    "object-or-recovery": (
        "the scheduler's reason if it gives one (S-39), else the last recovery's",
        lambda v: _object_cause(v) or v.last_recovery(),
    ),
}

#: When a row applies: (what the docs say, the test).
CONDITIONS: Mapping[str, tuple[str, Callable[[View], bool]]] = {
    "committed": ("the record committed an outcome", lambda v: v.job.outcome is not None),
    "held": ("the job is held", lambda v: v.job.hold is not None),
    "between": (
        "no submission yet, or the next one not yet requested",
        lambda v: v.current is None or v.job.awaiting_submission,
    ),
    "refused": (
        "the scheduler refused the current submission",
        lambda v: v.current is not None and v.current.failed is not None,
    ),
    "vanished": (
        "its object was created and is missing from the listing",
        lambda v: (
            v.obj is None
            and v.current is not None
            and v.current.object_id is not None
            and v.current.missing_since is not None
        ),
    ),
    "unseen": ("its object is not listed (not yet seen)", lambda v: v.obj is None),
    "running": ("its object runs", lambda v: v.phase_is(Phase.RUNNING)),
    "scheduler-hold": (
        "its object is held by a hold dispatch did not place (S-37)",
        lambda v: v.phase_is(Phase.HELD),
    ),
    "requeued": (
        "its object is pending again after an ended execution (native recovery)",
        lambda v: v.phase_is(Phase.PENDING) and _last_execution(v) is not None,
    ),
    "ended": (
        "its object ended (and the plan has not decided it)",
        lambda v: v.phase_is(Phase.ENDED),
    ),
    "waiting": ("its object is gated or pending", lambda v: True),
}


@dataclass(frozen=True)
class ShownRow:
    when: str
    state: State | Shows
    cause: str


#: The shown-state table: what ``project`` shows for a job with a record.
SHOWN_TABLE: tuple[ShownRow, ...] = (
    ShownRow("committed", Shows.COMMITTED, "outcome"),
    ShownRow("held", State.HELD, "hold"),
    ShownRow("between", Shows.WAITING, "recovery"),
    ShownRow("refused", Shows.WAITING, "refusal"),
    ShownRow("vanished", State.UNKNOWN, "not-listed"),
    ShownRow("unseen", Shows.WAITING, "recovery"),
    ShownRow("running", State.RUNNING, "node-lost"),
    ShownRow("scheduler-hold", State.HELD, "object"),
    ShownRow("requeued", State.RECOVERING, "execution"),
    ShownRow("ended", State.UNKNOWN, "object"),
    ShownRow("waiting", Shows.WAITING, "object-or-recovery"),
)


def shown(job: Job, objects: tuple[ObjectView, ...]) -> tuple[State, Cause | None]:
    """The state and cause :data:`SHOWN_TABLE` gives ``job`` with these objects."""
    view = View(job, objects)
    row = next(r for r in SHOWN_TABLE if CONDITIONS[r.when][1](view))
    if row.state is Shows.COMMITTED:
        assert job.outcome is not None
        state = job.outcome.state
    elif row.state is Shows.WAITING:
        state = State.RECOVERING if view.recovered() else State.PENDING
    else:
        state = row.state
    return state, CAUSES[row.cause][1](view)


# -- the docs ------------------------------------------------------------------------


def _cell(value: Enum | None) -> str:
    return "any" if value is None else str(value.value)


def _stall_markdown() -> list[str]:
    lines = [
        "| # | stall rule (`resubmit_on_stall`) | budget | verdict | records | "
        "escalation reason (after what was seen) |",
        "|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(STALL_TABLE):
        lines.append(
            f"| {i} | {_cell(row.cover)} | {_cell(row.budget)} | {row.verdict.value} | "
            f"{RECORDS[row.verdict]} | `{row.reason}` |"
        )
    return lines


def _rows_markdown(table: tuple[Row, ...], first: str) -> list[str]:
    lines = [
        f"| # | {first} | covering rule | budget | verdict | records | escalation reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(table):
        reason = f"`{row.reason}`" if row.reason and row.verdict is Verdict.FAIL else ""
        lines.append(
            f"| {i} | {_cell(row.ending)} | {_cell(row.cover)} | {_cell(row.budget)} | "
            f"{row.verdict.value} | {RECORDS[row.verdict]} | {reason} |"
        )
    return lines


def render_markdown() -> str:
    """The four tables as Markdown, for docs/model.md."""
    lines = ["### The ending table", ""]
    lines += _rows_markdown(ENDING_TABLE, "ending cause")
    lines += ["", "### The execution table (a live object's execution ended)", ""]
    lines += _rows_markdown(EXECUTION_TABLE, "execution cause")
    lines += ["", "### The stall table (a running job made no progress for its window, S-47)", ""]
    lines += _stall_markdown()
    lines += ["", "### The shown-state table (`project`, with a record)", ""]
    lines += ["| # | when | state | cause |", "|---|---|---|---|"]
    for i, shown_row in enumerate(SHOWN_TABLE):
        state = shown_row.state.value
        lines.append(
            f"| {i} | {CONDITIONS[shown_row.when][0]} | {state} | {CAUSES[shown_row.cause][0]} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
