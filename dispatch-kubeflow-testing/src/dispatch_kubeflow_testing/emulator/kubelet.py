"""The scheduler and the kubelet: bind pods to Ready nodes (Unschedulable when nothing
fits), start containers (or fail to pull them), and run a few trivial commands."""

from __future__ import annotations

import re
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


def command_exit(container: Obj) -> int | None:
    """The emulated kubelet runs a few trivial commands for real: ``true``/``false`` and
    ``sh -c 'exit N'`` end one step after they start; anything else runs until told."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if argv[:1] == ["true"]:
        return 0
    if argv[:1] == ["false"]:
        return 1
    if len(argv) == 3 and argv[0] in ("sh", "/bin/sh", "bash", "/bin/bash") and argv[1] == "-c":
        if argv[2].strip() == "true":
            return 0
        if m := _SHELL_EXIT.fullmatch(argv[2]):
            return int(m.group(1))
    return None


def kubelet(c: Cluster) -> None:
    ready_nodes = sorted(n["metadata"]["name"] for n in c.store.items(NODE) if is_true(n, "Ready"))
    for pod in list(c.store.items(POD)):
        status, spec = pod["status"], pod["spec"]
        uid = pod["metadata"]["uid"]
        if status.get("phase") == "Running" and "deletionTimestamp" not in pod["metadata"]:
            code = command_exit((spec.get("containers") or [{}])[0])
            if code is not None and c.step > c.started.get(uid, c.step):
                c.terminate(pod, reason="Completed" if code == 0 else "Error", exit_code=code)
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
            spec["nodeName"] = ready_nodes[index % len(ready_nodes)]
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
