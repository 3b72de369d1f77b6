"""Discovery of many jobs costs the same number of Slurm calls as one (S-32), on real Slurm."""

from __future__ import annotations

import uuid

import pytest
from dispatch import CauseKind, Phase
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.version import VersionCache
from dispatch_slurm_testing.provoke import wait_for

pytestmark = pytest.mark.live(server="slurm")


def _calls(backend: SlurmBackend, job_ids: list[str]) -> tuple[int, int]:
    before = backend.runner.calls
    found = backend.dispatch_discover(job_ids)
    return backend.runner.calls - before, len(found.objects)


def test_discovering_60_jobs_costs_what_one_costs_S32(backend, provoker) -> None:
    run = uuid.uuid4().hex[:8]
    jobs = [f"live-many-{run}-{i}" for i in range(60)]
    for number, job in enumerate(jobs):
        backend.dispatch_submit(job, 1 + number % 3, provoker.spec(("true",)), False)
    wait_for(
        backend.dispatch_discover,
        jobs,
        lambda s: len(s) == 60 and all(o.phase is Phase.ENDED for o in s.values()),
        timeout=120,
    )
    # the version is read at most once a minute, not per discovery: held here so the
    # counts below are the discovery's own
    version = backend.version()
    backend.versions = VersionCache(lambda: version, lifetime=float("inf"))
    one_calls, one_found = _calls(backend, jobs[:1])
    many_calls, many_found = _calls(backend, jobs)
    assert (one_found, many_found) == (1, 60)
    assert one_calls == many_calls == 2  # one squeue, one sacct; sinfo only when one runs
    seen = {o.job_id: o for o in backend.dispatch_discover(jobs).objects}
    assert {o.submission for o in seen.values()} == {1, 2, 3}
    assert all(o.cause.kind is CauseKind.NONE for o in seen.values())


def test_unknown_job_ids_are_absent_not_errors_S32(backend) -> None:
    found = backend.dispatch_discover([f"never-submitted-{uuid.uuid4().hex}", "x,y|z;w"])
    assert found.objects == ()


def test_every_object_of_a_job_is_listed_with_its_submission_S30_S34(backend, provoker) -> None:
    job = f"live-subs-{uuid.uuid4().hex[:8]}"
    first = backend.dispatch_submit(job, 1, provoker.spec(("sh", "-c", "exit 2")), False)
    second = backend.dispatch_submit(job, 2, provoker.spec(("true",)), False)

    def both_ended(_: dict) -> bool:
        objs = backend.dispatch_discover([job]).objects
        return len(objs) == 2 and all(o.phase is Phase.ENDED for o in objs)

    wait_for(backend.dispatch_discover, [job], both_ended, timeout=60)
    objs = {o.submission: o for o in backend.dispatch_discover([job]).objects}
    assert objs[1].object_id == first and objs[1].cause.kind is CauseKind.NON_ZERO_EXIT
    assert objs[2].object_id == second and objs[2].cause.kind is CauseKind.NONE
