"""End to end: ``dispatch submit --backend kubeflow --policy … --wait`` as a user runs it (a
real process, SQLite, the official client over HTTP to the emulated cluster) recovers a
TrainJob the scheduler preempted, and the record says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_testing.waiting import NotYet, eventually

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
POLICY = '[[rule]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n'


def until(
    what: str,
    check: Callable[[], bool],
    proc: subprocess.Popen[str],
    limit: float = 60.0,
    tick: Callable[[], None] | None = None,
) -> None:
    """Poll the emulator while the CLI supervises; fail with the CLI's output if it stops.
    ``tick`` lets the emulated controllers' time pass (see :func:`after_each_look`)."""

    def ready() -> bool:
        if check():
            return True
        if tick is not None:
            tick()
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"dispatch exited {proc.returncode} before {what}:\n{out}\n{err}")
        return False

    try:
        eventually(ready, timeout=limit, interval=0.1, what=what)
    except NotYet as late:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{late}:\n{out}\n{err}") from None


def pod_lists(emulator: Emulator) -> int:
    """How many pod listings the emulator has been asked for so far."""
    return sum(1 for r in emulator.log.entries if r.verb == "list" and r.resource == "pods")


def after_each_look(emulator: Emulator) -> Callable[[], None]:
    """One step of the emulated controllers each time the CLI has listed the pods twice
    since the last step (a request is logged before it is answered, so only the first of
    two is sure to have read the state): it sees every state, as a supervisor polling a
    real cluster sees a preempted pod terminate (a second or more), however slow the
    machine."""

    seen = [pod_lists(emulator)]

    def tick() -> None:
        if (now := pod_lists(emulator)) >= seen[0] + 2:
            seen[0] = now
            emulator.advance()

    return tick


def test_cli_submit_recovers_a_preempted_trainjob(
    emulator: Emulator, kubeconfig: Path, tmp_path: Path
) -> None:
    """S-13, S-16, S-28: preempted → recovering → a second TrainJob (its gate opened once
    the first had ended) → succeeded, with the recovery in the history."""
    env = {
        **os.environ,
        "DISPATCH_STORE": f"sqlite:///{tmp_path / 'record.db'}",
        "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
        "DISPATCH_KUBEFLOW_RETRIES": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    proc = subprocess.Popen(
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
            "image=ghcr.io/acme/train:1.4",
            "--interval",
            "0.2",
            "--wait",
            "--",
            "torchrun",
            "train.py",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    until(
        "the first TrainJob runs",
        lambda: len(emulator.names()) == 1 and emulator.is_running(emulator.names()[0]),
        proc,
    )
    first = emulator.names()[0]
    assert first.endswith("-1")
    # The pods run as soon as the TrainJob is created, before the submit has returned,
    # and a write the emulator serves (but for annotations or owner references alone) is
    # a step of its controllers: a submit's write after the preemption would confirm the
    # pod's deletion before the CLI could look. A pod listing after the pods run is the
    # CLI supervising, every write of the submit done.
    before = pod_lists(emulator)
    until("the CLI supervises the first TrainJob", lambda: pod_lists(emulator) > before, proc)
    emulator.preempt(first, pod=1)
    until(
        "a second TrainJob runs",
        lambda: (
            len(emulator.names()) == 2
            and emulator.is_running(next(n for n in emulator.names() if n != first))
        ),
        proc,
        tick=after_each_look(emulator),
    )
    second = next(n for n in emulator.names() if n != first)
    assert second.endswith("-2")
    assert emulator.trainjob(first)["status"]["conditions"][-1]["reason"] == "FailedJobs"
    emulator.succeed(second)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{out}\n{err}"
    job_id = out.splitlines()[0].strip()
    shown = subprocess.run(
        [DISPATCH, "status", job_id, "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["state"] == "succeeded"
    events = [(h["event"], (h.get("cause") or {}).get("kind")) for h in status["history"]]
    assert events == [("recovery-started", "preempted"), ("outcome-committed", "none")]
    recovery = status["history"][0]["cause"]
    assert "PreemptionByScheduler" in recovery["detail"] and recovery["provenance"] == "scheduler"
    assert [s["number"] for s in status["submissions"]] == [1, 2]
    bare = subprocess.run(
        [DISPATCH, "status", job_id, "--no-record", "--backend", "kubeflow", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bare.returncode == 0, bare.stderr
    object_only = json.loads(bare.stdout)
    assert object_only["level"] == "object-only"  # S-29: never terminal without the record
    assert object_only["state"] == "pending"
    assert len(object_only["submissions"]) == 2
    shown_states = [line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 1]
    assert shown_states[-1] == "succeeded"


def test_dispatch_help_does_not_import_the_kubernetes_client() -> None:
    """S-31: ``dispatch --help`` lists commands without loading any backend's client."""
    code = (
        "import sys\n"
        "from dispatch.cli.main import cli\n"
        "try:\n"
        "    cli.main(['--help'], standalone_mode=False)\n"
        "finally:\n"
        "    loaded = ('kubernetes' in sys.modules, 'dispatch_kubeflow' in sys.modules)\n"
        "    print(*loaded, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "submit" in out.stdout
    assert out.stderr.strip() == "False False"
