"""The launch contract as dispatch hands it to sbatch, without a cluster (S-41, S-43, S-44,
S-46); the live tests prove what the tasks then see."""

from __future__ import annotations

import pytest
from dispatch import BadInput, JobSpec, Launcher, Resources
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


def test_render_shows_the_sbatch_argv_and_the_batch_script_sending_nothing() -> None:
    text = SlurmBackend().dispatch_render("j", 1, _spec(launcher=Launcher.TORCHRUN), True)
    first, _, script = text.partition("\n--- batch script ---\n")
    assert first.startswith("sbatch --parsable") and "--hold" in first and " torchrun " in first
    assert script == WRAPPER


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
