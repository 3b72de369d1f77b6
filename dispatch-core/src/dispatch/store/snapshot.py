"""A snapshot of a supervisor's folded jobs, kept beside the record: a cache, never the truth.

A supervisor that starts reads the whole record, decodes every row and folds every job:
most of its cold start. The snapshot holds the jobs as folded up to a feed position, so a
restart unpickles them and reads only the feed after that position.

It can never change a decision:

- it is used only when it checks out against the record: its format, dispatch's
  version and the folded models' shapes match, it names this record, its body is the
  one written (SHA-256), its position is one the record's feed has reached, and every job
  it holds has exactly the last sequence number the record has for that job up to the
  snapshot's position (one query);
  a job of the record it lacks (a quarantined one, say) is read and folded from the record.
  Anything else (missing, truncated, of another version, stale, not ours) and it is set
  aside whole: the supervisor folds the record as it would without it, and writes a new one;
- what follows its position is read from the feed and folded as usual.

Pickle runs code of the file's choosing, so a snapshot is read only from a regular file of
this user's, writable by nobody else, in a directory of this user's that only they can
write (:mod:`dispatch.store.permissions`); it is written 0600 under a temporary name and
renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import stat
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from dispatch.store.codec import collector_paused
from dispatch.store.permissions import (
    check_private_dir,
    check_private_file,
    open_private,
    private_dirs,
)

if TYPE_CHECKING:
    from dispatch.core.compact import Packed
    from dispatch.store.base import RecordStore

log = logging.getLogger("dispatch.snapshot")

#: The first line of a snapshot; the second is its JSON header, then the pickles.
MAGIC = b"dispatch-snapshot\n"
#: Jobs per pickle of the body: a pickle's memo keeps every object it read or wrote alive
#: until it ends (each datetime's arguments, say: 2 KiB a job), so the body is a run of
#: small pickles, one dict each, and that costs a chunk's worth, not the whole snapshot's.
CHUNK = 1000
FORMAT = 3  # 2: a folded Job has a group; 3: jobs packed (dispatch.core.compact)


@dataclass(frozen=True)
class Snapshot:
    """Jobs as folded up to ``position``, packed (:mod:`dispatch.core.compact`);
    ``missing``: jobs of the record up to that position the snapshot does not hold (to be
    read from the record)."""

    position: int
    jobs: dict[str, Packed]
    missing: list[str]


def _version() -> str:
    try:
        return metadata.version("dispatch-core")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree not installed
        return "unknown"


def _shape() -> str:
    """A digest of the folded models' shapes (every model a ``Job`` reaches, its fields in
    order): a snapshot pickled by a build whose models differ is never unpickled into
    these, even when the version number did not change (a source checkout)."""
    from pydantic import BaseModel

    from dispatch.core.job import Job

    seen: list[str] = []
    todo: list[object] = [Job]
    done: set[int] = set()
    while todo:
        kind = todo.pop()
        if id(kind) in done:
            continue
        done.add(id(kind))
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = kind.model_fields
            seen.append(f"{kind.__module__}.{kind.__qualname__}({','.join(fields)})")
            todo.extend(f.annotation for f in fields.values())
        else:
            todo.extend(get_args(kind))
    return hashlib.sha256("\n".join(sorted(seen)).encode()).hexdigest()[:16]


def snapshot_path(store: RecordStore) -> Path | None:
    """Where the snapshot of ``store``'s supervisor lives: beside a SQLite record file; for
    another store, in the user's state directory under a name made from its location."""
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return path.with_name(path.name + ".snapshot")
    location = getattr(store, "location", None)
    if not isinstance(location, str):
        return None
    from dispatch.supervising import state_dir

    digest = hashlib.sha256(location.encode()).hexdigest()[:32]
    return state_dir().parent / "snapshots" / f"{digest}.snapshot"


def _header(store: RecordStore, position: int | None, digest: str = "") -> dict[str, object]:
    """The snapshot's header; without ``position``, the fields a snapshot must match."""
    header: dict[str, object] = {
        "format": FORMAT,
        "dispatch": _version(),
        "models": _shape(),
        "record": str(getattr(store, "location", "")),
    }
    if position is not None:
        header["position"] = position
        header["sha256"] = digest
    return header


def load(path: Path, store: RecordStore) -> Snapshot | None:
    """The snapshot at ``path`` if it checks out against ``store``, else None (logged)."""
    try:
        return _load(path, store)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a cache: any fault means it is set aside, never raised
        log.warning("snapshot %s set aside: %s", path, exc)
        return None


def _load(path: Path, store: RecordStore) -> Snapshot | None:
    check_private_dir(path.parent, "the snapshot's directory")
    fd = open_private(path, os.O_RDONLY, "the supervisor snapshot")
    with os.fdopen(fd, "rb") as file:
        st = check_private_file(fd, path, "the supervisor snapshot")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            log.warning("snapshot %s set aside: writable by others", path)
            return None
        if file.readline() != MAGIC:
            log.warning("snapshot %s set aside: not a snapshot", path)
            return None
        header = json.loads(file.readline())
        position, digest = header.pop("position", None), header.pop("sha256", None)
        if header != _header(store, None) or type(position) is not int:
            log.info("snapshot %s set aside: of another version or record", path)
            return None
        start = file.tell()
        body = hashlib.sha256()
        while chunk := file.read(1 << 20):  # not held whole: it is as big as the jobs
            body.update(chunk)
        if body.hexdigest() != digest:
            log.warning("snapshot %s set aside: damaged", path)
            return None
        last = store.last_seqs(position)
        if last is None:  # a store that cannot say, or a position past its feed
            log.info("snapshot %s set aside: not of this record's feed", path)
            return None
        file.seek(start)  # the same open file: a snapshot renamed over it meanwhile is not read
        jobs: dict[str, Packed] = {}
        with collector_paused():
            while file.peek(1):
                part = pickle.load(file)
                if type(part) is not dict:
                    log.warning("snapshot %s set aside: not a snapshot's body", path)
                    return None
                jobs.update(part)
    from dispatch.core.compact import JOB_ID, VERSION

    for job_id, job in jobs.items():
        if type(job) is not tuple or job[JOB_ID] != job_id or last.get(job_id) != job[VERSION]:
            log.info("snapshot %s set aside: stale (job %s)", path, job_id)
            return None
    missing = [job_id for job_id in last if job_id not in jobs]
    return Snapshot(position=position, jobs=jobs, missing=missing)


def save(path: Path, store: RecordStore, position: int, jobs: dict[str, Packed]) -> bool:
    """Write the snapshot (0600, renamed into place); False (logged) when it cannot."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        private_dirs(path.parent, "the snapshot's directory")
        fd = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "a snapshot")
        ids = list(jobs)
        digest = hashlib.sha256()
        # the body goes to an unnamed file first (the header, before it, holds its digest):
        # never held whole in memory, it is as big as the jobs
        with os.fdopen(fd, "wb") as file, tempfile.TemporaryFile(dir=path.parent) as body:
            for start in range(0, len(ids), CHUNK):
                part = pickle.dumps(
                    {job_id: jobs[job_id] for job_id in ids[start : start + CHUNK]},
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
                digest.update(part)
                body.write(part)
            body.seek(0)
            file.write(MAGIC)
            file.write(json.dumps(_header(store, position, digest.hexdigest())).encode() + b"\n")
            shutil.copyfileobj(body, file, 1 << 20)
        os.replace(temporary, path)
        return True
    except Exception as exc:  # a cache: failing to write one never stops a supervisor
        log.warning("snapshot %s not written: %s", path, exc)
        try:
            temporary.unlink()
        except OSError:
            pass
        return False
