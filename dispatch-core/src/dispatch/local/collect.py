"""Garbage collection of the local state directory.

A killed submit leaves files nothing will ever read: a ``.draft-<id>`` directory, a
``.*.tmp`` file, or an object directory moved into place but never indexed (no job's
index names it, so no discovery and no record can ever reach it). Ended objects pile up
too. :func:`collect` removes, and says what it removed:

- drafts, temporary files and never-indexed object directories once they are older than
  :data:`GRACE` (a submit takes milliseconds) and no runner of theirs is alive;
- ended objects (``end.json`` written, or a keeper's ``exit.json`` with its runner gone)
  whose ending is older than the retention (:data:`DEFAULT_RETENTION`, 14 days;
  ``DISPATCH_LOCAL_RETENTION_DAYS`` overrides it), with their job index entry, unless
  their job is one of ``active`` (the record's active jobs, when the caller has a
  record); and a job's kept environment once none of its objects is left and it is older
  than the retention.

Nothing alive is ever removed: an object without an ending stays, whatever its age. The
local backend runs this at most once an hour, from a submit (see
:meth:`LocalBackend.collect_garbage`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dispatch.local.layout import CLAIM, OBJECT_ID, ObjectDir, StateDir
from dispatch.local.processes import gone, is_here
from dispatch.local.records import Ending, Exited, ObjectMeta, ProcessIdentity, exit_file, read
from dispatch.model.errors import BadInput, DecodeError

GRACE = timedelta(hours=1)
DEFAULT_RETENTION = timedelta(days=14)


def retention_from_env() -> timedelta:
    raw = os.environ.get("DISPATCH_LOCAL_RETENTION_DAYS", "")
    if not raw:
        return DEFAULT_RETENTION
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not 0 < days < 100_000:
        raise BadInput(f"DISPATCH_LOCAL_RETENTION_DAYS={raw!r} is not a number of days above 0")
    return timedelta(days=days)


@dataclass
class Collected:
    """What one collection removed, as paths relative to the state directory."""

    removed: list[str] = field(default_factory=list)

    def add(self, state: StateDir, path: Path) -> None:
        self.removed.append(str(path.relative_to(state.root)))


def _age(path: Path, now: float) -> float:
    try:
        return now - path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


def _runner_alive(obj: ObjectDir) -> bool:
    try:
        runner = read(obj.runner, ProcessIdentity)
    except DecodeError:
        return False
    return runner is not None and (not is_here(runner) or gone(runner) is None)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def collect(
    state: StateDir,
    *,
    retention: timedelta = DEFAULT_RETENTION,
    active: Collection[str] | None = None,
    now: float | None = None,
) -> Collected:
    """Remove what nothing can reach any more (see the module); return what was removed."""
    now = time.time() if now is None else now
    done = Collected()
    indexed: dict[str, list[Path]] = {}  # object id -> its index entry and claim
    for index in _entries(state.jobs):
        for entry in _entries(index):
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                if _age(entry, now) > GRACE.total_seconds():
                    _remove(entry)
                    done.add(state, entry)
            elif OBJECT_ID.match(entry.name):
                indexed.setdefault(entry.name, []).append(entry)
            elif CLAIM.match(entry.name):
                try:
                    holder = entry.read_text()
                except FileNotFoundError:
                    continue
                indexed.setdefault(holder, []).append(entry)
    for path in _entries(state.objects):
        if path.name.startswith(".draft-"):
            if _age(path, now) > GRACE.total_seconds() and not _runner_alive(ObjectDir(path)):
                _remove(path)
                done.add(state, path)
            continue
        if not OBJECT_ID.match(path.name):
            continue
        obj = ObjectDir(path)
        for tmp in path.glob(".*.tmp"):
            if _age(tmp, now) > GRACE.total_seconds():
                _remove(tmp)
                done.add(state, tmp)
        if path.name not in indexed:
            if _age(path, now) > GRACE.total_seconds() and not _runner_alive(obj):
                _remove(path)  # never indexed: no discovery or record can reach it
                done.add(state, path)
            continue
        if _expired(obj, now, retention, active):
            entries = indexed[path.name]
            for entry in entries:
                _remove(entry)
                done.add(state, entry)
            _remove(path)
            done.add(state, path)
            if not _entries(entries[0].parent):
                entries[0].parent.rmdir()
    _collect_environments(state, now, retention, done)
    return done


def _expired(
    obj: ObjectDir, now: float, retention: timedelta, active: Collection[str] | None
) -> bool:
    try:
        ending = read(obj.end, Ending)
        meta = read(obj.meta, ObjectMeta)
    except DecodeError:
        return False  # what cannot be read is evidence: keep it
    if meta is None or (active is not None and meta.job_id in active):
        return False
    if ending is not None:
        ended = ending.ended_at.timestamp()
    else:
        try:
            exited = read(exit_file(obj.path), Exited)
        except DecodeError:
            return False
        if exited is None or _runner_alive(obj):
            return False  # alive, or its ending not written yet: never removed
        ended = exited.at.timestamp()
    return now - ended > retention.total_seconds()


def _collect_environments(
    state: StateDir, now: float, retention: timedelta, done: Collected
) -> None:
    for kept in _entries(state.root / "environments"):
        key = kept.name.removesuffix(".json")
        if kept.name.startswith(".") and kept.name.endswith(".tmp"):
            if _age(kept, now) > GRACE.total_seconds():
                _remove(kept)
                done.add(state, kept)
            continue
        if _entries(state.jobs / key):
            continue  # the job still has objects
        if _age(kept, now) > retention.total_seconds():
            _remove(kept)
            done.add(state, kept)


def _entries(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
