"""The launch contract as dispatch hands it to sbatch, without a cluster (S-41, S-43, S-44,
S-46); the live tests prove what the tasks then see."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch import BadInput, JobSpec, Launcher, Resources, SubmitRefused
from dispatch_slurm.backend import SlurmBackend, sbatch_argv
from dispatch_slurm.launch import WRAPPER, job_environment, log_dir


def _spec(**kw) -> JobSpec:
    return JobSpec(command=("python", "train.py"), resources=Resources(nodes=2), **kw)


def test_a_command_runs_through_the_wrapper_with_appended_per_submission_output_S46(
    monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(tmp_path))
    argv = sbatch_argv("job/1", 2, _spec(), False, "/tmp/w.sh")
    logs = tmp_path / "job-job%2F1" / "submission-2"
    assert log_dir("job/1", 2) == logs  # escaped: a job id never climbs out of the root
    assert "--open-mode=append" in argv and f"--output={logs / 'batch.out'}" in argv
    assert argv[-5:] == ["/tmp/w.sh", "tasks", str(logs), "python", "train.py"]
    assert "--kill-on-bad-exit=1" in WRAPPER and "--open-mode=append" in WRAPPER


def test_exclude_nodes_become_sbatch_exclude_S43() -> None:
    argv = sbatch_argv("j", 1, _spec(exclude_nodes=frozenset({"node2", "node1"})), False, "s")
    assert "--exclude=node1,node2" in argv
    assert not [a for a in sbatch_argv("j", 1, _spec(), False, "s") if a.startswith("--excl")]


@pytest.mark.parametrize(
    "spec,words",
    [
        (JobSpec(script="#!/bin/sh\n", launcher=Launcher.TORCHRUN), "torchrun starts a command"),
        (_spec(exclude_nodes=frozenset({"node[1-2]"})), "exclude node 'node[1-2]'"),
        (_spec(options={"sbatch_args": "--exclude=node3"}), "may not set --exclude"),
        (_spec(options={"sbatch_args": "--open-mode=truncate"}), "may not set --open-mode"),
        (_spec(options={"colour": "red"}), "unknown slurm option"),
    ],
)
def test_validate_refuses_what_sbatch_would_be_asked_wrongly_S36(spec, words: str) -> None:
    with pytest.raises(BadInput, match=words.replace("[", r"\[").replace("]", r"\]")):
        SlurmBackend().dispatch_validate(spec)


def test_prepare_builds_argv_script_and_environment_sending_nothing_S30(monkeypatch) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", "/nonexistent/logs")
    backend = SlurmBackend()
    monkeypatch.setattr(backend.runner, "run", lambda *a, **k: pytest.fail("ran a command"))
    spec = _spec(launcher=Launcher.TORCHRUN, env={"FOO": "bar"})
    prepared = backend.dispatch_prepare("j", 1, spec, True)
    argv = prepared.words("sbatch")
    assert argv[:2] == ["sbatch", "--parsable"] and "--hold" in argv
    assert prepared.words("script arguments")[0] == "torchrun"
    assert prepared.text("batch script") == WRAPPER
    env = prepared.mapping("environment")
    assert (env["FOO"], env["DISPATCH_JOB_ID"], env["DISPATCH_SUBMISSION"]) == ("bar", "j", "1")
    assert env["DISPATCH_CHECKPOINT_DIR"].startswith("/nonexistent/logs")
    assert not Path("/nonexistent").exists()  # prepared, nothing created
    text = prepared.render()
    assert "--- batch script ---" in text and "--- environment ---" in text


def test_prepare_refuses_what_sbatch_cannot_be_given_S30() -> None:
    with pytest.raises(SubmitRefused, match="may not set --open-mode"):
        SlurmBackend().dispatch_prepare(
            "j", 1, _spec(options={"sbatch_args": "--open-mode=truncate"}), False
        )


def test_the_job_never_sees_dispatch_configuration_and_gets_its_tags_S44(monkeypatch) -> None:
    monkeypatch.setenv("DISPATCH_STORE", "postgresql://u:secret@db/x")
    monkeypatch.setenv("DISPATCH_SLURM_TIMEOUT", "5")
    monkeypatch.setenv("HOME_OF_TEST", "kept")
    env = job_environment("j", 3, {"FOO": "bar"})
    assert not {k for k in env if k.startswith("DISPATCH_")} - {
        "DISPATCH_JOB_ID",
        "DISPATCH_SUBMISSION",
    }
    assert (env["DISPATCH_JOB_ID"], env["DISPATCH_SUBMISSION"]) == ("j", "3")
    assert env["FOO"] == "bar" and env["HOME_OF_TEST"] == "kept"


def test_slurm_declares_exclude_nodes_and_logs() -> None:
    from dispatch import Capability

    caps = SlurmBackend().dispatch_declare().capabilities
    assert {Capability.EXCLUDE_NODES, Capability.LOGS} <= caps
