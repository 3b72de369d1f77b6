"""The embedded record store: one SQLite file, shared by the processes of one host (S-33).

WAL lets readers go on while a supervisor writes; every write starts with
``BEGIN IMMEDIATE`` so two writers queue on the file lock (up to the busy timeout) instead
of both reading version N and one failing late. The file holds commands, environments and
scheduler output, so it is created readable by its owner only (0600, directory 0700).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from dispatch.enums import State
from dispatch.errors import BadInput, DecodeError, RecordConflict, Unreachable
from dispatch.events import Event
from dispatch.store.base import (
    Batch,
    JobSummary,
    Lease,
    Prepared,
    RecordStore,
    check,
    check_filter,
    check_job_ids,
    check_lease_request,
    check_limit,
    check_position,
    decide_lease,
    decode_row,
    events_by_job,
    feed,
    key_conflict,
    prepare,
    summaries,
    unknown_job,
)

#: Bumped when the tables change; a file written by a newer build is refused, not misread.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dispatch_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS dispatch_events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    at TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (job_id, seq)
);
CREATE TABLE IF NOT EXISTS dispatch_jobs (
    job_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    backend TEXT NOT NULL,
    created_at TEXT NOT NULL,
    version INTEGER NOT NULL,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS dispatch_jobs_active ON dispatch_jobs (backend, created_at)
    WHERE outcome IS NULL;
CREATE INDEX IF NOT EXISTS dispatch_jobs_created ON dispatch_jobs (created_at);
CREATE TABLE IF NOT EXISTS dispatch_leases (
    job_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_us INTEGER NOT NULL
);
"""

_T = TypeVar("_T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _stamp(value: datetime) -> str:
    """UTC with a fixed width, so text order is time order."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _insert(db: sqlite3.Connection, items: list[Prepared]) -> None:
    db.executemany(
        "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
        [(j, s, t, _stamp(a), b) for item in items for (j, s, t, a, b) in item.rows],
    )
    db.executemany(
        "INSERT INTO dispatch_jobs (job_id, name, backend, created_at, version, outcome) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                i.batch.job_id,
                i.created.name,
                i.created.backend,
                _stamp(i.created.at),
                i.version,
                i.outcome.value if i.outcome else None,
            )
            for i in items
            if i.created is not None
        ],
    )
    db.executemany(
        "UPDATE dispatch_jobs SET version = ?, outcome = coalesce(?, outcome) WHERE job_id = ?",
        [
            (i.version, i.outcome.value if i.outcome else None, i.batch.job_id)
            for i in items
            if i.created is None
        ],
    )


def _make_private_dirs(directory: Path) -> None:
    """Create missing directories 0700 (``os.makedirs`` gives parents the umask default)."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(path, 0o700)


class SQLiteStore(RecordStore):
    """A record store in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.location = f"sqlite://{self.path.absolute()}"
        self._lock = threading.RLock()
        self._closed = False
        try:
            _make_private_dirs(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise Unreachable(f"cannot open the record store {self.location}: {exc}") from exc
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    def _setup(self) -> None:
        with self._translate("open"):
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise Unreachable(
                    f"record store {self.location}: SQLite refused WAL mode (got {mode!r}); "
                    "is the file on a network filesystem?"
                )
            self._db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            row = self._db.execute("SELECT max(version) FROM dispatch_schema").fetchone()
            if row[0] is None:
                self._db.execute("INSERT INTO dispatch_schema VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                self._db.execute("ROLLBACK")
                raise DecodeError(
                    f"record store {self.location} has schema version {row[0]}, written by a "
                    f"newer dispatch (this build knows up to {SCHEMA_VERSION}); upgrade dispatch",
                    field="schema version",
                    value=row[0],
                )
            self._db.execute("COMMIT")

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        """Turn driver errors into dispatch's at the boundary."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            self._rollback()
            raise Unreachable(f"record store {self.location}: {what} failed: {exc}") from exc
        except sqlite3.IntegrityError as exc:
            self._rollback()
            raise key_conflict(None, self.location, exc) from exc
        except sqlite3.DatabaseError as exc:
            self._rollback()
            raise BadInput(
                f"record store {self.location}: {what} failed: {exc}; "
                "is this file a dispatch record store?"
            ) from exc
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if not self._closed and self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _check_open(self) -> None:
        if self._closed:
            raise BadInput(f"record store {self.location} is closed; open it again")

    def _write(self, what: str, body: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock, self._translate(what):
            self._check_open()
            self._db.execute("BEGIN IMMEDIATE")
            result = body(self._db)
            self._db.execute("COMMIT")
            return result

    def _query(self, what: str, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        with self._lock, self._translate(what):
            self._check_open()
            return self._db.execute(sql, tuple(params)).fetchall()

    def append_many(self, batches: Iterable[Batch]) -> dict[str, int | RecordConflict]:
        items = prepare(batches)
        if not items:
            return {}
        try:
            return self._write("append", lambda db: self._append(db, items, isolate=False))
        except RecordConflict:
            # The pre-check passed but the (job_id, seq) key refused a row: the jobs table
            # and the events disagree (a damaged file). Write each job under its own
            # savepoint so that job alone is refused and the others are kept.
            return self._write("append", lambda db: self._append(db, items, isolate=True))

    def _append(
        self, db: sqlite3.Connection, items: list[Prepared], *, isolate: bool
    ) -> dict[str, int | RecordConflict]:
        ids = json.dumps([item.batch.job_id for item in items])
        versions = dict(
            db.execute(
                "SELECT job_id, version FROM dispatch_jobs "
                "WHERE job_id IN (SELECT value FROM json_each(?))",
                (ids,),
            ).fetchall()
        )
        leased = json.dumps([i.batch.job_id for i in items if i.batch.lease is not None])
        leases = {
            job_id: (owner, token)
            for job_id, owner, token in db.execute(
                "SELECT job_id, owner, token FROM dispatch_leases "
                "WHERE job_id IN (SELECT value FROM json_each(?))",
                (leased,),
            )
        }
        result: dict[str, int | RecordConflict] = {}
        ok = []
        for item in items:
            job_id = item.batch.job_id
            conflict = check(item, versions.get(job_id, 0), leases.get(job_id))
            if conflict is not None:
                result[job_id] = conflict
            else:
                ok.append(item)
                result[job_id] = item.version
        if not isolate:
            _insert(db, ok)
            return result
        for item in ok:
            db.execute("SAVEPOINT job")
            try:
                _insert(db, [item])
            except sqlite3.IntegrityError as exc:
                db.execute("ROLLBACK TO job")
                result[item.batch.job_id] = key_conflict(item.batch.job_id, self.location, exc)
            db.execute("RELEASE job")
        return result

    def read(self, job_id: str, after: int = 0) -> list[Event]:
        check_job_ids([job_id], "read")
        check_position(after, "read: after")
        rows = self._query(
            "read",
            "SELECT seq, body FROM dispatch_events WHERE job_id = ? AND seq > ? ORDER BY seq",
            (job_id, after),
        )
        if not rows and not self._query(
            "read", "SELECT 1 FROM dispatch_events WHERE job_id = ? LIMIT 1", (job_id,)
        ):
            raise unknown_job([job_id], self.location)
        return [decode_row(job_id, seq, body) for seq, body in rows]

    def read_many(self, job_ids: Iterable[str]) -> dict[str, list[Event]]:
        ids = check_job_ids(job_ids, "read_many")
        rows = self._query(
            "read",
            "SELECT job_id, seq, body FROM dispatch_events "
            "WHERE job_id IN (SELECT value FROM json_each(?)) ORDER BY job_id, seq",
            (json.dumps(ids),),
        )
        return events_by_job(rows, ids, self.location)

    def read_since(self, position: int, limit: int | None = None) -> tuple[list[Event], int]:
        check_position(position, "read_since: position")
        check_limit(limit, "read_since")
        rows = self._query(
            "read",
            "SELECT position, job_id, seq, body FROM dispatch_events WHERE position > ? "
            "ORDER BY position LIMIT ?",
            (position, -1 if limit is None else limit),
        )
        return feed(rows, position)

    def active_jobs(self, backend: str | None = None) -> list[str]:
        rows = self._query(
            "list",
            "SELECT job_id FROM dispatch_jobs WHERE outcome IS NULL AND (? IS NULL OR backend = ?) "
            "ORDER BY created_at, job_id",
            (backend, backend),
        )
        return [job_id for (job_id,) in rows]

    def jobs(self, state: str | State | None = None, limit: int | None = None) -> list[JobSummary]:
        wanted = check_filter(state)
        check_limit(limit, "jobs")
        rows = self._query(
            "list",
            "SELECT job_id, name, backend, created_at, outcome, version FROM dispatch_jobs "
            "WHERE (?1 IS NULL) OR (?1 = 'active' AND outcome IS NULL) OR outcome = ?1 "
            "ORDER BY created_at DESC, job_id DESC LIMIT ?2",
            (wanted, -1 if limit is None else limit),
        )
        return summaries(
            (job_id, name, backend, datetime.fromisoformat(created_at), outcome, version)
            for job_id, name, backend, created_at, outcome, version in rows
        )

    def acquire_leases(
        self, job_ids: Iterable[str], owner: str, ttl: timedelta, now: datetime
    ) -> dict[str, Lease]:
        ids = check_lease_request(job_ids, owner, ttl, now)

        def body(db: sqlite3.Connection) -> dict[str, Lease]:
            current = {
                job_id: Lease(job_id, held_by, token, _from_micros(expires))
                for job_id, held_by, token, expires in db.execute(
                    "SELECT job_id, owner, token, expires_us FROM dispatch_leases "
                    "WHERE job_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids),),
                )
            }
            got: dict[str, Lease] = {}
            for job_id in ids:
                lease = decide_lease(job_id, current.get(job_id), owner, ttl, now)
                if lease is not None:
                    got[job_id] = lease
            db.executemany(
                "INSERT INTO dispatch_leases (job_id, owner, token, expires_us) "
                "VALUES (?, ?, ?, ?) "
                "ON CONFLICT (job_id) DO UPDATE SET owner = excluded.owner, "
                "token = excluded.token, expires_us = excluded.expires_us",
                [(g.job_id, g.owner, g.token, _micros(g.expires_at)) for g in got.values()],
            )
            return got

        return self._write("acquire leases", body)

    def release_leases(self, job_ids: Iterable[str], owner: str) -> None:
        ids = check_job_ids(job_ids, "release_leases")

        def body(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE dispatch_leases SET owner = '', expires_us = 0 "
                "WHERE owner = ? AND job_id IN (SELECT value FROM json_each(?))",
                (owner, json.dumps(ids)),
            )

        self._write("release leases", body)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
