"""pytest fixtures for the live tier; a test module imports the ones it uses
(``from dispatch_kubeflow_testing.live.fixtures import live, live_backend, live_plane``).

``live_plane`` starts the control plane through ``start-kube.sh`` (building it on a cold
machine) and fails the test with the script's output when it cannot: never a skip.
The control plane is stopped at the end of the session if this session started it
(``DISPATCH_KUBE_KEEP=1`` keeps it running for the next run).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig

from dispatch_kubeflow_testing.live import cluster
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.driver import LiveDriver

__all__ = ["job_id", "live", "live_backend", "live_plane", "make_live_backend"]


@pytest.fixture(scope="session")
def live_plane() -> Iterator[ControlPlane]:
    plane = cluster.control_plane()
    yield plane
    if plane.started_here and os.environ.get("DISPATCH_KUBE_KEEP") != "1":
        cluster.stop()


@pytest.fixture
def live(live_plane: ControlPlane) -> Iterator[LiveDriver]:
    driver = LiveDriver(live_plane)
    driver.cleanup()
    try:
        yield driver
    finally:
        driver.cleanup()


@pytest.fixture
def make_live_backend(live_plane: ControlPlane) -> Callable[..., KubeflowBackend]:
    def make(**changes: object) -> KubeflowBackend:
        settings: dict[str, object] = {
            "kubeconfig": str(live_plane.kubeconfig),
            "trainer_version": live_plane.trainer_version,
            "retries": 1,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
        }
        settings.update(changes)
        return KubeflowBackend(KubeflowConfig(**settings))  # type: ignore[arg-type]

    return make


@pytest.fixture
def live_backend(make_live_backend: Callable[..., KubeflowBackend]) -> KubeflowBackend:
    return make_live_backend()


@pytest.fixture
def job_id() -> str:
    """A fresh dispatch job id per test (TrainJobs of earlier runs never match)."""
    return f"live-{uuid.uuid4().hex[:8]}"
