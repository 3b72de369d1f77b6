"""What every SQL record store shares: its queries, and how their rows become results.

SQLite and PostgreSQL differ in how a list of ids is passed, how times and lease expiries
are stored and how rows are locked: a ``Dialect`` says that. They also differ in how they
connect, run a transaction, translate driver errors and insert a batch fast: each driver's
subclass implements those few methods. Every read, the append's checks and the lease rules
are therefore written once, so the two stores cannot drift.

Over 500 lines on purpose: it is every read, the append's checks and the lease rules,
written once for both SQL stores.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from dispatch.model.enums import State
from dispatch.model.errors import BadInput, DecodeError, RecordConflict
from dispatch.model.events import Event
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.base import (
    BEATS_KEPT,
    ENDING_TYPES,
    Batch,
    Feed,
    JobSummary,
    Lease,
    Prepared,
    Quarantined,
    RecordStore,
    UndecodableRow,
    check,
    check_cause,
    check_filter,
    check_job_ids,
    check_lease_request,
    check_limit,
    check_position,
    decide_lease,
    decode_row,
    in_utc,
    prepare,
    summary_outcome,
    unknown_job,
)

_T = TypeVar("_T")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Dialect:
    """How one SQL database spells what the shared queries need.

    Queries are written with ``?`` placeholders; ``placeholder`` replaces them.
    """

    placeholder: str
    #: ``column`` is one of a list of ids passed as one parameter (``ids`` turns the list
    #: into that parameter).
    any_of: Callable[[str], str]
    ids: Callable[[Sequence[str]], Any]
    #: The LIMIT value meaning "no limit".
    no_limit: Any
    #: How job creation times are stored and read back.
    to_time: Callable[[datetime], Any]
    from_time: Callable[[Any], datetime]
    #: The lease table's expiry column and how an expiry is stored and read back.
    expiry_column: str
    to_expiry: Callable[[datetime], Any]
    from_expiry: Callable[[Any], datetime]
    #: Row locks a transaction takes on the leases it reads (empty where the whole database
    #: is locked by the write transaction anyway).
    for_share: str
    for_update: str
    #: The jobs table's column naming the job's owning role, or ``NULL`` where there is none.
    owner_column: str = "NULL"
    #: The database's own clock, where hosts with clocks of their own share the record
    #: (``clock_offset``); empty where the record is one machine's.
    database_now: str = ""

    def sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)


class SQLStore(RecordStore):
    """A record store in SQL tables ``dispatch_events``, ``dispatch_jobs``, ``dispatch_leases``
    and ``dispatch_supervisors`` (the supervisors' beats)."""

    dialect: Dialect
    #: False for a read-only record written before supervisors recorded their beats.
    _has_beats: bool = True

    # -- what each driver provides --------------------------------------------------------

    @abc.abstractmethod
    def _rows(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read query outside any write transaction; driver errors translated."""

    @abc.abstractmethod
    def _transaction(self, what: str, body: Callable[[Any], _T]) -> _T:
        """Run ``body(connection)`` in one write transaction; driver errors translated."""

    @abc.abstractmethod
    def _lock_appends(self, conn: Any) -> None:
        """Serialise appends, so the version check and the insert see the same record."""

    @abc.abstractmethod
    def _insert(self, conn: Any, items: list[Prepared]) -> None:
        """Write the prepared rows and the jobs table's summary rows."""

    @abc.abstractmethod
    def _insert_alone(self, conn: Any, item: Prepared) -> RecordConflict | None:
        """``_insert`` of one job under a savepoint: the key's refusal, or None."""

    @abc.abstractmethod
    def _write_leases(
        self, conn: Any, got: dict[str, Lease], current: dict[str, Lease]
    ) -> dict[str, Lease]:
        """Store the leases decided; return those really written (a racing writer may
        have created a lease row first)."""

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(conn.execute(self.dialect.sql(sql), tuple(params)).fetchall())

    def _query(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._rows(what, self.dialect.sql(sql), tuple(params))

    # -- appending ------------------------------------------------------------------------

    def append_many(self, batches: Iterable[Batch]) -> dict[str, int | RecordConflict]:
        items = prepare(batches)
        if not items:
            return {}
        return self._append_prepared(items)

    def _append_prepared(self, items: list[Prepared]) -> dict[str, int | RecordConflict]:
        """Append checked batches in one transaction (a driver whose commit can be lost in
        transit reads the rows back before it tries again: ``PostgresStore``)."""
        try:
            return self._transaction("append", lambda c: self._append(c, items, isolate=False))
        except RecordConflict:
            # The version check passed but the (job_id, seq) key refused a row: the jobs
            # table and the events disagree (a damaged record). Write each job under its own
            # savepoint so that job alone is refused and the others are kept.
            return self._transaction("append", lambda c: self._append(c, items, isolate=True))

    def _append(
        self, conn: Any, items: list[Prepared], *, isolate: bool
    ) -> dict[str, int | RecordConflict]:
        d = self.dialect
        self._lock_appends(conn)
        ids = [item.batch.job_id for item in items]
        versions: dict[str, int] = dict(
            self._exec(
                conn,
                f"SELECT job_id, version FROM dispatch_jobs WHERE {d.any_of('job_id')}",
                (d.ids(ids),),
            )
        )
        leased = sorted(i.batch.job_id for i in items if i.batch.lease is not None)
        leases: dict[str, tuple[str, int]] = {}
        if leased:
            for job_id, owner, token in self._exec(
                conn,
                f"SELECT job_id, owner, token FROM dispatch_leases WHERE {d.any_of('job_id')} "
                f"ORDER BY job_id{d.for_share}",
                (d.ids(leased),),
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
            if ok:
                self._insert(conn, ok)
            return result
        for item in ok:
            refused = self._insert_alone(conn, item)
            if refused is not None:
                result[item.batch.job_id] = refused
        return result

    # -- reading --------------------------------------------------------------------------

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
        d = self.dialect
        rows = self._query(
            "read",
            f"SELECT job_id, seq, body FROM dispatch_events WHERE {d.any_of('job_id')} "
            "ORDER BY job_id, seq",
            (d.ids(ids),),
        )
        found: dict[str, list[Event]] = {}
        for job_id, seq, body in rows:
            found.setdefault(job_id, []).append(decode_row(job_id, seq, body))
        missing = [j for j in ids if j not in found]
        if missing:
            raise unknown_job(missing, self.location)
        return found

    def _feed_rows(
        self, position: int, limit: int | None, job_ids: Iterable[str] | None
    ) -> list[tuple[Any, ...]]:
        d = self.dialect
        page = "" if limit is None else " LIMIT ?"
        more: tuple[Any, ...] = () if limit is None else (limit,)
        if job_ids is None:
            return self._query(
                "read",
                "SELECT position, job_id, seq, body FROM dispatch_events WHERE position > ? "
                f"ORDER BY position{page}",
                (position, *more),
            )
        ids = check_job_ids(job_ids, "read_feed")
        if not ids:
            return []
        # ``+position``: the position index must not be chosen over the job index, or a
        # one-job read would scan every event after ``position``. One job (every per-job
        # command) is an equality: PostgreSQL plans an array parameter several times slower.
        which, param = ("job_id = ?", ids[0]) if len(ids) == 1 else (d.any_of("job_id"), d.ids(ids))
        return self._query(
            "read",
            f"SELECT position, job_id, seq, body FROM dispatch_events WHERE {which} "
            f"AND +position > ? ORDER BY position{page}",
            (param, position, *more),
        )

    def read_since(self, position: int, limit: int | None = None) -> tuple[list[Event], int]:
        check_position(position, "read_since: position")
        check_limit(limit, "read_since")
        rows = self._feed_rows(position, limit, None)
        events = [decode_row(job_id, seq, body) for _, job_id, seq, body in rows]
        return events, (int(rows[-1][0]) if rows else position)

    def read_feed(
        self, position: int = 0, limit: int | None = None, *, job_ids: Iterable[str] | None = None
    ) -> Feed:
        check_position(position, "read_feed: position")
        check_limit(limit, "read_feed")
        rows = self._feed_rows(position, limit, job_ids)
        try:  # every row good, nearly always: one pass without the bookkeeping below
            return Feed(
                events=[decode_row(job_id, seq, body) for _, job_id, seq, body in rows],
                position=int(rows[-1][0]) if rows else position,
                quarantined=[],
            )
        except UndecodableRow:
            pass  # decode again row by row, setting the bad rows' jobs aside (no side effects)
        events: list[Event] = []
        bad: dict[str, Quarantined] = {}
        for _, job_id, seq, body in rows:
            if job_id in bad:
                continue
            try:
                events.append(decode_row(job_id, seq, body))
            except UndecodableRow as exc:
                bad[job_id] = exc.quarantined()
        if bad:
            events = [e for e in events if e.job_id not in bad]
        return Feed(
            events=events,
            position=int(rows[-1][0]) if rows else position,
            quarantined=list(bad.values()),
        )

    def active_jobs(self, backend: str | None = None) -> list[str]:
        sql = "SELECT job_id FROM dispatch_jobs WHERE outcome IS NULL"
        params: tuple[Any, ...] = ()
        if backend is not None:
            sql += " AND backend = ?"
            params = (backend,)
        rows = self._query("list", sql + " ORDER BY created_at, job_id", params)
        return [job_id for (job_id,) in rows]

    def jobs(
        self,
        state: str | State | None = None,
        limit: int | None = None,
        *,
        backend: str | None = None,
        cause: str | None = None,
        before: str | None = None,
        offset: int = 0,
    ) -> list[JobSummary]:
        wanted = check_filter(state)
        check_limit(limit, "jobs")
        check_position(offset, "jobs: offset")
        kind = check_cause(cause)
        sql = (
            "SELECT job_id, name, backend, created_at, outcome, version, "
            f"{self.dialect.owner_column} FROM dispatch_jobs j WHERE TRUE"
        )
        params: list[Any] = []
        if wanted == "active":
            sql += " AND outcome IS NULL"
        elif wanted is not None:
            sql += " AND outcome = ?"
            params.append(wanted)
        if backend is not None:
            sql += " AND backend = ?"
            params.append(backend)
        if before is not None:
            check_job_ids([before], "jobs: before")
            # the page goes on after that job, in the order below (its own row decides)
            sql += (
                " AND created_at <= (SELECT created_at FROM dispatch_jobs WHERE job_id = ?)"
                " AND (created_at, job_id) < "
                "(SELECT created_at, job_id FROM dispatch_jobs WHERE job_id = ?)"
            )
            params += [before, before]
        if kind is not None:
            # a cause as the event codec writes it: inside a JSON string a quote is
            # escaped, so text a user or a scheduler wrote cannot look like this. A scalar
            # subquery, not EXISTS: PostgreSQL would turn EXISTS into a join over every
            # event, where this looks at the jobs newest first until the page is full
            sql += (
                " AND (SELECT 1 FROM dispatch_events e WHERE e.job_id = j.job_id "
                "AND (j.outcome IS NULL OR e.type = 'outcome-committed') AND e.body LIKE ? "
                "LIMIT 1) IS NOT NULL"
            )
            params.append(f'%"cause":{{"kind":"{kind}"%')
        sql += " ORDER BY created_at DESC, job_id DESC"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [self.dialect.no_limit if limit is None else limit, offset]
        return [self._summary(row) for row in self._query("list", sql, params)]

    def count_jobs(self) -> dict[str | None, int]:
        rows = self._query(
            "count jobs", "SELECT outcome, COUNT(*) FROM dispatch_jobs GROUP BY outcome"
        )
        return {None if outcome is None else str(outcome): int(n) for outcome, n in rows}

    def ending_events(self, since: datetime) -> Feed:
        types = ", ".join(f"'{t}'" for t in ENDING_TYPES)
        ended = ", ".join(f"'{t}'" for t in ENDING_TYPES if t != "submission-requested")
        rows = self._query(
            "read recent endings",
            "SELECT position, job_id, seq, body FROM dispatch_events "
            f"WHERE type IN ({types}) AND job_id IN (SELECT job_id FROM dispatch_events "
            f"WHERE type IN ({ended}) AND at >= ?) ORDER BY position",
            (self.dialect.to_time(since),),
        )
        events: list[Event] = []
        bad: dict[str, Quarantined] = {}
        for _, job_id, seq, body in rows:
            if job_id in bad:
                continue
            try:
                events.append(decode_row(job_id, seq, body))
            except UndecodableRow as exc:
                bad[job_id] = exc.quarantined()
        return Feed(
            events=[e for e in events if e.job_id not in bad] if bad else events,
            position=int(rows[-1][0]) if rows else 0,
            quarantined=list(bad.values()),
        )

    def _summary(self, row: tuple[Any, ...]) -> JobSummary:
        """One jobs-table row; a row that does not decode is listed as quarantined (S-48)."""
        job_id, name, backend, created_at, outcome, version, owner = row
        job_id = str(job_id)
        try:
            when = in_utc(self.dialect.from_time(created_at))
        except (ValueError, TypeError, OverflowError):
            return _quarantined_summary(job_id, name, backend, "created_at", created_at, owner)
        if not isinstance(version, int) or isinstance(version, bool):
            return _quarantined_summary(job_id, name, backend, "version", version, owner, when)
        try:
            state = summary_outcome(outcome, job_id)
        except UndecodableRow as exc:
            return JobSummary(
                job_id=job_id,
                name=_text(name),
                backend=_text(backend),
                created_at=when,
                outcome=None,
                version=version,
                quarantined=exc.quarantined(),
                owner=owner,
            )
        return JobSummary(
            job_id=job_id,
            name=_text(name),
            backend=_text(backend),
            created_at=when,
            outcome=state,
            version=version,
            owner=owner,
        )

    # -- leases ---------------------------------------------------------------------------

    def acquire_leases(
        self, job_ids: Iterable[str], owner: str, ttl: Any, now: datetime
    ) -> dict[str, Lease]:
        ids = check_lease_request(job_ids, owner, ttl, now)
        if not ids:
            return {}
        d = self.dialect

        def body(conn: Any) -> dict[str, Lease]:
            current = {
                job_id: Lease(job_id, held_by, token, d.from_expiry(expires))
                for job_id, held_by, token, expires in self._exec(
                    conn,
                    f"SELECT job_id, owner, token, {d.expiry_column} FROM dispatch_leases "
                    f"WHERE {d.any_of('job_id')} ORDER BY job_id{d.for_update}",
                    (d.ids(ids),),
                )
            }
            got: dict[str, Lease] = {}
            for job_id in ids:
                lease = decide_lease(job_id, current.get(job_id), owner, ttl, now)
                if lease is not None:
                    got[job_id] = lease
            return self._write_leases(conn, got, current) if got else got

        return self._transaction("acquire leases", body)

    def clock_offset(self, now: datetime) -> timedelta:
        """How far the database's clock is ahead of ``now`` (zero where the dialect has no
        clock of its own: one machine's record)."""
        if not self.dialect.database_now:
            return timedelta(0)
        ((database_now,),) = self._query("read the clock", f"SELECT {self.dialect.database_now}")
        return _database_time(database_now) - now

    def release_leases(self, job_ids: Iterable[str], owner: str) -> None:
        ids = check_job_ids(job_ids, "release_leases")
        if not ids:
            return
        d = self.dialect

        def body(conn: Any) -> None:
            conn.execute(
                d.sql(
                    f"UPDATE dispatch_leases SET owner = '', {d.expiry_column} = ? "
                    f"WHERE owner = ? AND {d.any_of('job_id')}"
                ),
                (d.to_expiry(EPOCH), owner, d.ids(ids)),
            )

        self._transaction("release leases", body)

    def job_owners(self, job_ids: Iterable[str]) -> dict[str, str]:
        ids = check_job_ids(job_ids, "job_owners")
        d = self.dialect
        if not ids or d.owner_column == "NULL":
            return {}
        rows = self._query(
            "read job owners",
            f"SELECT job_id, {d.owner_column} FROM dispatch_jobs WHERE {d.any_of('job_id')}",
            (d.ids(ids),),
        )
        return {str(job_id): str(owner) for job_id, owner in rows if owner is not None}

    def last_seqs(self, position: int) -> dict[str, int] | None:
        check_position(position, "last_seqs: position")
        ((end,),) = self._query("read the feed's end", "SELECT MAX(position) FROM dispatch_events")
        if position > (end or 0):
            return None  # not a position of this record's feed
        rows = self._query(
            "read last sequence numbers",
            "SELECT job_id, MAX(seq) FROM dispatch_events WHERE position <= ? GROUP BY job_id",
            (position,),
        )
        return {str(job_id): int(seq) for job_id, seq in rows}

    def lease_owners(self, job_ids: Iterable[str], now: datetime) -> dict[str, str]:
        ids = check_job_ids(job_ids, "lease_owners")
        if not ids:
            return {}
        d = self.dialect
        rows = self._query(
            "read leases",
            f"SELECT job_id, owner, {d.expiry_column} FROM dispatch_leases "
            f"WHERE {d.any_of('job_id')}",
            (d.ids(ids),),
        )
        return {
            str(job_id): str(owner)
            for job_id, owner, expires in rows
            if owner and d.from_expiry(expires) > now
        }

    # -- supervisors' beats ---------------------------------------------------------------

    def record_beat(self, beat: SupervisorBeat) -> None:
        if not isinstance(beat, SupervisorBeat):
            raise BadInput(f"record_beat takes a SupervisorBeat, got {type(beat).__name__}")
        d = self.dialect
        t = d.to_time
        stopped = None if beat.stopped_at is None else t(beat.stopped_at)
        row = (
            *(beat.owner, beat.host, beat.pid, t(beat.started_at), t(beat.last_tick)),
            *(beat.interval, beat.lease, stopped),
        )

        def body(conn: Any) -> None:
            conn.execute(
                d.sql(
                    "INSERT INTO dispatch_supervisors (owner, host, pid, started_at, last_tick, "
                    "interval_s, lease_s, stopped_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
                    "started_at = excluded.started_at, last_tick = excluded.last_tick, "
                    "interval_s = excluded.interval_s, lease_s = excluded.lease_s, "
                    "stopped_at = excluded.stopped_at"
                ),
                row,
            )
            conn.execute(
                d.sql("DELETE FROM dispatch_supervisors WHERE last_tick < ?"),
                (t(beat.last_tick - BEATS_KEPT),),
            )

        self._transaction("record the supervisor's tick", body)

    def beats(self) -> list[SupervisorBeat]:
        if not self._has_beats:
            return []
        rows = self._query(
            "read the supervisors",
            "SELECT owner, host, pid, started_at, last_tick, interval_s, lease_s, stopped_at "
            "FROM dispatch_supervisors ORDER BY last_tick DESC",
        )
        found = []
        f = self.dialect.from_time
        for owner, host, pid, started, last, interval, lease, stopped in rows:
            try:
                found.append(
                    SupervisorBeat(
                        owner=owner,
                        host=host,
                        pid=pid,
                        started_at=in_utc(f(started)),
                        last_tick=in_utc(f(last)),
                        interval=interval,
                        lease=lease,
                        stopped_at=None if stopped is None else in_utc(f(stopped)),
                    )
                )
            except (DecodeError, ValueError, TypeError, OverflowError):
                continue  # a damaged beat says nothing about the jobs: left out
        return found


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _quarantined_summary(
    job_id: str,
    name: Any,
    backend: Any,
    field: str,
    value: Any,
    owner: str | None,
    when: datetime = EPOCH,
) -> JobSummary:
    error = DecodeError(
        f"job {job_id!r}: stored {field} {value!r} in the jobs table does not decode; the row "
        "is damaged (nothing was changed; other jobs are unaffected)",
        field=field,
        value=value,
    )
    return JobSummary(
        job_id=job_id,
        name=_text(name),
        backend=_text(backend),
        created_at=when,
        outcome=None,
        version=0,
        quarantined=Quarantined(job_id=job_id, seq=None, field=field, message=str(error)),
        owner=owner,
    )


def _database_time(value: Any) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise DecodeError(f"the database's clock said {value!r}, not a time with a zone")
    return value
