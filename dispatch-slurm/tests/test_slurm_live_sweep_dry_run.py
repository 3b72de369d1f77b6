"""A sweep's dry run on the real cluster is the array that is then sent (S-30): the dry run
records nothing and leaves nothing at Slurm or on disk; the sweep that follows sends one
``sbatch --array`` whose argv and environment are the dry run's (its group id in place of
the dry run's), Slurm shows that array (name, comment, throttle, partition, output) and
stores the dry run's batch script byte for byte (``scontrol write batch_script``), and
each task runs its own member's command."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from dispatch import Client, Registry, State
from dispatch.model.prepared import Prepared
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.launch import log_dir, submitter_environment
from dispatch_slurm.runner import Result
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

COMMAND = ["sh", "-c", 'echo "seed={seed} task=$SLURM_ARRAY_TASK_ID"']


def _scontrol(*words: str) -> str:
    return subprocess.run(
        ["scontrol", *words], capture_output=True, text=True, timeout=60, check=True
    ).stdout


def _shown(object_id: str) -> dict[str, str]:
    line = _scontrol("show", "job", "-o", object_id).splitlines()[0]
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def test_a_sweeps_dry_run_records_nothing_and_the_sweep_sends_what_it_showed_S30(
    slurm_cluster: str, workdir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_SLURM_LOG_DIR", str(Path(workdir) / "logs"))
    backend = SlurmBackend()
    sent: list[tuple[list[str], bytes, dict[str, str]]] = []
    real_run = backend.runner.run

    def recording(argv: list[str], **kwargs: Any) -> Result:
        if argv[0] == "sbatch":
            env = dict(kwargs.get("env") or {})
            sent.append((list(argv), Path(argv[-1]).read_bytes(), env))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(backend.runner, "run", recording)
    client = Client(
        f"sqlite:///{tmp_path / 'record.db'}",
        registry=Registry.from_plugins({"slurm": backend}),
    )
    fields: dict[str, Any] = {
        "name": f"live-dryarray-{uuid.uuid4().hex[:6]}-{{seed}}",
        "options": {"partition": "low"},
        "workdir": workdir,
    }

    dry = client.dry_run_sweep(COMMAND, "seed=1..3", backend="slurm", max_running=2, **fields)

    assert dry.as_array and dry.array is not None
    assert sent == [] and client.store.count_jobs() == {}
    assert _scontrol("show", "job").count(f"dsp.{dry.group_id}") == 0
    assert not (Path(workdir) / "logs").exists()

    made = client.sweep(COMMAND, "seed=1..3", backend="slurm", max_running=2, **fields)

    objects = [m.record().submissions[0].object_id or "" for m in made.members]
    array_id = objects[0].split("_")[0]
    try:
        assert objects == [f"{array_id}_{i}" for i in range(3)]
        shown = dry.array.model_dump_json().replace(dry.group_id, made.group_id)
        prepared = Prepared.model_validate_json(shown)
        ((argv, script, env),) = sent
        assert argv[:-1] == prepared.words("sbatch")
        assert script == prepared.text("batch script").encode()
        assert env == submitter_environment() | prepared.mapping("environment")
        # what Slurm holds is what the dry run showed
        stored = _scontrol("write", "batch_script", array_id, "-")
        assert stored == prepared.text("batch script")
        job = _shown(objects[0])
        options = prepared.words("sbatch")
        assert job["ArrayJobId"] == array_id and "--array=0-2%2" in options
        assert job["ArrayTaskThrottle"] == "2"
        assert f"--job-name={job['JobName']}" in options
        assert f"--comment={job['Comment']}" in options
        assert f"--partition={job['Partition']}" in options
        output = next(w for w in options if w.startswith("--output="))
        assert job["StdOut"] == output.removeprefix("--output=").replace("%a", "0")

        def states() -> list[State]:
            client.supervise(once=True)
            return [m.status().state for m in made.members]

        eventually(
            states,
            until=lambda s: s == [State.SUCCEEDED] * 3,
            timeout=300,
            interval=1.0,
            what="the three members succeed",
        )
        for index, member in enumerate(made.members):
            printed = "".join(
                p.read_text(errors="replace") for p in log_dir(member.job_id, 1).glob("*.0.out")
            )
            assert f"seed={index + 1} task={index}" in printed, printed
    finally:
        subprocess.run(["scancel", array_id], capture_output=True, timeout=60, check=False)
