"""``submit --dry-run`` prints what would be sent (the backend's ``Prepared``, S-30) and the
plan, records nothing; the backend's ``dispatch_validate`` refuses what it cannot run before
anything is recorded; a backend without ``dispatch_prepare`` shows the spec."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cli.cli_shell import Shell
from click.testing import CliRunner
from dispatch import CauseKind, Declarations, Discovery, hookimpl
from dispatch.backends import Registry
from dispatch.cli.common import Context
from dispatch.cli.main import cli


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
    assert f"--- runner ---\n{sys.executable} -m dispatch.local.runner" in text
    assert "--- command ---\npython train.py --epochs 2\n" in text
    assert "LR=0.1" in text and "DISPATCH_JOB_ID=j" in text
    assert '"time_limit": "PT1H30M"' in text
    assert "rule 1: on [non-zero-exit] hold" in text
    assert "uncovered causes" in text
    assert sh.recorded() == []


def test_dry_run_json_and_script(sh: Shell) -> None:
    script = sh.write("job.sh", "#!/bin/sh\necho hello\n")
    data = json.loads(sh.run("submit", "--dry-run", "--json", "--script", str(script)).stdout)
    assert data["dry_run"] is True and data["backend"] == "local"
    assert data["spec"]["script"] == "#!/bin/sh\necho hello\n" and data["spec"]["name"] == "job.sh"
    parts = data["prepared"]["parts"]
    assert parts["object"]["spec"]["script"] == "#!/bin/sh\necho hello\n"
    assert parts["command"][0].endswith("/script") and len(parts["command"]) == 1
    assert parts["environment"]["DISPATCH_JOB_ID"] == data["job_id"]
    assert data["plan"]["backend"] == "local"
    assert sh.recorded() == []


def test_validate_hook_refuses_before_anything_is_recorded(sh: Shell) -> None:
    for extra in (["--dry-run"], []):
        out = sh.run("submit", *extra, "--tasks-per-node", "2", "--", "true")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "the local backend starts one process" in out.stderr  # local's own words
    assert sh.recorded() == []


class OneStep:
    """A backend with the one-step ``dispatch_submit`` and no ``dispatch_prepare``."""

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name="onestep",
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE, CauseKind.UNKNOWN}),
        )

    @hookimpl
    def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
        return Discovery(backend="onestep", at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        raise AssertionError("a dry run submits nothing")

    @hookimpl
    def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
        return None


def test_dry_run_of_a_backend_without_prepare_shows_the_spec_S30(tmp_path: Path) -> None:
    registry = Registry.from_plugins({"onestep": OneStep()})
    out = CliRunner().invoke(
        cli,
        ["submit", "--backend", "onestep", "--dry-run", "--", "python", "train.py"],
        obj=Context(f"sqlite://{tmp_path / 'r.db'}", registry=registry),
    )
    assert out.exit_code == 0, out.output
    assert "onestep builds what it sends only when it sends it (no dispatch_prepare)" in out.stdout
    assert '"command": [\n    "python",\n    "train.py"\n  ]' in out.stdout
