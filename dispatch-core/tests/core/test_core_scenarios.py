"""A training job's typical situations, end to end through fold/decide/project on the
pure bench."""

from __future__ import annotations

from core_bench import World, cause, declarations, policy
from dispatch import Action, CauseKind, Level, Phase, Provenance, State
from dispatch.core.interventions import cancel, give_up, resubmit, supersede
from dispatch.model.enums import Resolution
from dispatch.model.events import CancelRequested, HoldResolved, OutcomeCommitted, SupersededBy

PREEMPT_RESUBMIT_3 = ([CauseKind.PREEMPTED, CauseKind.NODE_LOST], Action.RESUBMIT, 3)
EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


def started(w: World) -> str:
    w.tick()
    return w.run_current()


def test_first_submission_is_pending_then_running_S17_S21() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    w.tick()
    assert [s.submission for s in w.submitted] == [1]
    assert w.status().state is State.PENDING
    w.run_current()
    st = w.status()
    assert (st.state, st.cause, st.settled) == (State.RUNNING, None, True)
    assert st.history == ()  # S-23: running is never history


def test_success_commits_succeeded_S12_S18() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.NONE, provenance=Provenance.APPLICATION, exit_code=0))
    before = w.status()
    assert (before.state, before.settled) == (
        State.SUCCEEDED,
        False,
    )  # S-21: shows what will commit
    w.tick()
    after = w.status()
    assert (after.state, after.settled) == (State.SUCCEEDED, True)
    assert after.history[-1].event == "outcome-committed"


def test_preemption_resubmits_and_never_spends_exit_budget_S13_S16() -> None:
    exit_resubmit = ([CauseKind.NON_ZERO_EXIT], Action.RESUBMIT, 1)
    w = World(policy(PREEMPT_RESUBMIT_3, exit_resubmit))
    for n in range(3):
        started(w)
        w.end_current(cause(CauseKind.PREEMPTED))
        w.tick()
        assert w.status().state is State.RECOVERING
        assert w.job.spent == {0: n + 1}
    assert w.job.budget_left(1) == 1  # S-16
    assert [s.submission for s in w.submitted] == [1, 2, 3, 4]


def test_spent_budget_fails_with_escalation_S15() -> None:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 1)))
    started(w)
    w.end_current(cause(CauseKind.PREEMPTED))
    w.tick()
    w.run_current()
    w.end_current(cause(CauseKind.PREEMPTED, detail="second"))
    w.tick()
    st = w.status()
    assert (st.state, st.cause.detail if st.cause else None) == (State.FAILED, "second")
    assert "spent" in st.escalations[-1].reason
    assert w.job.spent == {0: 1}  # never over-spent


def test_recovering_never_returns_to_pending_S17() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.PREEMPTED))
    w.tick()
    assert w.status().state is State.RECOVERING  # queued second submission
    oid = w.current_object()
    w.set(oid, Phase.PENDING, cause(CauseKind.NO_CAPACITY))
    assert w.status().state is State.RECOVERING


def test_hold_then_resubmit_S14() -> None:
    w = World(policy(EXIT_HOLD))
    started(w)
    w.end_current(cause(CauseKind.NON_ZERO_EXIT, exit_code=1))
    w.tick()
    st = w.status()
    assert (st.state, st.cause.kind if st.cause else None) == (State.HELD, CauseKind.NON_ZERO_EXIT)
    w.events.extend(resubmit(w.job, actor="alice", now=w.now))
    w.tick()
    assert [s.submission for s in w.submitted] == [1, 2]
    assert w.status().state is State.RECOVERING


def test_hold_then_cancel_S14() -> None:
    w = World(policy(EXIT_HOLD))
    started(w)
    w.end_current(cause(CauseKind.NON_ZERO_EXIT, exit_code=1))
    w.tick()
    w.events.extend(cancel(w.job, actor="alice", now=w.now))
    w.tick()
    st = w.status()
    assert (st.state, st.settled) == (State.CANCELLED, True)
    assert st.cause is not None and (st.cause.provenance, st.cause.actor) == (
        Provenance.ACTOR,
        "alice",
    )


def test_hold_then_give_up_fails_with_ending_cause_S14() -> None:
    w = World(policy(EXIT_HOLD))
    started(w)
    w.end_current(cause(CauseKind.NON_ZERO_EXIT, exit_code=7))
    w.tick()
    w.events.extend(give_up(w.job, actor="alice", now=w.now))
    st = w.status()
    assert st.state is State.FAILED and st.cause is not None
    assert (st.cause.kind, st.cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 7)
    assert any(isinstance(e, HoldResolved) and e.resolution is Resolution.GIVE_UP for e in w.events)


def test_escalate_rule_fails_with_escalation_S15() -> None:
    w = World(policy(([CauseKind.OUT_OF_MEMORY], Action.ESCALATE, None)))
    started(w)
    w.end_current(cause(CauseKind.OUT_OF_MEMORY))
    w.tick()
    st = w.status()
    assert st.state is State.FAILED and len(st.escalations) == 1


def test_no_rule_fails_with_escalation_S15() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.TIME_LIMIT))
    w.tick()
    st = w.status()
    assert st.state is State.FAILED and "no rule covers 'time-limit'" in st.escalations[0].reason


def test_restart_assigned_to_supervisor_fails_not_implemented_S11() -> None:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESTART, 2)))
    assert [b.rule.action for b in w.plan.unenforced] == [Action.RESTART]
    started(w)
    w.end_current(cause(CauseKind.PREEMPTED))
    w.tick()
    st = w.status()
    assert st.state is State.FAILED
    assert "supervisor recovery for restart is not implemented" in st.escalations[0].reason


def test_scheduler_cancel_is_cancelled_despite_rules_S12() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3, ([CauseKind.UNKNOWN], Action.HOLD, None)))
    started(w)
    w.end_current(cause(CauseKind.CANCELLED, detail="CANCELLED by 0"))
    w.tick()
    assert w.status().state is State.CANCELLED
    assert [s.submission for s in w.submitted] == [1]


def test_node_lost_inside_window_is_running_with_cause_S26() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    oid = started(w)
    w.set(oid, Phase.RUNNING, cause(CauseKind.NODE_LOST, at=w.now))
    w.advance(60)
    assert w.tick() == []
    st = w.status()
    assert (st.state, st.cause.kind if st.cause else None) == (State.RUNNING, CauseKind.NODE_LOST)


def test_node_lost_past_window_stops_and_gates_replacement_S27_S28() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    old = started(w)
    w.set(old, Phase.RUNNING, cause(CauseKind.NODE_LOST, at=w.now))
    w.advance(301)
    assert w.status().settled is False
    w.tick()
    assert [s.object_id for s in w.stopped] == [old]
    assert w.submitted[-1].submission == 2 and w.submitted[-1].gated is True
    new = w.current_object()
    assert w.objects[new].phase is Phase.GATED
    w.tick()  # old object still reports running: the gate stays shut (S-28)
    assert w.opened == [] and w.status().state is State.RECOVERING
    w.set(old, Phase.ENDED, cause(CauseKind.CANCELLED))
    w.tick()
    assert [g.object_id for g in w.opened] == [new]
    w.run_current()
    assert w.status().state is State.RUNNING
    assert w.job.spent == {0: 1}


def test_supersede_links_both_and_keeps_outcome_S18() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.TIME_LIMIT))
    w.tick()
    old_job = w.job
    events = supersede(old_job, new_job_id="job-2", actor="alice", now=w.now)
    assert [type(e) for e in events] == [SupersededBy]
    w.events.extend(events)
    st = w.status()
    assert st.state is State.FAILED and st.superseded_by == ("job-2",)
    assert st.history[-1].event == "superseded-by"


def test_committed_outcome_never_changes_S18() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.NONE))
    w.tick()
    seq = w.events[-1].seq + 1
    w.events.append(
        OutcomeCommitted(
            job_id=w.job_id, seq=seq, at=w.now, state=State.FAILED, cause=cause(CauseKind.UNKNOWN)
        )
    )
    w.events.append(
        CancelRequested(job_id=w.job_id, seq=seq + 1, at=w.now, cause=cause(CauseKind.CANCELLED))
    )
    assert w.status().state is State.SUCCEEDED
    assert w.tick() == []


def test_object_only_status_is_never_terminal_S29() -> None:
    from dispatch import project

    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.NONE))
    st = project(None, w.discovery(), w.now, job_id=w.job_id)
    assert (st.level, st.state) == (Level.OBJECT_ONLY, State.PENDING)
    w.set(w.current_object(), Phase.RUNNING)
    assert project(None, w.discovery(), w.now, job_id=w.job_id).state is State.RUNNING


def test_launch_refusal_goes_through_the_plan() -> None:
    from dispatch.model.events import SubmissionFailed

    w = World(policy(([CauseKind.LAUNCH_FAILED], Action.RESUBMIT, 1)))
    effects = decide_only(w)
    assert effects
    w.events.extend(e for eff in effects if hasattr(eff, "events") for e in eff.events)  # type: ignore[attr-defined]
    w.events.append(
        SubmissionFailed(
            job_id=w.job_id,
            seq=w.events[-1].seq + 1,
            at=w.now,
            submission=1,
            cause=cause(CauseKind.LAUNCH_FAILED, detail="sbatch: error: invalid"),
        )
    )
    w.tick()
    assert w.submitted[-1].submission == 2 and w.job.spent == {0: 1}


def decide_only(w: World):  # type: ignore[no-untyped-def]
    from dispatch import decide

    return decide(w.job, w.discovery(), w.plan, w.now)


def test_pending_window_stops_and_applies_plan_S39() -> None:
    from datetime import timedelta

    decl = declarations(pending_windows={CauseKind.NO_CAPACITY: timedelta(minutes=10)})
    w = World(policy(([CauseKind.NO_CAPACITY], Action.HOLD, None)), decl)
    w.tick()
    oid = w.current_object()
    w.set(oid, Phase.PENDING, cause(CauseKind.NO_CAPACITY, at=w.now, detail="PartitionConfig"))
    w.advance(60)
    st = w.status()
    assert (st.state, st.cause.detail if st.cause else None) == (State.PENDING, "PartitionConfig")
    w.advance(600)
    w.tick()
    assert [s.object_id for s in w.stopped] == [oid]
    assert w.status().state is State.HELD


def test_native_requeue_spends_per_execution_then_stops_S38() -> None:
    from dispatch import Execution

    decl = declarations(native_actions=frozenset({Action.REQUEUE}))
    w = World(policy(([CauseKind.PREEMPTED], Action.REQUEUE, 1)), decl)
    oid = started(w)
    e0 = Execution(index=0, cause=cause(CauseKind.PREEMPTED))
    w.set(oid, Phase.PENDING, None, (e0, Execution(index=1)))
    w.tick()
    st = w.status()
    assert (st.state, st.cause.kind if st.cause else None) == (
        State.RECOVERING,
        CauseKind.PREEMPTED,
    )
    assert w.job.spent == {0: 1}
    e1 = Execution(index=1, cause=cause(CauseKind.PREEMPTED, detail="again"))
    w.set(oid, Phase.PENDING, None, (e0, e1, Execution(index=2)))
    w.tick()
    assert [s.object_id for s in w.stopped] == [oid]
    st = w.status()
    assert st.state is State.FAILED and "spent" in st.escalations[-1].reason
    assert w.job.spent == {0: 1}


def test_duplicate_object_is_stopped_S34() -> None:
    from dispatch import ObjectView

    w = World(policy(PREEMPT_RESUBMIT_3))
    oid = started(w)
    w.objects["dup"] = ObjectView(
        object_id="dup",
        job_id=w.job_id,
        submission=1,
        phase=Phase.RUNNING,
        scheduler_state="RUNNING",
        created_at=w.now,
    )
    w.tick()
    assert [(s.object_id, s.cause.kind) for s in w.stopped] == [("dup", CauseKind.DUPLICATE)]
    w.tick()
    assert len(w.stopped) == 2  # asked again while it still runs: stop is idempotent
    w.set("dup", Phase.ENDED, cause(CauseKind.CANCELLED))
    w.tick()
    assert len(w.stopped) == 2
    assert w.status().submissions[0].object_id == oid


def test_cancel_requested_stops_then_commits_S12() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    oid = started(w)
    w.events.extend(cancel(w.job, actor="bob", now=w.now))
    w.tick()
    assert [s.object_id for s in w.stopped] == [oid]
    assert w.status().state is State.RUNNING
    w.set(oid, Phase.ENDED, cause(CauseKind.CANCELLED))
    w.tick()
    st = w.status()
    assert st.state is State.CANCELLED and st.cause is not None and st.cause.actor == "bob"


def test_scheduler_hold_shows_held_with_its_words_S37() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    w.tick()
    assert w.status().state is State.PENDING  # our own gate would be pending too
    w.set(w.current_object(), Phase.HELD, cause(CauseKind.HELD, detail="JobHeldAdmin"))
    st = w.status()
    assert (st.state, st.cause.detail if st.cause else None) == (State.HELD, "JobHeldAdmin")


def test_recovering_shows_the_cause_before_the_new_object_is_seen_S17_S21() -> None:
    w = World(policy(PREEMPT_RESUBMIT_3))
    started(w)
    w.end_current(cause(CauseKind.PREEMPTED, detail="preempted by job 42"))
    for effect in decide_only(w):  # record the intent only: the submit is still in flight
        w.events.extend(getattr(effect, "events", ()))
    assert w.job.current is not None and w.job.current.number == 2
    st = w.status()
    assert st.state is State.RECOVERING
    assert st.cause is not None and st.cause.detail == "preempted by job 42"
