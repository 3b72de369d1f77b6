"""The embedded record store: one SQLite file, shared by the processes of one host (S-33).

WAL lets readers go on while a supervisor writes; every write starts with
``BEGIN IMMEDIATE`` so two writers queue on the file lock (up to the busy timeout) instead
of both reading version N and one failing late. The file holds commands, environments and
scheduler output, so it lives in a directory only its owner can write, is created 0600 and
is never reached through a symlink (S-51). A SQLite file that is not a record is refused
and left as it was; a record dispatch may not write (a read-only file or file system) is
opened read-only, so it can still be listed and read.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from dispatch.model.errors import (
    BadInput,
    DecodeError,
    NoSpace,
    RecordConflict,
    Unreachable,
    no_space,
)
from dispatch.store.base import Lease, Prepared, key_conflict
from dispatch.store.permissions import (
    check_private_file,
    open_private,
    private_dirs,
)
from dispatch.store.sql import Dialect, SQLStore

#: Bumped when the tables change; a file written by a newer build is refused, not misread.
#: (``dispatch_supervisors`` came without a bump: it is created when missing, and a build
#: that does not know it reads and writes the other tables as before.)
SCHEMA_VERSION = 1

_TABLES = ("dispatch_schema", "dispatch_events", "dispatch_jobs", "dispatch_leases")

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
CREATE TABLE IF NOT EXISTS dispatch_supervisors (
    owner TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    last_tick TEXT NOT NULL,
    interval_s REAL NOT NULL,
    lease_s REAL NOT NULL,
    stopped_at TEXT
);
"""

_MAGIC = b"SQLite format 3\x00"
_T = TypeVar("_T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _stamp(value: datetime) -> str:
    """UTC with a fixed width, so text order is time order."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _parse_stamp(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"not a time stamp: {value!r}")
    return datetime.fromisoformat(value)


DIALECT = Dialect(
    placeholder="?",
    any_of=lambda column: f"{column} IN (SELECT value FROM json_each(?))",
    ids=lambda ids: json.dumps(list(ids)),
    no_limit=-1,
    to_time=_stamp,
    from_time=_parse_stamp,
    expiry_column="expires_us",
    to_expiry=_micros,
    from_expiry=_from_micros,
    for_share="",
    for_update="",
)

_WRITE_REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM)
#: Free bytes under which an I/O error of SQLite's is taken for a full file system (the
#: WAL index alone needs 32 KiB to grow).
_ROOM = 1 << 20


class SQLiteStore(SQLStore):
    """A record store in one SQLite file."""

    dialect = DIALECT

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path).absolute()
        self.location = f"sqlite://{self.path}"
        self.read_only = False
        self._read_only_why = ""
        self._lock = threading.RLock()
        self._closed = False
        self._db = self._open(busy_timeout)
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    # -- opening: a private file, never through a symlink, never a foreign one ---------------

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        what = "record store"
        try:
            private_dirs(self.path.parent, "the record store's directory")
        except OSError as exc:
            if no_space(exc):
                raise NoSpace(
                    f"{self.path.parent} (record store {self.location})", str(exc)
                ) from exc
            if exc.errno not in _WRITE_REFUSED:
                raise Unreachable(f"cannot open the record store {self.location}: {exc}") from exc
            raise BadInput(
                f"record store {self.location}: cannot create its directory ({exc.strerror}); "
                "point DISPATCH_STORE at a writable place, e.g. sqlite:///home/you/record.db"
            ) from None
        try:
            fd = self._open_file()
        except BadInput:
            raise
        except OSError as exc:
            if no_space(exc):
                raise NoSpace(
                    f"{self.path.parent} (record store {self.location})", str(exc)
                ) from exc
            raise Unreachable(f"cannot open the record store {self.location}: {exc}") from exc
        try:
            st = check_private_file(fd, self.path, what)
            if not self.read_only and st.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            header = os.pread(fd, len(_MAGIC), 0)
            if header and header != _MAGIC:
                raise BadInput(
                    f"record store {self.location}: the file is not a SQLite database; "
                    "is this file a dispatch record store? dispatch left it untouched; point "
                    "DISPATCH_STORE at another file"
                )
            identity = (st.st_dev, st.st_ino)
        finally:
            os.close(fd)
        try:
            db = sqlite3.connect(
                self._uri(),
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise Unreachable(f"cannot open the record store {self.location}: {exc}") from exc
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except OSError as exc:
            db.close()
            raise Unreachable(f"cannot open the record store {self.location}: {exc}") from exc
        if (now.st_dev, now.st_ino) != identity:
            db.close()
            raise BadInput(
                f"record store {self.location}: the file was replaced while dispatch opened "
                "it; refusing to use it (S-51)"
            )
        if self.read_only:
            try:
                return self._readable(db, busy_timeout)
            except sqlite3.Error as exc:
                raise Unreachable(f"cannot read the record store {self.location}: {exc}") from exc
        return db

    def _open_file(self) -> int:
        """The record's file descriptor, opened read-write (created 0600) when allowed and
        read-only when the file or its file system refuses writes."""
        what = "record store"
        try:
            return open_private(self.path, os.O_RDWR | os.O_CREAT, what)
        except IsADirectoryError:
            raise BadInput(
                f"record store {self.location}: {self.path} is a directory, not a record file; "
                f"name a file in it, e.g. sqlite://{self.path / 'record.db'}"
            ) from None
        except OSError as exc:
            if exc.errno not in _WRITE_REFUSED:
                raise
            why = "read-only file system" if exc.errno == errno.EROFS else "permission denied"
        try:
            fd = open_private(self.path, os.O_RDONLY, what)
        except FileNotFoundError:
            raise BadInput(
                f"record store {self.location}: cannot create the record ({why}); point "
                "DISPATCH_STORE at a writable place, e.g. sqlite:///home/you/record.db"
            ) from None
        self.read_only = True
        self._read_only_why = why
        return fd

    def _uri(self) -> str:
        uri = f"file:{quote(str(self.path))}"
        if not self.read_only:
            return uri
        # On a read-only file system nobody can change the file, and SQLite could not create
        # the WAL index it otherwise needs to read.
        immutable = "&immutable=1" if self._read_only_why == "read-only file system" else ""
        return f"{uri}?mode=ro{immutable}"

    def _readable(self, db: sqlite3.Connection, busy_timeout: float) -> sqlite3.Connection:
        """A read-only WAL file whose directory we may not write either: SQLite cannot make
        the WAL index a reader needs, so the file is read as it is on disk (immutable: a
        snapshot, which is all a reader that may not write can rely on anyway)."""
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            db.close()
            return sqlite3.connect(
                f"file:{quote(str(self.path))}?mode=ro&immutable=1",
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        return db

    def _setup(self) -> None:
        with self._translate("open"):
            tables = {
                name
                for (name,) in self._db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).fetchall()
            }
            foreign = sorted(t for t in tables if not t.startswith(("dispatch_", "sqlite_")))
            if tables and "dispatch_schema" not in tables:
                shown = ", ".join(foreign[:5]) or ", ".join(sorted(tables)[:5])
                raise BadInput(
                    f"record store {self.location}: this SQLite database is not a dispatch "
                    f"record store (it holds the tables {shown}); dispatch left it untouched; "
                    "point DISPATCH_STORE at another file"
                )
            if self.read_only:
                self._check_read_only(tables)
                self._has_beats = "dispatch_supervisors" in tables
                return
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
                raise self._newer(row[0])
            self._db.execute("COMMIT")

    def _check_read_only(self, tables: set[str]) -> None:
        missing = [t for t in _TABLES if t not in tables]
        if missing:
            raise BadInput(
                f"record store {self.location} is read-only ({self._read_only_why}) and holds "
                "no record yet; point DISPATCH_STORE at a writable place"
            )
        row = self._db.execute("SELECT max(version) FROM dispatch_schema").fetchone()
        if row[0] is not None and row[0] > SCHEMA_VERSION:
            raise self._newer(row[0])

    def _newer(self, version: int) -> DecodeError:
        return DecodeError(
            f"record store {self.location} has schema version {version}, written by a "
            f"newer dispatch (this build knows up to {SCHEMA_VERSION}); upgrade dispatch",
            field="schema version",
            value=version,
        )

    # -- the driver's part of SQLStore ----------------------------------------------------

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        """Turn driver errors into dispatch's at the boundary."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            self._rollback()
            if "readonly" in str(exc):
                raise self._refuse_write(what) from exc
            if self._full(exc):
                where = f"record store {self.location}: {what} failed: {exc}"
                raise NoSpace(str(self.path.parent), where) from exc
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

    def _full(self, exc: sqlite3.Error) -> bool:
        """SQLite says ``database or disk is full``; or an I/O error (growing the WAL
        index of a full file system is one) while the file system has no room left."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code is None:
            return False
        if code & 0xFF == sqlite3.SQLITE_FULL:
            return True
        if code & 0xFF != sqlite3.SQLITE_IOERR:
            return False
        try:
            st = os.statvfs(self.path.parent)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < _ROOM

    def _refuse_write(self, what: str) -> BadInput:
        why = self._read_only_why or "the file or its file system is read-only"
        return BadInput(
            f"record store {self.location} is read-only ({why}): {what} refused; it can be "
            "listed and read, and writes need a writable copy (check the file's mode and the "
            "mount)"
        )

    def _rollback(self) -> None:
        if not self._closed and self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _check_open(self) -> None:
        if self._closed:
            raise BadInput(f"record store {self.location} is closed; open it again")

    def _transaction(self, what: str, body: Callable[[Any], _T]) -> _T:
        with self._lock, self._translate(what):
            self._check_open()
            if self.read_only:
                raise self._refuse_write(what)
            self._db.execute("BEGIN IMMEDIATE")
            result = body(self._db)
            self._db.execute("COMMIT")
            return result

    def _rows(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._translate(what):
            self._check_open()
            return self._db.execute(sql, tuple(params)).fetchall()

    def _lock_appends(self, conn: Any) -> None:
        """``BEGIN IMMEDIATE`` already holds the file's write lock."""

    def _insert(self, conn: Any, items: list[Prepared]) -> None:
        db: sqlite3.Connection = conn
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
        db.executemany(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            [(j, s, t, _stamp(a), b) for item in items for (j, s, t, a, b) in item.rows],
        )

    def _insert_alone(self, conn: Any, item: Prepared) -> RecordConflict | None:
        db: sqlite3.Connection = conn
        db.execute("SAVEPOINT job")
        refused: RecordConflict | None = None
        try:
            self._insert(db, [item])
        except sqlite3.IntegrityError as exc:
            db.execute("ROLLBACK TO job")
            refused = key_conflict(item.batch.job_id, self.location, exc)
        db.execute("RELEASE job")
        return refused

    def _write_leases(
        self, conn: Any, got: dict[str, Lease], current: dict[str, Lease]
    ) -> dict[str, Lease]:
        db: sqlite3.Connection = conn
        db.executemany(
            "INSERT INTO dispatch_leases (job_id, owner, token, expires_us) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (job_id) DO UPDATE SET owner = excluded.owner, "
            "token = excluded.token, expires_us = excluded.expires_us",
            [(g.job_id, g.owner, g.token, _micros(g.expires_at)) for g in got.values()],
        )
        return got

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
