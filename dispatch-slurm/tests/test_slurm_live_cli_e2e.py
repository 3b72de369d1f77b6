"""End to end on the real Slurm: ``dispatch submit --backend slurm --policy … --wait`` as a
user runs it (a real process, SQLite record) (S-12..S-16, S-28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dispatch_slurm_testing.provoke import Provoker
from dispatch_testing.waiting import NotYet, eventually

pytestmark = pytest.mark.live(server="slurm")

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def _submit(tmp_path: Path, workdir: str, policy: str, *command: str) -> subprocess.Popen[str]:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(policy)
    return subprocess.Popen(
        [
            DISPATCH,
            "submit",
            "--backend",
            "slurm",
            "--policy",
            str(policy_file),
            "--workdir",
            workdir,
            "-o",
            f"output={workdir}/%j.out",
            "-o",
            "partition=low",
            "--interval",
            "1",
            "--wait",
            "--",
            *command,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )


def _status(tmp_path: Path, job_id: str) -> dict:
    out = subprocess.run(
        [DISPATCH, "status", job_id, "--json"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def _running_objects(provoker: Provoker, job_id: str) -> list[str]:
    out = provoker.oob.run(["squeue", "-h", "--states=RUNNING", f"--name=dsp.{job_id}", "-o", "%i"])
    return out.stdout.split()


def test_cli_resubmits_a_preempted_slurm_job_until_it_succeeds_S13_S16(
    slurm_cluster, provoker, tmp_path: Path
) -> None:
    policy = '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n'
    proc = _submit(tmp_path, provoker.workdir, policy, "sleep", "15")
    job_id = proc.stdout.readline().strip()
    assert job_id, proc.stderr.read()

    def running_objects() -> list[str]:
        assert proc.poll() is None, proc.communicate()
        return _running_objects(provoker, job_id)

    try:
        running = eventually(running_objects, timeout=90, interval=0.5, what=f"{job_id} running")
    except NotYet:
        proc.kill()
        raise
    preemptor = provoker.preempt({job_id: running[0]})
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        provoker.cleanup([preemptor])
    assert proc.returncode == 0, f"{out}\n{err}"
    assert "recovering" in out and "succeeded" in out
    status = _status(tmp_path, job_id)
    assert status["state"] == "succeeded"
    assert [s["number"] for s in status["submissions"]] == [1, 2]
    recoveries = [h for h in status["history"] if h["event"] == "recovery-started"]
    assert len(recoveries) == 1 and recoveries[0]["cause"]["kind"] == "preempted"
    assert "PREEMPTED" in recoveries[0]["cause"]["detail"]


def test_cli_holds_a_slurm_job_that_exits_1_S14(slurm_cluster, provoker, tmp_path: Path) -> None:
    policy = (
        '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n\n'
        '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n'
    )
    proc = _submit(tmp_path, provoker.workdir, policy, "sh", "-c", "exit 1")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 6, f"{out}\n{err}"  # held: needs a person
    job_id = out.splitlines()[0].strip()
    status = _status(tmp_path, job_id)
    assert status["state"] == "held"
    assert status["cause"]["kind"] == "non-zero-exit" and status["cause"]["exit_code"] == 1
    assert "NonZeroExitCode" in status["cause"]["detail"]
