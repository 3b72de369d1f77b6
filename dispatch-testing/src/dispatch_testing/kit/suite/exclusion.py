"""The exclude-nodes capability (S-43)."""

from __future__ import annotations

import pytest
from dispatch import Capability, CauseKind, ObjectView, Phase

from dispatch_testing.kit.harness import NotProvokable, Scenario
from dispatch_testing.kit.suite.support import STOP, alive, find_object, not_provokable
from dispatch_testing.kit.view import Kit


def check_exclusion(kit: Kit, job: str) -> None:
    """S-43: after a node-lost ending, a submission excluding the lost node keeps off
    it, although the node is back and would otherwise be chosen again."""
    multi = Capability.MULTI_NODE in kit.declarations.capabilities
    scenario = Scenario.NODE_LOST_OF_N if multi else Scenario.NODE_LOST
    reasons = kit.harness.not_provokable()
    if scenario in reasons:
        not_provokable(kit, NotProvokable(reasons[scenario]))
    if scenario not in kit.harness.scenarios():
        pytest.fail(
            f"{kit.name} declares exclude-nodes; the kit checks it after a "
            f"{scenario.value!r} ending, which its harness neither provokes nor explains",
            pytrace=False,
        )
    try:
        provoked = kit.harness.provoke(scenario, kit.backend, job)
    except NotProvokable as exc:
        not_provokable(kit, exc)
    first = provoked.object_id

    def lost(objs: tuple[ObjectView, ...]) -> bool:
        obj = find_object(objs, first) if first else None
        return obj is not None and obj.cause is not None and obj.cause.kind is CauseKind.NODE_LOST

    objects = kit.wait_for(job, lost, "showing node-lost", timeout=provoked.timeout)
    obj = find_object(objects, first or "")
    assert obj is not None and obj.cause is not None
    avoid = frozenset(obj.cause.nodes)
    assert avoid, (
        "a node-lost cause must name the lost node in Cause.nodes (S-42): there is "
        "nothing for exclude-nodes to keep off"
    )
    if obj.alive:
        kit.backend.stop(obj.object_id, STOP)
        kit.wait_for(job, lambda objs: not alive(objs), "the first object ended")
    kit.harness.restore_nodes(avoid)
    spec = kit.harness.multi_node_spec() if multi else kit.harness.long_spec()
    second = kit.backend.submit(job, 2, spec.model_copy(update={"exclude_nodes": avoid}), False)

    def running(objs: tuple[ObjectView, ...]) -> bool:
        mine = find_object(objs, second)
        return mine is not None and mine.phase is Phase.RUNNING and bool(mine.executions)

    objects = kit.wait_for(job, running, "submission 2 running")
    again = find_object(objects, second)
    assert again is not None
    nodes = set(again.executions[-1].nodes)
    assert nodes, "a running object must list its nodes (Execution.nodes)"
    assert not nodes & avoid, (
        f"submission 2 excluded {sorted(avoid)} and runs on {sorted(nodes)} (S-43)"
    )
