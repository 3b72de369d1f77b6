"""A local backend on a fresh state directory and a bounded wait on its discovery, for the
endings tests; every object a test leaves alive is stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, ObjectView, Provenance
from dispatch.local.backend import LocalBackend
from dispatch_testing.waiting import eventually

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
        (view,) = eventually(
            lambda: [
                v
                for v in local.dispatch_discover([job_id]).of_job(job_id)
                if v.object_id == object_id
            ],
            until=lambda seen: len(seen) == 1 and until(seen[0]),
            timeout=TIMEOUT,
            what=f"{object_id} of {job_id} meets the condition",
        )
        return view

    return wait
