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
- A connection lost mid-call (the server restarted, ``pg_terminate_backend``, a network
  cut) is reconnected, waiting up to ``reconnect_window`` seconds for the server to come
  back. A read or a lease/beat transaction is run again. An append is never run again
  blind: its commit may have reached the server with the answer lost, so the rows are
  read back first (the bodies are compared byte for byte); only an append that is not
  there is tried again. Nothing is appended twice and nothing acknowledged is lost.

psycopg is imported here only, when a PostgreSQL store is opened (``dispatch-core[postgres]``).

Over 500 lines on purpose: the schema with its row-level policies, its upgrades and the
reconnect rules are one thing a reader checks together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.model.errors import (
    BadInput,
    DecodeError,
    DispatchError,
    NotAllowed,
    RecordConflict,
    Unreachable,
)
from dispatch.store.base import Lease, Prepared, VersionConflict, key_conflict
from dispatch.store.redact import redact_text, secrets_in
from dispatch.store.sql import Dialect, SQLStore

if TYPE_CHECKING:
    import psycopg

#: Bumped when the tables change; a database written by a newer build is refused.
#: 2: row-level security (owner_role, role, the policies below).
#: 3: ``dispatch_supervisors``, the supervisors' beats.
#: 4: ``dispatch_deliveries`` and ``dispatch_delivery_sinks``: notifications delivered
#: once per (sink, job, seq) by whichever supervisor claims them (``dispatch.notify``).
SCHEMA_VERSION = 4

#: Members of this role act on every job (supervisors); others on their own (docs/record.md).
OPERATOR_ROLE = "dispatch_operator"

_OPERATOR = (
    "EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = 'dispatch_operator' "
    "AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'))"
)


def _owns(table: str) -> str:
    """The row's job is visible to the current role (``dispatch_jobs`` applies its policy)."""
    return f"EXISTS (SELECT 1 FROM dispatch_jobs j WHERE j.job_id = {table}.job_id)"


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
    # -- 2: access control (S-51, docs/record.md): the database role is the identity. A job
    # is its creator's; each event names the role that appended it; rows are visible and
    # writable only to their job's owner and to members of dispatch_operator. Forced, so
    # the tables' owner is bound too; events have no UPDATE or DELETE policy: append-only.
    "ALTER TABLE dispatch_jobs ADD COLUMN IF NOT EXISTS owner_role text NOT NULL "
    "DEFAULT current_user",
    "ALTER TABLE dispatch_events ADD COLUMN IF NOT EXISTS role text NOT NULL DEFAULT current_user",
    "ALTER TABLE dispatch_jobs ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_jobs FORCE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_events ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_events FORCE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_leases ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_leases FORCE ROW LEVEL SECURITY",
    "DROP POLICY IF EXISTS dispatch_owner ON dispatch_jobs",
    f"CREATE POLICY dispatch_owner ON dispatch_jobs "
    f"USING (owner_role = current_user OR {_OPERATOR}) "
    f"WITH CHECK (owner_role = current_user OR {_OPERATOR})",
    "DROP POLICY IF EXISTS dispatch_read ON dispatch_events",
    f"CREATE POLICY dispatch_read ON dispatch_events FOR SELECT "
    f"USING ({_OPERATOR} OR {_owns('dispatch_events')})",
    "DROP POLICY IF EXISTS dispatch_append ON dispatch_events",
    f"CREATE POLICY dispatch_append ON dispatch_events FOR INSERT "
    f"WITH CHECK (role = current_user AND ({_OPERATOR} OR {_owns('dispatch_events')}))",
    # A lease may name a job with no record yet (the contract allows it), so a role may also
    # keep the lease rows it wrote itself.
    "ALTER TABLE dispatch_leases ADD COLUMN IF NOT EXISTS role text NOT NULL DEFAULT current_user",
    "DROP POLICY IF EXISTS dispatch_lease ON dispatch_leases",
    f"CREATE POLICY dispatch_lease ON dispatch_leases "
    f"USING ({_OPERATOR} OR role = current_user OR {_owns('dispatch_leases')}) "
    f"WITH CHECK ({_OPERATOR} OR role = current_user OR {_owns('dispatch_leases')})",
    # Who may use the record at all is the database's CONNECT privilege; the policies
    # decide which rows. UPDATE on events is for LOCK TABLE only: no policy lets a row change.
    "GRANT SELECT ON dispatch_schema TO PUBLIC",
    "GRANT SELECT, INSERT, UPDATE ON dispatch_events, dispatch_jobs, dispatch_leases TO PUBLIC",
    # -- 3: the supervisors' beats (``status`` says who watches a job). Every role may read
    # them; a role writes and forgets only its own supervisors' rows (operators any).
    """CREATE TABLE IF NOT EXISTS dispatch_supervisors (
        owner text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        started_at timestamptz NOT NULL,
        last_tick timestamptz NOT NULL,
        interval_s double precision NOT NULL,
        lease_s double precision NOT NULL,
        stopped_at timestamptz,
        role text NOT NULL DEFAULT current_user
    )""",
    "ALTER TABLE dispatch_supervisors ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_supervisors FORCE ROW LEVEL SECURITY",
    "DROP POLICY IF EXISTS dispatch_beat_read ON dispatch_supervisors",
    "CREATE POLICY dispatch_beat_read ON dispatch_supervisors FOR SELECT USING (true)",
    "DROP POLICY IF EXISTS dispatch_beat_write ON dispatch_supervisors",
    f"CREATE POLICY dispatch_beat_write ON dispatch_supervisors FOR ALL "
    f"USING (role = current_user OR {_OPERATOR}) "
    f"WITH CHECK (role = current_user OR {_OPERATOR})",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON dispatch_supervisors TO PUBLIC",
    # -- 4: notification deliveries, shared by every supervisor on the record. A sink's row
    # says from when its events are owed; a delivery's row who is sending it (a claim
    # until a time of the database's clock, so hosts' clocks do not matter), how often it
    # failed, and whether it was delivered or dropped. Rows follow their job's visibility.
    """CREATE TABLE IF NOT EXISTS dispatch_delivery_sinks (
        sink text PRIMARY KEY,
        since timestamptz NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS dispatch_deliveries (
        sink text NOT NULL,
        job_id text NOT NULL,
        seq integer NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        owner text,
        claimed_until timestamptz,
        attempts integer NOT NULL DEFAULT 0,
        next_at timestamptz,
        error text,
        finished_at timestamptz,
        role text NOT NULL DEFAULT current_user,
        PRIMARY KEY (sink, job_id, seq)
    )""",
    "ALTER TABLE dispatch_deliveries ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE dispatch_deliveries FORCE ROW LEVEL SECURITY",
    "DROP POLICY IF EXISTS dispatch_delivery ON dispatch_deliveries",
    f"CREATE POLICY dispatch_delivery ON dispatch_deliveries "
    f"USING ({_OPERATOR} OR {_owns('dispatch_deliveries')}) "
    f"WITH CHECK ({_OPERATOR} OR {_owns('dispatch_deliveries')})",
    "GRANT SELECT, INSERT ON dispatch_delivery_sinks TO PUBLIC",
    "GRANT SELECT, INSERT, UPDATE ON dispatch_deliveries TO PUBLIC",
)

#: How often a transaction that PostgreSQL aborted to break a deadlock is tried again.
_RETRIES = 5

#: Seconds a store waits for its server to answer again after a connection was lost
#: mid-call (a fast restart takes a few), before it gives up with ``Unreachable``.
RECONNECT_WINDOW = 15.0

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def _describe(dsn: str) -> str:
    """Where the store is, for messages: the DSN with every password form masked."""
    safe = redact_text(dsn, secrets_in(dsn))
    return safe if "://" in dsn else f"PostgreSQL {safe}"


def _privilege_error() -> type[Exception]:
    import psycopg

    return psycopg.errors.InsufficientPrivilege


class _Deadlock(Unreachable):
    """PostgreSQL aborted the transaction to break a deadlock: safe to run it again."""


class _Lost(Unreachable):
    """The connection broke during the call: whatever was sent may or may not have been
    committed (a COMMIT whose answer never came)."""


DIALECT = Dialect(
    placeholder="%s",
    any_of=lambda column: f"{column} = ANY(?)",
    ids=list,
    no_limit=None,
    to_time=lambda value: value,
    from_time=lambda value: value if isinstance(value, datetime) else _not_a_time(value),
    expiry_column="expires_at",
    to_expiry=lambda value: value,
    from_expiry=lambda value: value,
    for_share=" FOR SHARE",
    for_update=" FOR UPDATE",
    owner_column="owner_role",
    database_now="clock_timestamp()",
)


def _not_a_time(value: Any) -> datetime:
    raise TypeError(f"not a time: {value!r}")


class PostgresStore(SQLStore):
    """A record store in a PostgreSQL database (or in ``schema`` of it, created if missing)."""

    dialect = DIALECT

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        connect_timeout: int = 10,
        application_name: str = "dispatch",
        reconnect_window: float = RECONNECT_WINDOW,
    ) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise BadInput(
                "a postgresql:// record store needs psycopg; install it with "
                "pip install 'dispatch-core[postgres]'"
            ) from exc
        self._dsn = dsn
        self._secrets = secrets_in(dsn)
        self._schema = schema
        self._connect_timeout = connect_timeout
        self._application_name = application_name
        self._reconnect_window = reconnect_window
        self.location = _describe(dsn) + (f" (schema {schema})" if schema else "")
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._role: str | None = None
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
        except psycopg.ProgrammingError as exc:
            raise BadInput(
                f"record store {self.location}: the PostgreSQL URL does not parse: "
                f"{self._safe(exc)}; accepted form: postgresql://user:password@host:port/database"
            ) from None
        except psycopg.Error as exc:
            raise Unreachable(
                f"cannot reach the record store {self.location}: {self._safe(exc)}"
            ) from None
        try:
            if self._schema is not None:
                from psycopg import sql

                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema)))
        except psycopg.Error as exc:
            conn.close()
            raise Unreachable(f"record store {self.location}: {self._safe(exc)}") from None
        self._conn = conn
        return conn

    def role(self) -> str | None:
        """``current_user``, asked once per store (a connection's role never changes)."""
        if self._role is None:
            rows = self._rows("reading the role", "SELECT current_user")
            self._role = str(rows[0][0])
        return self._role

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        """Create or upgrade the tables, unless they are current (then nothing is changed:
        a role that does not own them, or may not create tables, can still use them)."""
        from psycopg import sql

        version = self._version(conn)
        if version == SCHEMA_VERSION:
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('dispatch.store.schema'))")
        version = self._version(conn)
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise DecodeError(
                f"record store {self.location} has schema version {version}, written by a "
                f"newer dispatch (this build knows up to {SCHEMA_VERSION}); upgrade dispatch",
                field="schema version",
                value=version,
            )
        try:
            if self._schema is not None:
                name = sql.Identifier(self._schema)
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
                conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(name))
            for statement in _SCHEMA:
                conn.execute(statement)
        except _privilege_error() as exc:
            held = "no record yet" if version is None else f"schema version {version}"
            raise NotAllowed(
                f"record store {self.location} holds {held}, and this role may not create or "
                f"upgrade its tables ({self._safe(exc)}); the role that owns them (or a "
                "database owner) must open it once with this dispatch"
            ) from None
        if version is None:
            conn.execute("INSERT INTO dispatch_schema VALUES (%s)", (SCHEMA_VERSION,))
        else:
            conn.execute("UPDATE dispatch_schema SET version = %s", (SCHEMA_VERSION,))

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        row = conn.execute("SELECT to_regclass('dispatch_schema') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return None
        found = conn.execute("SELECT max(version) FROM dispatch_schema").fetchone()
        return int(found[0]) if found and found[0] is not None else None

    def _safe(self, exc: BaseException | str) -> str:
        """A driver's message with the DSN's password masked, whatever form it took."""
        return redact_text(str(exc), self._secrets).strip()

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        """Driver errors become dispatch's, their words scrubbed of the password; the
        driver's exception is not chained (a logged traceback would print its text)."""
        import psycopg

        try:
            yield
        except psycopg.errors.TransactionRollback as exc:
            raise _Deadlock(
                f"record store {self.location}: {what} failed: {self._safe(exc)}"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            conn = self._conn
            lost = conn is None or conn.closed or conn.broken
            raise (_Lost if lost else Unreachable)(
                f"record store {self.location}: {what} failed: {self._safe(exc)}"
            ) from None
        except psycopg.errors.UniqueViolation as exc:
            raise key_conflict(None, self.location, self._safe(exc)) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise NotAllowed(
                f"record store {self.location}: {what} refused: {self._safe(exc)}"
            ) from None
        except psycopg.DataError as exc:
            raise BadInput(
                f"record store {self.location}: {what} refused: {self._safe(exc)}"
            ) from None
        except psycopg.Error as exc:
            raise DispatchError(
                f"record store {self.location}: {what} failed in the database: {self._safe(exc)}"
            ) from None

    def _connected(self, deadline: float | None) -> psycopg.Connection[Any]:
        """The connection; after a loss (``deadline`` set), wait for the server to answer
        again until ``deadline``, with a growing pause between tries."""
        pause = 0.1
        while True:
            try:
                return self._connect()
            except Unreachable:
                if deadline is None or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _after_loss(self, deadline: float | None, lost: _Lost) -> float:
        """The deadline for reconnecting, set at the first loss; raise once it has passed."""
        if deadline is None:
            log.warning("%s; reconnecting", lost)
            return time.monotonic() + self._reconnect_window
        if time.monotonic() > deadline:
            raise lost
        return deadline

    def _transaction(self, what: str, body: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Run ``body`` in one transaction; retry when PostgreSQL broke a deadlock, and on
        a new connection when the connection was lost. An append's transaction is never
        run again here: :meth:`_append_prepared` reads it back first."""

        with self._lock:
            deadline: float | None = None
            deadlocks = 0
            while True:
                conn = self._connected(deadline)
                try:
                    with self._translate(what), conn.transaction():
                        return body(conn)
                except _Deadlock:
                    deadlocks += 1
                    if deadlocks < _RETRIES:
                        continue
                    raise
                except _Lost as lost:
                    if what == "append":
                        raise
                    deadline = self._after_loss(deadline, lost)

    def _rows(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            deadline: float | None = None
            while True:
                conn = self._connected(deadline)
                try:
                    with self._translate(what):
                        return conn.execute(sql, tuple(params)).fetchall()
                except _Lost as lost:  # a read is safe to ask again
                    deadline = self._after_loss(deadline, lost)

    def _append_prepared(self, items: list[Prepared]) -> dict[str, int | RecordConflict]:
        """Append; when the connection is lost on the way, read the rows back on a new
        connection before anything is sent again (see the module docstring)."""
        with self._lock:
            deadline: float | None = None
            while True:
                try:
                    if deadline is None:
                        return super()._append_prepared(items)
                    known = self._read_back(items, deadline)
                    if known is not None:
                        return known
                    return super()._append_prepared(items)
                except _Lost as lost:
                    try:
                        deadline = self._after_loss(deadline, lost)
                    except _Lost:
                        ids = ", ".join(i.batch.job_id for i in items)
                        raise Unreachable(
                            f"{lost}; the server did not answer again within "
                            f"{self._reconnect_window:g} s, so whether the append to {ids} "
                            "was committed is not known yet: the record says once it answers"
                        ) from None

    def _read_back(
        self, items: list[Prepared], deadline: float
    ) -> dict[str, int | RecordConflict] | None:
        """After a lost connection: the append's result if it was committed (its rows are
        there, byte for byte), None if it was not (nothing of it is there)."""
        conn = self._connected(deadline)
        found: dict[str, bool] = {}
        with self._translate("reading back an append"):
            for item in items:
                first, last = item.rows[0][1], item.rows[-1][1]
                there = conn.execute(
                    "SELECT seq, body FROM dispatch_events WHERE job_id = %s "
                    "AND seq BETWEEN %s AND %s ORDER BY seq",
                    (item.batch.job_id, first, last),
                ).fetchall()
                found[item.batch.job_id] = [tuple(r) for r in there] == [
                    (row[1], row[4]) for row in item.rows
                ]
            if not any(found.values()):
                log.warning("an append lost in transit was not committed; appending it again")
                return None
            log.warning("an append lost in transit was committed; not appending it again")
            result: dict[str, int | RecordConflict] = {}
            for item in items:
                job_id = item.batch.job_id
                if found[job_id]:
                    result[job_id] = item.version
                    continue
                row = conn.execute(
                    "SELECT version FROM dispatch_jobs WHERE job_id = %s", (job_id,)
                ).fetchone()
                actual = int(row[0]) if row else 0
                result[job_id] = VersionConflict(job_id, item.batch.expected_version, actual)
            return result

    def _lock_appends(self, conn: Any) -> None:
        conn.execute("LOCK TABLE dispatch_events IN EXCLUSIVE MODE")

    def _insert(self, conn: Any, items: list[Prepared]) -> None:
        _insert(conn, items)

    def _insert_alone(self, conn: Any, item: Prepared) -> RecordConflict | None:
        import psycopg

        try:
            with conn.transaction():
                _insert(conn, [item])
        except psycopg.errors.UniqueViolation as exc:
            return key_conflict(item.batch.job_id, self.location, self._safe(exc))
        return None

    def _write_leases(
        self, conn: Any, got: dict[str, Lease], current: dict[str, Lease]
    ) -> dict[str, Lease]:
        fresh = [lease for job_id, lease in got.items() if job_id not in current]
        held = [lease for job_id, lease in got.items() if job_id in current]
        if held:
            conn.execute(
                "UPDATE dispatch_leases SET owner = u.owner, token = u.token, role = current_user, "
                "expires_at = u.expires_at FROM unnest(%s::text[], %s::text[], %s::bigint[], "
                "%s::timestamptz[]) AS u(job_id, owner, token, expires_at) "
                "WHERE dispatch_leases.job_id = u.job_id",
                _lease_columns(held),
            )
        if fresh:
            # Two supervisors may both find no lease row; the first insert wins.
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

    # -- notification deliveries (schema 4): see dispatch.notify ---------------------------

    def delivery_since(self, sink: str, born: datetime) -> datetime:
        """When ``sink``'s notifications start being owed: the first notifier's ``born``,
        the same for every supervisor on the record."""

        def body(conn: psycopg.Connection[Any]) -> datetime:
            conn.execute(
                "INSERT INTO dispatch_delivery_sinks (sink, since) VALUES (%s, %s) "
                "ON CONFLICT (sink) DO NOTHING",
                (sink, born),
            )
            row = conn.execute(
                "SELECT since FROM dispatch_delivery_sinks WHERE sink = %s", (sink,)
            ).fetchone()
            assert row is not None
            return row[0]  # type: ignore[no-any-return]

        return self._transaction("reading the notification start", body)

    def claim_delivery(
        self, sink: str, job_id: str, seq: int, owner: str, hold: float
    ) -> tuple[str, int, float]:
        """Claim the delivery of (``sink``, ``job_id``, ``seq``) for ``hold`` seconds.

        Returns ``(verdict, attempts, wait)``: ``mine`` (send it now; ``attempts`` failed
        before), ``done`` (delivered or dropped, by anyone), or ``busy`` (another
        supervisor holds a claim, or a retry is not due: look again in ``wait`` s).
        Times are the database's, so clocks that disagree between hosts do not matter.
        """

        def body(conn: psycopg.Connection[Any]) -> tuple[str, int, float]:
            conn.execute(
                "INSERT INTO dispatch_deliveries (sink, job_id, seq) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (sink, job_id, seq),
            )
            row = conn.execute(
                "SELECT state, owner, attempts, "
                "extract(epoch FROM claimed_until - clock_timestamp()), "
                "extract(epoch FROM next_at - clock_timestamp()) "
                "FROM dispatch_deliveries WHERE sink = %s AND job_id = %s AND seq = %s "
                "FOR UPDATE",
                (sink, job_id, seq),
            ).fetchone()
            if row is None:  # not visible to this role: not its job's to deliver
                return "done", 0, 0.0
            state, holder, attempts, claimed, due = row
            if state != "pending":
                return "done", int(attempts), 0.0
            if claimed is not None and float(claimed) > 0 and holder != owner:
                return "busy", int(attempts), float(claimed)
            if due is not None and float(due) > 0:
                return "busy", int(attempts), float(due)
            conn.execute(
                "UPDATE dispatch_deliveries SET owner = %s, "
                "claimed_until = clock_timestamp() + make_interval(secs => %s) "
                "WHERE sink = %s AND job_id = %s AND seq = %s",
                (owner, hold, sink, job_id, seq),
            )
            return "mine", int(attempts), 0.0

        return self._transaction("claiming a notification", body)

    def finish_delivery(
        self,
        sink: str,
        job_id: str,
        seq: int,
        owner: str,
        *,
        outcome: str,
        retry_in: float = 0.0,
        error: str | None = None,
    ) -> bool:
        """Record how a claimed delivery went: ``delivered``, ``dropped``, or ``failed``
        (released, to be tried again ``retry_in`` s from now by any supervisor). False
        when the claim was no longer ``owner``'s (it expired and another took it)."""
        if outcome == "failed":
            sql = (
                "UPDATE dispatch_deliveries SET attempts = attempts + 1, owner = NULL, "
                "claimed_until = NULL, error = %s, "
                "next_at = clock_timestamp() + make_interval(secs => %s) "
                "WHERE sink = %s AND job_id = %s AND seq = %s AND owner = %s "
                "AND state = 'pending' RETURNING 1"
            )
            params: tuple[Any, ...] = (error, retry_in, sink, job_id, seq, owner)
        else:
            sql = (
                "UPDATE dispatch_deliveries SET state = %s, error = %s, claimed_until = NULL, "
                "finished_at = clock_timestamp() "
                "WHERE sink = %s AND job_id = %s AND seq = %s AND owner = %s "
                "AND state = 'pending' RETURNING 1"
            )
            params = (outcome, error, sink, job_id, seq, owner)
        rows = self._transaction(
            "recording a notification", lambda conn: conn.execute(sql, params).fetchall()
        )
        return bool(rows)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _insert(conn: psycopg.Connection[Any], items: list[Prepared]) -> None:
    created = [i for i in items if i.created is not None]
    if created:
        conn.execute(
            "INSERT INTO dispatch_jobs "
            "(job_id, name, backend, created_at, version, outcome) "
            "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::timestamptz[], "
            "%b::int[], %b::text[])",
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
    # Events after their job's row: row-level security checks an event against its job.
    # (INSERT, not COPY: PostgreSQL refuses COPY FROM into a table with row-level security;
    # the arrays go in binary, which spares quoting every JSON body.)
    rows = [row for item in items for row in item.rows]
    conn.execute(
        "INSERT INTO dispatch_events (job_id, seq, type, at, body) "
        "SELECT * FROM unnest(%b::text[], %b::int[], %b::text[], %b::timestamptz[], %b::text[])",
        tuple([row[column] for row in rows] for column in range(5)),
    )


def _lease_columns(leases: list[Lease]) -> tuple[list[Any], ...]:
    return (
        [lease.job_id for lease in leases],
        [lease.owner for lease in leases],
        [lease.token for lease in leases],
        [lease.expires_at for lease in leases],
    )
