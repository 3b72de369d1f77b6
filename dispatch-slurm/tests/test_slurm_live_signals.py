"""A signal Slurm sends to a job's tasks reaches the user's command (S-45): each task runs
under a small shell that notes failing ranks, and that shell must pass SIGTERM (a
preemption's, a cancel's, ``scancel --signal``) on to the command, then end with the
command's own status, not the interrupted wait's."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch_slurm_testing.provoke import wait_for
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="live test cleanup")

#: checkpoints on SIGTERM and exits 0; never ends by itself
TRAIN = """#!/bin/sh
trap 'echo "rank $RANK got TERM" >> "$OUT"; exit 0' TERM
echo "rank $RANK started" >> "$OUT"
sleep 300 &
wait
"""


def test_sigterm_reaches_the_command_and_its_own_status_ends_the_job_S45(
    backend, workdir: str
) -> None:
    job = f"live-sig-{uuid.uuid4().hex[:8]}"
    script = Path(workdir) / "train.sh"
    script.write_text(TRAIN)
    out = Path(workdir) / "out"
    spec = JobSpec(
        name="live-sig",
        command=("sh", str(script)),
        workdir=workdir,
        env={"OUT": str(out)},
        resources=Resources(nodes=2),
        options={"partition": "high"},
    )
    oid = backend.dispatch_submit(job, 1, spec, False)
    try:
        eventually(
            lambda: out.exists() and out.read_text().count("started") == 2,
            timeout=120,
            interval=0.5,
            what="the two ranks started",
        )
        subprocess.run(["scancel", "--signal=TERM", oid], check=True, timeout=30)
        seen = wait_for(
            backend.dispatch_discover,
            [job],
            lambda s: job in s and s[job].phase is Phase.ENDED,
            timeout=120,
        )[job]
    finally:
        backend.dispatch_stop(oid, STOP)
    assert sorted(out.read_text().splitlines()) == [
        "rank 0 got TERM",
        "rank 0 started",
        "rank 1 got TERM",
        "rank 1 started",
    ]
    assert seen.cause is not None and seen.cause.kind is CauseKind.NONE, seen.cause
