"""The emulator's promises (``test_kubeflow_promises.py``, written once) run against the
real control plane: K8s, JobSet, Trainer and KWOK started by ``start-kube.sh``.

Marked ``live(server='kubeflow')`` like the adapter's live tier (the test command runs
them with ``-m live`` once the plane is up); the plane is started by its idempotent
script, or the tests fail with its output (never a skip). A promise that fails here and
passes on the emulator is a divergence: the emulator is what gets mended.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.fixtures import live, live_plane
from dispatch_kubeflow_testing.live.kubeapi import ApiError
from kubernetes import client

pytestmark = pytest.mark.live(server="kubeflow")

_spec = importlib.util.spec_from_file_location(
    "kubeflow_promises", Path(__file__).with_name("test_kubeflow_promises.py")
)
assert _spec is not None and _spec.loader is not None
promises = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(promises)

__all__ = ["live", "live_plane"]
T = TypeVar("T")


class LiveTier:
    """The real cluster through the live driver; waiting is polling."""

    def __init__(self, driver: LiveDriver, api: client.ApiClient) -> None:
        self.driver, self.api = driver, api

    def trainjob(self, name: str) -> promises.Obj:
        return self.driver.trainjob(name)

    def jobset(self, name: str) -> promises.Obj:
        return self.driver.jobset(name)

    def jobs(self, name: str) -> list[promises.Obj]:
        return self.driver.jobs(name)

    def pods(self, name: str) -> list[promises.Obj]:
        return self.driver.pods(name)

    def events(self, name: str) -> list[promises.Obj]:
        return self.driver.events(name)

    def exit(self, name: str, code: int, *, pod: int = 0) -> None:
        self.driver.exit(name, code, pod=pod)

    def preempt(self, name: str, *, pod: int = 0) -> None:
        self.driver.preempt(name, pod=pod)

    def lose_node(self, name: str, *, pod: int = 0) -> str:
        return self.driver.lose_node(name, pod=pod)

    def recover_node(self, node: str) -> None:
        self.driver.recover_node(node)

    def oom(self, name: str, *, pod: int = 0) -> None:
        self.driver.oom(name, pod=pod)

    def cannot_pull(self, name: str) -> None:
        """Nothing to do: the image is under dispatch.invalid/, which KWOK cannot pull."""

    def suspend_behind_back(self, name: str) -> None:
        self.driver.suspend_behind_back(name)

    def remakes_while_deleting(self) -> None:
        """Nothing to do: the real Trainer does it by itself when it wins the race."""

    def expire_deadline(self, name: str) -> None:
        """Nothing to do: the real Trainer's clock runs (the promise sets a short one)."""

    def until(self, what: str, check: Callable[[], T | None], timeout: float = 120) -> T:
        return self.driver.wait(what, check, timeout)

    def a_while(self) -> None:
        self.driver.settle(8)


def _drop_runtimes(driver: LiveDriver) -> None:
    for runtime in driver.api.list(
        "TrainingRuntime", driver.namespace, "dispatch.dev/managed=true"
    ):
        try:
            driver.api.delete("TrainingRuntime", runtime["metadata"]["name"], driver.namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def tier(
    live: LiveDriver,
    live_plane: ControlPlane,
    api_of: Callable[[Path], client.ApiClient],
) -> Iterator[LiveTier]:
    yield LiveTier(live, api_of(live_plane.kubeconfig))
    live.cleanup()
    _drop_runtimes(live)


api_of = promises.api_of
for _name in dir(promises):
    if _name.startswith("test_promise_"):
        globals()[_name.replace("test_promise_", "test_live_promise_")] = getattr(promises, _name)
