"""A local backend on a fresh state directory and a bounded wait on its discovery, for the
endings tests; every object a test leaves alive is stopped."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, ObjectView, Provenance
from dispatch.local.backend import LocalBackend

TIMEOUT = 30.0


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def local(state_dir: Path) -> Iterator[LocalBackend]:
    backend = LocalBackend(state_dir=state_dir, stop_grace=0.5)
    yield backend
    cleanup = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="test over")
    objects = state_dir / "objects"
    for obj in objects.iterdir() if objects.is_dir() else ():
        if obj.name.startswith("local-"):
            backend.dispatch_stop(obj.name, cleanup)


@pytest.fixture
def settle(local: LocalBackend) -> Callable[..., ObjectView]:
    def wait(object_id: str, job_id: str, until: Callable[[ObjectView], bool]) -> ObjectView:
        deadline = time.monotonic() + TIMEOUT
        seen: list[ObjectView] = []
        while time.monotonic() < deadline:
            seen = [
                v
                for v in local.dispatch_discover([job_id]).of_job(job_id)
                if v.object_id == object_id
            ]
            if seen and until(seen[0]):
                return seen[0]
            time.sleep(0.05)
        pytest.fail(f"{object_id}: condition not met in {TIMEOUT}s; last seen {seen}")

    return wait
