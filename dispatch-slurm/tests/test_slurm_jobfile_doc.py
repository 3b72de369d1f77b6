"""The job file example of dispatch-core/docs/jobfile.md is a real one: it loads, and its
Slurm dry run has the resources, options, launcher, endings and policy it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dispatch import Action, CauseKind, Client, Launcher

DOC = Path(__file__).resolve().parents[2] / "dispatch-core" / "docs" / "jobfile.md"


def _example() -> str:
    section = DOC.read_text().split("## An example", 1)[1]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found, "the example's TOML block"
    return found.group(1)


def test_the_documented_example_loads_and_dry_runs_on_slurm_S41(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path / "logs"))
    for name in ("DISPATCH_PROFILE", "DISPATCH_BACKEND", "DISPATCH_POLICY"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "llama.toml"
    path.write_text(_example())
    with Client(f"sqlite:///{tmp_path / 'record.db'}") as client:
        dry = client.dry_run_file(path)
    spec = dry.spec
    assert (dry.backend, spec.name, spec.launcher) == ("slurm", "llama-8b", Launcher.TORCHRUN)
    assert spec.command == ("torchrun", "train.py", "--config", "configs/8b.yaml")
    r = spec.resources
    assert (r.nodes, r.gpus_per_node, r.tasks_per_node, r.cpus_per_task) == (2, 8, 8, 4)
    assert r.memory_mb == 200 * 1024 and r.time_limit is not None
    assert r.time_limit.total_seconds() == 12 * 3600
    assert spec.options == {"partition": "gpu", "requeue": "yes"}
    assert spec.env == {"NCCL_DEBUG": "WARN"}
    assert spec.warn is not None and spec.checkpoint_dir == "/scratch/llama-8b/checkpoints"
    assert spec.progress_window is not None and spec.progress_window.total_seconds() == 1800
    rules = dry.plan.policy.rules
    assert [rule.action for rule in rules] == [Action.RESUBMIT, Action.HOLD]
    assert rules[0].on == (CauseKind.PREEMPTED, CauseKind.NODE_LOST)
    assert dry.prepared is not None
    sbatch = dry.prepared.words("sbatch")
    assert {"--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--partition=gpu"} <= set(
        sbatch
    )
