"""Stall escalation on the multi-node Slurm (S-47): one rank frozen with SIGSTOP, the other
hangs in the (file-based) collective, nothing ends by itself; the silent heartbeat raises
one escalation and the job stays running, with no cause. Under the policy's stall rule
(``resubmit_on_stall``) dispatch then stops it, recorded as its own decision, and
resubmits it. A job that only prints (never touches its heartbeat) counts as progressing
while its ranks' output grows: the launch wrapper moves the heartbeat up to it."""

from __future__ import annotations

import os
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dispatch import Client, RecoveryPolicy
from dispatch.core.folding import fold
from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.events import EscalationRaised, RecoveryStarted, StopRequested
from dispatch_slurm.launch import log_dir
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

#: every step waits for every rank to reach it (a collective), then rank 0 beats; with
#: FINISH_ON set, that submission finishes after a few steps
RANKS = """#!/bin/bash
SYNC=$SYNC/$DISPATCH_SUBMISSION
mkdir -p "$SYNC"
echo $$ > "$SYNC/pid.$RANK"
n=0
while :; do
  n=$((n + 1))
  echo $n > "$SYNC/step.$RANK.tmp" && mv "$SYNC/step.$RANK.tmp" "$SYNC/step.$RANK"
  for ((r = 0; r < WORLD_SIZE; r++)); do
    until [[ -f $SYNC/step.$r ]] && (($(cat "$SYNC/step.$r") >= n)); do sleep 0.1; done
  done
  if ((RANK == 0)); then touch "$DISPATCH_HEARTBEAT"; fi
  if [[ $DISPATCH_SUBMISSION == "${FINISH_ON:-}" ]] && ((n >= 3)); then exit 0; fi
  sleep 0.2
done
"""

#: rank 1 (on the second node) prints a line a second, never touching the heartbeat, then
#: says it is done and hangs printing nothing; rank 0 prints nothing at all
PRINTS = """#!/bin/bash
if ((RANK == 1)); then
  for i in $(seq 1 20); do echo "step $i"; sleep 1; done
  touch "$DONE"
fi
exec sleep 600
"""


def _wait(what: str, until, timeout: float = 120.0):  # type: ignore[no-untyped-def]
    return eventually(until, timeout=timeout, interval=0.5, what=what)


def _freeze(sync: Path) -> None:
    os.kill(int((sync / "pid.1").read_text()), signal.SIGSTOP)


def _steps(sync: Path, at_least: int = 3) -> bool:
    step = sync / "step.1"
    return step.exists() and int(step.read_text() or 0) >= at_least


def _end(client: Client, handle) -> None:  # type: ignore[no-untyped-def]
    if not client.status(handle.job_id).state.terminal:
        handle.cancel()
    for _ in range(20):
        if client.supervise(once=True).active == 0:
            break
        time.sleep(1)
    client.close()


def test_a_frozen_rank_raises_one_escalation_and_changes_nothing_S47(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    base = Path(workdir) / "sync"
    base.mkdir()
    os.chmod(base, 0o777)
    sync = base / "1"  # the first submission's
    script = Path(workdir) / "ranks.sh"
    script.write_text(RANKS)
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(
        ["bash", str(script)],
        backend="slurm",
        name=f"live-stall-{uuid.uuid4().hex[:6]}",
        resources={"nodes": 2},
        env={"SYNC": str(base)},
        workdir=workdir,
        options={"partition": "high"},
        progress_window="8s",
        checkpoint_dir=Path(workdir) / "ck",
    )
    beat = Path(workdir) / "ck" / ".dispatch-heartbeat"
    try:

        def steps() -> bool:
            client.supervise(once=True)
            return (
                beat.exists()
                and (sync / "step.1").exists()
                and int((sync / "step.1").read_text() or 0) >= 3
            )

        _wait("both ranks stepping", steps)
        _freeze(sync)

        def escalated() -> tuple:  # type: ignore[type-arg]
            client.supervise(once=True)
            return fold(client.store.read(handle.job_id)).escalations

        (raised,) = _wait("the escalation", escalated)
        assert raised.reason.startswith("no progress for ") and raised.cause is None
        assert "(window 8 s); last progress " in raised.reason
        status = client.status(handle.job_id)
        assert status.state is State.RUNNING and status.cause is None
        for _ in range(3):
            client.supervise(once=True)
            time.sleep(1)  # lets the silence go on, as it would between ticks
        assert len(fold(client.store.read(handle.job_id)).escalations) == 1
    finally:
        _end(client, handle)


def test_under_the_stall_rule_a_frozen_rank_is_stopped_by_dispatch_and_resubmitted_S47(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    sync = Path(workdir) / "sync"
    sync.mkdir()
    os.chmod(sync, 0o777)
    script = Path(workdir) / "ranks.sh"
    script.write_text(RANKS)
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(
        ["bash", str(script)],
        backend="slurm",
        policy=RecoveryPolicy(resubmit_on_stall=1),
        name=f"live-stall-rule-{uuid.uuid4().hex[:6]}",
        resources={"nodes": 2},
        env={"SYNC": str(sync), "FINISH_ON": "2"},
        workdir=workdir,
        options={"partition": "high"},
        progress_window="8s",
        checkpoint_dir=Path(workdir) / "ck",
    )
    try:

        def stepping() -> bool:
            client.supervise(once=True)
            return _steps(sync / "1")

        _wait("both ranks stepping", stepping)
        _freeze(sync / "1")

        def done() -> bool:
            client.supervise(once=True)
            return handle.record().terminal

        _wait("the stop, the resubmission and its success", done, timeout=240)
        events = client.store.read(handle.job_id)
        kinds = [type(e) for e in events]
        # nothing ended by itself: the first thing after the freeze is the escalation, then
        # dispatch's own stop and the recovery under the stall rule
        first = kinds.index(EscalationRaised)
        assert RecoveryStarted not in kinds[:first] and StopRequested not in kinds[:first]
        raised, stop, recovery = events[first : first + 3]
        assert isinstance(raised, EscalationRaised) and raised.cause is None
        assert "(window 8 s); last progress " in raised.reason
        assert "stall rule (rule 1: resubmit_on_stall budget=1)" in raised.reason
        assert isinstance(stop, StopRequested) and stop.submission == 1
        assert (stop.cause.kind, stop.cause.provenance, stop.cause.actor) == (
            CauseKind.CANCELLED,
            Provenance.ACTOR,
            "dispatch",
        )
        assert stop.cause.detail.startswith("stopped by dispatch for no progress for ")
        assert isinstance(recovery, RecoveryStarted) and recovery.cause == stop.cause
        job = handle.record()
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED
        assert job.spent == {0: 1} and [s.number for s in job.submissions] == [1, 2]
        assert _steps(sync / "2")  # the resubmission ran both ranks to the end
        status = client.status(handle.job_id)
        (stopped,) = status.submissions[0].objects
        assert stopped.phase.value == "ended" and "CANCELLED" in stopped.scheduler_state
    finally:
        _end(client, handle)


def test_the_ranks_output_growing_counts_as_progress_on_slurm_S47(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    script = Path(workdir) / "prints.sh"
    script.write_text(PRINTS)
    done = Path(workdir) / "done"
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(
        ["bash", str(script)],
        backend="slurm",
        name=f"live-prints-{uuid.uuid4().hex[:6]}",
        resources={"nodes": 2},
        env={"DONE": str(done)},
        workdir=workdir,
        options={"partition": "high"},
        progress_window="10s",
        checkpoint_dir=Path(workdir) / "ck",
    )
    beat = Path(workdir) / "ck" / ".dispatch-heartbeat"
    try:

        def printed() -> bool:
            client.supervise(once=True)
            return done.exists()

        _wait("rank 1 printing its 20 lines", printed)
        # 20 s of output and no heartbeat touched by the job, with a 10 s window: no stall
        assert fold(client.store.read(handle.job_id)).escalations == ()

        def escalated() -> tuple:  # type: ignore[type-arg]
            client.supervise(once=True)
            return fold(client.store.read(handle.job_id)).escalations

        (raised,) = _wait("the escalation once the output stops", escalated)
        logs = log_dir(handle.job_id, 1)
        newest = max(p.stat().st_mtime for p in logs.glob("*.*.out"))
        assert beat.stat().st_mtime == newest  # the heartbeat is the newest rank output
        last = datetime.fromtimestamp(newest, UTC)
        assert f"(window 10 s); last progress {last:%Y-%m-%d %H:%M:%S} UTC" in raised.reason
        assert "step 20" in (logs / f"{_node_of_rank_1(logs)}.0.out").read_text()
        status = client.status(handle.job_id)
        assert status.state is State.RUNNING and status.cause is None
    finally:
        _end(client, handle)


def _node_of_rank_1(logs: Path) -> str:
    """The second node of the first execution (``layout``: ``execution=0 nodes=A B ...``)."""
    line = (logs / "layout").read_text().splitlines()[0]
    return line.split("nodes=")[1].split()[1]
