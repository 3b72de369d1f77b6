"""Warned, checkpointed, resubmitted, resumed: the whole loop on the local backend through
the CLI (S-44, S-45). Each execution is warned 1 s before its 3 s time limit, checkpoints
its step and exits 0; the policy resubmits on ``time-limit``; the step count continues."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli.cli_shell import Shell

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "resume" / "train.py"


def test_time_limited_executions_resume_from_the_checkpoint_until_done_S44_S45(
    tmp_path: Path,
) -> None:
    sh = Shell(tmp_path)
    policy = sh.write("p.toml", '[[rule]]\non = ["time-limit"]\naction = "resubmit"\nbudget = 5\n')
    ckpt = tmp_path / "ck"
    out = sh.run(
        "submit", "--policy", str(policy), "--time", "3", "--warn", "USR1@1",
        "--checkpoint-dir", str(ckpt), "--wait", "--interval", "0.5", "--json",
        "--", sys.executable, str(EXAMPLE), "--steps", "40",
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    status = json.loads(out.stdout)
    assert status["state"] == "succeeded"
    ends = [h["cause"]["kind"] for h in status["history"] if h.get("cause")]
    assert ends[-1] == "none" and set(ends[:-1]) == {"time-limit"} and len(ends) >= 3, ends
    assert (ckpt / "step").read_text() == "40"
    texts = [
        sh.run("logs", status["job_id"], "--submission", str(n)).stdout
        for n in range(1, len(ends) + 1)
    ]
    starts = [int(t.split("starts at step ")[1].split()[0]) for t in texts]
    assert starts[0] == 0 and "execution 0 resumed=0" in texts[0], texts
    assert all("resumed=1" in t for t in texts[1:]), texts
    assert 0 < starts[1] and starts == sorted(starts), starts  # continuing, never restarting
    # each warned with SIGUSR1 (or, at worst, done just as the warning came: still time-limit)
    assert all("on signal 10" in t or "step 40: done" in t for t in texts[:-1]), texts
    assert "stopped at step 40: done" in texts[-1], texts
