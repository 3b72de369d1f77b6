"""What a local job sees (S-44, S-41 for one node): dispatch's variables and
the one-node torch.distributed contract, the submitter's environment kept 0600, and never
dispatch's own configuration."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch import JobSpec, Launcher, ObjectView
from dispatch.local.backend import LocalBackend
from dispatch.local.environment import kept_file
from dispatch_testing.waiting import eventually

CONTRACT = {
    "MASTER_ADDR": "127.0.0.1",
    "WORLD_SIZE": "1",
    "RANK": "0",
    "LOCAL_RANK": "0",
    "NODE_RANK": "0",
    "NNODES": "1",
    "LOCAL_WORLD_SIZE": "1",
}


def _env_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().split("\0") if "=" in line)


def _run(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    tmp_path: Path,
    job_id: str,
    submission: int,
    launcher: Launcher = Launcher.TASKS,
) -> dict[str, str]:
    out = tmp_path / f"env-{job_id}-{submission}"
    spec = JobSpec(command=("sh", "-c", f"env -0 > {out}"), launcher=launcher, env={"MINE": "1"})
    backend.dispatch_submit(job_id, submission, spec, False)
    settle(job_id, lambda v: v.submission == submission and v.phase.value == "ended")
    return _env_of(out)


def test_every_execution_sees_dispatch_variables_and_the_one_node_contract_S44_S41(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    first = _run(backend, settle, tmp_path, "job-env", 1)
    assert {k: first[k] for k in CONTRACT} == CONTRACT
    assert int(first["MASTER_PORT"]) > 0
    assert first["DISPATCH_JOB_ID"] == "job-env"
    assert (first["DISPATCH_SUBMISSION"], first["DISPATCH_EXECUTION"]) == ("1", "0")
    assert first["DISPATCH_RESUMED"] == "0"  # nothing of the job ran before
    assert first["PYTHONUNBUFFERED"] == "1"  # as on every backend: output as it prints
    assert first["MINE"] == "1"
    assert not any(k.startswith("PET_") for k in first)


def test_a_later_submission_is_resumed_S44(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    _run(backend, settle, tmp_path, "job-again", 1)
    out = tmp_path / "second"
    backend.dispatch_submit("job-again", 2, JobSpec(command=("sh", "-c", f"env -0 > {out}")), False)
    eventually(
        lambda: [v.phase.value for v in backend.dispatch_discover(["job-again"]).objects],
        until=lambda phases: phases == ["ended", "ended"],
        what="both submissions of job-again end",
    )
    second = _env_of(out)
    assert (second["DISPATCH_SUBMISSION"], second["DISPATCH_RESUMED"]) == ("2", "1")


def test_torchrun_gets_its_rendezvous_from_the_same_values_S41(
    backend: LocalBackend, settle: Callable[..., ObjectView], tmp_path: Path
) -> None:
    env = _run(backend, settle, tmp_path, "job-torchrun", 1, Launcher.TORCHRUN)
    assert env["PET_NNODES"] == env["NNODES"] == "1"
    assert env["PET_NODE_RANK"] == env["NODE_RANK"] == "0"
    assert env["PET_NPROC_PER_NODE"] == env["LOCAL_WORLD_SIZE"] == "1"
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == (
        env["MASTER_ADDR"],
        env["MASTER_PORT"],
    )


def test_a_job_never_sees_dispatchs_own_configuration_and_gets_the_kept_environment_S44(
    backend: LocalBackend,
    settle: Callable[..., ObjectView],
    tmp_path: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what the supervisor running the submit has: dispatch's own settings and a variable
    monkeypatch.setenv("DISPATCH_STORE", "postgresql://dispatch:s3cret@db/dispatch")
    monkeypatch.setenv("ONLY_THE_SUPERVISOR", "yes")
    backend.keep_environment(
        "job-kept",
        {
            "FROM_SUBMITTER": "x",
            "DISPATCH_STORE": "sqlite:///elsewhere.db",
            "PATH": "/usr/bin:/bin",
        },
    )
    kept = kept_file(backend.state, "job-kept")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert "DISPATCH_STORE" not in kept.read_text()  # never kept either
    env = _run(backend, settle, tmp_path, "job-kept", 1)
    assert env["FROM_SUBMITTER"] == "x"
    assert "ONLY_THE_SUPERVISOR" not in env  # the submitter's, not the supervisor's
    assert not any(k.startswith("DISPATCH_STORE") for k in env)
    # no environment kept (a job recorded on another host): the supervisor's, still clean
    other = _run(backend, settle, tmp_path, "job-elsewhere", 1)
    assert other["ONLY_THE_SUPERVISOR"] == "yes"
    assert "DISPATCH_STORE" not in other
