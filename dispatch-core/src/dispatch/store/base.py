"""The record store contract (S-33, S-35, S-36), shared by every driver.

A store keeps, per job, an append-only list of events numbered 1, 2, … (the job's
*version* is the number of its last event). Writers use optimistic concurrency, as the
eventsourcing library's recorders do: an append names the version it read, and the
``(job_id, seq)`` key makes a second writer at the same version fail with a conflict
instead of overwriting. Everything a driver must agree on that is not SQL (validating a
batch, deciding a lease, decoding a row) lives here, so SQLite and PostgreSQL cannot drift.

Over 500 lines on purpose: the contract every store keeps (validation, leases, decoding)
is this one module, so that no driver can keep a different one.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self

from dispatch.model.enums import TERMINAL_STATES, State
from dispatch.model.errors import BadInput, DecodeError, RecordConflict, UnknownJob
from dispatch.model.events import (
    EVENT_TYPES,
    Event,
    JobCreated,
    OutcomeCommitted,
    encode_event,
)
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.codec import decode_body

#: How long a supervisor that stopped ticking stays in ``RecordStore.beats``.
BEATS_KEPT = timedelta(days=30)

#: The events that begin and end an attempt: what ``RecordStore.ending_events`` reads.
ENDING_TYPES: tuple[str, ...] = (
    "submission-requested",
    "submission-failed",
    "recovery-started",
    "hold-placed",
    "outcome-committed",
)

#: Filters ``RecordStore.jobs`` accepts besides None (every job).
JOB_FILTERS: tuple[str, ...] = ("active", *sorted(s.value for s in TERMINAL_STATES))


@dataclass(frozen=True)
class Lease:
    """The right to act on one job until ``expires_at`` (S-35).

    ``token`` is a fencing token: it grows every time the lease changes hands, so an append
    carrying an older token (from a supervisor that stalled past its lease) is refused even
    if that supervisor does not know yet that it lost the job.
    """

    job_id: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True)
class Batch:
    """One job's part of ``append_many``: what ``append`` takes, as a value."""

    job_id: str
    expected_version: int
    events: Sequence[Event]
    lease: Lease | None = None


@dataclass(frozen=True)
class Quarantined:
    """A job whose record holds a row this build cannot decode (S-48).

    Readers that go over many jobs (the feed, ``jobs``) set such a job aside and go on with
    the others; commands about that job alone fail naming it. ``seq`` is None when the fault
    is in the job's summary row rather than in one of its events.
    """

    job_id: str
    seq: int | None
    field: str
    message: str


@dataclass(frozen=True)
class Feed:
    """``read_feed``'s answer: the good events in append order, the position to pass next
    time, and the jobs set aside. No event of a quarantined job is in ``events``."""

    events: list[Event]
    position: int
    quarantined: list[Quarantined]


@dataclass(frozen=True)
class JobSummary:
    """One line of ``dispatch list``: enough to find a job without folding its record."""

    job_id: str
    name: str
    backend: str
    created_at: datetime
    outcome: State | None
    version: int
    #: Set when the job's row does not decode (S-48): the job is listed, named as
    #: quarantined, and ``outcome`` is None; every other job is listed as usual.
    quarantined: Quarantined | None = None
    #: The database role that created the job, where the store has roles (PostgreSQL's
    #: access control, docs/record.md); None in SQLite, whose file has one owner.
    owner: str | None = None


class VersionConflict(RecordConflict):
    """The record moved on since the writer read it (S-33): read again and decide again."""

    def __init__(self, job_id: str, expected: int, actual: int) -> None:
        self.job_id = job_id
        self.expected = expected
        self.actual = actual
        if actual == 0:
            where = "has no record yet"
        else:
            where = f"is at version {actual}"
        super().__init__(
            f"job {job_id!r}: append expected version {expected} but the record {where}; "
            "another writer got there first; read the record again and decide again"
        )


class LeaseConflict(RecordConflict):
    """The writer's lease is no longer the store's lease for the job (S-35 fencing)."""

    def __init__(self, job_id: str, lease: Lease, held: tuple[str, int] | None) -> None:
        self.job_id = job_id
        self.lease = lease
        self.held = held
        if held is None:
            now = "the store holds no lease for it"
        elif not held[0]:
            now = f"the lease was released (token {held[1]})"
        else:
            now = f"the store's lease is owner {held[0]!r} token {held[1]}"
        super().__init__(
            f"job {job_id!r}: append under lease of owner {lease.owner!r} token {lease.token} "
            f"refused: {now}; this supervisor must not act on the job any more"
        )


def key_conflict(job_id: str | None, location: str, exc: BaseException | str) -> RecordConflict:
    """The ``(job_id, seq)`` key refused a row the version check let through: the store's
    version of a job disagrees with its events, so the writer must read again."""
    who = f"job {job_id!r}: " if job_id else ""
    return RecordConflict(
        f"{who}record store {location}: append refused by the (job_id, seq) key ({exc}); "
        "another writer or a damaged record holds that sequence number; read the record again"
    )


@dataclass
class Prepared:
    """A validated batch, flattened into what drivers write."""

    batch: Batch
    rows: list[tuple[str, int, str, datetime, str]]
    created: JobCreated | None
    outcome: State | None
    version: int = field(init=False)

    def __post_init__(self) -> None:
        self.version = self.batch.expected_version + len(self.batch.events)


def prepare(batches: Iterable[Batch]) -> list[Prepared]:
    """Check every batch before touching the store, so bad input changes nothing (S-36).

    Raises BadInput naming the job, the event's position in the batch and what is wrong.
    """

    prepared: list[Prepared] = []
    seen: set[str] = set()
    for batch in batches:
        if not isinstance(batch, Batch):
            raise BadInput(f"append_many takes Batch values, got {type(batch).__name__}")
        job_id = batch.job_id
        where = f"append to job {job_id!r}"
        check_job_ids([job_id], "append")
        if job_id in seen:
            raise BadInput(f"{where}: the job appears twice in one append_many call; merge them")
        seen.add(job_id)
        expected = batch.expected_version
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise BadInput(f"{where}: expected_version must be an int >= 0, got {expected!r}")
        events = list(batch.events)
        if not events:
            raise BadInput(f"{where}: no events given; an append adds at least one event")
        if batch.lease is not None and batch.lease.job_id != job_id:
            raise BadInput(f"{where}: the lease given is for job {batch.lease.job_id!r}")
        rows: list[tuple[str, int, str, datetime, str]] = []
        created: JobCreated | None = None
        outcome: State | None = None
        for index, event in enumerate(events, start=1):
            at = f"{where}: event {index} of {len(events)}"
            kind = getattr(event, "type", None)
            if kind not in EVENT_TYPES or not hasattr(event, "model_dump_json"):
                raise BadInput(f"{at} is not a dispatch event: {type(event).__name__}")
            if event.job_id != job_id:
                raise BadInput(f"{at} ({kind}) belongs to job {event.job_id!r}")
            want = expected + index
            if event.seq != want:
                raise BadInput(
                    f"{at} ({kind}) has seq {event.seq}, expected {want}: events must continue "
                    f"the record at expected_version+1, +2, … without gaps"
                )
            if want == 1 and not isinstance(event, JobCreated):
                raise BadInput(
                    f"{at} ({kind}) starts a new record; the first event must be job-created"
                )
            if want > 1 and isinstance(event, JobCreated):
                raise BadInput(
                    f"{at} is job-created at seq {want}; a job is created once, at seq 1"
                )
            if isinstance(event, JobCreated):
                for name, text in (("name", event.name), ("backend", event.backend)):
                    if "\x00" in text:
                        raise BadInput(f"{at} (job-created): {name} {text!r} holds a NUL character")
                created = event
            if isinstance(event, OutcomeCommitted):
                outcome = State(event.state)
            rows.append((job_id, event.seq, kind, event.at, encode_event(event)))
        prepared.append(Prepared(batch=batch, rows=rows, created=created, outcome=outcome))
    return prepared


def check(item: Prepared, version: int, held: tuple[str, int] | None) -> RecordConflict | None:
    """The conflict an append meets, given the job's version and lease read in its transaction."""

    batch = item.batch
    if batch.expected_version != version:
        return VersionConflict(batch.job_id, batch.expected_version, version)
    if batch.lease is not None and held != (batch.lease.owner, batch.lease.token):
        return LeaseConflict(batch.job_id, batch.lease, held)
    return None


def check_lease_request(
    job_ids: Iterable[str], owner: str, ttl: timedelta, now: datetime
) -> list[str]:
    """Validate ``acquire_leases`` arguments; return the job ids sorted (a fixed lock order)."""

    if not isinstance(owner, str) or not owner:
        raise BadInput(f"lease owner must be a non-empty string, got {owner!r}")
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise BadInput(f"lease ttl must be a positive timedelta, got {ttl!r}")
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise BadInput(f"lease time 'now' must be a timezone-aware datetime, got {now!r}")
    return check_job_ids(job_ids, "acquire_leases")


def check_job_ids(job_ids: Iterable[str], what: str) -> list[str]:
    if isinstance(job_ids, str):
        raise BadInput(f"{what} takes a list of job ids, got the string {job_ids!r}")
    ids = sorted(set(job_ids))
    for job_id in ids:
        if not isinstance(job_id, str) or not job_id or "\x00" in job_id:
            raise BadInput(
                f"{what}: job id must be a non-empty string without NUL characters, got {job_id!r}"
            )
    return ids


def decide_lease(
    job_id: str, current: Lease | None, owner: str, ttl: timedelta, now: datetime
) -> Lease | None:
    """The lease ``owner`` gets for ``job_id`` at ``now``, or None if another owner holds it.

    - nobody ever held it: token 1;
    - the same owner holds it and it has not expired: renewed, same token;
    - it expired or was released: taken over with the next token, so any append still
      carrying the old token is refused (even from the same owner name: a supervisor that
      stalled past its lease may have been replaced by a namesake);
    - another owner holds it and it has not expired: not taken.
    """

    expires = (now + ttl).astimezone(UTC)
    if current is None:
        return Lease(job_id, owner, 1, expires)
    live = current.expires_at > now and bool(current.owner)
    if live and current.owner == owner:
        return Lease(job_id, owner, current.token, expires)
    if not live:
        return Lease(job_id, owner, current.token + 1, expires)
    return None


def check_filter(state: str | State | None) -> str | None:
    if state is None:
        return None
    value = state.value if isinstance(state, State) else state
    if value not in JOB_FILTERS:
        raise BadInput(
            f"unknown job filter {value!r}; use one of: {', '.join(JOB_FILTERS)} (or none for all)"
        )
    return value


def check_cause(cause: str | None) -> str | None:
    """A cause kind's value (``jobs``' ``cause`` filter), or BadInput naming the choices."""
    if cause is None:
        return None
    from dispatch.model.enums import CauseKind

    try:
        return CauseKind(cause).value
    except ValueError:
        kinds = ", ".join(k.value for k in CauseKind)
        raise BadInput(f"unknown cause {cause!r}; use one of: {kinds}") from None


def check_limit(limit: int | None, what: str) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadInput(f"{what}: limit must be a positive int or None, got {limit!r}")
    return limit


def check_position(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"{what} must be an int >= 0, got {value!r}")
    return value


class UndecodableRow(DecodeError):
    """One stored row of one job does not decode (S-6, S-48): names the job and seq."""

    def __init__(
        self, message: str, *, job_id: str, seq: int | None, field: str = "", value: Any = None
    ) -> None:
        self.job_id = job_id
        self.seq = seq
        super().__init__(message, field=field, value=value)

    def quarantined(self) -> Quarantined:
        return Quarantined(job_id=self.job_id, seq=self.seq, field=self.field, message=str(self))


_NOTHING_CHANGED = (
    "the row was written by a newer dispatch or damaged; upgrade dispatch to read it, or "
    "repair the row (nothing was changed; other jobs are unaffected)"
)


def decode_row(job_id: str, seq: int, body: str | bytes) -> Event:
    """Decode one stored event, naming the job and sequence number when it does not (S-6, S-36).

    A row from a newer build (an unknown event type, enum name or field) is refused, never
    guessed at; the caller has changed nothing when this raises ``UndecodableRow``.
    """

    if type(body) is str:  # every row a store wrote: the fast path, no error handling built
        try:
            event = decode_body(body)  # decode_event's value and errors, faster
        except (DecodeError, ValueError, TypeError, RecursionError) as exc:
            raise _undecodable(job_id, seq, body, exc) from exc
        if event.job_id == job_id and event.seq == seq:
            return event
        raise _misplaced(job_id, seq, event)
    where = f"record of job {job_id!r}, event seq {seq}"
    if not isinstance(body, str | bytes):
        raise UndecodableRow(
            f"{where}: field 'body' holds a {type(body).__name__}, not JSON text; "
            + _NOTHING_CHANGED,
            job_id=job_id,
            seq=seq,
            field="body",
            value=body,
        )
    try:
        event = decode_body(body)
    except (DecodeError, ValueError, TypeError, RecursionError) as exc:
        raise _undecodable(job_id, seq, body, exc) from exc
    if event.job_id != job_id or event.seq != seq:
        raise _misplaced(job_id, seq, event)
    return event


def _undecodable(job_id: str, seq: int, body: str | bytes, exc: Exception) -> UndecodableRow:
    where = f"record of job {job_id!r}, event seq {seq}"
    kind = _stored_type(body)
    if kind is not None and kind not in EVENT_TYPES:
        return UndecodableRow(
            f"{where}: field 'type' = {kind!r} is not an event type this build knows; "
            + _NOTHING_CHANGED,
            job_id=job_id,
            seq=seq,
            field="type",
            value=kind,
        )
    field_name = exc.field if isinstance(exc, DecodeError) else ""
    if field_name in ("", "<root>"):
        field_name = "body"  # the document as a whole: not JSON, or not an object
    value = exc.value if isinstance(exc, DecodeError) else None
    if isinstance(body, bytes) and not _utf8(body):
        field_name, value, exc_text = "body", None, "the body is not UTF-8 text"
    else:
        exc_text = str(exc)
    return UndecodableRow(
        f"{where}: {exc_text}; " + _NOTHING_CHANGED,
        job_id=job_id,
        seq=seq,
        field=field_name,
        value=value,
    )


def _misplaced(job_id: str, seq: int, event: Event) -> UndecodableRow:
    return UndecodableRow(
        f"record of job {job_id!r}, event seq {seq}: the stored event says job "
        f"{event.job_id!r} seq {event.seq}; "
        "the row is damaged (nothing was changed; other jobs are unaffected)",
        job_id=job_id,
        seq=seq,
        field="job_id" if event.job_id != job_id else "seq",
        value=event.job_id if event.job_id != job_id else event.seq,
    )


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _stored_type(body: str | bytes) -> str | None:
    """The ``type`` a row claims, when it is JSON at all: the event decoder reports an unknown
    type against the whole document, and a person needs the name itself."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    kind = data.get("type") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def summary_outcome(value: str | None, job_id: str) -> State | None:
    if value is None:
        return None
    try:
        return State(value)
    except (ValueError, TypeError):
        raise UndecodableRow(
            f"job {job_id!r}: stored outcome {value!r} in the jobs table is not a state this "
            "build knows; " + _NOTHING_CHANGED,
            job_id=job_id,
            seq=None,
            field="outcome",
            value=value,
        ) from None


class RecordStore(abc.ABC):
    """Where records live. One instance holds one connection; threads may share it (calls
    are serialised by a lock), and each process opens its own.

    Every method either does all it was asked or nothing. Driver errors never leak: a store
    that cannot be reached raises ``Unreachable`` (retry later, S-5), a stale writer
    ``RecordConflict`` (S-33), bad arguments ``BadInput`` and an unreadable row
    ``DecodeError`` (S-36).
    """

    #: Where the records are, for messages; never includes a password.
    location: str = ""

    def role(self) -> str | None:
        """The database role this store acts as, where the store has roles (PostgreSQL's
        ``current_user``); None for a store of one user (SQLite). Recorded beside the real
        uid of whoever appends a person's request (``dispatch.model.events.Identity``)."""
        return None

    def clock_offset(self, now: datetime) -> timedelta:
        """How far the record's own clock is ahead of ``now``: zero for a record of one
        machine (SQLite), the database server's clock otherwise (PostgreSQL), so processes
        on hosts whose clocks disagree can time leases by one clock
        (:class:`dispatch.job_records.RecordClock`)."""
        return timedelta(0)

    def job_owners(self, job_ids: Iterable[str]) -> dict[str, str]:
        """The database role that created each of ``job_ids`` (set by the database, not by
        what the role wrote), where the store has roles; jobs it does not know (or cannot
        see) are left out. Empty for a store of one user. A supervisor runs a local job only
        for the role that created it (:mod:`dispatch.core.submitters`)."""
        return {}

    def append(
        self,
        job_id: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        lease: Lease | None = None,
    ) -> int:
        """Append ``events`` (seq expected_version+1, +2, …) atomically; return the new version.

        ``expected_version`` is the version the caller folded; 0 creates the job (the first
        event must be job-created). A stale version raises ``VersionConflict``; with
        ``lease``, a lease the store no longer holds for this owner and token raises
        ``LeaseConflict`` (both are ``RecordConflict``), checked in the same transaction.
        """

        result = self.append_many([Batch(job_id, expected_version, events, lease)])[job_id]
        if isinstance(result, RecordConflict):
            raise result
        return result

    @abc.abstractmethod
    def append_many(self, batches: Iterable[Batch]) -> dict[str, int | RecordConflict]:
        """Append several jobs' batches in one transaction, the supervisor's once-per-tick write.

        Each job is atomic on its own: a job whose version or lease is stale gets its
        ``RecordConflict`` in the result and nothing of its batch is written, while the others
        are. Bad input in any batch raises ``BadInput`` before anything is written.
        """

    @abc.abstractmethod
    def read(self, job_id: str, after: int = 0) -> list[Event]:
        """The job's events with seq > ``after``, in order. ``UnknownJob`` if it has no record."""

    @abc.abstractmethod
    def read_many(self, job_ids: Iterable[str]) -> dict[str, list[Event]]:
        """Several jobs' whole records in one query; ``UnknownJob`` names any with no record."""

    @abc.abstractmethod
    def read_since(self, position: int, limit: int | None = None) -> tuple[list[Event], int]:
        """Events appended after ``position`` (0: from the start), in append order, and the
        position to pass next time.

        Lets a supervisor keep its folded jobs in memory and read only what is new, including
        what other writers appended. Positions only grow, and an event is never shown after
        one appended later (a reader never skips an event by moving past it).
        """

    @abc.abstractmethod
    def read_feed(
        self, position: int = 0, limit: int | None = None, *, job_ids: Iterable[str] | None = None
    ) -> Feed:
        """``read_since`` that one bad row cannot stop (S-48): a row that does not decode puts
        its job in ``Feed.quarantined`` and leaves every event of that job out of this page,
        while the other jobs' events are returned as usual.

        ``job_ids`` reads only those jobs, through the ``(job_id, seq)`` index, so a command
        about one job never decodes the others: its cost does not grow with the record. The
        store keeps no state: a reader that saw a job quarantined ignores that job's later
        events itself.
        """

    def last_seqs(self, position: int) -> dict[str, int] | None:
        """Each job's last sequence number among the events at or before feed ``position``
        (one query): what a supervisor's snapshot of its folded jobs is checked against.
        None where the store cannot say, or when its feed has not reached ``position``."""
        return None

    @abc.abstractmethod
    def active_jobs(self, backend: str | None = None) -> list[str]:
        """Jobs without an outcome-committed event, oldest first: what a supervisor watches."""

    @abc.abstractmethod
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
        """Summaries for ``dispatch list``, newest first, in one query.

        ``state`` is None (all), ``"active"`` (no committed outcome) or a terminal state
        (``"succeeded"``, ``"failed"``, ``"cancelled"``); the live state of an active job comes
        from projecting it, not from here. ``backend``: only that backend's jobs.
        ``cause`` (a cause kind): an ended job whose outcome has that cause, or a job not
        ended with an event naming it (a superset of the jobs whose live cause it is: the
        caller folds them to know). ``before``: only jobs listed after that job (a page
        that goes on where the last one ended); ``offset``: skip that many first.
        """

    @abc.abstractmethod
    def count_jobs(self) -> dict[str | None, int]:
        """How many jobs have each outcome (None: not ended), counted by the store in one
        query; an outcome this build does not know is counted under its stored text."""

    @abc.abstractmethod
    def ending_events(self, since: datetime) -> Feed:
        """The events that begin and end attempts (:data:`ENDING_TYPES`) of every job with
        an ending (all but a request) at or after ``since``, in append order, in one query:
        what a summary of recent endings needs, without the other jobs or the jobs' other
        events. A row that does not decode quarantines its job, as ``read_feed`` does."""

    @abc.abstractmethod
    def acquire_leases(
        self, job_ids: Iterable[str], owner: str, ttl: timedelta, now: datetime
    ) -> dict[str, Lease]:
        """Acquire or renew leases for ``owner``; return only those it now holds (S-35).

        Time is passed in (the store never reads a clock), so every supervisor must use a
        clock close to the others'; ``ttl`` should leave room for that skew.
        """

    @abc.abstractmethod
    def release_leases(self, job_ids: Iterable[str], owner: str) -> None:
        """Give up ``owner``'s leases so another supervisor may take the jobs at once.

        The token is kept, so the next holder gets a higher one and an append still carrying
        the released lease is refused.
        """

    @abc.abstractmethod
    def lease_owners(self, job_ids: Iterable[str], now: datetime) -> dict[str, str]:
        """The owner of each job's lease that is live at ``now``; jobs whose lease expired,
        was released or was never taken are left out. One query, for ``status``."""

    @abc.abstractmethod
    def record_beat(self, beat: SupervisorBeat) -> None:
        """Keep ``beat`` as its supervisor's last tick (one row per owner, replaced), and
        forget supervisors that have not ticked for ``BEATS_KEPT``. One small transaction:
        a supervisor writes it once per tick."""

    @abc.abstractmethod
    def beats(self) -> list[SupervisorBeat]:
        """The supervisors that ticked on this record (within ``BEATS_KEPT``), the most
        recent tick first."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


def unknown_job(job_ids: Sequence[str], location: str) -> UnknownJob:
    """The UnknownJob error, with advice on where to look."""

    shown = ", ".join(repr(j) for j in job_ids[:5])
    more = f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else ""
    plural = "s" if len(job_ids) > 1 else ""
    return UnknownJob(
        f"no record for job id{plural} {shown}{more} in the record store at {location}; "
        "check the id with `dispatch list`, or point DISPATCH_STORE at the store that "
        "holds the job"
    )


def in_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)
