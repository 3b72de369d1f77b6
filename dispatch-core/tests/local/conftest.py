"""Fixtures for the local backend's tests: a backend on a fresh state directory, and a
bounded wait on what discovery shows. Every object left alive by a test is stopped."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, ObjectView, Provenance
from dispatch.local.backend import LocalBackend
from dispatch.local.processes import gone
from dispatch.local.records import Started
from dispatch_testing.waiting import eventually

GRACE = 0.5
TIMEOUT = 15.0


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def backend(state_dir: Path) -> Iterator[LocalBackend]:
    backend = LocalBackend(state_dir=state_dir, stop_grace=GRACE)
    yield backend
    objects = state_dir / "objects"
    if not objects.is_dir():
        return
    cleanup = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="test over")
    for obj in objects.iterdir():
        if obj.name.startswith("local-"):
            backend.dispatch_stop(obj.name, cleanup)
    for started_file in objects.glob("*/started.json"):
        leader = Started.model_validate_json(started_file.read_text()).process
        if gone(leader) is None:  # a stop that failed must not leave a test's process behind
            os.killpg(leader.pid, signal.SIGKILL)


Waiter = Callable[..., ObjectView]


@pytest.fixture
def settle(backend: LocalBackend) -> Waiter:
    """``settle(job_id, until)``: poll discovery until the job's single object satisfies
    ``until`` and return it; fail with what was last seen after a bounded time."""

    def wait(
        job_id: str, until: Callable[[ObjectView], bool], timeout: float = TIMEOUT
    ) -> ObjectView:
        (view,) = eventually(
            lambda: backend.dispatch_discover([job_id]).of_job(job_id),
            until=lambda seen: len(seen) == 1 and until(seen[0]),
            timeout=timeout,
            what=f"job {job_id} has one object that meets the condition",
        )
        return view

    return wait


@pytest.fixture
def wait_file() -> Callable[[Path], str]:
    """Wait (bounded) for a file a command writes, and return its content."""

    def wait(path: Path, timeout: float = TIMEOUT) -> str:
        def written() -> str | None:
            text = path.read_text() if path.exists() else ""
            return text if text.endswith("\n") else None

        return eventually(written, timeout=timeout, what=f"{path} is written")

    return wait
