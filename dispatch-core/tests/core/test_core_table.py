"""The state machine is data: every row of the three tables is reached, each combination
meets exactly the row the docs say, and docs/model.md is the table in the code."""

from __future__ import annotations

import itertools
import typing
from pathlib import Path

import pytest
from core_bench import World, cause, declarations, policy
from dispatch import Action, CauseKind, Execution, Phase, State
from dispatch.core.folding import APPLY
from dispatch.core.interventions import resubmit
from dispatch.core.table import (
    CAUSES,
    CONDITIONS,
    ENDING_TABLE,
    EXECUTION_TABLE,
    SHOWN_TABLE,
    Budget,
    Cover,
    Ending,
    Verdict,
    View,
    render_markdown,
    rule_on_ending,
    rule_on_execution,
    shown,
)
from dispatch.model.events import Event, JobCreated

DOCS = Path(__file__).parents[2] / "docs" / "model.md"
K = CauseKind


def test_docs_model_tables_are_the_tables_in_the_code_S12_S38() -> None:
    text = DOCS.read_text()
    assert render_markdown() in text, "docs/model.md is stale: python -m dispatch.core.table"


def _possible() -> list[tuple[Ending, Cover, Budget]]:
    """Every situation a plan can meet: only ordinary endings are covered (S-8), and a
    resubmit, restart or requeue rule always has a budget (S-7)."""
    budgeted = (Cover.RESUBMIT, Cover.NATIVE, Cover.UNENFORCED)
    return [
        (ending, cover, budget)
        for ending, cover, budget in itertools.product(Ending, Cover, Budget)
        if (ending is Ending.OTHER or cover is Cover.NO_RULE)
        and (budget is not Budget.NONE) == (cover in budgeted)
    ]


@pytest.mark.parametrize("table", [ENDING_TABLE, EXECUTION_TABLE], ids=["ending", "execution"])
def test_every_combination_meets_a_row_and_every_row_is_met(table: object) -> None:
    assert isinstance(table, tuple)
    met = set()
    for combo in _possible():
        index = next((i for i, r in enumerate(table) if r.matches(*combo)), None)
        assert index is not None, f"no row for {combo}"
        met.add(index)
    assert met == set(range(len(table))), "a row no combination reaches is dead"


def test_every_shown_row_names_a_known_condition_and_cause() -> None:
    for row in SHOWN_TABLE:
        assert row.when in CONDITIONS and row.cause in CAUSES
    assert SHOWN_TABLE[-1].when == "waiting"  # the last row catches every job left


def _spent_job(w: World):  # type: ignore[no-untyped-def]
    """A job whose rule 1 (resubmit, budget 1) has spent its budget."""
    w.tick()
    w.run_current()
    w.end_current(cause(K.PREEMPTED))
    w.tick()
    assert w.job.spent == {0: 1}
    return w.job


NATIVE = declarations(native_actions=frozenset({Action.RESTART}))
#: For each ending-table row: (rules, declarations, ending cause, spend the budget first).
ENDING_CASES = [
    ((), None, K.NONE, False),
    ((([K.PREEMPTED], Action.RESUBMIT, 1),), None, K.CANCELLED, False),
    ((), None, K.TIME_LIMIT, False),
    ((([K.PREEMPTED], Action.RESUBMIT, 1),), None, K.PREEMPTED, False),
    ((([K.PREEMPTED], Action.RESUBMIT, 1),), None, K.PREEMPTED, True),
    ((([K.NON_ZERO_EXIT], Action.HOLD, None),), None, K.NON_ZERO_EXIT, False),
    ((([K.OUT_OF_MEMORY], Action.ESCALATE, None),), None, K.OUT_OF_MEMORY, False),
    ((([K.PREEMPTED], Action.RESTART, 1),), None, K.PREEMPTED, False),
    ((([K.PREEMPTED], Action.RESTART, 1),), NATIVE, K.PREEMPTED, False),
]
EXPECTED_ENDING = [
    (Verdict.SUCCEED, ""),
    (Verdict.CANCEL, ""),
    (Verdict.FAIL, "no rule covers 'time-limit'"),
    (Verdict.RESUBMIT, "resubmit on 'preempted'"),
    (Verdict.FAIL, "budget of rule 1 (on [preempted] resubmit budget=1) is spent"),
    (Verdict.HOLD, "recovery hold on 'non-zero-exit'"),
    (Verdict.FAIL, "rule 1 escalates 'out-of-memory'"),
    (
        Verdict.FAIL,
        "supervisor recovery for restart is not implemented "
        "(backend 'bench' does not enforce restart natively)",
    ),
    (Verdict.FAIL, "the backend ended the object with 'preempted' instead of its native restart"),
]


@pytest.mark.parametrize("row", range(len(ENDING_TABLE)))
def test_each_ending_row_rules_on_a_real_plan_S12_S17(row: int) -> None:
    rules, decl, kind, spend = ENDING_CASES[row]
    w = World(policy(*rules), decl)
    job = _spent_job(w) if spend else w.job
    ruling = rule_on_ending(job, w.plan, cause(kind))
    assert ruling.row == row
    assert (ruling.verdict, ruling.reason) == EXPECTED_ENDING[row]


def test_each_execution_row_rules_on_a_real_plan_S38() -> None:
    decl = declarations(native_actions=frozenset({Action.REQUEUE}))
    w = World(policy(([K.PREEMPTED], Action.REQUEUE, 2)), decl)
    job, plan = w.job, w.plan
    ignored = rule_on_execution(job, plan, cause(K.REQUEUED))
    assert (ignored.verdict, ignored.row) == (Verdict.IGNORE, 0)
    native = rule_on_execution(job, plan, cause(K.PREEMPTED))
    assert (native.verdict, native.row, native.reason) == (
        Verdict.NATIVE,
        1,
        "native requeue on 'preempted'",
    )
    spent = rule_on_execution(job, plan, cause(K.PREEMPTED), spending=2)
    assert (spent.verdict, spent.row) == (Verdict.FAIL, 2)
    assert spent.reason.endswith("dispatch stopped the backend from recovering again")
    # anything else falls through to the ending table (row 2: no rule covers it)
    other = rule_on_execution(job, plan, cause(K.OUT_OF_MEMORY))
    assert (other.verdict, other.row) == (Verdict.FAIL, 2)
    assert other.reason == "no rule covers 'out-of-memory'"


def _shown_row(w: World) -> int:
    job, objects = w.job, w.discovery().of_job(w.job_id)
    view = View(job, objects)
    return next(i for i, r in enumerate(SHOWN_TABLE) if CONDITIONS[r.when][1](view))


def _row_of(when: str) -> int:
    return next(i for i, r in enumerate(SHOWN_TABLE) if r.when == when)


def test_each_shown_row_is_what_project_shows_S17_S21_S26_S37_S38() -> None:
    seen: dict[str, State] = {}

    def look(w: World, when: str) -> None:
        assert _shown_row(w) == _row_of(when), when
        state, _ = shown(w.job, w.discovery().of_job(w.job_id))
        seen[when] = state

    hold = World(policy(([K.NON_ZERO_EXIT], Action.HOLD, None)))
    look(hold, "between")
    hold.tick()
    look(hold, "waiting")
    hold.run_current()
    look(hold, "running")
    hold.end_current(cause(K.NON_ZERO_EXIT))
    look(hold, "ended")
    hold.tick()
    look(hold, "held")
    hold.events.extend(resubmit(hold.job, actor="a", now=hold.now))
    look(hold, "between")
    assert seen["between"] is State.RECOVERING

    w = World(policy(([K.PREEMPTED], Action.RESUBMIT, 2)))
    w.tick()
    look(w, "waiting")
    assert seen["waiting"] is State.PENDING
    oid = w.current_object()
    w.set(oid, Phase.HELD, cause(K.HELD, detail="JobHeldAdmin"))
    look(w, "scheduler-hold")
    executions = (Execution(index=0, cause=cause(K.PREEMPTED)), Execution(index=1))
    w.set(oid, Phase.PENDING, None, executions)
    look(w, "requeued")
    del w.objects[oid]
    w.tick()  # records object-missing
    look(w, "vanished")
    assert seen["vanished"] is State.UNKNOWN

    refused = World(policy())
    refused.tick()
    refused.objects.clear()
    refused.events[-1] = _failed(refused)
    look(refused, "refused")
    fresh = World(policy())
    fresh.tick()
    fresh.objects.clear()
    look(fresh, "unseen")
    done = World(policy())
    done.tick()
    done.run_current()
    done.end_current(cause(K.NONE))
    done.tick()
    look(done, "committed")
    assert seen["committed"] is State.SUCCEEDED
    assert set(seen) == {r.when for r in SHOWN_TABLE}


def _failed(w: World) -> Event:
    """Replace the bench's submission-created with the scheduler refusing the submit."""
    from dispatch.model.events import SubmissionFailed

    last = w.events[-1]
    return SubmissionFailed(
        job_id=w.job_id,
        seq=last.seq,
        at=w.now,
        submission=1,
        cause=cause(K.LAUNCH_FAILED, detail="sbatch: error: invalid partition"),
    )


def test_fold_has_one_applier_per_event_class_S20() -> None:
    union = typing.get_args(typing.get_args(Event)[0])
    assert set(APPLY) == set(union) - {JobCreated}
