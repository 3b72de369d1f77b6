"""A script job on real Slurm gets what a command job gets (S-44, S-45, S-47), end to end
through the client and the supervisor: warned before its time limit, it checkpoints,
ends ``time-limit`` and its resubmission resumes with DISPATCH_RESUMED=1; its output,
wherever ``--output`` puts it, counts as progress."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import Action, CauseKind, Client, RecoveryPolicy, Rule
from dispatch.core.folding import fold
from dispatch.model.enums import State
from dispatch.model.events import RecoveryStarted
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

#: says what it sees; resumes from its checkpoint if there is one, else steps until the
#: warning, when it writes its step to the checkpoint and exits 0
TRAIN = """#!/bin/bash
#SBATCH --cpus-per-task=2
echo "submission=$DISPATCH_SUBMISSION execution=$DISPATCH_EXECUTION" \\
  "resumed=$DISPATCH_RESUMED unbuffered=$PYTHONUNBUFFERED job=$DISPATCH_JOB_ID" \\
  "cpus=$SLURM_CPUS_PER_TASK ckpt=$DISPATCH_CHECKPOINT_DIR" >> "$OUT"
if [[ -f $DISPATCH_CHECKPOINT_DIR/step ]]; then
  echo "resumed at step $(cat "$DISPATCH_CHECKPOINT_DIR/step")" >> "$OUT"
  exit 0
fi
step=0
trap 'echo "$step" > "$DISPATCH_CHECKPOINT_DIR/step"; exit 0' USR1
while :; do step=$((step + 1)); sleep 0.2; done
"""

#: prints a line a second for 20 s, never touching its heartbeat, then says it is done
#: and hangs printing nothing
PRINTS = """#!/bin/bash
for i in $(seq 1 20); do echo "step $i"; sleep 1; done
touch "$DONE"
exec sleep 600
"""


def _supervised(client: Client, until, what: str, timeout: float = 240.0):  # type: ignore[no-untyped-def]
    def tick():  # type: ignore[no-untyped-def]
        client.supervise(once=True)
        return until()

    return eventually(tick, timeout=timeout, interval=1.0, what=what)


def _end(client: Client, handle) -> None:  # type: ignore[no-untyped-def]
    if not client.status(handle.job_id).state.terminal:
        handle.cancel()
    for _ in range(20):
        if client.supervise(once=True).active == 0:
            break
        time.sleep(1)
    client.close()


def test_a_warned_script_ends_time_limit_and_its_resubmission_sees_resumed_S44_S45(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    out = Path(workdir) / "out"
    ckpt = Path(workdir) / "ck"
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(
        script=TRAIN,
        backend="slurm",
        policy=RecoveryPolicy(
            rules=(Rule(on=(CauseKind.TIME_LIMIT,), action=Action.RESUBMIT, budget=1),)
        ),
        name=f"live-script-warn-{uuid.uuid4().hex[:6]}",
        env={"OUT": str(out)},
        workdir=workdir,
        warn="USR1@55s",
        checkpoint_dir=ckpt,
        resources={"time_limit": timedelta(minutes=1)},
        options={"partition": "high"},
    )
    try:
        _supervised(client, lambda: handle.record().terminal, "the warning, the resubmission")
        events = client.store.read(handle.job_id)
        (recovery,) = [e for e in events if isinstance(e, RecoveryStarted)]
        assert recovery.cause.kind is CauseKind.TIME_LIMIT, recovery.cause
        assert "Slurm sent the warning SIGUSR1 time_left=" in recovery.cause.detail
        job = handle.record()
        assert job.outcome is not None and job.outcome.state is State.SUCCEEDED, job.outcome
        assert [s.number for s in job.submissions] == [1, 2]
    finally:
        _end(client, handle)
    first, second, resumed = out.read_text().splitlines()
    assert first == (
        f"submission=1 execution=0 resumed=0 unbuffered=1 job={handle.job_id} cpus=2 ckpt={ckpt}"
    )
    assert second == (
        f"submission=2 execution=0 resumed=1 unbuffered=1 job={handle.job_id} cpus=2 ckpt={ckpt}"
    )
    step = int((ckpt / "step").read_text())
    assert step > 0 and resumed == f"resumed at step {step}"


def test_a_script_printing_counts_as_progress_wherever_its_output_goes_S47(
    slurm_cluster: str, workdir: str, tmp_path: Path
) -> None:
    done = Path(workdir) / "done"
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(
        script=PRINTS,
        backend="slurm",
        name=f"live-script-prints-{uuid.uuid4().hex[:6]}",
        env={"DONE": str(done)},
        workdir=workdir,
        options={
            "partition": "high",
            "output": f"{workdir}/printed-%j.out",
            "error": f"{workdir}/printed-%j.err",
        },
        progress_window="10s",
        checkpoint_dir=Path(workdir) / "ck",
    )
    beat = Path(workdir) / "ck" / ".dispatch-heartbeat"
    try:
        _supervised(client, done.exists, "the script printing its 20 lines")
        # 20 s of output and no heartbeat touched by the job, with a 10 s window: no stall
        assert fold(client.store.read(handle.job_id)).escalations == ()
        (raised,) = _supervised(
            client,
            lambda: fold(client.store.read(handle.job_id)).escalations,
            "the escalation once the output stops",
        )
        (printed,) = Path(workdir).glob("printed-*.out")
        assert "step 20" in printed.read_text()
        newest = printed.stat().st_mtime
        assert beat.stat().st_mtime == newest  # the heartbeat is the script's output's
        last = datetime.fromtimestamp(newest, UTC)
        assert f"(window 10 s); last progress {last:%Y-%m-%d %H:%M:%S} UTC" in raised.reason
        status = client.status(handle.job_id)
        assert status.state is State.RUNNING and status.cause is None
    finally:
        _end(client, handle)
