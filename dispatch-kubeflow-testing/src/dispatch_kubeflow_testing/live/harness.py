"""The conformance kit's live tier for ``kubeflow`` (``dispatch-conformance kubeflow
--live``): the real control plane of ``start-kube.sh``, provoked by :class:`LiveDriver`.

The kit's entry point names :class:`dispatch_kubeflow_testing.harness.KubeflowHarness`;
that class hands the live tier to this one, so one entry point serves both tiers. Both
submit each scenario's spec the same way
(:class:`dispatch_kubeflow_testing.scenarios.KubeflowScenarios`).

KWOK stands in for the kubelet and runs no processes, so the launch contract (S-41) is
checked the way a kubelet would produce it: each rank's container command (dispatch's
launcher, as the real Trainer and JobSet rendered it into the pod) is run here with the
environment the kubelet would give it, resolved from the pod object itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from datetime import timedelta

from dispatch.backends import Backend
from dispatch.model.spec import JobSpec
from dispatch_kubeflow import tags
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_testing.kit.harness import NotProvokable, Provoked, Scenario

from dispatch_kubeflow_testing.live.cluster import control_plane
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.kubeapi import Obj
from dispatch_kubeflow_testing.scenarios import KubeflowScenarios

IMAGE = "registry.example/acme/train:1.4"
#: the PATH a container image's shell would have (the kubelet adds none)
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field_ref(pod: Obj, path: str) -> str:
    """A downward-API ``fieldRef`` resolved from the pod, as the kubelet resolves it."""
    meta = pod["metadata"]
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": pod["spec"].get("nodeName"),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName"),
        "status.hostIP": pod.get("status", {}).get("hostIP"),
        "status.podIP": pod.get("status", {}).get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    match = _FIELD.match(path)
    if match is None:
        raise NotProvokable(f"pod {meta['name']}: fieldRef {path!r} is not one a kubelet resolves")
    return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))


def container_environment(pod: Obj) -> dict[str, str]:
    """The environment of the pod's first container: HOSTNAME, the image's PATH, then its
    ``env`` in order (``$(VAR)`` expanded from the ones before, fieldRefs resolved)."""
    container = pod["spec"]["containers"][0]
    env = {
        "HOSTNAME": pod["spec"].get("hostname") or pod["metadata"]["name"],
        "PATH": CONTAINER_PATH,
    }
    for item in container.get("env") or []:
        if "value" in item:
            value = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                lambda m: env.get(m.group(1), m.group(0)),
                str(item["value"]),
            )
        elif "fieldRef" in (item.get("valueFrom") or {}):
            value = field_ref(pod, item["valueFrom"]["fieldRef"]["fieldPath"])
        else:
            raise NotProvokable(
                f"pod {pod['metadata']['name']}: env {item['name']} comes from "
                f"{item.get('valueFrom')}, which this harness does not resolve"
            )
        env[item["name"]] = value
    return env


def run_container(pod: Obj, timeout: float = 30.0) -> str:
    """What the pod's first container prints on stdout, run here as its kubelet would
    run it (command + args, the container's environment, a scratch working directory)."""
    container = pod["spec"]["containers"][0]
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if not argv:
        raise NotProvokable(f"pod {pod['metadata']['name']} names no command (the image's own)")
    with tempfile.TemporaryDirectory(prefix="dispatch-kube-container-") as scratch:
        done = subprocess.run(
            argv,
            env={**container_environment(pod), "TMPDIR": scratch},
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise AssertionError(
            f"pod {pod['metadata']['name']}: its command exited {done.returncode}: "
            f"{done.stderr.strip()}"
        )
    return done.stdout


class LiveKubeflowHarness(KubeflowScenarios):
    #: the real Job controller backs off between restarts: endings take tens of seconds
    timeout = 180.0
    #: the Trainer's deadline is real time here
    time_limit = timedelta(seconds=20)
    #: the real scheduler preempts a pod only for one that needs its node's GPUs
    preempt_gpus = 8
    image = IMAGE

    def __init__(self, live: bool = True) -> None:
        super().__init__(live=True)
        self.driver: LiveDriver | None = None

    @property
    def live_driver(self) -> LiveDriver:
        if self.driver is None:
            raise NotProvokable("the control plane is not started (plugin() was not called)")
        return self.driver

    def plugin(self) -> object:
        plane = control_plane()
        self.driver = LiveDriver(plane)
        self.driver.cleanup()
        # what a user of this plane exports (start-kube.sh env names it): the backend the
        # entry point loads from the environment then declares what this one does
        major, minor = plane.trainer_version
        os.environ.setdefault("DISPATCH_KUBEFLOW_TRAINER_VERSION", f"{major}.{minor}")
        return KubeflowBackend(
            KubeflowConfig(
                kubeconfig=str(plane.kubeconfig),
                trainer_version=plane.trainer_version,
                retries=1,
                connect_timeout=2.0,
                read_timeout=5.0,
            )
        )

    def close(self) -> None:
        if self.driver is not None:
            self.driver.cleanup()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        with self.live_driver.api_frozen():
            yield

    def printing_spec(self, text: str) -> JobSpec:
        raise NotProvokable(
            "KWOK runs no programs and serves no container logs: what a submission printed "
            "exists nowhere on this tier (the offline tier and the Slurm live tier check logs)"
        )

    def script_spec(self, script: str) -> JobSpec:
        raise NotProvokable(
            "KWOK's nodes run no programs: which interpreter a script's #! line picks is not "
            "observable here (the offline tier and the Slurm live tier check it)"
        )

    def task_environments(
        self, backend: Backend, job_id: str, object_id: str, world_size: int
    ) -> list[Mapping[str, str]]:
        """Each rank's pod (by completion index) run as its kubelet would: the ``env`` it
        prints, through dispatch's launcher as the real controllers rendered it."""
        name = tags.split_object_id(object_id)[1]
        by_rank: dict[int, Obj] = {}
        for pod in self.live_driver.pods(name):
            index = (pod["metadata"].get("annotations") or {}).get(
                "batch.kubernetes.io/job-completion-index"
            )
            if index is not None and pod["status"].get("phase") == "Succeeded":
                by_rank.setdefault(int(index), pod)
        seen: list[Mapping[str, str]] = []
        for rank in range(world_size):
            if rank not in by_rank:
                raise AssertionError(f"TrainJob {name}: no succeeded pod of rank {rank}")
            env: dict[str, str] = {}
            for line in run_container(by_rank[rank]).splitlines():
                key, sep, value = line.partition("=")
                if sep and key.isidentifier():
                    env[key] = value
            seen.append(env)
        return seen

    def restore_nodes(self, nodes: Set[str]) -> None:
        for node in nodes:
            self.live_driver.recover_node(node)

    def not_provokable(self) -> Mapping[Scenario, str]:
        return {
            **super().not_provokable(),
            Scenario.UNMAPPABLE: (
                "the real controllers only write reasons the adapter maps; writing an "
                "invented one into their status would fake them (the offline tier covers it)"
            ),
            Scenario.NATIVE_RECOVERY: (
                "the shipped torch-distributed runtime has no JobSet failurePolicy that "
                "restarts, so nothing restarts natively on this control plane"
            ),
            **self._older_trainer(),
        }

    def _older_trainer(self) -> dict[Scenario, str]:
        major, minor = control_plane().trainer_version
        if (major, minor) >= (2, 2):
            return {}
        return {
            Scenario.TIME_LIMIT: (
                f"Trainer {major}.{minor} has no TrainJob deadline (the adapter refuses --time "
                "before 2.2, as it declares); its time-limit ending is Kueue's maximum "
                "execution time, and Kueue runs on the 2.2 plane only"
            )
        }

    def act(self, scenario: Scenario, object_id: str, name: str, exit_code: int | None) -> Provoked:
        driver = self.live_driver
        detail: str | None = None
        nodes: tuple[str, ...] = ()
        if scenario is Scenario.SIGNAL:
            driver.exit(name, 137, pod=0)
            exit_code = 137
        elif scenario is Scenario.PREEMPTED:
            driver.preempt(name, pod=0)
            detail = "PreemptionByScheduler"
        elif scenario in (Scenario.NODE_LOST, Scenario.NODE_LOST_OF_N):
            nodes = (driver.lose_node(name, pod=1),)
        elif scenario is Scenario.OUT_OF_MEMORY:
            driver.oom(name, pod=1)
        elif scenario is Scenario.HELD_BY_SCHEDULER:
            driver.running(name, 2)
            driver.suspend_behind_back(name)
        elif scenario is Scenario.RANK_FAILED:
            driver.running(name, 2)
            nodes = (str(driver.pod(name, 1)["spec"]["nodeName"]),)
            driver.exit(name, 3, pod=1)
            exit_code = 3
        return Provoked(
            object_id=object_id,
            timeout=self.timeout,
            exit_code=exit_code,
            detail=detail,
            nodes=nodes,
        )
