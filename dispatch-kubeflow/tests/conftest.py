"""Fixtures: an emulated Trainer cluster on loopback and a backend pointed at it through a
real kubeconfig file, so the official client does real HTTP (nothing is monkeypatched)."""

from __future__ import annotations

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
