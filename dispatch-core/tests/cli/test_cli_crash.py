"""Crash injection (S-34): the supervisor, a real process on the local backend,
is SIGKILLed at each step of a submission and of a recovery (the supervisor's own steps
and every step inside the local backend's submit), then another one picks up the pieces.

The crash points come from ``python -m dispatch_testing.crash``, which installs them into
the process it starts: the product itself carries no fault hook."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from dispatch_testing.crash import STEPS, Machine

#: Every step a submission or a recovery passes (stop and gate-opened are not on its path).
ON_THE_PATH = [s for s in STEPS if s not in ("stopped", "gate-opened")]


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return Machine(tmp_path, env)


@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("step", ON_THE_PATH)
def test_supervisor_killed_at_each_step_loses_nothing_S34(
    machine: Machine, step: str, attempt: int
) -> None:
    marker = machine.root / "ran"
    runs = machine.root / "runs"
    go = machine.root / "go"
    script = machine.root / "flaky.sh"
    # the first run fails only once the test says so (`go`), just before a supervisor that
    # crashes: so that supervisor, not the one picking up after it, sees the failure and
    # dies in the recovery, however slowly the machine starts each CLI process
    script.write_text(
        f"echo run >> {runs}\n[ -e {marker} ] && exit 0\ntouch {marker}\n"
        f"while [ ! -e {go} ]; do sleep 0.05; done\nexit 1\n"
    )
    policy = machine.root / "p.toml"
    policy.write_text('[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 2\n')
    # recorded only, so the first submission is a crashing supervisor's too
    job = machine.run(
        "submit", "--no-start", "--policy", str(policy), "--", "sh", str(script)
    ).stdout.strip()

    crashes = 0
    status: dict[str, Any] = {}
    for iteration in range(200):
        if (crashes or iteration >= 5) and not go.exists():
            go.touch()
        # a supervisor that dies at the step, then one that must pick up the pieces
        out = machine.run("supervise", "--once", "--lease", "0.5", crash=[step])
        if out.returncode == -9:
            crashes += 1
            time.sleep(0.6)  # the dead supervisor's lease runs out; the next one takes over
            machine.run("supervise", "--once", "--lease", "0.5")
        else:
            assert out.returncode == 0, out
        status = machine.json("status", job)
        if status["settled"] and status["state"] in ("succeeded", "failed", "cancelled"):
            break
    assert status["state"] == "succeeded", status
    assert crashes >= 2  # it died in the submission and again in the recovery
    events = machine.json("history", job)
    assert [e["event"] for e in events] == ["recovery-started", "outcome-committed"]
    assert status["budgets"] == {"rule 1": 1}  # spent exactly once
    subs = status["submissions"]
    assert [s["number"] for s in subs] == [1, 2]
    assert all(len(s["objects"]) == 1 for s in subs), subs  # never submitted twice
    assert runs.read_text() == "run\nrun\n"  # the command ran once per submission
    started = list(machine.local.glob("objects/local-*/started.json"))
    assert len(started) == 2, started


@pytest.mark.parametrize("step", ON_THE_PATH)
def test_submit_killed_while_it_submits_leaves_the_id_and_no_second_object_S34(
    machine: Machine, step: str
) -> None:
    """``dispatch submit`` makes the first submission itself, on the supervisor's path: killed
    at any step of it, the person still has the job id, the record has the job, and a
    supervisor ticking while the dead submit's lease holds makes no second object."""
    runs = machine.root / "runs"
    out = machine.run("submit", "--", "sh", "-c", f"echo run >> {runs}", crash=[step])
    assert out.returncode == -9, out  # it died at the step
    job = out.stdout.split()[0]
    assert machine.json("status", job)["job_id"] == job
    assert machine.run("supervise", "--once").returncode == 0
    subs = machine.json("status", job)["submissions"]
    assert len(subs) <= 1 and all(len(s["objects"]) <= 1 for s in subs), subs
    objects = list(machine.local.glob("objects/local-*"))
    assert len(objects) <= 1, objects
