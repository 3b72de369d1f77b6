"""Live tier, end to end: ``dispatch submit --backend kubeflow --policy … --wait`` as a
user runs it (a real process, SQLite, the official client over HTTP) against the real
control plane: a TrainJob the real scheduler preempts is recovered by the policy, and
one whose program exits 1 is held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_testing.waiting import NotYet, eventually

pytestmark = pytest.mark.live(server="kubeflow")

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
RECOVER = '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n'
HOLD = '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n'


def cli_env(plane: ControlPlane, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(plane.kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        # the running Trainer's API shape (2.1 refuses 2.2's runtimePatches)
        "DISPATCH_KUBEFLOW_TRAINER_VERSION": ".".join(map(str, plane.trainer_version)),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def until(
    what: str, check: Callable[[], bool], proc: subprocess.Popen[str], limit: float = 120.0
) -> None:

    def ready() -> bool:
        if check():
            return True
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"dispatch exited {proc.returncode} before {what}:\n{out}\n{err}")
        return False

    try:
        eventually(ready, timeout=limit, interval=0.3, what=what)
    except NotYet as late:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{late}:\n{out}\n{err}") from None


def trainjobs(live: LiveDriver) -> list[str]:
    return sorted(
        tj["metadata"]["name"]
        for tj in live.api.list("TrainJob", live.namespace, "dispatch.dev/managed=true")
        if "deletionTimestamp" not in tj["metadata"]
    )


def running(live: LiveDriver, name: str) -> bool:
    pods = live.pods(name)
    return bool(pods) and all(
        p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
        for p in pods
    )


def submit_cli(env: dict[str, str], policy: Path, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            DISPATCH,
            "submit",
            "--backend",
            "kubeflow",
            "--policy",
            str(policy),
            "--name",
            "llama",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "-o",
            "image=registry.example/acme/train:1.4",
            "--interval",
            "0.5",
            "--wait",
            "--",
            *command,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def status(env: dict[str, str], job_id: str) -> dict:  # type: ignore[type-arg]
    shown = subprocess.run(
        [DISPATCH, "status", job_id, "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    out: dict = json.loads(shown.stdout)  # type: ignore[type-arg]
    return out


def test_live_cli_submit_recovers_a_preempted_trainjob(
    live_plane: ControlPlane, live: LiveDriver, tmp_path: Path
) -> None:
    """S-13, S-16, S-28: the real scheduler preempts node 1 of the first TrainJob;
    the policy resubmits, the second TrainJob runs, then succeeds."""
    env = cli_env(live_plane, tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(RECOVER)
    proc = submit_cli(env, policy, "torchrun", "train.py")
    until(
        "the first TrainJob runs",
        lambda: len(trainjobs(live)) == 1 and running(live, trainjobs(live)[0]),
        proc,
    )
    first = trainjobs(live)[0]
    assert first.endswith("-1")
    live.preempt(first, pod=1)
    until(
        "a second TrainJob runs",
        lambda: any(n != first and running(live, n) for n in trainjobs(live)),
        proc,
        limit=180,
    )
    second = next(n for n in trainjobs(live) if n != first)
    assert second.endswith("-2")
    for index in range(2):
        live.exit(second, 0, pod=index)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, f"{out}\n{err}"
    job_id = out.splitlines()[0].strip()
    st = status(env, job_id)
    assert st["state"] == "succeeded", st
    events = [(h["event"], (h.get("cause") or {}).get("kind")) for h in st["history"]]
    assert events == [("recovery-started", "preempted"), ("outcome-committed", "none")], st
    assert "PreemptionByScheduler" in st["history"][0]["cause"]["detail"]


def test_live_cli_submit_holds_a_trainjob_that_exits_1(
    live_plane: ControlPlane, live: LiveDriver, tmp_path: Path
) -> None:
    """S-14: exit 1 under a hold rule: ``--wait`` exits 6 and the job is held with the
    real exit code."""
    env = cli_env(live_plane, tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(HOLD)
    proc = submit_cli(env, policy, "sh", "-c", "exit 1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 6, f"{out}\n{err}"
    job_id = out.splitlines()[0].strip()
    st = status(env, job_id)
    assert st["state"] == "held", st
    assert (st["cause"]["kind"], st["cause"]["exit_code"]) == ("non-zero-exit", 1), st
