"""The real Kubernetes API server flapping under a supervisor: the campaign (S-5).

TrainJobs of one or two nodes (one GPU a node, so on the plane's four 8-GPU KWOK nodes
some wait for others to end) are recorded with a policy that resubmits on every ending it
may (``unknown`` is held) and run by one real ``dispatch supervise`` process against a
real control plane (``start-kube.sh``: kube-apiserver, etcd, the controllers, the real
Trainer and JobSet, KWOK for the kubelets). Meanwhile the plane's kube-apiserver is
stopped and started again (SIGTERM, SIGKILL if it lingers: every connection drops and
new ones are refused) or frozen with SIGSTOP and thawed (connections are accepted by the
kernel and nothing answers), in turns (``start-kube.sh apiserver``). The controllers, the
scheduler and KWOK lose the API server as the supervisor does and catch up when it is
back. While it is away, ``dispatch status`` of a job not ended must show what the record
knows, say that the scheduler is unreachable (its words, since when) and exit 3,
appending nothing.

The application's own time goes on whatever the API server does: once every pod of a
TrainJob has run its job's seconds, its program ends with 0 (KWOK is told by the pod
annotation ``dispatch.dev/live-exit``, as the live driver does; while the API server is
away the kubelet cannot report it, so the ending reaches the cluster when it is back).

Every job must end as it would have without the flaps: succeeded, one submission, one
TrainJob (the one it recorded) that completed, its pods ran once on each node, and a
record with nothing but its creation, its submission and its outcome, its events
numbered without a gap. The API server answering 500, or 429 with ``Retry-After``,
cannot be had from a real one on demand: those outages are the emulated campaign's
(:mod:`dispatch_kubeflow_testing.flapping`).

The driver is :mod:`dispatch_testing.campaign`. Used by ``benchmarks/kube_flapping.py
--real`` (the full campaign) and by dispatch-kubeflow's live test (a shorter one), each
on a plane of its own (:func:`dispatch_kubeflow_testing.live.cluster.own_plane`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any, ClassVar

from dispatch_kubeflow import tags
from dispatch_testing import campaign
from dispatch_testing.campaign import Flap, Result, Tick

from dispatch_kubeflow_testing.live import cluster
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import EXIT, LiveDriver, is_true
from dispatch_kubeflow_testing.live.kubeapi import ApiError, KubeApi, Obj

__all__ = ["LABELS", "Campaign", "Flap", "Plan", "Result", "Tick"]

#: the ways the API server goes away, in turns, and their rows in the table
LABELS = {
    "stop": "kube-apiserver stopped, started",
    "freeze": "kube-apiserver frozen, thawed",
}
IMAGE = "registry.example/acme/train:1.4"
NAMESPACE = "default"


@dataclass
class Plan:
    """``flaps`` outages spread over ``span`` seconds, each at least ``down`` seconds,
    under ``jobs`` TrainJobs whose pods each run ``job_seconds`` once all are running."""

    jobs: int = 40
    flaps: int = 20
    span: float = 600.0
    down: float = 12.0
    job_seconds: tuple[float, float] = (50.0, 300.0)
    interval: float = 2.0
    lease: float = 60.0
    settle: float = 1200.0
    read_timeout: float = 5.0
    connect_timeout: float = 2.0
    seed: int = 1


class Campaign(campaign.Campaign[Plan, tuple[int, float]]):
    """One campaign on ``plane`` (started by the caller, its API server left up by
    :meth:`cancel`); its jobs are kept with their nodes and seconds."""

    backend = "kubeflow"
    flap_labels = LABELS
    tick_names: ClassVar[dict[str, str]] = {"stop": "stopped", "freeze": "frozen"}
    well = "up"
    went_down = "the API server went away"
    not_reached = "the supervisor did not reach the API server again after it came back"

    def __init__(self, plan: Plan, plane: ControlPlane, say: Any = None) -> None:
        super().__init__(plan, self.workdir("dispatch-kube-flapping-", "/var/tmp"), say)
        self.plane = plane
        # the application's and the judge's own calls: short, so an outage costs little
        self.api = KubeApi.from_kubeconfig(plane.kubeconfig, timeout=3.0)
        self.env |= {
            "DISPATCH_KUBEFLOW_KUBECONFIG": str(plane.kubeconfig),
            "DISPATCH_KUBEFLOW_TRAINER_VERSION": ".".join(map(str, plane.trainer_version)),
            "DISPATCH_KUBEFLOW_IMAGE": IMAGE,
            "DISPATCH_KUBEFLOW_RETRIES": "1",
            "DISPATCH_KUBEFLOW_CONNECT_TIMEOUT": f"{plan.connect_timeout:g}",
            "DISPATCH_KUBEFLOW_READ_TIMEOUT": f"{plan.read_timeout:g}",
        }
        self._running_since: dict[str, float] = {}  # TrainJob name -> all its pods running
        self._ended: set[str] = set()  # TrainJobs whose programs were told to end
        self._done = threading.Event()
        self._cluster: threading.Thread | None = None

    def record(self) -> None:
        from dispatch import Client

        policy = self.write_policy()
        low, high = self.plan.job_seconds
        with Client(self.env["DISPATCH_STORE"]) as client:
            for i in range(self.plan.jobs):
                nodes = 1 + i % 2
                handle = client.submit(
                    ["torchrun", "train.py"],
                    backend="kubeflow",
                    policy=str(policy),
                    start=False,
                    name=f"flap-{i}",
                    resources={"nodes": nodes, "gpus_per_node": 1},
                    options={"image": IMAGE},
                )
                self.jobs[handle.job_id] = (nodes, round(self.rng.uniform(low, high), 1))

    def misbehave(self, mode: str) -> None:
        cluster.apiserver(self.plane, "stop" if mode == "stop" else "freeze")

    def behave(self, mode: str) -> None:
        cluster.apiserver(self.plane, "start" if mode == "stop" else "thaw")

    # ------------------------------------------------------------------ the application
    def _trainjobs(self) -> dict[str, list[Obj]]:
        """Each job's TrainJobs, by the job's label."""
        by_label = {tags.job_label(j): j for j in self.jobs}
        found: dict[str, list[Obj]] = {j: [] for j in self.jobs}
        for tj in self.api.list("TrainJob", NAMESPACE, f"{tags.MANAGED}=true"):
            job_id = by_label.get(str((tj["metadata"].get("labels") or {}).get(tags.JOB)))
            if job_id is not None:
                found[job_id].append(tj)
        return found

    def _pods(self) -> dict[str, list[Obj]]:
        """Every pod, by the JobSet (the TrainJob) it belongs to."""
        found: dict[str, list[Obj]] = {}
        for pod in self.api.list("Pod", NAMESPACE):
            name = (pod["metadata"].get("labels") or {}).get(tags.JOBSET_NAME)
            if name:
                found.setdefault(str(name), []).append(pod)
        return found

    def _step(self) -> None:
        """One look at the cluster: a TrainJob whose pods all run is timed; once it has
        run its seconds, its programs end with 0."""
        trainjobs = self._trainjobs()
        pods = self._pods()
        now = time.monotonic()
        for job_id, made in trainjobs.items():
            nodes, seconds = self.jobs[job_id]
            for tj in made:
                name = str(tj["metadata"]["name"])
                if name in self._ended:
                    continue
                # (by phase, not Ready: node lifecycle marks the pods of nodes whose
                # leases lapsed while the API server was away not ready, and KWOK, unlike
                # a kubelet, never marks a running pod ready again)
                running = [
                    p
                    for p in pods.get(name, [])
                    if p["status"].get("phase") == "Running"
                    and "deletionTimestamp" not in p["metadata"]
                ]
                if len(running) < nodes:
                    continue
                since = self._running_since.setdefault(name, now)
                if now - since < seconds:
                    continue
                for pod in running:
                    annotations = pod["metadata"].get("annotations") or {}
                    if EXIT not in annotations:
                        self.api.merge_patch(
                            "Pod",
                            pod["metadata"]["name"],
                            {"metadata": {"annotations": {EXIT: "0"}}},
                            NAMESPACE,
                        )
                self._ended.add(name)

    def _run_cluster(self) -> None:
        while not self._done.wait(1.0):
            try:
                self._step()
            except (ApiError, OSError, HTTPException, ValueError):
                continue  # the API server is away (or went away mid-answer): next look

    def start_cluster(self) -> None:
        self._cluster = threading.Thread(target=self._run_cluster, daemon=True)
        self._cluster.start()

    # ------------------------------------------------------------------ the judge
    def judge(self, object_ids: dict[str, str | None]) -> list[tuple[str, str, list[str]]]:
        """Each job's one submission made one TrainJob, the one it recorded, and it
        completed; its pods ran once, one on each node, and succeeded."""
        trainjobs = self._trainjobs()
        pods = self._pods()
        not_one: list[str] = []
        not_once: list[str] = []
        for job_id, (nodes, _) in self.jobs.items():
            made = trainjobs[job_id]
            names = [str(tj["metadata"]["name"]) for tj in made]
            object_id = object_ids[job_id]
            if (
                len(made) != 1
                or object_id is None
                or tags.split_object_id(object_id)[1] != names[0]
                or not is_true(made[0], "Complete")
            ):
                conditions = [
                    (c.get("type"), c.get("status"))
                    for tj in made
                    for c in (tj.get("status") or {}).get("conditions") or []
                ]
                not_one.append(f"{job_id} ({object_id}): {names} {conditions}")
                continue
            ran = pods.get(names[0], [])
            restarts = [
                int(s.get("restartCount") or 0)
                for p in ran
                for s in p["status"].get("containerStatuses") or []
            ]
            phases = [p["status"].get("phase") for p in ran]
            if len(ran) != nodes or set(phases) != {"Succeeded"} or any(restarts):
                not_once.append(f"{job_id} ({names[0]}): pods {phases}, restarts {restarts}")
        return [
            ("made", "one TrainJob created, completed", not_one),
            ("ran", "its pods ran once, on every node", not_once),
        ]

    def cancel(self) -> None:
        """Stop the supervisor if it still runs and the application; leave the API server
        up and delete the campaign's TrainJobs. It does not wait for their pods to go: the
        plane is its caller's own, stopped after, and after an outage KWOK can take minutes
        over pods of TrainJobs deleted in Background."""
        self._stop_supervisor()
        self._done.set()
        if self._cluster is not None:
            self._cluster.join(timeout=60)
        cluster.apiserver(self.plane, "start")
        LiveDriver(self.plane).remove_trainjobs()
