"""Garbage collection of the local state directory: what a killed submit
leaves (drafts, temporary files, never-indexed objects) and ended objects past their
retention are removed; nothing alive, nothing recent and no active job's object is."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from dispatch import JobSpec, ObjectView, Phase
from dispatch.local.backend import LocalBackend
from dispatch.local.collect import collect
from dispatch.local.records import Ending

DAY = 24 * 3600.0


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def _end_at(obj: Path, seconds_ago: float) -> None:
    ending = Ending.model_validate_json((obj / "end.json").read_text())
    when = ending.ended_at - timedelta(seconds=seconds_ago)
    (obj / "end.json").write_text(ending.model_copy(update={"ended_at": when}).model_dump_json())


def test_collect_removes_only_what_nothing_can_reach_or_retention_expired(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    objects = state_dir / "objects"
    done = [backend.dispatch_submit(f"job-{n}", 1, JobSpec(command=("true",)), False) for n in "ab"]
    for n in "ab":
        settle(f"job-{n}", lambda v: v.phase is Phase.ENDED)
    alive = backend.dispatch_submit("job-c", 1, JobSpec(command=("sleep", "30")), False)
    settle("job-c", lambda v: v.phase is Phase.RUNNING)
    # what a killed submit leaves: a draft, a temporary file, an object never indexed
    draft = objects / ".draft-local-000000000001"
    draft.mkdir(mode=0o700)
    (draft / "meta.json").write_text("{}")
    tmp = objects / done[0] / ".end.json.123.abcd.tmp"
    tmp.write_text("half")
    orphan = objects / "local-00000000000f"
    orphan.mkdir(mode=0o700)
    (orphan / "meta.json").write_text("{}")
    for path in (draft, tmp, orphan, objects / alive):
        _age(path, 2 * 3600)
    _end_at(objects / done[0], 20 * DAY)  # job-a ended long ago, job-b just now

    removed = collect(backend.state, retention=timedelta(days=14))
    assert sorted(removed.removed) == sorted(
        [
            f"objects/{draft.name}",
            f"objects/{orphan.name}",
            f"objects/{done[0]}/{tmp.name}",
            f"objects/{done[0]}",
            f"jobs/job-a/{done[0]}",
            "jobs/job-a/submission-1",  # its claim of the submission
        ]
    )
    assert not draft.exists() and not orphan.exists() and not (objects / done[0]).exists()
    assert (objects / done[1]).exists() and (objects / alive).exists()
    assert backend.dispatch_discover(["job-a"]).objects == ()
    assert len(backend.dispatch_discover(["job-b", "job-c"]).objects) == 2
    assert collect(backend.state).removed == []  # nothing left to do


def test_an_active_jobs_objects_are_kept_whatever_their_age(
    state_dir: Path, backend: LocalBackend, settle: Callable[..., ObjectView]
) -> None:
    object_id = backend.dispatch_submit("job-old", 1, JobSpec(command=("true",)), False)
    settle("job-old", lambda v: v.phase is Phase.ENDED)
    _end_at(state_dir / "objects" / object_id, 400 * DAY)
    assert collect(backend.state, active={"job-old"}).removed == []
    assert sorted(collect(backend.state).removed) == [
        f"jobs/job-old/{object_id}",
        "jobs/job-old/submission-1",
        f"objects/{object_id}",
    ]
