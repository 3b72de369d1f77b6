"""The vocabulary (S-1..S-6) and the policy/plan rules (S-7..S-11)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from core_bench import declarations, policy
from dispatch import (
    Action,
    Capability,
    Cause,
    CauseKind,
    Declarations,
    DecodeError,
    Discovery,
    Execution,
    Level,
    ObjectView,
    Phase,
    Plan,
    PolicyError,
    Provenance,
    Rule,
    State,
    Unreachable,
    root_cause,
)
from dispatch.model.enums import Enforcer
from dispatch.model.events import decode_event
from pydantic import ValidationError

T = datetime(2026, 1, 1, tzinfo=UTC)


def test_eight_states_exactly_S1() -> None:
    assert [s.value for s in State] == [
        "pending",
        "held",
        "running",
        "recovering",
        "succeeded",
        "failed",
        "cancelled",
        "unknown",
    ]


def test_cause_has_all_fields_S2_S42() -> None:
    c = Cause(
        kind=CauseKind.OUT_OF_MEMORY,
        provenance=Provenance.SCHEDULER,
        actor=None,
        detail="OUT_OF_MEMORY  0:125",
        exit_code=125,
        at=T,
    )
    assert set(Cause.model_fields) == {
        "kind",
        "provenance",
        "actor",
        "detail",
        "exit_code",
        "at",
        "nodes",
        "rank",
    }
    assert [p.value for p in Provenance] == ["scheduler", "application", "actor"]
    assert Cause.model_validate_json(c.model_dump_json()).detail == "OUT_OF_MEMORY  0:125"


def test_cause_kinds_closed_list_S3() -> None:
    assert [k.value for k in CauseKind] == [
        "none",
        "preempted",
        "node-lost",
        "out-of-memory",
        "time-limit",
        "non-zero-exit",
        "launch-failed",
        "no-capacity",
        "held",
        "released",
        "requeued",
        "cancelled",
        "duplicate",
        "unknown",
    ]


def test_unknown_keeps_the_answer_verbatim_S4() -> None:
    raw = "PENDING  Reason=SomethingNew(42)\n"
    obj = ObjectView(
        object_id="1",
        job_id="j",
        submission=1,
        phase=Phase.ENDED,
        scheduler_state="WEIRD",
        cause=Cause(kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=raw),
    )
    assert ObjectView.model_validate_json(obj.model_dump_json()).cause.detail == raw  # type: ignore[union-attr]


def test_unreachable_is_an_error_not_a_state_S5() -> None:
    assert issubclass(Unreachable, ConnectionError)
    assert "unreachable" not in {s.value for s in State} | {k.value for k in CauseKind}


@pytest.mark.parametrize(
    "model,data,field",
    [
        (Cause, {"kind": "martian", "provenance": "scheduler"}, "kind"),
        (Cause, {"kind": "none", "provenance": "gossip"}, "provenance"),
        (Rule, {"on": ["preempted"], "action": "pray"}, "action"),
        (
            ObjectView,
            {
                "object_id": "1",
                "job_id": "j",
                "submission": 1,
                "phase": "zombie",
                "scheduler_state": "X",
            },
            "phase",
        ),
        (
            Declarations,
            {
                "name": "x",
                "node_loss_window": "PT1M",
                "reports": ["none"],
                "capabilities": ["teleport"],
            },
            "capabilities",
        ),
    ],
)
def test_unknown_names_refused_naming_field_and_value_S6(model, data, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DecodeError) as err:
        model.model_validate_json(json.dumps(data))
    assert err.value.field.startswith(field)
    assert repr(err.value.value) in str(err.value) or str(err.value.value) in str(err.value)


def test_enums_encode_as_names_S6() -> None:
    c = Cause(kind=CauseKind.NODE_LOST, provenance=Provenance.SCHEDULER, at=T)
    assert json.loads(c.model_dump_json())["kind"] == "node-lost"
    assert json.loads(Level.OBJECT_ONLY.value.join('""')) == "object-only"


def test_event_from_newer_build_refused_S6() -> None:
    newer = {"type": "teleported", "job_id": "j", "seq": 2, "at": T.isoformat()}
    with pytest.raises(DecodeError, match="teleported"):
        decode_event(json.dumps(newer))
    extra = {
        "type": "cancel-requested",
        "job_id": "j",
        "seq": 2,
        "at": T.isoformat(),
        "cause": {"kind": "cancelled", "provenance": "actor"},
        "priority": 5,
    }
    with pytest.raises(DecodeError, match="priority"):
        decode_event(json.dumps(extra))


def test_rule_shape_S7() -> None:
    r = Rule(on=[CauseKind.PREEMPTED, CauseKind.NODE_LOST], action=Action.RESUBMIT, budget=3)
    assert r.on == (CauseKind.PREEMPTED, CauseKind.NODE_LOST) and r.budget == 3
    assert [a.value for a in Action] == ["resubmit", "hold", "escalate", "restart", "requeue"]
    with pytest.raises(ValidationError):
        Rule(on=[], action=Action.HOLD)


@pytest.mark.parametrize(
    "rules,needle",
    [
        (
            [
                ([CauseKind.PREEMPTED], Action.RESUBMIT, 1),
                ([CauseKind.PREEMPTED], Action.HOLD, None),
            ],
            "rule 1 and rule 2 (on [preempted] hold) both cover 'preempted'",
        ),
        ([([CauseKind.NONE], Action.HOLD, None)], "covers 'none'"),
        ([([CauseKind.CANCELLED], Action.ESCALATE, None)], "covers 'cancelled'"),
        ([([CauseKind.UNKNOWN], Action.RESUBMIT, 2)], "covers 'unknown' with 'resubmit'"),
        ([([CauseKind.HELD], Action.HOLD, None)], "covers 'held', which never ends an object"),
        ([([CauseKind.REQUEUED], Action.HOLD, None)], "covers 'requeued'"),
        ([([CauseKind.DUPLICATE], Action.HOLD, None)], "covers 'duplicate'"),
        ([([CauseKind.RELEASED], Action.HOLD, None)], "covers 'released'"),
        (
            [([CauseKind.PREEMPTED], Action.RESUBMIT, None)],
            "resubmit needs a positive budget, got None",
        ),
        ([([CauseKind.PREEMPTED], Action.RESTART, 0)], "restart needs a positive budget, got 0"),
        ([([CauseKind.PREEMPTED], Action.REQUEUE, -1)], "requeue needs a positive budget"),
    ],
)
def test_validate_refuses_naming_rule_and_cause_S8(rules, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PolicyError) as err:
        policy(*rules).validate()
    assert isinstance(err.value, ValueError)
    assert needle in str(err.value)


def test_valid_policy_accepted_S8() -> None:
    p = policy(
        ([CauseKind.PREEMPTED, CauseKind.NODE_LOST], Action.RESUBMIT, 3),
        ([CauseKind.UNKNOWN], Action.HOLD, None),
        ([CauseKind.OUT_OF_MEMORY], Action.ESCALATE, None),
    )
    assert p.validate() is p


def test_plan_binds_enforcers_S9() -> None:
    p = policy(
        ([CauseKind.PREEMPTED], Action.REQUEUE, 2),
        ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None),
        ([CauseKind.NODE_LOST], Action.RESTART, 1),
    )
    plan = Plan.bind(p, declarations(native_actions=frozenset({Action.REQUEUE})))
    assert [(b.enforcer, b.enforced) for b in plan.bindings] == [
        (Enforcer.BACKEND, True),
        (Enforcer.SUPERVISOR, True),
        (Enforcer.SUPERVISOR, False),
    ]


def test_plan_lists_uncovered_causes_S10() -> None:
    plan = Plan.bind(
        policy(([CauseKind.PREEMPTED, CauseKind.NODE_LOST], Action.RESUBMIT, 3)), declarations()
    )
    assert plan.uncovered == {
        CauseKind.OUT_OF_MEMORY,
        CauseKind.TIME_LIMIT,
        CauseKind.NON_ZERO_EXIT,
        CauseKind.LAUNCH_FAILED,
        CauseKind.NO_CAPACITY,
        CauseKind.UNKNOWN,
    }
    narrow = declarations(reports=frozenset({CauseKind.NONE, CauseKind.NON_ZERO_EXIT}))
    assert Plan.bind(policy(), narrow).uncovered == {CauseKind.NON_ZERO_EXIT, CauseKind.UNKNOWN}


def test_plan_accepts_but_lists_unenforced_rules_S11() -> None:
    plan = Plan.bind(policy(([CauseKind.PREEMPTED], Action.RESTART, 2)), declarations())
    assert [b.index for b in plan.unenforced] == [0]


def test_plan_refuses_invalid_policy_S8() -> None:
    with pytest.raises(PolicyError):
        Plan.bind(policy(([CauseKind.NONE], Action.HOLD, None)), declarations())


def test_root_cause_is_earliest_failure_not_the_ranks_killed_after() -> None:
    oom = Cause(kind=CauseKind.OUT_OF_MEMORY, provenance=Provenance.SCHEDULER, at=T)
    killed = [
        Cause(
            kind=CauseKind.NON_ZERO_EXIT,
            provenance=Provenance.APPLICATION,
            exit_code=143,
            at=T + timedelta(seconds=s),
        )
        for s in (1, 2, 3)
    ]
    assert root_cause([*killed, oom]) == oom
    same_time = Cause(
        kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.APPLICATION, exit_code=1, at=T
    )
    assert root_cause([same_time, oom]) == oom  # same instant: the specific one
    ok = Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, at=T)
    assert root_cause([ok, ok]) == ok and root_cause([]) is None


def test_discovery_groups_objects_by_job() -> None:
    objs = tuple(
        ObjectView(
            object_id=str(i),
            job_id=f"j{i % 2}",
            submission=1,
            phase=Phase.RUNNING,
            scheduler_state="R",
            executions=(Execution(index=0),),
        )
        for i in range(4)
    )
    d = Discovery(backend="b", at=T, objects=objs)
    assert [o.object_id for o in d.of_job("j1")] == ["1", "3"]
    assert set(d.by_job()) == {"j0", "j1"}


def test_declarations_refuse_non_native_actions() -> None:
    with pytest.raises(Exception, match="only restart/requeue"):
        Declarations(
            name="x",
            node_loss_window=timedelta(1),
            reports=frozenset(),
            native_actions=frozenset({Action.HOLD}),
            capabilities=frozenset({Capability.GATING}),
        )
