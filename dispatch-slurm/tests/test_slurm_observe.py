"""Discovery assembled from what real squeue/sacct/sinfo printed (recorded by
``scripts/record-discovery.py`` on the live cluster) (S-19, S-32, S-36, S-38)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import CauseKind, Phase
from dispatch_slurm.observe import build_objects
from dispatch_slurm.parse import ParseError, parse_sinfo_nodes

REC = Path(__file__).parent / "data" / "recorded"
AT = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
ENDED_JOBS = {
    "smoke-63a0ac-gated",
    "smoke-63a0ac-cpus",
    "smoke-63a0ac-oomstep",
    "live-1792712e-signal",
    "live-1792712e-refused",
    "live-pre-aa8e3ca5-native",
    "live-pre-aa8e3ca5-norequeue",
    "live-pre-aa8e3ca5-cancel",
    "live-node-c188feb8-plain",
    "live-node-c188feb8-native",
    "nfprobe-c74174",
    "live-81723d52-cancelled",
    "live-1792712e-held_by_scheduler",
}


def _tick(name: str, wanted: set[str], with_nodes: bool = False):
    squeue = (REC / f"{name}.squeue").read_text()
    sacct = (REC / f"{name}.sacct").read_text()
    nodes = parse_sinfo_nodes((REC / f"{name}.sinfo").read_text()) if with_nodes else None
    return {o.job_id: o for o in build_objects(squeue, sacct, nodes, wanted, AT)}


def test_a_recorded_tick_gives_one_object_per_tagged_job_S19() -> None:
    seen = _tick("tick-ended", ENDED_JOBS)
    assert set(seen) == ENDED_JOBS
    kinds = {j: (o.phase, o.cause.kind if o.cause else None) for j, o in seen.items()}
    assert kinds["smoke-63a0ac-gated"] == (Phase.GATED, None)
    assert kinds["smoke-63a0ac-cpus"] == (Phase.PENDING, CauseKind.NO_CAPACITY)
    assert kinds["smoke-63a0ac-oomstep"] == (Phase.ENDED, CauseKind.OUT_OF_MEMORY)
    assert kinds["live-1792712e-signal"] == (Phase.ENDED, CauseKind.NON_ZERO_EXIT)
    assert kinds["live-1792712e-refused"] == (Phase.ENDED, CauseKind.LAUNCH_FAILED)
    assert kinds["live-pre-aa8e3ca5-norequeue"] == (Phase.ENDED, CauseKind.PREEMPTED)
    assert kinds["live-pre-aa8e3ca5-cancel"] == (Phase.ENDED, CauseKind.PREEMPTED)
    assert kinds["live-node-c188feb8-plain"] == (Phase.ENDED, CauseKind.NODE_LOST)


def test_requeued_objects_keep_their_id_and_list_every_execution_S38() -> None:
    seen = _tick("tick-ended", ENDED_JOBS)
    native = seen["live-pre-aa8e3ca5-native"]
    assert native.object_id == "118"
    assert [e.cause.kind for e in native.executions] == [CauseKind.PREEMPTED, CauseKind.CANCELLED]
    assert [e.index for e in native.executions] == [0, 1]
    node = seen["live-node-c188feb8-native"]
    assert [e.cause.kind for e in node.executions] == [CauseKind.NODE_LOST, CauseKind.CANCELLED]
    assert node.executions[0].ended_at < node.executions[1].started_at
    # the first incarnation's Submit (23:24:25), not the requeue's new one (23:24:53)
    assert node.created_at == datetime(2026, 11, 29, 23, 24, 25).astimezone().astimezone(UTC)


def test_a_requeued_job_waiting_to_run_again_has_its_ended_execution_S38() -> None:
    seen = _tick("tick-live", {"rec-requeued", "rec-running", "rec-gated"}, with_nodes=True)
    waiting = seen["rec-requeued"]
    assert (waiting.phase, waiting.cause.kind) == (Phase.PENDING, CauseKind.REQUEUED)
    assert [e.cause.kind for e in waiting.executions] == [CauseKind.REQUEUED]
    running = seen["rec-running"]
    assert (running.phase, running.cause) == (Phase.RUNNING, None)
    assert running.executions[0].nodes == ("vm",) and not running.executions[0].ended
    assert (seen["rec-gated"].phase, seen["rec-gated"].submission) == (Phase.GATED, 3)


def test_a_running_job_on_a_not_responding_node_is_node_lost_S26() -> None:
    squeue = (REC / "tick-live.squeue").read_text()
    sacct = (REC / "tick-live.sacct").read_text()
    nodes = parse_sinfo_nodes("vm|mixed*|Not responding\n")
    seen = {o.job_id: o for o in build_objects(squeue, sacct, nodes, {"rec-running"}, AT)}
    obj = seen["rec-running"]
    assert (obj.phase, obj.cause.kind) == (Phase.RUNNING, CauseKind.NODE_LOST)
    assert "State=mixed*" in obj.cause.detail and not obj.executions[0].ended


def test_jobs_not_asked_for_are_left_out_S32() -> None:
    assert set(_tick("tick-ended", {"live-1792712e-signal"})) == {"live-1792712e-signal"}
    assert _tick("tick-ended", {"nobody"}) == {}


def test_a_line_that_does_not_parse_is_that_object_unknown_verbatim_S36() -> None:
    line = (
        "7|dsp.j1|RUNNING|zz|0|0|2026-11-29T23:11:04|2026-11-29T23:11:11|NONE|vm|low|"
        "dispatch;job=j1;submission=2;gate=open|None|"
    )
    (obj,) = build_objects(line + "\n", "", None, {"j1"}, AT)
    assert (obj.object_id, obj.submission, obj.cause.kind) == ("7", 2, CauseKind.UNKNOWN)
    assert line in obj.cause.detail and obj.alive


def test_a_line_that_does_not_parse_and_is_not_ours_is_an_error_S36() -> None:
    with pytest.raises(ParseError, match="squeue"):
        build_objects("garbage\n", "", None, {"j1"}, AT)


def test_a_comment_naming_another_job_is_not_adopted_S34() -> None:
    line = (
        "7|dsp.j1|RUNNING|0|0|0|2026-11-29T23:11:04|2026-11-29T23:11:11|NONE|vm|low|"
        "dispatch;job=j2;submission=1;gate=open|None|"
    )
    assert build_objects(line + "\n", "", None, {"j1", "j2"}, AT) == []
