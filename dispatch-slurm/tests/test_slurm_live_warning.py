"""The warning before the time limit on real Slurm (S-44, S-45): ``--signal=B:SIG@S`` from
``spec.warn``, the signal passed on to the ranks, DISPATCH_CHECKPOINT_DIR exported, and a
job that checkpoints on the warning and exits 0 ending ``time-limit``, not ``succeeded``."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, JobSpec, Phase, Provenance, Resources
from dispatch.warning_text import parse_warning
from dispatch_slurm.backend import sbatch_argv
from dispatch_slurm.launch import log_dir
from dispatch_slurm.warning import checkpoint_dir
from dispatch_slurm_testing.provoke import wait_for
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

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
        warn=parse_warning("USR1@55s"),
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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resume" / "train.py"


def test_a_job_preempted_twice_continues_its_step_count_S44(
    backend, provoker, workdir: str
) -> None:
    """examples/resume/train.py, requeued by Slurm after each preemption: every execution
    starts where the checkpoint left it, the last one finishes the steps."""
    import shutil
    import sys

    job = f"live-resume-{uuid.uuid4().hex[:8]}"
    script = Path(workdir) / "train.py"
    shutil.copy(EXAMPLE, script)
    spec = JobSpec(
        name="live-resume",
        command=(sys.executable, str(script), "--steps", "400"),
        workdir=workdir,
        warn=parse_warning("USR1@60s"),
        options={"partition": "low", "requeue": "yes", "output": f"{workdir}/%j.out"},
    )
    oid = backend.dispatch_submit(job, 1, spec, False)
    step = checkpoint_dir(job, spec) / "step"

    def steps() -> int:
        return int(step.read_text() or 0) if step.exists() else 0

    try:
        for preemptions in (1, 2):
            wait_for(
                backend.dispatch_discover,
                [job],
                lambda s, n=preemptions: (
                    job in s and s[job].phase is Phase.RUNNING and len(s[job].executions) == n
                ),
                timeout=120,
            )
            before = steps()  # the running execution started at or below it
            eventually(lambda b=before: steps() > b, timeout=120, what="the execution makes a step")
            provoker.preempt({job: oid}, rerun_seconds=3)
        seen = wait_for(
            backend.dispatch_discover,
            [job],
            lambda s: job in s and s[job].phase is Phase.ENDED,
            timeout=240,
        )[job]
    finally:
        backend.dispatch_stop(oid, STOP)
    assert [e.cause.kind for e in seen.executions] == [
        CauseKind.PREEMPTED,
        CauseKind.PREEMPTED,
        CauseKind.NONE,
    ], seen.executions
    text = "".join(p.read_text() for p in sorted(log_dir(job, 1).glob("node*.out")))
    starts = [int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if "starts at step" in line]
    assert len(starts) == 3 and starts[0] == 0 and 0 < starts[1] < starts[2] < 400, text
    assert "stopped at step 400: done" in text
    print(text)


def test_a_batch_script_that_checkpoints_on_the_warning_and_exits_0_is_time_limit_S45(
    backend, workdir: str
) -> None:
    """A ``spec.script`` runs under the prelude: its #SBATCH lines still count, it gets the
    warning, and its exit 0 after it is the time limit's."""
    job = f"live-warn-script-{uuid.uuid4().hex[:8]}"
    out = Path(workdir) / "script.out"
    script = (
        "#!/bin/bash\n#SBATCH --job-name=ignored-by-dispatch-name\n"
        "#SBATCH --cpus-per-task=2\n"
        'echo "cpus=$SLURM_CPUS_PER_TASK ckpt=$DISPATCH_CHECKPOINT_DIR" >> "$OUT"\n'
        "trap 'echo warned > \"$DISPATCH_CHECKPOINT_DIR/ckpt\"; exit 0' USR1\n"
        "while :; do sleep 0.2; done\n"
    )
    spec = JobSpec(
        name="live-warn-script",
        script=script,
        workdir=workdir,
        env={"OUT": str(out)},
        warn=parse_warning("USR1@55s"),
        resources=Resources(time_limit=timedelta(minutes=1)),
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
    assert seen.cause is not None and seen.cause.kind is CauseKind.TIME_LIMIT, seen.cause
    assert "Slurm sent the warning SIGUSR1 time_left=" in seen.cause.detail
    (line,) = out.read_text().splitlines()
    assert line.startswith("cpus=2 ckpt=")
    assert (Path(line.split("ckpt=")[1]) / "ckpt").read_text() == "warned\n"
