"""The warning before the time limit on real Slurm (S-44, S-45): ``--signal=B:SIG@S`` from
``spec.warn``, the signal passed on to the ranks, DISPATCH_CHECKPOINT_DIR exported, and a
job that checkpoints on the warning and exits 0 ending ``time-limit``, not ``succeeded``."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch.warning import parse_warning
from dispatch_slurm.backend import sbatch_argv
from dispatch_slurm_testing.provoke import wait_for

pytestmark = pytest.mark.live

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="live test cleanup")

#: traps the warning, writes a checkpoint where dispatch says and exits 0
TRAIN = """#!/bin/bash
echo "rank=$RANK ckpt=$DISPATCH_CHECKPOINT_DIR resumed=$DISPATCH_RESUMED" >> "$OUT"
trap 'echo "rank $RANK step $step" > "$DISPATCH_CHECKPOINT_DIR/ckpt.$RANK"; exit 0' USR1
step=0
while :; do step=$((step + 1)); sleep 0.2; done
"""


def test_the_warning_becomes_sbatch_signal_S45() -> None:
    spec = JobSpec(command=("true",), warn=parse_warning("USR1@90s"))
    assert "--signal=B:USR1@90" in sbatch_argv("j-argv", 1, spec, False, "/x.sh")
    assert not [
        w
        for w in sbatch_argv("j-argv", 1, JobSpec(command=("true",)), False, "/x")
        if w.startswith("--signal")
    ]


def test_a_job_that_checkpoints_on_the_warning_and_exits_0_is_time_limit_S45_S44(
    backend, workdir: str
) -> None:
    job = f"live-warn-{uuid.uuid4().hex[:8]}"
    script = Path(workdir) / "train.sh"
    script.write_text(TRAIN)
    out = Path(workdir) / "out"
    spec = JobSpec(
        name="live-warn",
        command=("bash", str(script)),
        workdir=workdir,
        env={"OUT": str(out)},
        warn=parse_warning("USR1@45s"),
        resources=Resources(nodes=2, time_limit=timedelta(minutes=1)),
        options={"partition": "high"},
    )
    oid = backend.dispatch_submit(job, 1, spec, False)
    try:
        seen = wait_for(
            backend.dispatch_discover,
            [job],
            lambda s: job in s and s[job].phase is Phase.ENDED,
            timeout=150,
        )[job]
    finally:
        backend.dispatch_stop(oid, STOP)
    cause = seen.cause
    assert cause is not None
    assert cause.kind is CauseKind.TIME_LIMIT, cause
    assert cause.provenance is Provenance.SCHEDULER
    assert "Slurm sent the warning SIGUSR1 time_left=" in cause.detail
    assert "time_limit=1:00" in cause.detail and "COMPLETED" in cause.detail
    assert seen.executions[-1].cause == cause
    lines = out.read_text().splitlines()
    assert len(lines) == 2, lines
    ckpt = Path(lines[0].split("ckpt=")[1].split()[0])
    assert {p.name for p in ckpt.iterdir()} == {"ckpt.0", "ckpt.1"}
    assert all(p.read_text().startswith(f"rank {p.suffix[1:]} step ") for p in ckpt.iterdir())
