"""Endings attributed to a node and rank from what a real 4-node Slurm printed (S-42).

``data/multinode/*`` are the exact outputs of one discovery (recorded with
``scripts/record-discovery.py`` on the start script's cluster): a 2-node job whose rank 1
exited 1, one whose rank 1 was OOM-killed, and a successful one; the node-lost ones
(``node-lost.*``) hold sacctmgr's node events.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import CauseKind, Phase, Provenance
from dispatch_slurm.attribute import attribution_queries
from dispatch_slurm.observe import build_objects

DATA = Path(__file__).resolve().parent / "data" / "multinode"
AT = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _discover(prefix: str, *job_ids: str, steps: bool = True):
    def text(ext: str) -> str:
        path = DATA / f"{prefix}.{ext}"
        return path.read_text() if path.exists() else ""

    objects = build_objects(
        text("squeue"),
        text("sacct"),
        None,
        set(job_ids),
        AT,
        steps_text=text("steps") if steps else "",
        events_text=text("sacctmgr") if steps else "",
    )
    return {o.job_id: o for o in objects}


def test_rank_exit_1_names_node2_and_rank_1_not_the_rank_cancelled_in_its_wake_S42() -> None:
    obj = _discover("rank-failures", "s-856d42-exit1")["s-856d42-exit1"]
    assert obj.cause.kind is CauseKind.NON_ZERO_EXIT and obj.cause.exit_code == 1
    assert (obj.cause.nodes, obj.cause.rank) == (("node2",), 1)
    kinds = {c.nodes: c.kind for c in obj.executions[0].node_causes}
    assert kinds == {("node1",): CauseKind.CANCELLED, ("node2",): CauseKind.NON_ZERO_EXIT}
    assert "sacct step 9.1 (dsp-ranks-1-1): State=FAILED" in obj.cause.detail
    assert obj.executions[0].nodes == ("node1", "node2")


def test_rank_oom_names_its_node_and_rank_S42() -> None:
    obj = _discover("rank-failures", "s-856d42-oom")["s-856d42-oom"]
    assert obj.cause.kind is CauseKind.OUT_OF_MEMORY
    assert obj.cause.provenance is Provenance.SCHEDULER
    assert (obj.cause.nodes, obj.cause.rank) == (("node2",), 1)


def test_without_step_rows_the_ending_is_still_classified_but_names_no_node_S42() -> None:
    obj = _discover("rank-failures", "s-856d42-oom", steps=False)["s-856d42-oom"]
    assert obj.cause.kind is CauseKind.OUT_OF_MEMORY and obj.cause.nodes == ()


def test_only_failed_endings_ask_for_step_rows_and_only_node_failures_for_events_S32() -> None:
    sacct = (DATA / "rank-failures.sacct").read_text()
    wanted = {"s-856d42-env", "s-856d42-exit1", "s-856d42-oom"}
    queries = attribution_queries("", sacct, wanted)
    assert sorted(queries.steps_of) == ["10", "9"] and queries.events_nodes == ""
    assert attribution_queries("", sacct, {"s-856d42-env"}).steps_of == ()


@pytest.mark.parametrize("job_suffix,node", [("other", "node2"), ("batch", "node3")])
def test_a_lost_node_is_named_from_slurmdbd_node_events_S42(job_suffix: str, node: str) -> None:
    sacct = (DATA / "node-lost.sacct").read_text()
    job = next(
        line.split("|")[1][4:]
        for line in sacct.splitlines()
        if line.split("|")[1].endswith(job_suffix)
    )
    obj = _discover("node-lost", job)[job]
    assert obj.cause.kind is CauseKind.NODE_LOST
    assert obj.cause.nodes == (node,)
    assert f"sacctmgr: Node={node}" in obj.cause.detail and "Not responding" in obj.cause.detail


def test_a_failure_waits_for_the_records_that_name_its_node_then_settles_S42() -> None:
    """Right after the end sacct may not have the step rows yet: the object is reported
    finishing (so the ending is recorded once, attributed); 30 s later as it stands."""
    text = {ext: (DATA / f"rank-failures.{ext}").read_text() for ext in ("squeue", "sacct")}
    ended = datetime.fromisoformat("2026-12-01T08:07:44").astimezone()
    soon = build_objects(
        text["squeue"], text["sacct"], None, {"s-856d42-oom"}, ended + timedelta(seconds=5)
    )
    assert soon[0].phase is Phase.RUNNING and soon[0].cause is None
    late = build_objects(
        text["squeue"], text["sacct"], None, {"s-856d42-oom"}, ended + timedelta(seconds=31)
    )
    assert late[0].phase is Phase.ENDED and late[0].cause.kind is CauseKind.OUT_OF_MEMORY


def test_docs_hold_the_step_table_as_the_code_has_it_S42() -> None:
    from dispatch_slurm.attribute import render_markdown

    docs = (Path(__file__).parents[1] / "docs" / "mapping.md").read_text()
    assert render_markdown() in docs, "docs/mapping.md is stale: see its attribution section"


def test_torchrun_peer_failing_after_its_node_was_lost_is_node_lost_of_that_node_S42() -> None:
    """Rank 0's torchrun exits 1 at once (connection closed) and the wrapper ends the job
    before Slurm declares node4 down: the step on node4 never reported an exit status and
    slurmdbd recorded node4 DOWN 7 s after the end: node-lost, node4, not rank 0's exit."""
    job = "live-torchrun-kill-750d6b8a"
    obj = _discover("torchrun-node-lost", job)[job]
    assert obj.cause.kind is CauseKind.NODE_LOST
    assert obj.cause.nodes == ("node4",) and obj.cause.exit_code is None
    assert "sacctmgr: Node=node4" in obj.cause.detail
    kinds = {c.nodes: c.kind for c in obj.executions[0].node_causes}
    assert kinds[("node3",)] is CauseKind.NON_ZERO_EXIT  # kept per node, not the cause


def test_a_down_event_later_than_the_job_end_still_names_the_silent_node_S42() -> None:
    """Here node4 was declared down 11 s after the job ended: the event is matched to the
    silent step's own end (when Slurm gave up on its node), not the job's."""
    job = "live-torchrun-kill-5cdbb49c"
    obj = _discover("torchrun-node-lost-late-event", job)[job]
    assert (obj.cause.kind, obj.cause.nodes) == (CauseKind.NODE_LOST, ("node4",))


def test_with_two_tasks_per_node_the_step_srun_ended_itself_names_the_node_S42() -> None:
    """Rank 3 exited 5 on node2; --kill-on-bad-exit ended its step: sacct says CANCELLED
    0:15 with no `by <uid>` (and keeps no per-task code), while the step the wrapper
    cancelled on node1 says `CANCELLED by 0`. (Recorded before the wrapper passed the
    task's own status on, so the job's code here is srun's 143.)"""
    job = "kit-bc736282d2c9"
    obj = _discover("two-tasks-per-node-rank-failed", job)[job]
    assert obj.cause.kind is CauseKind.NON_ZERO_EXIT
    assert obj.cause.nodes == ("node2",) and obj.cause.rank is None
    by_node = {c.nodes: c.kind for c in obj.executions[0].node_causes}
    assert by_node == {("node1",): CauseKind.CANCELLED, ("node2",): CauseKind.NON_ZERO_EXIT}
