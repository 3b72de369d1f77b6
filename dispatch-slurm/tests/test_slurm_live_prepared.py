"""A Slurm dry run is what is sent (S-30), on the real 22.05 cluster: the sbatch argv and
environment ``dispatch_send`` ran are the ``Prepared`` one with the script's temporary
path in its place, and the batch script Slurm stored for the job
(``scontrol write batch_script JOBID -``) is the prepared script, byte for byte."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

import pytest
from dispatch import Cause, CauseKind, JobSpec, Provenance
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import submitter_environment
from dispatch_slurm.runner import Result
from dispatch_slurm_testing.provoke import Provoker

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="tester", detail="done")


def _stored_script(object_id: str) -> str:
    done = subprocess.run(
        ["scontrol", "write", "batch_script", object_id, "-"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _shown(object_id: str) -> dict[str, str]:
    done = subprocess.run(
        ["scontrol", "show", "job", "-o", object_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(word.split("=", 1) for word in done.stdout.split() if "=" in word)


@pytest.mark.parametrize("kind", ["command", "script"])
def test_the_prepared_sbatch_argv_environment_and_script_are_what_slurm_got_S30(
    backend: SlurmBackend, provoker: Provoker, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    job = f"live-prepared-{uuid.uuid4().hex[:8]}"
    if kind == "command":
        base = provoker.spec(("sh", "-c", "echo prepared"))
    else:
        base = provoker.spec(script="#!/bin/sh\necho prepared from a script\n")
    spec: JobSpec = base.model_copy(update={"env": {"MINE": "two words"}})
    ran: list[tuple[list[str], dict[str, str]]] = []
    real_run = backend.runner.run

    def recording(argv: list[str], **kwargs: Any) -> Result:
        if argv[0] == "sbatch":
            ran.append((list(argv), dict(kwargs.get("env") or {})))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(backend.runner, "run", recording)
    prepared = backend.dispatch_prepare(job, 1, spec, True)  # gated: it stays pending
    object_id = backend.dispatch_send(prepared)
    try:
        stored = _stored_script(object_id)
        shown = _shown(object_id)
    finally:
        backend.dispatch_stop(object_id, STOP)

    ((argv, env),) = ran
    options, arguments = prepared.words("sbatch"), prepared.words("script arguments")
    assert argv[: len(options)] == options
    assert argv[len(options) + 1 :] == arguments
    assert len(argv) == len(options) + 1 + len(arguments)
    assert env == submitter_environment() | prepared.mapping("environment")
    assert env["MINE"] == "two words" and env["DISPATCH_JOB_ID"] == job
    assert stored == prepared.text("batch script")
    assert f"--job-name={shown['JobName']}" in options
    assert f"--comment={shown['Comment']}" in options
    assert "--hold" in options and shown["JobState"] == "PENDING"
