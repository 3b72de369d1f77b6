"""``dispatch submit -o queue=… -o priority=…`` (and from a job file) as a user runs it: a
value that is no DNS-1123 label is refused before anything is recorded or created; a
valid one reaches the TrainJob as Kueue's labels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dispatch_kubeflow import tags
from dispatch_kubeflow_testing.emulator import Emulator

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def _env(kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DISPATCH, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_bad_queue_or_priority_is_refused_before_anything_is_recorded(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    env = _env(kubeconfig, tmp_path)
    for option, words in (
        ("queue=Team_A", "-o queue='Team_A': must be lower-case letters"),
        ("priority=high", "a Kueue priority class needs a queue"),
    ):
        done = _run(env, "submit", "--backend", "kubeflow", "-o", option, "--", "train")
        assert done.returncode != 0, done.stdout
        assert words in done.stderr
    listed = _run(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout or "[]") in ([], {"jobs": []})
    assert emulator.names() == []


def test_queue_and_priority_from_a_job_file_reach_the_trainjob_labels(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'backend = "kubeflow"\ncommand = ["train"]\n'
        '[options]\nqueue = "team-a"\npriority = "high"\n'
    )
    done = _run(_env(kubeconfig, tmp_path), "submit", str(job))
    assert done.returncode == 0, done.stderr
    (name,) = emulator.names()
    labels = emulator.trainjob(name)["metadata"]["labels"]
    assert labels[tags.KUEUE_QUEUE] == "team-a" and labels[tags.KUEUE_PRIORITY] == "high"
