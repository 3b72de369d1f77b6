"""The shared record store: PostgreSQL, for several supervisors and readers on several hosts.

Same contract as SQLite (S-33, S-35). How it keeps it with writers on many hosts:

- Every append transaction first takes ``LOCK TABLE dispatch_events IN EXCLUSIVE MODE``
  (readers are not blocked). Appends are therefore serialised, which gives two things: the
  version check and the insert see the same record, so two supervisors never both append at
  one version (the ``(job_id, seq)`` primary key would refuse the second anyway); and
  positions become visible in the order they were handed out, so ``read_since`` never moves
  past an event that commits later with a smaller position (the gap an identity column alone
  leaves, which the eventsourcing library closes the same way).
- The lease rows an append is fenced by are read ``FOR SHARE`` in the append's transaction,
  so a takeover waits until the append has committed, and an append after the takeover
  sees the new token and is refused.
- Bodies are stored as text, byte for byte what ``encode_event`` wrote, and decoded by the
  same strict decoder as SQLite's.

psycopg is imported here only, when a PostgreSQL store is opened (``dispatch-core[postgres]``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.enums import State
from dispatch.errors import BadInput, DecodeError, DispatchError, RecordConflict, Unreachable
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

if TYPE_CHECKING:
    import psycopg

#: Bumped when the tables change; a database written by a newer build is refused.
SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dispatch_schema (version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS dispatch_events (
        position bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        job_id text NOT NULL,
        seq integer NOT NULL,
        type text NOT NULL,
        at timestamptz NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (job_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS dispatch_jobs (
        job_id text PRIMARY KEY,
        name text NOT NULL,
        backend text NOT NULL,
        created_at timestamptz NOT NULL,
        version integer NOT NULL,
        outcome text
    )""",
    "CREATE INDEX IF NOT EXISTS dispatch_jobs_active ON dispatch_jobs (backend, created_at) "
    "WHERE outcome IS NULL",
    "CREATE INDEX IF NOT EXISTS dispatch_jobs_created ON dispatch_jobs (created_at)",
    """CREATE TABLE IF NOT EXISTS dispatch_leases (
        job_id text PRIMARY KEY,
        owner text NOT NULL,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL
    )""",
)

#: How often a transaction that PostgreSQL aborted to break a deadlock is tried again.
_RETRIES = 5

_T = TypeVar("_T")


def _describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    from dispatch.store import redact

    return (
        redact(dsn)
        if "://" in dsn
        else "PostgreSQL "
        + " ".join(part for part in dsn.split() if not part.startswith("password="))
    )


class PostgresStore(RecordStore):
    """A record store in a PostgreSQL database (or in ``schema`` of it, created if missing)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        connect_timeout: int = 10,
        application_name: str = "dispatch",
    ) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise BadInput(
                "a postgresql:// record store needs psycopg; install it with "
                "pip install 'dispatch-core[postgres]'"
            ) from exc
        self._dsn = dsn
        self._schema = schema
        self._connect_timeout = connect_timeout
        self._application_name = application_name
        self.location = _describe(dsn) + (f" (schema {schema})" if schema else "")
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        with self._lock:
            self._transaction("open", self._setup)

    def _connect(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise BadInput(f"record store {self.location} is closed; open it again")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        import psycopg

        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name=self._application_name,
            )
        except psycopg.Error as exc:
            raise Unreachable(
                f"cannot reach the record store {self.location}: {exc}".rstrip()
            ) from exc
        try:
            if self._schema is not None:
                from psycopg import sql

                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema)))
        except psycopg.Error as exc:
            conn.close()
            raise Unreachable(f"record store {self.location}: {exc}") from exc
        self._conn = conn
        return conn

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        conn.execute("SELECT pg_advisory_xact_lock(hashtext('dispatch.store.schema'))")
        if self._schema is not None:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
            )
        for statement in _SCHEMA:
            conn.execute(statement)
        row = conn.execute("SELECT max(version) FROM dispatch_schema").fetchone()
        version = row[0] if row else None
        if version is None:
            conn.execute("INSERT INTO dispatch_schema VALUES (%s)", (SCHEMA_VERSION,))
        elif version > SCHEMA_VERSION:
            raise DecodeError(
                f"record store {self.location} has schema version {version}, written by a "
                f"newer dispatch (this build knows up to {SCHEMA_VERSION}); upgrade dispatch",
                field="schema version",
                value=version,
            )

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        import psycopg

        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise Unreachable(f"record store {self.location}: {what} failed: {exc}") from exc
        except psycopg.errors.UniqueViolation as exc:
            raise key_conflict(None, self.location, exc) from exc
        except (psycopg.errors.InsufficientPrivilege, psycopg.DataError) as exc:
            raise BadInput(f"record store {self.location}: {what} refused: {exc}") from exc
        except psycopg.Error as exc:
            raise DispatchError(
                f"record store {self.location}: {what} failed in the database: {exc}"
            ) from exc

    def _transaction(self, what: str, body: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Run ``body`` in one transaction; retry when PostgreSQL broke a deadlock."""
        import psycopg

        with self._lock:
            for attempt in range(_RETRIES):
                conn = self._connect()
                try:
                    with self._translate(what), conn.transaction():
                        return body(conn)
                except Unreachable as exc:
                    retry = isinstance(exc.__cause__, psycopg.errors.TransactionRollback)
                    if retry and attempt + 1 < _RETRIES:
                        continue
                    raise
            raise AssertionError("unreachable: the loop returns or raises")

    def _query(
        self, what: str, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._connect()
            with self._translate(what):
                return conn.execute(sql, params).fetchall()

    def append_many(self, batches: Iterable[Batch]) -> dict[str, int | RecordConflict]:
        items = prepare(batches)
        if not items:
            return {}
        try:
            return self._transaction("append", lambda c: self._append(c, items, isolate=False))
        except RecordConflict:
            # The version check passed but the (job_id, seq) key refused a row: the jobs table
            # and the events disagree. Write each job under its own savepoint so that job
            # alone is refused and the others are kept.
            return self._transaction("append", lambda c: self._append(c, items, isolate=True))

    def _append(
        self, conn: psycopg.Connection[Any], items: list[Prepared], *, isolate: bool
    ) -> dict[str, int | RecordConflict]:
        import psycopg

        conn.execute("LOCK TABLE dispatch_events IN EXCLUSIVE MODE")
        ids = [item.batch.job_id for item in items]
        versions = dict(
            conn.execute(
                "SELECT job_id, version FROM dispatch_jobs WHERE job_id = ANY(%s)", (ids,)
            ).fetchall()
        )
        leased = sorted(i.batch.job_id for i in items if i.batch.lease is not None)
        leases: dict[str, tuple[str, int]] = {}
        if leased:
            for job_id, owner, token in conn.execute(
                "SELECT job_id, owner, token FROM dispatch_leases WHERE job_id = ANY(%s) "
                "ORDER BY job_id FOR SHARE",
                (leased,),
            ):
                leases[job_id] = (owner, token)
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
            _insert(conn, ok)
            return result
        for item in ok:
            try:
                with conn.transaction():
                    _insert(conn, [item])
            except psycopg.errors.UniqueViolation as exc:
                result[item.batch.job_id] = key_conflict(item.batch.job_id, self.location, exc)
        return result

    def read(self, job_id: str, after: int = 0) -> list[Event]:
        check_job_ids([job_id], "read")
        check_position(after, "read: after")
        rows = self._query(
            "read",
            "SELECT seq, body FROM dispatch_events WHERE job_id = %s AND seq > %s ORDER BY seq",
            (job_id, after),
        )
        if not rows and not self._query(
            "read", "SELECT 1 FROM dispatch_events WHERE job_id = %s LIMIT 1", (job_id,)
        ):
            raise unknown_job([job_id], self.location)
        return [decode_row(job_id, seq, body) for seq, body in rows]

    def read_many(self, job_ids: Iterable[str]) -> dict[str, list[Event]]:
        ids = check_job_ids(job_ids, "read_many")
        rows = self._query(
            "read",
            "SELECT job_id, seq, body FROM dispatch_events WHERE job_id = ANY(%s) "
            "ORDER BY job_id, seq",
            (ids,),
        )
        return events_by_job(rows, ids, self.location)

    def read_since(self, position: int, limit: int | None = None) -> tuple[list[Event], int]:
        check_position(position, "read_since: position")
        check_limit(limit, "read_since")
        rows = self._query(
            "read",
            "SELECT position, job_id, seq, body FROM dispatch_events WHERE position > %s "
            "ORDER BY position LIMIT %s",
            (position, limit),
        )
        return feed(rows, position)

    def active_jobs(self, backend: str | None = None) -> list[str]:
        rows = self._query(
            "list",
            "SELECT job_id FROM dispatch_jobs WHERE outcome IS NULL "
            "AND (%s::text IS NULL OR backend = %s) ORDER BY created_at, job_id",
            (backend, backend),
        )
        return [job_id for (job_id,) in rows]

    def jobs(self, state: str | State | None = None, limit: int | None = None) -> list[JobSummary]:
        wanted = check_filter(state)
        check_limit(limit, "jobs")
        rows = self._query(
            "list",
            "SELECT job_id, name, backend, created_at, outcome, version FROM dispatch_jobs "
            "WHERE (%(s)s::text IS NULL) OR (%(s)s = 'active' AND outcome IS NULL) "
            "OR outcome = %(s)s ORDER BY created_at DESC, job_id DESC LIMIT %(n)s",
            {"s": wanted, "n": limit},
        )
        return summaries(rows)

    def acquire_leases(
        self, job_ids: Iterable[str], owner: str, ttl: timedelta, now: datetime
    ) -> dict[str, Lease]:
        ids = check_lease_request(job_ids, owner, ttl, now)
        if not ids:
            return {}

        def body(conn: psycopg.Connection[Any]) -> dict[str, Lease]:
            current = {
                job_id: Lease(job_id, held_by, token, expires)
                for job_id, held_by, token, expires in conn.execute(
                    "SELECT job_id, owner, token, expires_at FROM dispatch_leases "
                    "WHERE job_id = ANY(%s) ORDER BY job_id FOR UPDATE",
                    (ids,),
                )
            }
            decided = {
                job_id: decide_lease(job_id, current.get(job_id), owner, ttl, now) for job_id in ids
            }
            got = {job_id: lease for job_id, lease in decided.items() if lease is not None}
            fresh = [lease for job_id, lease in got.items() if job_id not in current]
            held = [lease for job_id, lease in got.items() if job_id in current]
            if held:
                conn.execute(
                    "UPDATE dispatch_leases SET owner = u.owner, token = u.token, "
                    "expires_at = u.expires_at FROM unnest(%s::text[], %s::text[], %s::bigint[], "
                    "%s::timestamptz[]) AS u(job_id, owner, token, expires_at) "
                    "WHERE dispatch_leases.job_id = u.job_id",
                    _lease_columns(held),
                )
            if fresh:
                inserted = {
                    job_id
                    for (job_id,) in conn.execute(
                        "INSERT INTO dispatch_leases (job_id, owner, token, expires_at) "
                        "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], "
                        "%s::timestamptz[]) ON CONFLICT (job_id) DO NOTHING RETURNING job_id",
                        _lease_columns(fresh),
                    ).fetchall()
                }
                for lease in fresh:
                    if lease.job_id not in inserted:
                        del got[lease.job_id]
            return got

        return self._transaction("acquire leases", body)

    def release_leases(self, job_ids: Iterable[str], owner: str) -> None:
        ids = check_job_ids(job_ids, "release_leases")
        if not ids:
            return

        def body(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "UPDATE dispatch_leases SET owner = '', expires_at = 'epoch' "
                "WHERE owner = %s AND job_id = ANY(%s)",
                (owner, ids),
            )

        self._transaction("release leases", body)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _insert(conn: psycopg.Connection[Any], items: list[Prepared]) -> None:
    with conn.cursor().copy(
        "COPY dispatch_events (job_id, seq, type, at, body) FROM STDIN"
    ) as copy:
        for item in items:
            for row in item.rows:
                copy.write_row(row)
    created = [i for i in items if i.created is not None]
    if created:
        conn.execute(
            "INSERT INTO dispatch_jobs "
            "(job_id, name, backend, created_at, version, outcome) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::timestamptz[], "
            "%s::int[], %s::text[])",
            (
                [i.batch.job_id for i in created],
                [i.created.name for i in created if i.created],
                [i.created.backend for i in created if i.created],
                [i.created.at for i in created if i.created],
                [i.version for i in created],
                [i.outcome.value if i.outcome else None for i in created],
            ),
        )
    updated = [i for i in items if i.created is None]
    if updated:
        conn.execute(
            "UPDATE dispatch_jobs SET version = u.version, "
            "outcome = coalesce(u.outcome, dispatch_jobs.outcome) "
            "FROM unnest(%s::text[], %s::int[], %s::text[]) AS u(job_id, version, outcome) "
            "WHERE dispatch_jobs.job_id = u.job_id",
            (
                [i.batch.job_id for i in updated],
                [i.version for i in updated],
                [i.outcome.value if i.outcome else None for i in updated],
            ),
        )


def _lease_columns(leases: list[Lease]) -> tuple[list[Any], ...]:
    return (
        [lease.job_id for lease in leases],
        [lease.owner for lease in leases],
        [lease.token for lease in leases],
        [lease.expires_at for lease in leases],
    )
