"""A Kubernetes API server that flaps under a supervisor: the campaign and its checks (S-5).

TrainJobs of one or two nodes on the emulated cluster, recorded with a policy that
resubmits on every ending it may (``unknown`` is held), run under one real ``dispatch
supervise`` process talking HTTP to the emulator. Meanwhile the API server misbehaves as a
whole, in turns (:meth:`dispatch_kubeflow_testing.emulator.Emulator.misbehave`): it refuses
connections, hangs (accepts, never answers), answers every request 500, or 429 with
``Retry-After``. The cluster goes on meanwhile: each TrainJob succeeds when its time is
up, whether or not the API server answers. While it misbehaves, ``dispatch status`` of a
job not ended must show what the record knows, say that the scheduler is unreachable
(its words, since when) and exit 3, appending nothing.

Every job must end as it would have without the flaps: succeeded, one submission, one
TrainJob created, and a record with nothing but its creation, its submission and its
outcome, its events numbered without a gap. Each tick the supervisor prints (``--json``)
is timed: wall from its start to its line, CPU of the supervisor between two lines; the
worst ticks while the API server misbehaved and while it was well are reported, never
asserted.

The driver is :mod:`dispatch_testing.campaign`; what is Kubeflow's own is here. Used by
``benchmarks/kube_flapping.py`` (the full campaign) and by dispatch-kubeflow's offline
test (a shorter one).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from dispatch_kubeflow import tags
from dispatch_testing import campaign
from dispatch_testing.campaign import Flap, Result, Tick

from dispatch_kubeflow_testing.emulator import Emulator

__all__ = ["LABELS", "MODES", "Campaign", "Flap", "Plan", "Result", "Tick"]

#: the ways the API server misbehaves, in turns, and their rows in the table
LABELS = {
    "refuse": "API server refusing connections",
    "hang": "API server hung (accepts, never answers)",
    "500": "API server answering 500",
    "429": "API server answering 429, Retry-After",
}
MODES = tuple(LABELS)


@dataclass
class Plan:
    """``flaps`` outages spread over ``span`` seconds, each at least ``down`` seconds,
    under ``jobs`` TrainJobs that each succeed ``job_seconds`` after they start running."""

    jobs: int = 40
    flaps: int = 20
    span: float = 240.0
    down: float = 6.0
    job_seconds: tuple[float, float] = (20.0, 200.0)
    interval: float = 1.0
    lease: float = 60.0
    settle: float = 600.0
    read_timeout: float = 5.0
    connect_timeout: float = 2.0
    retry_after: int = 5
    seed: int = 1


class Campaign(campaign.Campaign[Plan, float]):
    """One campaign on an emulated cluster it starts (and stops in :meth:`cancel`); its
    jobs are kept with the seconds each runs."""

    backend = "kubeflow"
    flap_labels = LABELS
    tick_names: ClassVar[dict[str, str]] = {
        mode: label.removeprefix("API server ") for mode, label in LABELS.items()
    }
    well = "well"
    went_down = "the API server began to misbehave"
    not_reached = "the supervisor did not reach the API server again"

    def __init__(self, plan: Plan, say: Any = None) -> None:
        super().__init__(plan, self.workdir("dispatch-kube-flapping-"), say)
        self.emulator = Emulator().start()
        kubeconfig = self.emulator.write_kubeconfig(self.work / "kubeconfig")
        self.env |= {
            "DISPATCH_KUBEFLOW_KUBECONFIG": str(kubeconfig),
            "DISPATCH_KUBEFLOW_IMAGE": "ghcr.io/acme/train:1.4",
            "DISPATCH_KUBEFLOW_RETRIES": "1",
            "DISPATCH_KUBEFLOW_CONNECT_TIMEOUT": f"{plan.connect_timeout:g}",
            "DISPATCH_KUBEFLOW_READ_TIMEOUT": f"{plan.read_timeout:g}",
        }
        self._running_since: dict[str, float] = {}  # TrainJob name -> when seen running
        self._succeeded: set[str] = set()
        self._done = threading.Event()
        self._cluster: threading.Thread | None = None

    def record(self) -> None:
        from dispatch import Client

        policy = self.write_policy()
        low, high = self.plan.job_seconds
        with Client(self.env["DISPATCH_STORE"]) as client:
            for i in range(self.plan.jobs):
                handle = client.submit(
                    ["torchrun", "train.py"],
                    backend="kubeflow",
                    policy=str(policy),
                    start=False,
                    name=f"flap-{i}",
                    resources={"nodes": 1 + i % 2, "gpus_per_node": 8},
                )
                self.jobs[handle.job_id] = round(self.rng.uniform(low, high), 1)

    def misbehave(self, mode: str) -> None:
        self.emulator.misbehave(mode, retry_after=self.plan.retry_after)

    def behave(self, mode: str) -> None:
        self.emulator.behave()

    def _job_of(self, name: str) -> str | None:
        labels = self.emulator.trainjob(name)["metadata"].get("labels") or {}
        value = labels.get(tags.JOB)
        return next((j for j in self.jobs if tags.job_label(j) == value), None)

    def _run_cluster(self) -> None:
        """The cluster's own time: controllers step, each TrainJob succeeds once it has
        run its time, whatever the API server answers meanwhile."""
        emu = self.emulator
        while not self._done.wait(0.5):
            emu.advance()
            now = time.monotonic()
            for name in emu.names():
                if name in self._succeeded:
                    continue
                if not emu.is_running(name):
                    continue
                since = self._running_since.setdefault(name, now)
                job_id = self._job_of(name)
                if job_id is not None and now - since >= self.jobs[job_id]:
                    emu.succeed(name)
                    self._succeeded.add(name)

    def start_cluster(self) -> None:
        self._cluster = threading.Thread(target=self._run_cluster, daemon=True)
        self._cluster.start()

    def _created(self) -> dict[str, list[str]]:
        """The TrainJobs the API server created for each job, by name."""
        made: dict[str, list[str]] = {j: [] for j in self.jobs}
        by_label = {tags.job_label(j): j for j in self.jobs}
        with self.emulator.log.lock:
            entries = list(self.emulator.log.entries)
        for request in entries:
            if request.verb != "create" or request.resource != "trainjobs":
                continue
            meta = (request.body or {}).get("metadata") or {}
            job_id = by_label.get(str((meta.get("labels") or {}).get(tags.JOB)))
            if job_id is not None:
                made[job_id].append(str(meta.get("name")))
        return made

    def judge(self, object_ids: dict[str, str | None]) -> list[tuple[str, str, list[str]]]:
        """Each job's one submission created one TrainJob, the one it recorded."""
        created = self._created()
        not_one: list[str] = []
        for job_id in self.jobs:
            made = created[job_id]
            object_id = object_ids[job_id]
            if len(made) != 1 or object_id is None or not object_id.endswith("/" + made[0]):
                not_one.append(f"{job_id} ({object_id}): {made}")
        return [("made", "one TrainJob created", not_one)]

    def cancel(self) -> None:
        """Stop the supervisor if it still runs, and the cluster."""
        self._stop_supervisor()
        self._done.set()
        if self._cluster is not None:
            self._cluster.join(timeout=60)
        self.emulator.stop()
