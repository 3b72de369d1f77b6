"""The launch wrapper starts a step once the controller answers (S-5), without a cluster.

A job that starts just before slurmctld is stopped or frozen has its ``srun`` fail before
any task runs: "Unable to confirm allocation for job N: Unable to contact slurm
controller". That is no ending of the job's: the wrapper runs srun again, after a pause,
until the controller answers, so the step starts once and the job ends as it would have.
Any other failure of srun is the step's and ends the job at once. The wrapper is run here
by bash with stand-ins for ``srun`` (failing as told, then running the task) and
``scontrol``; the flapping campaign proves it on the real Slurm.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dispatch_slurm.launch import WRAPPER

SRUN = """#!/bin/bash
# fails the first time with srun's own words from $SRUN_SAYS, then runs the task
n=$(($(cat "$WORK/sruns" 2>/dev/null || echo 0) + 1))
echo "$n" >"$WORK/sruns"
if ((n == 1)); then echo "$SRUN_SAYS" >&2; exit "$SRUN_EXIT"; fi
while [[ $1 == --* ]]; do shift; done
SLURM_LOCALID=0 exec "$@"
"""
SCONTROL = """#!/bin/bash
if [[ "$1 $2" == "show hostnames" ]]; then echo node1; else exit 1; fi
"""


def _run(tmp_path: Path, says: str, exit_code: int) -> tuple[int, str, int, int]:
    """Run the wrapper for one node whose first srun fails with ``says``: its exit
    status, its stderr, how many times srun ran and how many times the command ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("squeue", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "scancel").symlink_to("/bin/true")
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(WRAPPER)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "WORK": str(tmp_path),
        "SRUN_SAYS": says,
        "SRUN_EXIT": str(exit_code),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_JOB_NUM_NODES": "1",
        "DISPATCH_JOB_ID": "j-flap",
        "DISPATCH_SUBMISSION": "1",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    command = ["sh", "-c", f'echo "$RANK" >> {tmp_path}/ran']
    done = subprocess.run(
        ["bash", str(wrapper), "tasks", str(logs), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    sruns = int((tmp_path / "sruns").read_text())
    ran = tmp_path / "ran"
    runs = len(ran.read_text().splitlines()) if ran.exists() else 0
    return done.returncode, done.stderr, sruns, runs


@pytest.mark.parametrize(
    "says",
    [
        "srun: error: Unable to confirm allocation for job 42: "
        "Unable to contact slurm controller (connect failure)",
        "srun: error: Unable to confirm allocation for job 42: Connection reset by peer",
        "srun: error: Unable to create step for job 42: Socket timed out on send/recv operation",
    ],
)
def test_a_step_srun_could_not_start_for_the_controller_starts_once_it_answers_S5(
    tmp_path: Path, says: str
) -> None:
    status, stderr, sruns, runs = _run(tmp_path, says, 1)
    assert (status, sruns, runs) == (0, 2, 1), stderr
    assert says in stderr  # srun's own words stay in the batch output
    assert "could not reach the controller" in stderr


@pytest.mark.parametrize(
    ("says", "exit_code"),
    [
        ("srun: error: node1: task 0: Exited with exit code 3", 3),
        (
            "srun: error: Unable to create step for job 42: "
            "Requested node configuration is not available",
            1,
        ),
        ("srun: error: Unable to contact slurm controller (connect failure)", 1),
    ],
)
def test_any_other_failure_of_srun_ends_the_job_at_once(
    tmp_path: Path, says: str, exit_code: int
) -> None:
    status, stderr, sruns, runs = _run(tmp_path, says, exit_code)
    assert (status, sruns, runs) == (exit_code, 1, 0), stderr
    assert says in stderr
