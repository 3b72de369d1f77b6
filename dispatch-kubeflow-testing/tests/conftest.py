"""Fixtures: the emulated Trainer cluster on loopback and a real kubeconfig pointing at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
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


#: The promises on the real control plane (test_kubeflow_live_*.py) need start-kube.sh's
#: Kubernetes, JobSet and Trainer (a 25-40 min cold Go build): collected when asked,
#: never silently skipped: DISPATCH_KUBE_LIVE=1 pytest dispatch-kubeflow-testing/tests
LIVE = os.environ.get("DISPATCH_KUBE_LIVE") == "1"
collect_ignore_glob = [] if LIVE else ["test_kubeflow_live_*"]
