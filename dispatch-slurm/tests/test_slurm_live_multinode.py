"""One job across nodes on the real 4-node cluster: the launch contract (S-41), endings
attributed to a node and rank (S-42), nodes kept off (S-43), output kept per node and rank
and appended across executions (S-44, S-46).

Every job here runs on two of the four slurmd's (``slurmd -N nodeX``) the start script
starts on this host.
"""

from __future__ import annotations

import re
import socket
import uuid

import pytest
from dispatch import (
    BadInput,
    Capability,
    CauseKind,
    JobSpec,
    Launcher,
    LogSelection,
    Phase,
    Resources,
)
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import log_dir
from dispatch_slurm_testing.provoke import Provoker, wait_for

pytestmark = pytest.mark.live(server="slurm")

#: the top-tier partition (PreemptMode=OFF): another test preempting `low` jobs to make
#: room cannot end these
UNPREEMPTED = "high"

ENV_LINE = (
    "sh",
    "-c",
    "echo CONTRACT RANK=$RANK LOCAL_RANK=$LOCAL_RANK "
    "WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK NNODES=$NNODES "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR "
    "MASTER_PORT=$MASTER_PORT DISPATCH_JOB_ID=$DISPATCH_JOB_ID "
    "DISPATCH_SUBMISSION=$DISPATCH_SUBMISSION DISPATCH_EXECUTION=$DISPATCH_EXECUTION "
    "DISPATCH_RESUMED=$DISPATCH_RESUMED DISPATCH_STORE=${DISPATCH_STORE:-unset} "
    "HOST=$SLURMD_NODENAME PET=${PET_NNODES:-}/${PET_NPROC_PER_NODE:-}/"
    "${PET_NODE_RANK:-}/${PET_MASTER_ADDR:-}/${PET_MASTER_PORT:-}",
)
RANK1_FAILS = 'if [ "$RANK" = 1 ]; then sleep 2; {fail}; fi; sleep 300'


def _ended(backend: SlurmBackend, job_ids: list[str], timeout: float = 90):
    return wait_for(
        backend.dispatch_discover,
        job_ids,
        lambda s: all(j in s and s[j].phase is Phase.ENDED for j in job_ids),
        timeout=timeout,
    )


def _contract_lines(job_id: str) -> list[dict[str, str]]:
    lines = []
    for path in sorted(log_dir(job_id, 1).glob("node*.out")):
        for line in path.read_text().splitlines():
            if line.startswith("CONTRACT "):
                lines.append(dict(f.split("=", 1) for f in line.split()[1:]))
    return lines


def test_every_task_sees_one_launch_contract_across_two_nodes_S41_S44(
    backend, provoker, monkeypatch
) -> None:
    monkeypatch.setenv("DISPATCH_STORE", "postgresql://user:secret@db/dispatch")
    run = uuid.uuid4().hex[:8]
    jobs = [f"live-contract-{run}-a", f"live-contract-{run}-b"]
    for job in jobs:
        spec = provoker.spec(ENV_LINE, resources=Resources(nodes=2, tasks_per_node=2))
        backend.dispatch_submit(job, 1, spec, False)
    seen = _ended(backend, jobs)
    assert all(seen[j].cause.kind is CauseKind.NONE for j in jobs)
    ports = set()
    for job in jobs:
        lines = _contract_lines(job)
        assert sorted(int(x["RANK"]) for x in lines) == [0, 1, 2, 3]
        assert {x["WORLD_SIZE"] for x in lines} == {"4"}
        assert {x["NNODES"] for x in lines} == {"2"}
        assert {x["LOCAL_WORLD_SIZE"] for x in lines} == {"2"}
        assert len({(x["MASTER_ADDR"], x["MASTER_PORT"]) for x in lines}) == 1
        nodes = seen[job].executions[-1].nodes
        for x in lines:
            assert int(x["RANK"]) == int(x["NODE_RANK"]) * 2 + int(x["LOCAL_RANK"])
            assert x["HOST"] == nodes[int(x["NODE_RANK"])]
            assert (x["DISPATCH_JOB_ID"], x["DISPATCH_SUBMISSION"]) == (job, "1")
            assert (x["DISPATCH_EXECUTION"], x["DISPATCH_RESUMED"]) == ("0", "0")
            assert x["DISPATCH_STORE"] == "unset"  # dispatch's own configuration stays out
        # the first node's address, and it resolves: every node can reach it
        socket.getaddrinfo(lines[0]["MASTER_ADDR"], int(lines[0]["MASTER_PORT"]))
        ports.add(lines[0]["MASTER_PORT"])
    assert len(ports) == 2, "MASTER_PORT is chosen per job"


def test_torchrun_launcher_runs_once_per_node_with_its_rendezvous_set_S41(
    backend, provoker
) -> None:
    job = f"live-torchrun-env-{uuid.uuid4().hex[:8]}"
    spec = provoker.spec(ENV_LINE, resources=Resources(nodes=2, tasks_per_node=3))
    spec = spec.model_copy(update={"launcher": Launcher.TORCHRUN})
    backend.dispatch_submit(job, 1, spec, False)
    seen = _ended(backend, [job])
    assert seen[job].cause.kind is CauseKind.NONE
    lines = _contract_lines(job)
    assert len(lines) == 2  # one torchrun per node, not one per task
    master = f"{lines[0]['MASTER_ADDR']}/{lines[0]['MASTER_PORT']}"
    assert sorted(x["PET"] for x in lines) == [f"2/3/0/{master}", f"2/3/1/{master}"]
    assert {x["RANK"] for x in lines} == {""}  # torchrun sets RANK for its workers


@pytest.mark.parametrize(
    "fail,kind",
    [
        ("exit 1", CauseKind.NON_ZERO_EXIT),
        ('exec python3 -c "b = bytearray(600 * 1024 * 1024)"', CauseKind.OUT_OF_MEMORY),
    ],
)
def test_one_failing_rank_ends_the_job_and_the_cause_names_its_node_and_rank_S42(
    backend, provoker, fail: str, kind: CauseKind
) -> None:
    """The other rank sleeps 300 s: the job ends within the wait only because the wrapper
    cancelled it, and that cancelled rank is not the cause (root-cause rule)."""
    job = f"live-rankfail-{uuid.uuid4().hex[:8]}"
    spec = provoker.spec(
        ("sh", "-c", RANK1_FAILS.format(fail=fail)), resources=Resources(nodes=2, memory_mb=200)
    )
    backend.dispatch_submit(job, 1, spec, False)
    obj = _ended(backend, [job], timeout=60)[job]
    nodes = obj.executions[-1].nodes
    assert len(nodes) == 2
    assert obj.cause.kind is kind
    assert obj.cause.nodes == (nodes[1],) and obj.cause.rank == 1
    if kind is CauseKind.NON_ZERO_EXIT:
        assert obj.cause.exit_code == 1
    by_node = {c.nodes: c for c in obj.executions[-1].node_causes}
    assert by_node[(nodes[0],)].kind is CauseKind.CANCELLED  # stopped in the wake, not waited
    assert by_node[(nodes[1],)].kind is kind
    assert obj.executions[-1].cause == obj.cause


def test_excluded_nodes_are_kept_off_S43(backend, provoker) -> None:
    job = f"live-exclude-{uuid.uuid4().hex[:8]}"
    spec = provoker.spec(("true",), resources=Resources(nodes=2))
    spec = spec.model_copy(update={"exclude_nodes": frozenset({"node1", "node2"})})
    backend.dispatch_submit(job, 1, spec, False)
    obj = _ended(backend, [job])[job]
    assert obj.cause.kind is CauseKind.NONE
    assert set(obj.executions[-1].nodes) == {"node3", "node4"}
    assert backend.dispatch_declare().capabilities >= {Capability.EXCLUDE_NODES, Capability.LOGS}


def test_logs_are_per_node_and_rank_and_a_requeue_appends_S46(backend, provoker) -> None:
    job = f"live-logs-{uuid.uuid4().hex[:8]}"
    command = (
        "sh",
        "-c",
        "echo rank $RANK execution $DISPATCH_EXECUTION resumed $DISPATCH_RESUMED; sleep 600",
    )
    spec = provoker.spec(command, resources=Resources(nodes=2), requeue="yes")
    # the batch script's own output goes to the log directory too (the default)
    spec = spec.model_copy(
        update={"options": {k: v for k, v in spec.options.items() if k != "output"}}
    )
    oid = backend.dispatch_submit(job, 1, spec, False)
    wait_for(backend.dispatch_discover, [job], lambda s: job in s and s[job].phase is Phase.RUNNING)

    def rank_log(rank: int) -> str:
        return b"".join(backend.dispatch_logs(oid, LogSelection(rank=rank).of(job, 1))).decode()

    wait_for(backend.dispatch_discover, [job], lambda s: "execution 0" in rank_log(1))
    provoker.requeue(oid)
    try:
        wait_for(
            backend.dispatch_discover, [job], lambda s: "execution 1" in rank_log(1), timeout=90
        )
        assert re.findall(r"rank 1 execution (\d) resumed (\d)", rank_log(1)) == [
            ("0", "0"),
            ("1", "1"),
        ]
        assert "rank 0 execution 0" in rank_log(0) and "rank 1" not in rank_log(0)
        nodes = backend.dispatch_discover([job]).objects[0].executions[-1].nodes
        per_node = b"".join(backend.dispatch_logs(oid, LogSelection(node=nodes[0]).of(job, 1)))
        everything = b"".join(backend.dispatch_logs(oid, LogSelection().of(job, 1)))
        assert per_node.decode() in everything.decode() and b"dispatch: execution 1" in everything
        skipped = b"".join(backend.dispatch_logs(oid, LogSelection().of(job, 1, offset=10)))
        assert skipped == everything[10:]
        with pytest.raises(BadInput, match="rank 7"):
            backend.dispatch_logs(oid, LogSelection(rank=7).of(job, 1))
        with pytest.raises(BadInput, match="node 'elsewhere'"):
            backend.dispatch_logs(oid, LogSelection(node="elsewhere").of(job, 1))
    finally:
        provoker.cleanup([oid])


def _two_node_long(provoker: Provoker, where: str, requeue: str = "no") -> JobSpec:
    return provoker.spec(
        ("sleep", "600"),
        resources=Resources(nodes=2),
        requeue=requeue,
        sbatch_args=f"--nodelist={where}",
        partition=UNPREEMPTED,
    )


def test_a_lost_node_is_named_batch_node_and_other_node_S42(backend, provoker, launched) -> None:
    """node2 (not the batch node) lost under one job, node3 (its batch node) under another,
    at once: each cause names its own lost node, while running and once ended."""
    run = uuid.uuid4().hex[:8]
    other, batch = f"live-lost-{run}-other", f"live-lost-{run}-batch"
    oids = {
        other: backend.dispatch_submit(other, 1, _two_node_long(provoker, "node[1-2]"), False),
        batch: backend.dispatch_submit(batch, 1, _two_node_long(provoker, "node[3-4]"), False),
    }
    try:
        wait_for(
            backend.dispatch_discover,
            list(oids),
            lambda s: all(j in s and s[j].phase is Phase.RUNNING for j in oids),
        )
        for oid in oids.values():
            launched(oid)  # srun has launched its steps through the slurmd's
        assert provoker.lose(oids[other], which=-1) == "node2"
        assert provoker.lose(oids[batch], which=0) == "node3"
        running = wait_for(
            backend.dispatch_discover,
            list(oids),
            lambda s: all(
                s[j].cause is not None and s[j].cause.kind is CauseKind.NODE_LOST for j in oids
            ),
            timeout=60,
        )
        assert running[other].cause.nodes == ("node2",)
        assert running[batch].cause.nodes == ("node3",)
        seen = _ended(backend, list(oids), timeout=90)
    finally:
        provoker.restore_nodes()
        provoker.cleanup(list(oids.values()))
    for job, node in ((other, "node2"), (batch, "node3")):
        assert seen[job].cause.kind is CauseKind.NODE_LOST
        assert seen[job].cause.nodes == (node,), seen[job].cause
        assert "NODE_FAIL" in seen[job].cause.detail and "Not responding" in seen[job].cause.detail
        assert seen[job].executions[-1].cause.nodes == (node,)


def test_a_lost_node_under_native_requeue_and_a_node_set_down_are_named_S42(
    backend, provoker, launched
) -> None:
    run = uuid.uuid4().hex[:8]
    native, down = f"live-lost-{run}-native", f"live-down-{run}"
    oids = {
        native: backend.dispatch_submit(
            native, 1, _two_node_long(provoker, "node[1-2]", requeue="yes"), False
        ),
        down: backend.dispatch_submit(down, 1, _two_node_long(provoker, "node[3-4]"), False),
    }
    try:
        wait_for(
            backend.dispatch_discover,
            list(oids),
            lambda s: all(j in s and s[j].phase is Phase.RUNNING for j in oids),
        )
        for oid in oids.values():
            launched(oid)  # srun has launched its steps through the slurmd's
        provoker.lose(oids[native], which=-1)
        provoker.oob.run(
            [
                "scontrol",
                "update",
                "nodename=node4",
                "state=down",
                "reason=dispatch live test: node4 down",
            ]
        )
        seen = wait_for(
            backend.dispatch_discover,
            list(oids),
            lambda s: (
                s[down].phase is Phase.ENDED
                and s[native].executions
                and s[native].executions[0].ended
            ),
            timeout=120,
        )
    finally:
        provoker.restore_nodes()
        provoker.oob.run(["scontrol", "update", "nodename=node4", "state=resume"])
        provoker.cleanup(list(oids.values()))
    first = seen[native].executions[0]
    assert first.cause.kind is CauseKind.NODE_LOST and first.cause.nodes == ("node2",)
    assert seen[native].phase is not Phase.ENDED  # Slurm runs it again under the same id
    assert seen[down].cause.kind is CauseKind.NODE_LOST
    assert seen[down].cause.nodes == ("node4",)
    assert "node4 down" in seen[down].cause.detail


def test_with_two_tasks_per_node_the_failing_tasks_own_exit_code_is_the_jobs_S42(
    backend, provoker
) -> None:
    """srun --kill-on-bad-exit answers 143 for its step and sacct keeps no per-task code:
    the wrapper ends the job with the failing task's own status (5), and the node is the
    one whose step srun ended itself."""
    job = f"live-rankfail-2x2-{uuid.uuid4().hex[:8]}"
    spec = provoker.spec(
        ("sh", "-c", RANK1_FAILS.replace('$RANK" = 1', '$RANK" = 3').format(fail="exit 5")),
        resources=Resources(nodes=2, tasks_per_node=2),
    )
    backend.dispatch_submit(job, 1, spec, False)
    obj = _ended(backend, [job], timeout=60)[job]
    nodes = obj.executions[-1].nodes
    assert (obj.cause.kind, obj.cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 5)
    assert obj.cause.nodes == (nodes[1],)
