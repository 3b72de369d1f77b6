"""The user's daily loop on Kubeflow, through the real ``dispatch`` CLI and the emulated
cluster: a dry run shows the TrainJob and sends nothing, what a TrainJob cannot run is
refused before anything is recorded, and ``dispatch logs`` prints what each node printed
(S-36, S-46)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_testing.waiting import eventually

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


@pytest.fixture
def env(kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def dispatch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DISPATCH, *args], capture_output=True, text=True, env=env, timeout=120)


def test_dry_run_prints_the_trainjob_and_its_runtime_copy_and_sends_nothing_S30(
    emulator: Emulator, env: dict[str, str]
) -> None:
    args = ("submit", "--backend", "kubeflow", "--dry-run", "--nodes", "2")
    shown = dispatch(env, *args, "--", "echo", "hi")
    assert shown.returncode == 0, shown.stderr
    assert "--- TrainJob ---" in shown.stdout and "--- runtime copy ---" in shown.stdout
    done = dispatch(env, *args, "--json", "--", "echo", "hi")
    assert done.returncode == 0, done.stderr
    parts = json.loads(done.stdout)["prepared"]["parts"]
    manifest = parts["TrainJob"]
    assert parts["runtime copy"]["metadata"]["name"] == manifest["metadata"]["name"]
    assert manifest["kind"] == "TrainJob" and manifest["spec"]["trainer"]["numNodes"] == 2
    assert manifest["spec"]["trainer"]["command"][-2:] == ["echo", "hi"]
    assert emulator.names() == []
    assert not [r for r in emulator.log.entries if r.verb not in ("get", "list")]


def test_a_workdir_is_refused_before_anything_is_recorded_S36(
    emulator: Emulator, env: dict[str, str]
) -> None:
    done = dispatch(env, "submit", "--backend", "kubeflow", "--workdir", "/data", "--", "true")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--workdir: a TrainJob has no working directory" in done.stderr
    assert "Traceback" not in done.stderr
    assert emulator.names() == []
    listed = dispatch(env, "list", "--json")
    assert listed.returncode == 0 and listed.stdout.strip() in ("", "[]"), listed.stdout


@pytest.mark.parametrize("how", [[], ["--dry-run"]], ids=["submit", "dry-run"])
def test_a_kubeconfig_that_cannot_be_loaded_records_nothing_and_says_what_to_set_S36(
    env: dict[str, str], tmp_path: Path, how: list[str]
) -> None:
    """Not recorded and then failed at every submission: the cluster cannot be asked from
    here (exit 3), and the error says what to set."""
    env = {**env, "DISPATCH_KUBEFLOW_KUBECONFIG": str(tmp_path / "absent")}
    done = dispatch(env, "submit", "--backend", "kubeflow", *how, "--", "true")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "cannot load the Kubernetes configuration from " in done.stderr
    assert "point KUBECONFIG or DISPATCH_KUBEFLOW_KUBECONFIG at a kubeconfig" in done.stderr
    assert "fault in the backend" not in done.stderr and "uncovered" not in done.stderr
    assert done.stdout == ""
    listed = dispatch(env, "list", "--json")
    assert listed.returncode == 0 and listed.stdout.strip() in ("", "[]"), listed.stdout
    # --no-start records for a supervisor elsewhere, which has the configuration
    kept = dispatch(env, "submit", "--backend", "kubeflow", "--no-start", "--", "true")
    assert kept.returncode == 0, (kept.stdout, kept.stderr)
    assert len(json.loads(dispatch(env, "list", "--json").stdout)) == 1


def test_logs_print_what_every_node_printed_and_one_rank_S46(
    emulator: Emulator, env: dict[str, str]
) -> None:
    """S-46: a two-node job printing a line on each node; ``dispatch logs`` shows both
    nodes' output in node order, ``--rank 1`` only the second's."""
    proc = subprocess.Popen(
        [DISPATCH, "submit", "--backend", "kubeflow", "--nodes", "2", "--interval", "0.2",
         "--wait", "--", "torchrun", "train.py"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    printed = False

    def returned() -> bool:
        nonlocal printed
        names = emulator.names()
        pods = emulator.pods(names[0]) if names else []
        if (
            not printed
            and len(pods) == 2
            and all(p["status"].get("phase") == "Running" for p in pods)
        ):
            # each node prints its line, then the training ends (exit 0 on every node)
            for rank in range(2):
                emulator.print_log(names[0], f"hello from node rank {rank}\n", pod=rank)
            emulator.succeed(names[0])
            printed = True
        emulator.reconcile()
        return proc.poll() is not None

    try:
        eventually(returned, timeout=90, interval=0.2, what="submit --wait returns")
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{out}\n{err}"
    job_id = out.splitlines()[0].strip()
    shown = dispatch(env, "logs", job_id)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line.startswith("hello")]
    assert lines[:1] == ["hello from node rank 0"] and lines[-1] == "hello from node rank 1"
    one = dispatch(env, "logs", job_id, "--rank", "1")
    assert one.returncode == 0, one.stderr
    assert "hello from node rank 1" in one.stdout and "node rank 0" not in one.stdout
    bad = dispatch(env, "logs", job_id, "--stderr")
    assert bad.returncode == 2 and "stdout and stderr in one log" in bad.stderr
