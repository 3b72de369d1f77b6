"""A sweep as one Slurm job array on the real 4-node cluster (S-13, S-15, S-16, S-19).

Twelve members go as one ``sbatch --array=0-11%4``; each task is its member's object
(``<array>_<i>``) and is classified on its own: one task is preempted, one runs on a
node that is then lost, one exits 1. Each of those three ends by its own rule (a
resubmission as a single job for the first two, a failure for the third) while the nine
others succeed untouched, each with its one task.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from dispatch import Action, CauseKind, Client, RecoveryPolicy, Rule, State
from dispatch.core.folding import fold
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import log_dir
from dispatch_slurm_testing.provoke import Provoker, node_cpus
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

#: member 3 exits 1; members 0 and 1 run until something happens to them (their first
#: submission only); every member says it started, so the test knows its step runs
COMMAND = [
    "sh",
    "-c",
    'i={i}; echo "started $i"; if [ "$i" = 3 ]; then exit 1; fi; '
    'if [ "$DISPATCH_SUBMISSION" = 1 ] && [ "$i" -lt 2 ]; then sleep 600; fi; '
    'sleep 4; echo "done $i"',
]
POLICY = RecoveryPolicy(
    rules=(
        Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=1),
        Rule(on=(CauseKind.NODE_LOST,), action=Action.RESUBMIT, budget=1),
        Rule(on=(CauseKind.NON_ZERO_EXIT,), action=Action.ESCALATE),
    )
)


def _started(job_id: str) -> bool:
    return any(
        "started" in path.read_text(errors="replace") for path in log_dir(job_id, 1).glob("*.0.out")
    )


def test_a_12_member_array_one_preempted_one_node_lost_one_exit_1_each_by_its_rule_S13_S15_S16(
    slurm_cluster: str, workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(Path(workdir) / "logs"))
    monkeypatch.setenv("DISPATCH_SLURM_NODE_LOSS_WINDOW", "20")
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    provoker = Provoker(SlurmBackend().dispatch_submit, workdir)
    cpus = node_cpus()
    made = client.sweep(
        COMMAND,
        "i=0..11",
        backend="slurm",
        policy=POLICY,
        max_running=4,
        name=f"live-array-{uuid.uuid4().hex[:6]}-{{i}}",
        resources={"cpus_per_task": cpus},  # one task per node: each fault hits one member
        options={"partition": "low"},
        workdir=workdir,
    )
    ids = made.job_ids
    first = [fold(client.store.read(j)).submissions[0].object_id for j in ids]
    array = first[0].split("_")[0] if first[0] else ""
    try:
        assert first == [f"{array}_{i}" for i in range(12)], first

        def tick(what: str, done) -> object:  # type: ignore[no-untyped-def]
            def once() -> object:
                client.supervise(once=True)
                return done()

            return eventually(once, until=bool, timeout=300, interval=1.0, what=what)

        tick("members 0 and 1 running their steps", lambda: _started(ids[0]) and _started(ids[1]))
        (node0,) = provoker.nodes_of(first[0])
        provoker.sbatch_helper(
            "--partition=high", f"--nodelist={node0}", f"--cpus-per-task={cpus}", "--wrap=sleep 5"
        )
        lost = provoker.lose(first[1])
        assert lost != node0

        def ended() -> bool:
            return all(fold(client.store.read(j)).outcome is not None for j in ids)

        tick("every member's outcome committed", ended)
    finally:
        provoker.restore_nodes()
        leftover = [
            s.object_id or ""
            for j in ids
            for s in fold(client.store.read(j)).submissions
            if fold(client.store.read(j)).outcome is None
        ]
        provoker.cleanup([*leftover, *provoker.helpers])

    jobs = {j: fold(client.store.read(j)) for j in ids}
    preempted, on_lost, failing = ids[0], ids[1], ids[3]
    for job_id in (preempted, on_lost):
        job = jobs[job_id]
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job
        assert job.submissions[0].object_id == first[ids.index(job_id)]
        second = job.submissions[1].object_id or ""
        assert len(job.submissions) == 2 and "_" not in second  # a single job, no array
    status0 = client.status(preempted)
    assert status0.history[0].cause is not None
    assert status0.history[0].cause.kind is CauseKind.PREEMPTED
    status1 = client.status(on_lost)
    assert status1.history[0].cause is not None
    assert status1.history[0].cause.kind is CauseKind.NODE_LOST
    assert jobs[preempted].spent == {0: 1} and jobs[on_lost].spent == {1: 1}  # own budgets
    bad = jobs[failing]
    assert bad.outcome is not None and bad.outcome.state is State.FAILED
    assert bad.outcome.cause is not None and bad.outcome.cause.kind is CauseKind.NON_ZERO_EXIT
    assert bad.outcome.cause.exit_code == 1 and len(bad.submissions) == 1
    for index, job_id in enumerate(ids):
        if job_id in (preempted, on_lost, failing):
            continue
        job = jobs[job_id]
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job_id
        assert [s.object_id for s in job.submissions] == [f"{array}_{index}"], job_id
        assert job.spent == {}, job_id
        assert "done" in "".join(
            p.read_text() for p in log_dir(job_id, 1).glob("*.0.out")
        )  # its own log, per task
