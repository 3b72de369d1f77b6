"""The launch contract (S-41, S-42, S-44) as every task sees it: the TrainJob dispatch
submits, the torch plugin's ``PET_*`` variables the emulated Trainer puts on each pod
(as Trainer 2.2's ``torch.go`` does), the downward API resolved as the kubelet resolves
it, and the real launcher run by ``/bin/sh`` on this machine, one process per node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from dispatch import JobSpec, Launcher, Resources
from dispatch_kubeflow import launch, tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.emulator import Emulator
from dispatch_kubeflow_testing.emulator.kubelet import resolve_env
from hypothesis import given, settings
from hypothesis import strategies as st

SHOW = (
    "RANK LOCAL_RANK NODE_RANK WORLD_SIZE NNODES LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT "
    "DISPATCH_JOB_ID DISPATCH_SUBMISSION DISPATCH_EXECUTION DISPATCH_RESUMED PET_NODE_RANK"
).split()
PRINT = "echo CONTRACT " + " ".join(f"{k}=${{{k}:-unset}}" for k in SHOW)


def submit(backend: KubeflowBackend, emulator: Emulator, spec: JobSpec, submission: int = 1) -> str:
    object_id = backend.dispatch_submit(
        job_id="job-l", submission=submission, spec=spec, gated=False
    )
    emulator.reconcile()
    return tags.split_object_id(object_id)[1]


def run_pods(
    emulator: Emulator, name: str, replace: list[str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Be the kubelet: start every pod's container with the environment its spec gives,
    all at once (ranks of one job run side by side), and wait for each."""
    procs = []
    for pod in emulator.pods(name):
        container = pod["spec"]["containers"][0]
        argv = [*container["command"], *(container.get("args") or [])]
        if replace is not None:
            argv = argv[: argv.index("--") + 1] + replace
        procs.append(
            subprocess.Popen(
                argv,
                env=resolve_env(pod, container),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def contract(outputs: list[subprocess.CompletedProcess[str]]) -> list[dict[str, str]]:
    seen = []
    for done in outputs:
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            if line.startswith("CONTRACT "):
                seen.append(dict(word.split("=", 1) for word in line.split()[1:]))
    return sorted(seen, key=lambda env: int(env["RANK"]))


def test_every_task_sees_one_contract_from_the_runtimes_variables_S41_S44(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-41, S-44: two nodes of two tasks: four tasks, one MASTER_ADDR/PORT (the torch
    plugin's node-0 address and port), distinct RANKs 0..3, RANK = NODE_RANK * 2 +
    LOCAL_RANK, NODE_RANK = PET_NODE_RANK (the pod's completion index), and dispatch's
    own variables."""
    spec = JobSpec(
        name="contract",
        command=("sh", "-c", PRINT),
        resources=Resources(nodes=2, tasks_per_node=2),
    )
    name = submit(backend, emulator, spec)
    envs = contract(run_pods(emulator, name))
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert {e["MASTER_ADDR"] for e in envs} == {f"{name}-node-0-0.{name}"}
    assert {e["MASTER_PORT"] for e in envs} == {"29500"}
    for e in envs:
        assert (e["WORLD_SIZE"], e["NNODES"], e["LOCAL_WORLD_SIZE"]) == ("4", "2", "2")
        assert int(e["RANK"]) == int(e["NODE_RANK"]) * 2 + int(e["LOCAL_RANK"])
        assert e["NODE_RANK"] == e["PET_NODE_RANK"]
        assert (e["DISPATCH_JOB_ID"], e["DISPATCH_SUBMISSION"]) == ("job-l", "1")
        assert (e["DISPATCH_EXECUTION"], e["DISPATCH_RESUMED"]) == ("0", "0")


def test_one_task_per_node_execs_the_command_itself_S41(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-41: with one task per node the launcher execs the command (its exit code and
    signals are the command's own): RANK = NODE_RANK, WORLD_SIZE = NNODES."""
    spec = JobSpec(name="one", command=("sh", "-c", PRINT), resources=Resources(nodes=3))
    envs = contract(run_pods(emulator, submit(backend, emulator, spec)))
    assert [(e["RANK"], e["NODE_RANK"], e["LOCAL_RANK"]) for e in envs] == [
        ("0", "0", "0"),
        ("1", "1", "0"),
        ("2", "2", "0"),
    ]
    assert {e["WORLD_SIZE"] for e in envs} == {"3"}


def test_torchrun_mode_leaves_the_rendezvous_to_torchrun_S41(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-41: the torchrun launcher runs the command once per node with the PET_* values
    untouched (torchrun's static rendezvous reads them) and sets no RANK itself."""
    spec = JobSpec(
        name="trun",
        command=(
            "sh",
            "-c",
            "echo PET $PET_NNODES $PET_NPROC_PER_NODE $PET_NODE_RANK ${RANK:-none}",
        ),
        resources=Resources(nodes=2, tasks_per_node=4),
        launcher=Launcher.TORCHRUN,
    )
    outputs = run_pods(emulator, submit(backend, emulator, spec))
    lines = sorted(
        line for o in outputs for line in o.stdout.splitlines() if line.startswith("PET")
    )
    assert lines == ["PET 2 4 0 none", "PET 2 4 1 none"]


def test_a_later_submission_or_restart_attempt_is_resumed_S44(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-44: DISPATCH_RESUMED is 1 in a later submission (and DISPATCH_EXECUTION is the
    JobSet restart attempt the pod belongs to)."""
    spec = JobSpec(name="again", command=("sh", "-c", PRINT), resources=Resources(nodes=1))
    envs = contract(run_pods(emulator, submit(backend, emulator, spec, submission=2)))
    assert [(e["DISPATCH_SUBMISSION"], e["DISPATCH_RESUMED"]) for e in envs] == [("2", "1")]


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failing_task_stops_its_nodes_other_tasks_with_its_own_code_S42(
    backend: KubeflowBackend, emulator: Emulator, failing: int
) -> None:
    """S-42: one task exits 3 while the other would sleep for ten minutes: the launcher
    stops the other at once and the pod ends with 3 (the root cause), not the other's
    143 (the subprocess timeout only turns a hang into a failure)."""
    spec = JobSpec(name="fail", command=("true",), resources=Resources(nodes=1, tasks_per_node=2))
    name = submit(backend, emulator, spec)
    script = f'if [ "$LOCAL_RANK" = {failing} ]; then sleep 0.2; exit 3; fi; exec sleep 600'
    (done,) = run_pods(emulator, name, replace=["sh", "-c", script])
    assert done.returncode == 3, done.stderr
    assert "a task failed with status 3" in done.stderr


def test_a_script_runs_by_its_own_interpreter(backend: KubeflowBackend, emulator: Emulator) -> None:
    """S-30: JobSpec.script is run by its own #! line, never fed to sh."""
    script = "#!/usr/bin/env python3\nimport os\nprint('PY', os.environ['RANK'])\n"
    spec = JobSpec(name="py", script=script, resources=Resources(nodes=2))
    outputs = run_pods(emulator, submit(backend, emulator, spec))
    assert sorted(o.stdout.strip() for o in outputs) == ["PY 0", "PY 1"]


def env_names(pod: dict[str, Any]) -> list[str]:
    return [e["name"] for e in pod["spec"]["containers"][0]["env"]]


def test_the_runtime_sets_the_pet_variables_and_dispatch_never_does_S41(
    backend: KubeflowBackend, emulator: Emulator
) -> None:
    """S-41: the PET_* variables come from the runtime (the webhook refuses a TrainJob
    setting them), so the TrainJob dispatch sends carries none of them."""
    spec = JobSpec(name="pet", command=("true",), resources=Resources(nodes=2))
    name = submit(backend, emulator, spec)
    sent = [e["name"] for e in emulator.trainjob(name)["spec"]["trainer"]["env"]]
    assert not [n for n in sent if n.startswith("PET_")]
    assert {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"} <= set(
        env_names(emulator.pods(name)[0])
    )


def test_after_a_jobset_restart_the_execution_is_the_attempt_and_resumed_S44(
    make_backend,
    emulator: Emulator,  # type: ignore[no-untyped-def]
) -> None:
    """S-44: the pods of JobSet restart attempt 1 see DISPATCH_EXECUTION=1, RESUMED=1."""
    emulator.add_runtime("restarting", failure_policy={"maxRestarts": 2, "rules": []})
    backend = make_backend(native_restart=True, runtime="restarting")
    spec = JobSpec(name="restart", command=("sh", "-c", PRINT), resources=Resources(nodes=2))
    name = submit(backend, emulator, spec)
    emulator.preempt(name, pod=0)
    emulator.settle()
    assert emulator.jobset(name)["status"]["restarts"] == 1
    envs = contract(run_pods(emulator, name))
    assert {(e["DISPATCH_EXECUTION"], e["DISPATCH_RESUMED"]) for e in envs} == {("1", "1")}
    assert [e["RANK"] for e in envs] == ["0", "1"]


#: one write per line: the launcher sets PYTHONUNBUFFERED, and two tasks share the pipe
ECHO_ARGV = 'import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]) + "\\n")'


@settings(max_examples=25, deadline=None)
@given(
    args=st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
        ),
        max_size=5,
    ),
    tasks=st.sampled_from([1, 2]),
)
def test_the_command_reaches_every_task_verbatim_never_through_a_shell_S41(
    args: list[str], tasks: int
) -> None:
    """S-41 (and the argv contract): whatever the words (quotes, $, ;, newlines), each task
    runs the command with exactly those arguments, with one task per node (exec) or two."""
    spec = JobSpec(
        command=(sys.executable, "-c", ECHO_ARGV, *args),
        resources=Resources(tasks_per_node=tasks),
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PET_NNODES": "1",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": str(tasks),
    }
    done = subprocess.run(
        launch.container_command(spec), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [args] * tasks
