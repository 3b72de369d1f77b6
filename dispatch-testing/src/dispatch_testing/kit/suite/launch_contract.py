"""The launch contract of a multi-node job (S-41)."""

from __future__ import annotations

from dispatch import CauseKind

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.suite.support import alive, find_object, not_provokable
from dispatch_testing.kit.view import Kit

#: S-41: what every task of a multi-node job sees
CONTRACT = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    "NNODES",
    "LOCAL_WORLD_SIZE",
)


def check_contract(kit: Kit, job: str) -> None:
    """S-41: every rank sees one MASTER_ADDR/PORT, its own RANK, and the same sizes."""
    spec = kit.harness.contract_spec()
    nodes, per = spec.resources.nodes, spec.resources.tasks_per_node
    assert nodes >= 2, "Harness.contract_spec must ask for at least two nodes"
    object_id = kit.backend.submit(job, 1, spec, False)
    objects = kit.wait_for(job, lambda objs: bool(objs) and not alive(objs), "ended")
    obj = find_object(objects, object_id)
    assert obj is not None and obj.cause is not None and obj.cause.kind is CauseKind.NONE, (
        f"the job printing its environment did not succeed: {obj and obj.cause}"
    )
    ran_on = obj.executions[-1].nodes if obj.executions else ()
    assert len(ran_on) in (0, nodes), f"asked for {nodes} nodes, ran on {ran_on}"
    world = nodes * per
    try:
        envs = kit.harness.task_environments(kit.backend, job, object_id, world)
    except NotProvokable as exc:
        not_provokable(kit, exc)
    assert len(envs) == world, f"{len(envs)} environments for {world} ranks"
    for rank, env in enumerate(envs):
        missing = [k for k in CONTRACT if not env.get(k)]
        assert not missing, f"rank {rank} does not see {missing} (S-41)"
        assert env["RANK"] == str(rank), f"rank {rank}'s task says RANK={env['RANK']}"
        sizes = (env["WORLD_SIZE"], env["NNODES"], env["LOCAL_WORLD_SIZE"])
        assert sizes == (str(world), str(nodes), str(per)), (
            f"rank {rank}: WORLD_SIZE, NNODES, LOCAL_WORLD_SIZE = {sizes}, "
            f"expected {world}, {nodes}, {per}"
        )
        ranks = (env["NODE_RANK"], env["LOCAL_RANK"])
        assert ranks == (str(rank // per), str(rank % per)), (
            f"rank {rank}: NODE_RANK, LOCAL_RANK = {ranks}, expected {rank // per}, {rank % per}"
        )
    for key in ("MASTER_ADDR", "MASTER_PORT"):
        values = {env[key] for env in envs}
        assert len(values) == 1, f"the ranks disagree on {key}: {sorted(values)} (S-41)"
    port = envs[0]["MASTER_PORT"]
    assert port.isdigit() and 0 < int(port) < 65536, f"MASTER_PORT={port!r}"
