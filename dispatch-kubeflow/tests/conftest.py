"""Fixtures: an emulated Trainer cluster on loopback and a backend pointed at it through a
real kubeconfig file, so the official client does real HTTP (nothing is monkeypatched)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch_kubeflow.backend import KubeflowBackend
from dispatch_kubeflow.config import KubeflowConfig
from dispatch_kubeflow_testing.emulator import Emulator


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def kubeconfig(emulator: Emulator, tmp_path: Path) -> Path:
    return emulator.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def make_backend(kubeconfig: Path) -> Callable[..., KubeflowBackend]:
    def make(**changes: object) -> KubeflowBackend:
        settings: dict[str, object] = {
            "kubeconfig": str(kubeconfig),
            "retries": 1,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
        }
        settings.update(changes)
        return KubeflowBackend(KubeflowConfig(**settings))  # type: ignore[arg-type]

    return make


@pytest.fixture
def backend(make_backend: Callable[..., KubeflowBackend]) -> KubeflowBackend:
    return make_backend()


#: The live tier on a real control plane (test_kubeflow_live_*.py) builds Kubernetes, JobSet
#: and the Trainer from Go modules (25-40 min cold) and 7 of its 18 tests fail today on
#: divergences between the real controllers and the adapter (listed in
#: dispatch-kubeflow-testing/scripts/kube/README.md). It runs when asked, never silently:
#: DISPATCH_KUBE_LIVE=1 pytest dispatch-kubeflow/tests -k live  (or tox -e kubeflow-live).
LIVE = os.environ.get("DISPATCH_KUBE_LIVE") == "1"
collect_ignore_glob = [] if LIVE else ["test_kubeflow_live_*"]
