"""Endings and their causes: each scenario provoked and classified right."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dispatch import CauseKind, ObjectView, Phase

from dispatch_testing.kit.harness import (
    EXPECTED,
    MULTI_NODE_SCENARIOS,
    NotProvokable,
    Provoked,
    Scenario,
)
from dispatch_testing.kit.suite.support import alive, find_object, not_provokable
from dispatch_testing.kit.view import Kit


class EndingTests:
    def test_scenario(self, kit: Kit, scenario: Scenario, new_job: Callable[[], str]) -> None:
        """S-2, S-3, S-4, S-26, S-38: each ending the backend declares is provoked and
        classified right: kind, provenance, exit code, verbatim detail."""
        reasons = kit.harness.not_provokable()
        if scenario in reasons:
            not_provokable(kit, NotProvokable(reasons[scenario]))
        if scenario not in kit.harness.scenarios():
            pytest.fail(
                f"{kit.name} declares what makes {scenario.value!r} required, but its harness "
                "neither provokes it (scenarios()) nor says why not (not_provokable())",
                pytrace=False,
            )
        job = new_job()
        try:
            provoked = kit.harness.provoke(scenario, kit.backend, job)
        except NotProvokable as exc:
            not_provokable(kit, exc)
        if provoked.refused is not None:
            assert scenario is Scenario.LAUNCH_FAILED, f"{scenario.value}: submit was refused"
            assert provoked.refused.detail.strip(), "a refusal needs the scheduler's words"
            assert not alive(kit.objects(job)), "a refused submit left a live object"
            return
        expected = EXPECTED[scenario]
        object_id = provoked.object_id

        def mine(objs: tuple[ObjectView, ...]) -> ObjectView | None:
            return find_object(objs, object_id) if object_id else (objs[0] if objs else None)

        def done(objs: tuple[ObjectView, ...]) -> bool:
            obj = mine(objs)
            if obj is None or obj.phase not in expected.phases:
                return False
            if scenario is Scenario.NATIVE_RECOVERY:
                return len(obj.executions) >= 2 and obj.executions[0].cause is not None
            return obj.cause is not None and obj.cause.kind is expected.kind

        def wrong(objs: tuple[ObjectView, ...]) -> str | None:
            obj = mine(objs)
            if obj is None or obj.alive or expected.kind is None:
                return None
            got = obj.cause.kind.value if obj.cause else "no cause"
            if Phase.ENDED not in expected.phases:
                return f"{scenario.value}: expected a live {expected.kind.value}, it ended {got}"
            if got != expected.kind.value:
                return f"{scenario.value}: misclassified as {got}, expected {expected.kind.value}"
            return None

        objects = kit.wait_for(
            job, done, f"showing {scenario.value}", timeout=provoked.timeout, wrong=wrong
        )
        obj = mine(objects)
        assert obj is not None
        if scenario is Scenario.NATIVE_RECOVERY:
            check_native(kit, obj, provoked)
        else:
            check_cause(obj, scenario, provoked)
        assert ObjectView.model_validate_json(obj.model_dump_json()) == obj


def check_cause(obj: ObjectView, scenario: Scenario, provoked: Provoked) -> None:
    cause = obj.cause
    assert cause is not None
    expected = EXPECTED[scenario]
    assert cause.provenance in expected.provenances, (
        f"{scenario.value}: provenance {cause.provenance.value}, expected one of "
        f"{sorted(p.value for p in expected.provenances)}"
    )
    if cause.kind is CauseKind.NON_ZERO_EXIT:
        assert provoked.exit_code, "the harness must say which non-zero exit it provoked"
        assert cause.exit_code == provoked.exit_code, (
            f"exit code {cause.exit_code}, the job exited {provoked.exit_code}"
        )
    if cause.kind is CauseKind.NONE:
        assert cause.exit_code in (0, None), f"success with exit code {cause.exit_code}"
    if provoked.detail:
        assert provoked.detail in cause.detail, (
            f"{scenario.value}: detail must keep the scheduler's words verbatim: "
            f"{provoked.detail!r} not in {cause.detail!r}"
        )
    if scenario is Scenario.UNMAPPABLE:
        assert provoked.raw, "the harness must return the raw answer it injected"
        assert provoked.raw in cause.detail, (
            f"unknown must carry the scheduler's answer verbatim: {provoked.raw!r} not in "
            f"{cause.detail!r}"
        )
    if scenario in MULTI_NODE_SCENARIOS:
        ran_on = obj.executions[-1].nodes if obj.executions else ()
        assert len(ran_on) >= 2, (
            f"{scenario.value}: the object ran on {ran_on}; a multi-node scenario needs a "
            "job of at least two nodes listing them (Execution.nodes)"
        )
        assert provoked.nodes, (
            f"{scenario.value}: the harness must say which node it made fail (Provoked.nodes)"
        )
    if provoked.nodes:
        assert set(cause.nodes) == set(provoked.nodes), (
            f"{scenario.value}: the cause blames nodes {list(cause.nodes)}, the harness "
            f"made {list(provoked.nodes)} fail: Cause.nodes names exactly the node lost "
            "or whose rank failed, never the ones killed in its wake (S-42)"
        )
    if provoked.rank is not None:
        assert cause.rank == provoked.rank, (
            f"{scenario.value}: the cause names rank {cause.rank}, rank {provoked.rank} "
            "failed (S-42)"
        )
    if obj.phase is Phase.ENDED and obj.executions and scenario is not Scenario.UNMAPPABLE:
        last = obj.executions[-1].cause
        assert last is not None and last.kind is cause.kind, (
            f"the last execution ended {last}, the object says {cause.kind.value}"
        )


def check_native(kit: Kit, obj: ObjectView, provoked: Provoked) -> None:
    assert kit.declarations.native_actions, "native recovery on a backend declaring none"
    first = obj.executions[0].cause
    assert first is not None and first.kind is provoked.native_cause, (
        f"the first execution ended {first}, provoked {provoked.native_cause}"
    )
    assert obj.executions[1].index > obj.executions[0].index
