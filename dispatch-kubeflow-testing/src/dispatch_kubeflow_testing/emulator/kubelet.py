"""The scheduler and the kubelet: bind pods to Ready nodes their affinity allows
(Unschedulable when nothing fits), start containers (or fail to pull them), and run a few
harmless commands for real, with the environment the pod spec gives them (downward API
included), keeping what they print as the container's log. The kubelet honours the
pod's restartPolicy (a crash-looping container restarts a step after it failed) and
stops a deleted pod (Failed, 143) before confirming its deletion."""

from __future__ import annotations

import os
import re
import subprocess
from typing import TYPE_CHECKING

from dispatch_kubeflow_testing.emulator.objects import (
    GPUS_PER_NODE,
    JOBSET_NAME,
    is_true,
)
from dispatch_kubeflow_testing.emulator.store import (
    NODE,
    POD,
    Obj,
)

if TYPE_CHECKING:
    from dispatch_kubeflow_testing.emulator.cluster import Cluster

_SHELL_EXIT = re.compile(r"\s*exit\s+(\d+)\s*")
_SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")
#: commands harmless and quick enough to run for real on the test machine
RUNNABLE = frozenset({"true", "false", "env", "echo", "printf"})
_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def argv_of(container: Obj) -> list[str]:
    return [*(container.get("command") or []), *(container.get("args") or [])]


def inner_argv(argv: list[str]) -> list[str]:
    """The command behind a launcher wrapper ``sh -c SCRIPT NAME ... -- ARGV`` (dispatch's
    ``dispatch-launch``), else the argv itself."""
    if len(argv) > 4 and argv[0] in _SHELLS and argv[1] == "-c" and "--" in argv[4:]:
        return argv[argv.index("--", 4) + 1 :]
    return argv


def runnable(argv: list[str]) -> bool:
    """A harmless command, or a script a test submitted (``sh -c RUNNER dispatch-script
    TEXT``, dispatch's way of running ``JobSpec.script`` by its own ``#!`` line)."""
    inner = inner_argv(argv)
    if inner[:1] and os.path.basename(inner[0]) in RUNNABLE:
        return True
    if (
        len(inner) == 5
        and inner[0] in _SHELLS
        and inner[1] == "-c"
        and inner[3] == "dispatch-script"
    ):
        return True
    return (
        len(inner) == 3
        and inner[0] in _SHELLS
        and inner[1] == "-c"
        and (inner[2].strip() == "true" or _SHELL_EXIT.fullmatch(inner[2]) is not None)
    )


def resolve_env(pod: Obj, container: Obj) -> dict[str, str]:
    """The container's environment as the kubelet builds it: values, and downward-API
    references to the pod's labels, annotations, name, namespace and node."""
    meta = pod["metadata"]
    env: dict[str, str] = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOSTNAME": meta["name"],
    }
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
            continue
        path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        if m := _FIELD.fullmatch(path):
            env[var["name"]] = str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        elif path in ("metadata.name", "metadata.namespace"):
            env[var["name"]] = str(meta.get(path.split(".")[1], ""))
        elif path == "spec.nodeName":
            env[var["name"]] = str(pod["spec"].get("nodeName", ""))
    return env


def run_for_real(c: Cluster, pod: Obj, container: Obj) -> int:
    """Run the container's command on this machine; its output becomes the log."""
    try:
        done = subprocess.run(
            argv_of(container),
            env=resolve_env(pod, container),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        c.write_log(pod, f"emulated kubelet: {exc}\n".encode())
        return 128
    c.write_log(pod, done.stdout)
    return done.returncode


def allowed_nodes(pod: Obj, ready_nodes: list[str]) -> list[str]:
    """The ready nodes the pod's required node affinity lets it on (``kubernetes.io/
    hostname`` In / NotIn, the only key the emulated nodes carry)."""
    required = (
        ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return ready_nodes

    def fits(node: str, term: Obj) -> bool:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") != "kubernetes.io/hostname":
                return False
            values = expr.get("values") or []
            if expr.get("operator") == "NotIn" and node in values:
                return False
            if expr.get("operator") == "In" and node not in values:
                return False
        return True

    return [n for n in ready_nodes if any(fits(n, t) for t in terms)]


def kubelet(c: Cluster) -> None:
    ready_nodes = sorted(n["metadata"]["name"] for n in c.store.items(NODE) if is_true(n, "Ready"))
    for pod in list(c.store.items(POD)):
        status, spec = pod["status"], pod["spec"]
        uid = pod["metadata"]["uid"]
        if (
            "deletionTimestamp" in pod["metadata"]
            and not c.pod_terminal(pod)
            and c.node_ready(spec.get("nodeName"))
            and c.due(c.deleting.get(uid))
        ):
            c.stop_for_deletion(pod)
            continue
        if status.get("phase") == "Running" and "deletionTimestamp" not in pod["metadata"]:
            if uid in c.crashed:
                if c.due(c.crashed[uid]):
                    c.restart(pod)
                    container = (spec.get("containers") or [{"name": "node"}])[0]
                    if runnable(argv_of(container)):
                        code = run_for_real(c, pod, container)
                        c.exits[uid] = (code, "Completed" if code == 0 else "Error")
                continue
            ending = c.exits.get(uid)
            if ending is not None and c.due(c.started.get(uid)):
                c.terminate(pod, reason=ending[1], exit_code=ending[0])
            continue
        if status.get("phase") != "Pending" or "deletionTimestamp" in pod["metadata"]:
            continue
        jobset_name = pod["metadata"]["labels"].get(JOBSET_NAME, "")
        if not spec.get("nodeName"):
            gpus = int(
                (
                    ((spec.get("containers") or [{}])[0].get("resources") or {}).get("limits") or {}
                ).get("nvidia.com/gpu", 0)
            )
            eligible = allowed_nodes(pod, ready_nodes)
            if not eligible and ready_nodes and c.capacity:
                total = len(list(c.store.items(NODE)))
                c.set_condition(
                    pod,
                    "PodScheduled",
                    "False",
                    "Unschedulable",
                    f"0/{total} nodes are available: {len(ready_nodes)} "
                    "node(s) didn't match Pod's node affinity/selector. preemption: "
                    f"0/{total} nodes are available: {total} Preemption is not helpful for "
                    "scheduling.",
                )
                continue
            if (
                not c.capacity
                or not ready_nodes
                or jobset_name in c.unschedulable
                or gpus > GPUS_PER_NODE
            ):
                total = len(list(c.store.items(NODE)))
                c.set_condition(
                    pod,
                    "PodScheduled",
                    "False",
                    "Unschedulable",
                    f"0/{total} nodes are available: {total} Insufficient nvidia.com/gpu. "
                    f"preemption: 0/{total} nodes are available: {total} No preemption "
                    "victims found for incoming pod.",
                )
                continue
            index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
            spec["nodeName"] = eligible[index % len(eligible)]
            c.set_condition(pod, "PodScheduled", "True", "", "")
        container = (spec.get("containers") or [{"name": "node"}])[0]
        launch = c.launch_errors.get(pod["metadata"]["labels"].get(JOBSET_NAME, ""))
        if launch:
            reason, message = launch
            status["containerStatuses"] = [
                {
                    "name": container.get("name", "node"),
                    "image": container.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": reason, "message": message}},
                }
            ]
            c.store.touch(pod)
            continue
        status["phase"] = "Running"
        status["startTime"] = c.now()
        c.started[uid] = c.step
        status["containerStatuses"] = [
            {
                "name": container.get("name", "node"),
                "image": container.get("image", ""),
                "imageID": f"docker.io/library/emulated@sha256:{'0' * 64}",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": c.now()}},
            }
        ]
        c.set_condition(pod, "Ready", "True", "", "")
        if runnable(argv_of(container)):
            code = run_for_real(c, pod, container)
            c.exits[uid] = (code, "Completed" if code == 0 else "Error")
