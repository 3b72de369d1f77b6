"""Live tier: the real API server stops answering (frozen with SIGSTOP: connections are
accepted by the kernel, nothing comes back) and the adapter says unreachable within its
bounded timeouts, then sees the same TrainJob again once it resumes."""

from __future__ import annotations

import pytest
from dispatch import JobSpec, Phase, Resources, Unreachable
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow_testing.live.driver import LiveDriver
from dispatch_kubeflow_testing.live.fixtures import *  # noqa: F403 - the live fixtures
from dispatch_kubeflow_testing.live.observe import submit, until

pytestmark = pytest.mark.live(server="kubeflow")

LONG = JobSpec(
    name="train",
    command=("torchrun", "train.py"),
    resources=Resources(nodes=1),
    options={"image": "registry.example/acme/train:1.4"},
)


def test_live_frozen_api_server_is_unreachable_then_seen_again(
    live_backend: KubeflowBackend, live: LiveDriver, job_id: str
) -> None:
    """S-31: discovery raises Unreachable (never an empty answer that would read as gone)."""
    name = submit(live_backend, job_id, LONG)
    live.running(name, 1)
    until(live_backend, job_id, "running", lambda o: o.phase is Phase.RUNNING, live=live)
    with live.api_frozen(), pytest.raises(Unreachable, match=r"127\.0\.0\.1"):
        live_backend.dispatch_discover(job_ids=[job_id])
    until(live_backend, job_id, "running again", lambda o: o.phase is Phase.RUNNING, live=live)
