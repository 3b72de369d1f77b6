"""Crash injection (S-34): the supervisor, a real process on the local backend, is
SIGKILLed at each step of a submission and of a recovery, then restarted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
STEPS = ["intent-recorded", "submitted", "result-recorded"]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DISPATCH, *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("attempt", range(3))
@pytest.mark.parametrize("step", STEPS)
def test_supervisor_killed_at_each_step_loses_nothing_S34(
    tmp_path: Path, step: str, attempt: int
) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("DISPATCH_STORE", None)
    marker = tmp_path / "ran"
    script = tmp_path / "flaky.sh"
    script.write_text(f"[ -e {marker} ] && exit 0\ntouch {marker}\nsleep 3\nexit 1\n")
    policy = tmp_path / "p.toml"
    policy.write_text('[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 2\n')
    job = _run(env, "submit", "--policy", str(policy), "--", "sh", str(script)).stdout.strip()

    crashes = 0
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        # a supervisor that dies at the step, then one that must pick up the pieces
        out = _run({**env, "DISPATCH_CRASH_AT": step}, "supervise", "--once", "--lease", "0.5")
        if out.returncode == -9:
            crashes += 1
            time.sleep(0.6)  # the dead supervisor's lease runs out; the next one takes over
            _run(env, "supervise", "--once", "--lease", "0.5")
        status = json.loads(_run(env, "status", job, "--json").stdout)
        if status["state"] == "succeeded" and status["settled"]:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"job did not finish: {status}")

    assert crashes >= 2  # it died in the submission and again in the recovery
    events = json.loads(_run(env, "history", job, "--json").stdout)
    assert [e["event"] for e in events] == ["recovery-started", "outcome-committed"]
    assert status["budgets"] == {"rule 1": 1}  # spent exactly once
    subs = status["submissions"]
    assert [s["number"] for s in subs] == [1, 2]
    assert all(len(s["objects"]) == 1 for s in subs), subs  # never submitted twice
    objects = list((tmp_path / "state" / "dispatch" / "local" / "objects").iterdir())
    assert len(objects) == 2
