"""The emulated Kueue's promises (``test_kubeflow_kueue_promises.py``, written once) run
against the real Kueue v0.17.0 that ``start-kube.sh`` starts with the Trainer v2.2 plane.

The plane's queues (install.py's ``kueue_setup``) already hold what the promises ask an
administrator for: LocalQueue ``team-a`` on a ClusterQueue of 16 GPUs that may not
borrow, WorkloadPriorityClasses ``low`` and ``high``. What Kueue itself decides after a
requeuing limit is provoked as Kueue's workload controller provokes it, by the
``DeactivationTarget`` condition on the Workload's status (the adapter's live tier,
``test_kubeflow_live_kueue.py``, reaches the real limit through waitForPodsReady). A
promise that fails here and passes on the emulator is a divergence: the emulator is what
gets mended.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.fixtures import live, live_plane
from kubernetes import client

pytestmark = pytest.mark.live(server="kubeflow")


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"test_{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


promises = _load("kubeflow_kueue_promises")
api_of = _load("kubeflow_promises").api_of

__all__ = ["api_of", "live", "live_plane"]
T = TypeVar("T")
Obj = dict[str, Any]


class LiveKueue:
    """The real Kueue through the live driver; waiting is polling."""

    def __init__(self, driver: LiveDriver, api: client.ApiClient) -> None:
        self.driver, self.api = driver, api

    def trainjob(self, name: str) -> Obj:
        return self.driver.trainjob(name)

    def workload(self, name: str) -> Obj:
        try:
            return self.driver.workload(name)
        except ValueError as exc:  # none yet: Kueue makes it after the TrainJob
            raise LookupError(f"TrainJob {name!r} has no Kueue Workload yet") from exc

    def queues(
        self,
        cluster_queues: dict[str, int],
        local_queues: dict[str, str],
        priorities: dict[str, int],
        *,
        cohorts: dict[str, str],
        borrowing_limits: dict[str, int],
    ) -> None:
        """The plane's queues are install.py's: check that they are what the promises
        ask for, as the API server holds them."""
        api, ns = self.driver.api, self.driver.namespace
        for local, cluster in local_queues.items():
            assert api.get("LocalQueue", local, ns)["spec"]["clusterQueue"] == cluster
        for cluster, gpus in cluster_queues.items():
            spec = api.get("ClusterQueue", cluster)["spec"]
            assert spec["cohortName"] == cohorts[cluster], spec
            (flavor,) = spec["resourceGroups"][0]["flavors"]
            (gpu,) = [r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"]
            assert int(gpu["nominalQuota"]) == gpus, gpu
            limit = gpu.get("borrowingLimit")  # a quantity: the API server answers "0"
            assert (None if limit is None else int(limit)) == borrowing_limits.get(cluster), gpu
        for name, value in priorities.items():
            assert api.get("WorkloadPriorityClass", name)["value"] == value

    def deactivate(self, name: str) -> None:
        wl = self.workload(name)
        self.driver.api.merge_patch(
            "Workload",
            str(wl["metadata"]["name"]),
            {"spec": {"active": False}},
            self.driver.namespace,
        )

    def reach_requeuing_limit(self, name: str) -> None:
        wl = self.workload(name)
        path = self.driver.api.path("Workload", self.driver.namespace, wl["metadata"]["name"])
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.driver.api.request(
            "PATCH",
            f"{path}/status",
            [
                {
                    "op": "add",
                    "path": "/status/conditions/-",
                    "value": {
                        "type": "DeactivationTarget",
                        "status": "True",
                        "reason": "RequeuingLimitExceeded",
                        "message": "exceeding the maximum number of re-queuing retries",
                        "lastTransitionTime": now,
                    },
                }
            ],
            content_type="application/json-patch+json",
        )

    def until(self, what: str, check: Callable[[], T | None]) -> T:
        def checked() -> T | None:
            try:
                return check()
            except LookupError:
                return None

        return self.driver.wait(what, checked, 120)


@pytest.fixture
def tier(
    live: LiveDriver,
    live_plane: ControlPlane,
    api_of: Callable[[Path], client.ApiClient],
) -> Iterator[LiveKueue]:
    assert "kueue" in live_plane.versions, f"no Kueue on this plane: {live_plane.versions}"
    live.cleanup(promises.QUEUE_NAME)
    tier = LiveKueue(live, api_of(live_plane.kubeconfig))
    tier.queues(
        promises.CLUSTER_QUEUES,
        promises.LOCAL_QUEUES,
        promises.KUEUE_PRIORITIES,
        cohorts=promises.COHORTS,
        borrowing_limits=promises.BORROWING,
    )
    yield tier
    live.cleanup(promises.QUEUE_NAME)


for _name in dir(promises):
    if _name.startswith("test_promise_"):
        globals()[_name.replace("test_promise_", "test_live_promise_")] = getattr(promises, _name)
