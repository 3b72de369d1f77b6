"""``submit --dry-run`` prints what would be sent and the plan, records nothing; the
backend's ``dispatch_validate`` refuses what it cannot run before anything is recorded."""

from __future__ import annotations

import json
import sys

from cli.cli_shell import Shell


def test_dry_run_shows_runner_command_env_and_plan_records_nothing(sh: Shell) -> None:
    policy = sh.write("p.toml", '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    out = sh.run(
        "submit",
        "--dry-run",
        "--policy",
        str(policy),
        "--env",
        "LR=0.1",
        "--time",
        "90m",
        "--",
        "python",
        "train.py",
        "--epochs",
        "2",
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "dry run: nothing recorded, nothing sent to local" in text
    assert f"runner   {sys.executable} -m dispatch.local.runner" in text
    assert "command  python train.py --epochs 2" in text
    assert "LR=0.1" in text and "DISPATCH_JOB_ID=j" in text
    assert "time     1:30:00" in text
    assert "rule 1: on non-zero-exit" in text or "rule 1:" in text
    assert "uncovered causes" in text
    assert sh.recorded() == []


def test_dry_run_json_and_script(sh: Shell) -> None:
    script = sh.write("job.sh", "#!/bin/sh\necho hello\n")
    data = json.loads(sh.run("submit", "--dry-run", "--json", "--script", str(script)).stdout)
    assert data["dry_run"] is True and data["backend"] == "local"
    assert data["spec"]["script"] == "#!/bin/sh\necho hello\n" and data["spec"]["name"] == "job.sh"
    assert "  | echo hello" in data["rendered"]
    assert data["plan"]["backend"] == "local"
    assert sh.recorded() == []


def test_validate_hook_refuses_before_anything_is_recorded(sh: Shell) -> None:
    for extra in (["--dry-run"], []):
        out = sh.run("submit", *extra, "--tasks-per-node", "2", "--", "true")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "the local backend starts one process" in out.stderr  # local's own words
    assert sh.recorded() == []
