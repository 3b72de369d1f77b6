"""Stall escalation on the multi-node Slurm (S-47): one rank frozen with SIGSTOP, the other
hangs in the (file-based) collective, nothing ends by itself; the silent heartbeat raises
one escalation and the job stays running, with no cause."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from dispatch import Client
from dispatch.enums import State
from dispatch.folding import fold

#: every step waits for every rank to reach it (a collective), then rank 0 beats
RANKS = """#!/bin/bash
echo $$ > "$SYNC/pid.$RANK"
n=0
while :; do
  n=$((n + 1))
  echo $n > "$SYNC/step.$RANK.tmp" && mv "$SYNC/step.$RANK.tmp" "$SYNC/step.$RANK"
  for ((r = 0; r < WORLD_SIZE; r++)); do
    until [[ -f $SYNC/step.$r ]] && (($(cat "$SYNC/step.$r") >= n)); do sleep 0.1; done
  done
  if ((RANK == 0)); then touch "$DISPATCH_HEARTBEAT"; fi
  sleep 0.2
done
"""


def _wait(what: str, until, timeout: float = 120.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = until()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen in {timeout}s")


def test_a_frozen_rank_raises_one_escalation_and_changes_nothing_S47(
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
        name=f"live-stall-{uuid.uuid4().hex[:6]}",
        resources={"nodes": 2},
        env={"SYNC": str(sync)},
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
        frozen = int((sync / "pid.1").read_text())
        os.kill(frozen, signal.SIGSTOP)

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
            time.sleep(1)
        assert len(fold(client.store.read(handle.job_id)).escalations) == 1
    finally:
        handle.cancel()
        for _ in range(20):
            if client.supervise(once=True).active == 0:
                break
            time.sleep(1)
        client.close()
