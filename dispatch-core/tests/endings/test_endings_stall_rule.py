"""The policy's stall rule (S-47, S-8, S-16), pure: a stalled running job is escalated; with
``resubmit_on_stall = N`` dispatch then stops it, as its own decision recorded as
``cancelled`` by actor ``dispatch`` naming the stall, and resubmits it under the rule's
own budget; once that budget is spent, the stall only escalates again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from core_bench import World, cause, declarations, policy
from dispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    Execution,
    ObjectView,
    Phase,
    State,
    project,
)
from dispatch.core.effects import Append, Stop, Submit
from dispatch.core.policy import RecoveryPolicy
from dispatch.core.progress import on_stall
from dispatch.core.status import Status
from dispatch.core.table import STALL_TABLE, Verdict, rule_on_stall
from dispatch.model.enums import Provenance
from dispatch.model.errors import BadInput, PolicyError
from dispatch.model.events import (
    CancelRequested,
    EscalationRaised,
    HoldPlaced,
    RecoveryStarted,
    StopRequested,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.model.spec import JobSpec
from dispatch.policy_file import load_policy, parse_policy

WINDOW = timedelta(seconds=60)
K = CauseKind


def _world(stall: int | None, *, gating: bool = True) -> World:
    rules = policy(([K.PREEMPTED], Action.RESUBMIT, 5))
    pol = RecoveryPolicy(rules=rules.rules, resubmit_on_stall=stall)
    caps = frozenset({Capability.GATING}) if gating else frozenset()
    w = World(pol, declarations(capabilities=caps))
    spec = JobSpec(command=("python", "train.py"), progress_window=WINDOW, heartbeat="/hb")
    w.events[0] = w.events[0].model_copy(update={"spec": spec})
    return w


def _status(w: World) -> Status:
    return project(w.job, w.discovery(), w.now)


def _running(w: World) -> str:
    """Submit (and open the gate of) the next submission and let it run from ``w.now``."""
    w.tick()
    w.tick()
    oid = w.current_object()
    w.set(oid, Phase.RUNNING, executions=(Execution(index=0, started_at=w.now),))
    assert w.tick() == []
    return oid


def _stall_tick(w: World, last_progress=None):  # type: ignore[no-untyped-def]
    """One tick as the supervisor does it: ``decide``, and ``on_stall`` if it did nothing
    (its effects carried out as ``World.tick`` carries out ``decide``'s)."""
    effects = w.tick()
    if effects:
        return effects
    effects = on_stall(w.job, w.discovery(), w.plan, w.now, last_progress)
    for effect in effects:
        if isinstance(effect, Append):
            assert effect.expected_version == w.events[-1].seq
            w.events.extend(effect.events)
        elif isinstance(effect, Stop):
            w.stopped.append(effect)
        elif isinstance(effect, Submit):
            w.submitted.append(effect)
            oid = f"obj-{effect.submission}-{len(w.submitted)}"
            w.objects[oid] = ObjectView(
                object_id=oid,
                job_id=w.job_id,
                submission=effect.submission,
                phase=Phase.GATED,
                scheduler_state="gated",
                created_at=w.now,
            )
            created = SubmissionCreated(
                job_id=w.job_id,
                seq=w.events[-1].seq + 1,
                at=w.now,
                submission=effect.submission,
                object_id=oid,
            )
            w.events.append(created)
    return effects


def test_without_a_stall_rule_a_stall_only_escalates_S47() -> None:
    w = _world(None)
    _running(w)
    w.advance(30)
    assert _stall_tick(w, last_progress=w.now) == []
    w.advance(61)
    (append,) = _stall_tick(w, last_progress=w.now - timedelta(seconds=61))
    assert isinstance(append, Append)
    (event,) = append.events
    assert isinstance(event, EscalationRaised) and event.cause is None
    assert event.reason.startswith("no progress for 1 min (window 1 min); last progress ")
    assert event.reason.endswith("; state and cause unchanged, a person decides")
    assert w.stopped == [] and _status(w).state is State.RUNNING and _status(w).cause is None


def test_the_stall_rule_stops_as_dispatch_and_resubmits_under_its_budget_S47_S16() -> None:
    w = _world(2)
    first = _running(w)
    w.advance(90)
    effects = _stall_tick(w)
    assert [type(e) for e in effects] == [Append, Stop, Submit]
    events = effects[0].events
    assert [type(e) for e in events] == [
        EscalationRaised,
        StopRequested,
        RecoveryStarted,
        SubmissionRequested,
    ]
    raised, stop, recovery, request = events
    # the escalation first, as without the rule: what was seen, and what the rule does
    assert raised.cause is None
    assert raised.reason.startswith("no progress for 1 min (window 1 min); no heartbeat since ")
    assert "stall rule (rule 2: resubmit_on_stall budget=2)" in raised.reason
    assert raised.reason.endswith("dispatch stops it and resubmits it (1 of 2)")
    # dispatch's own stop: cancelled by actor dispatch, naming the stall; not a guessed cause
    why = stop.cause
    assert (why.kind, why.provenance, why.actor) == (K.CANCELLED, Provenance.ACTOR, "dispatch")
    assert why.detail.startswith("stopped by dispatch for no progress for 1 min (window 1 min)")
    assert stop.object_id == first and effects[1].object_id == first
    assert recovery.cause == why and recovery.rule == 1 and recovery.action is Action.RESUBMIT
    assert request.submission == 2 and request.gated  # S-28: gated while the old one lives
    job = w.job
    assert job.spent == {1: 1} and job.budget_left(0) == 5  # the rule on preempted: untouched
    status = _status(w)
    assert status.state is State.RECOVERING and status.cause == why
    # the stopped object ends as the scheduler reports a cancel: the job is not cancelled,
    # its ending was decided when dispatch stopped it (S-12 is about a cancel nobody decided)
    w.set(first, Phase.ENDED, why.model_copy(update={"provenance": Provenance.SCHEDULER}))
    w.tick()
    assert w.job.outcome is None and len(w.opened) == 1
    assert _status(w).state is State.RECOVERING


def test_a_spent_stall_budget_escalates_and_leaves_the_job_running_S47() -> None:
    w = _world(1)
    first = _running(w)
    w.advance(61)
    assert [type(e) for e in _stall_tick(w)] == [Append, Stop, Submit]
    w.set(first, Phase.ENDED, w.stopped[0].cause)
    second = _running(w)
    assert second != first
    w.advance(30)
    assert _stall_tick(w, last_progress=w.now) == []  # progress in the new execution
    w.advance(61)
    (append,) = _stall_tick(w, last_progress=w.now - timedelta(seconds=61))
    (event,) = append.events
    assert isinstance(event, EscalationRaised)
    assert "budget of the stall rule (rule 2: resubmit_on_stall budget=1) is spent" in event.reason
    assert len(w.stopped) == 1 and _status(w).state is State.RUNNING
    assert w.job.spent == {1: 1}
    w.advance(30)
    assert _stall_tick(w, last_progress=w.now - timedelta(seconds=91)) == []  # once per silence


def test_without_gating_the_resubmission_waits_for_the_stopped_object_to_end_S28() -> None:
    w = _world(1, gating=False)
    first = _running(w)
    w.advance(61)
    effects = _stall_tick(w)
    assert [type(e) for e in effects] == [Append, Stop]
    assert [type(e) for e in effects[0].events] == [
        EscalationRaised,
        StopRequested,
        RecoveryStarted,
    ]
    assert [type(e) for e in w.tick()] == [Stop]  # still alive: asked again, nothing else
    w.set(first, Phase.ENDED, w.stopped[0].cause)
    effects = w.tick()
    assert [type(e) for e in effects] == [Append, Submit]
    assert isinstance(effects[1], Submit) and not effects[1].gated
    assert w.job.outcome is None


@pytest.mark.parametrize("why", ["no window", "held", "cancel requested"])
def test_a_stall_is_not_decided_without_a_window_or_on_a_held_or_cancelled_job(why: str) -> None:
    w = _world(1)
    _running(w)
    w.advance(61)
    assert on_stall(w.job, w.discovery(), w.plan, w.now, None) != []
    seq = w.events[-1].seq + 1
    if why == "no window":
        spec = w.job.spec.model_copy(update={"progress_window": None})
        w.events[0] = w.events[0].model_copy(update={"spec": spec})
    elif why == "held":
        w.events.append(HoldPlaced(job_id=w.job_id, seq=seq, at=w.now, cause=_cancel()))
    else:
        w.events.append(CancelRequested(job_id=w.job_id, seq=seq, at=w.now, cause=_cancel()))
    assert on_stall(w.job, w.discovery(), w.plan, w.now, None) == []


def test_every_stall_row_is_met_on_a_real_plan_S47() -> None:
    met = set()
    for stall in (None, 1):
        w = _world(stall)
        _running(w)
        w.advance(61)
        ruling = rule_on_stall(w.job, w.plan)
        met.add(ruling.row)
        _stall_tick(w)
        if stall is not None:
            assert ruling.verdict is Verdict.STOP_RESUBMIT
            spent = rule_on_stall(w.job, w.plan)
            assert spent.verdict is Verdict.ESCALATE
            met.add(spent.row)
        else:
            assert ruling.verdict is Verdict.ESCALATE
    assert met == set(range(len(STALL_TABLE))), "a stall row no plan reaches is dead"


def _cancel() -> Cause:
    return cause(K.CANCELLED, provenance=Provenance.ACTOR)


@pytest.mark.parametrize("budget", [0, -1])
def test_a_stall_rule_without_a_positive_budget_is_refused_naming_it_S8(budget: int) -> None:
    with pytest.raises(PolicyError) as caught:
        RecoveryPolicy(resubmit_on_stall=budget).validate()
    assert f"resubmit_on_stall (the stall rule) needs a positive budget, got {budget}" in str(
        caught.value
    )


def test_a_policy_file_takes_a_stall_rule_S36(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        'resubmit_on_stall = 2\n\n[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 3\n'
    )
    pol = load_policy(path)
    assert pol.resubmit_on_stall == 2 and pol.stall_index == 1
    assert parse_policy({}).resubmit_on_stall is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("2", "<policy>: key 'resubmit_on_stall' must be a whole number, got '2'"),
        (True, "<policy>: key 'resubmit_on_stall' must be a whole number, got True"),
        (0, "<policy>: resubmit_on_stall (the stall rule) needs a positive budget, got 0"),
    ],
)
def test_a_bad_stall_rule_in_a_file_is_refused_naming_the_place_S36(
    value: object, says: str
) -> None:
    with pytest.raises((BadInput, PolicyError)) as caught:
        parse_policy({"resubmit_on_stall": value})
    assert says in str(caught.value)


def test_a_crash_after_the_stall_intent_is_finished_by_the_next_tick_S34() -> None:
    w = _world(1)
    first = _running(w)
    w.advance(61)
    effects = on_stall(w.job, w.discovery(), w.plan, w.now, None)
    (append,) = [e for e in effects if isinstance(e, Append)]
    w.events.extend(append.events)  # the intent is recorded; the supervisor dies here
    w.advance(5)
    again = w.tick()
    assert [type(e) for e in again] == [Stop, Submit]
    stop, submit = again
    assert isinstance(stop, Stop) and stop.object_id == first
    assert stop.cause == w.job.submissions[0].stopped[first]
    assert isinstance(submit, Submit) and (submit.submission, submit.gated) == (2, True)
    assert w.job.spent == {1: 1}  # the budget was spent once, by the intent
    assert on_stall(w.job, w.discovery(), w.plan, w.now, None) == []
