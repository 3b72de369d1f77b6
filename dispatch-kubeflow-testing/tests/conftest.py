"""Fixtures: the emulated Trainer cluster on loopback and a real kubeconfig pointing at it."""

from __future__ import annotations

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
