"""The rows of ``dispatch list``: each job's live state, cause, attempts and budget.

Bounded on a big record: only the jobs shown are read (``read_feed`` with ``job_ids``,
through the store's index), and the active ones among them are looked at with **one
discovery per backend** (the same call a supervisor's tick makes), never one per job. A
backend that cannot be asked leaves its jobs as the record has them, with a note; a job of
another user on a backend that runs commands as their submitter (S-51) is shown from its
record alone, as ``status`` shows it.

The state of an active job is what ``status`` computes (``project``: the record plus the
discovery), so ``list`` and ``status`` never disagree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from dispatch.model.enums import TERMINAL_STATES, CauseKind, State

if TYPE_CHECKING:
    from dispatch.backends import Registry
    from dispatch.core.job import Job
    from dispatch.core.status import Status
    from dispatch.model.discovery import Discovery
    from dispatch.model.supervision import Supervision
    from dispatch.store.base import JobSummary, RecordStore

#: The ``--state`` values: every state, and ``active`` (any state but a terminal one).
STATE_CHOICES = ("active", *(s.value for s in State))
#: Why a member of a sweep with --max-running waits unsubmitted.
SWEEP_SLOT = "waiting for a sweep slot"
#: Jobs read per page while a filter leaves rows out.
PAGE = 200


@dataclass(frozen=True)
class Listed:
    """One row of ``dispatch list``."""

    job_id: str
    name: str
    backend: str
    created_at: datetime
    #: the live state (an active job projected as ``status`` does), or ``quarantined``
    state: str
    #: the scheduler's id of the latest submission's object, if it has one
    object_id: str | None = None
    cause: str | None = None
    cause_detail: str | None = None
    #: submissions made so far, and the most the policy's budgets allow (None: unknown)
    attempt: int = 0
    attempts: int | None = None
    #: what the policy's budgets have left, summed over its rules (None: no budgeted rule)
    budget_left: int | None = None
    nodes: int | None = None
    #: Slurm's Reason (or another scheduler's words) while the latest object waits
    waiting: str | None = None
    settled: bool = True
    #: for the row of a sweep (``GroupRow.as_row``): "listed/size members"; else None
    members: str | None = None
    #: why the row shows less than the live state (the scheduler could not be asked...)
    note: str | None = None
    quarantined: str | None = None
    outcome: str | None = None
    version: int = 0
    #: whether a supervisor watches the job, as ``status`` says it; None once it ended
    supervisor: Supervision | None = None


@dataclass
class Listing:
    rows: list[Listed] = field(default_factory=list)
    #: backend -> why it could not be asked (its jobs are shown from the record)
    unreachable: dict[str, str] = field(default_factory=dict)
    #: whether more jobs matched than ``limit`` let through
    more: bool = False


def list_jobs(
    store: RecordStore,
    registry: Registry,
    *,
    state: str | None = None,
    cause: str | None = None,
    backend: str | None = None,
    limit: int | None = None,
    now: datetime | None = None,
    group: str | None = None,
    offset: int = 0,
    before: str | None = None,
) -> Listing:
    """The rows, newest first, that pass the filters (``state``: one of
    :data:`STATE_CHOICES`; ``cause``: a cause kind; ``backend``: a backend's name);
    with ``group``, only the members of that sweep, in member order. ``offset`` skips
    that many matching rows; ``before`` starts after that job (the last row of a page).
    Each job not ended says whether a supervisor watches it (:func:`supervised`).

    The store is asked for the rows a page shows, ``limit`` (plus one, to know whether
    more follow) at a time: the recorded state, the backend and the cause are filters of
    its query; only a live state (``running``...) and a cause among jobs not ended are
    checked here, on the jobs folded, asking the store for the next page while rows are
    left out."""
    from dispatch.job_records import utc_now

    now = now or utc_now()
    return supervised(
        store,
        _list(store, registry, state, cause, backend, limit, now, group, offset, before),
        now,
    )


def supervised(store: RecordStore, listing: Listing, now: datetime) -> Listing:
    """``listing`` with ``Listed.supervisor`` set on each row not ended, as ``status``
    sets it (:func:`dispatch.core.supervision.supervision`): the rows' live leases in one
    query and the supervisors' beats in another, whatever the number of rows."""
    from dataclasses import replace

    from dispatch.core.supervision import supervision

    open_ids = [r.job_id for r in listing.rows if r.outcome is None and r.quarantined is None]
    if not open_ids:
        return listing
    owners = store.lease_owners(open_ids, now)
    beats = store.beats()
    watched = set(open_ids)
    listing.rows = [
        replace(r, supervisor=supervision(owners.get(r.job_id), beats, now))
        if r.job_id in watched
        else r
        for r in listing.rows
    ]
    return listing


def _list(
    store: RecordStore,
    registry: Registry,
    state: str | None,
    cause: str | None,
    backend: str | None,
    limit: int | None,
    now: datetime,
    group: str | None,
    offset: int = 0,
    before: str | None = None,
) -> Listing:
    from dispatch.sweep import group_of, index_of

    live = state is not None and state not in ("active", *(s.value for s in TERMINAL_STATES))
    recorded = "active" if live else state
    kind = CauseKind(cause) if cause is not None else None
    listing = Listing()
    if group is not None:
        summaries = sorted(
            (s for s in store.jobs(state=recorded) if group_of(s.job_id) == group),
            key=lambda s: index_of(s.job_id),
        )
        return _filtered(store, registry, _pages(summaries, backend, PAGE), state, kind, limit, now)
    # the store's answer is the rows themselves unless a live state or cause must be
    # checked on the folded jobs; then ask for pages until the rows are found
    exact = not live and kind is None
    size = PAGE if limit is None else limit + 1
    skip = 0 if exact else offset
    cursor = before
    seen = 0
    while True:
        page = store.jobs(
            state=recorded,
            backend=backend,
            cause=None if kind is None else kind.value,
            before=cursor,
            offset=offset if exact and cursor == before else 0,
            limit=size if limit is not None or not exact else None,
        )
        start = 0
        while start < len(page):
            if limit is not None and len(listing.rows) >= limit:
                listing.more = True  # jobs are left that may match: not read
                return listing
            # fold no more jobs than the rows still wanted (a page at a time without a limit)
            step = PAGE if limit is None else max(limit - len(listing.rows), 1)
            for row in _rows(store, registry, page[start : start + step], now, listing):
                if (live and row.state != state) or (kind is not None and row.cause != kind.value):
                    continue
                seen += 1
                if seen > skip:
                    listing.rows.append(row)
            start += step
        if (exact and limit is None) or len(page) < size:
            return listing
        cursor = page[-1].job_id


def _filtered(
    store: RecordStore,
    registry: Registry,
    pages: Iterator[list[JobSummary]],
    state: str | None,
    kind: CauseKind | None,
    limit: int | None,
    now: datetime,
) -> Listing:
    """The rows of a sweep's members, page by page, that pass the live filters."""
    live = state is not None and state not in ("active", *(s.value for s in TERMINAL_STATES))
    listing = Listing()
    for page in pages:
        for row in _rows(store, registry, page, now, listing):
            if live and row.state != state:
                continue
            if kind is not None and row.cause != kind.value:
                continue
            if limit is not None and len(listing.rows) >= limit:
                listing.more = True
                return listing
            listing.rows.append(row)
    return listing


def _pages(
    summaries: list[JobSummary], backend: str | None, size: int
) -> Iterator[list[JobSummary]]:
    chosen = [s for s in summaries if backend is None or s.backend == backend]
    for start in range(0, len(chosen), max(size, 1)):
        yield chosen[start : start + max(size, 1)]


def _rows(
    store: RecordStore,
    registry: Registry,
    page: Sequence[JobSummary],
    now: datetime,
    listing: Listing,
) -> list[Listed]:
    """The rows of one page: its jobs folded from their own events, the active ones
    projected over one discovery per backend."""
    from dispatch.core.folding import fold
    from dispatch.model.errors import DispatchError

    events: dict[str, list[object]] = {}
    bad: dict[str, str] = {}
    ids = [s.job_id for s in page if s.quarantined is None]
    position = 0
    while ids:
        feed = store.read_feed(position, 20_000, job_ids=ids)
        for event in feed.events:
            events.setdefault(event.job_id, []).append(event)
        for q in feed.quarantined:
            bad[q.job_id] = str(getattr(q, "message", q))
        if feed.position == position:
            break
        position = feed.position
    jobs: dict[str, Job] = {}
    for s in page:
        if s.job_id in bad or s.job_id not in events:
            continue
        try:
            jobs[s.job_id] = fold(events[s.job_id])  # type: ignore[arg-type]
        except DispatchError as exc:
            bad[s.job_id] = str(exc)
    discoveries = _discover(registry, [j for j in jobs.values() if j.outcome is None], listing)
    rows = []
    for s in page:
        quarantined = s.quarantined
        why = bad.get(s.job_id) or (
            None if quarantined is None else str(getattr(quarantined, "message", quarantined))
        )
        job = jobs.get(s.job_id)
        if why is not None or job is None:
            rows.append(
                Listed(
                    job_id=s.job_id,
                    name=s.name,
                    backend=s.backend,
                    created_at=s.created_at,
                    state="quarantined",
                    quarantined=why or "no events",
                    version=s.version,
                )
            )
            continue
        rows.append(_row(s, job, discoveries.get(job.backend), now, listing))
    return rows


def _discover(registry: Registry, active: list[Job], listing: Listing) -> dict[str, Discovery]:
    """One discovery per backend for the active jobs that are this process's to look at."""
    from dispatch.core.submitters import refusal

    wanted: dict[str, list[str]] = {}
    for job in active:
        try:
            caller = registry.get(job.backend).declarations.runs_as_caller
        except Exception as exc:  # not installed, or broken: the record alone
            listing.unreachable.setdefault(job.backend, str(exc))
            continue
        if refusal(job, uid=os.getuid(), runs_as_caller=caller) is None:
            wanted.setdefault(job.backend, []).append(job.job_id)
    found: dict[str, Discovery] = {}
    for name, job_ids in wanted.items():
        try:
            found[name] = registry.get(name).discover(job_ids)
        except Exception as exc:  # one backend's failure never hides the others (S-50)
            listing.unreachable[name] = str(exc).splitlines()[0] if str(exc) else repr(exc)
    return found


def _row(
    summary: JobSummary,
    job: Job,
    discovery: Discovery | None,
    now: datetime,
    listing: Listing,
) -> Listed:
    from dispatch.core.projection import project
    from dispatch.model.discovery import Discovery

    note = None
    if job.outcome is None and discovery is None:
        reason = listing.unreachable.get(job.backend)
        note = (
            f"record only: {job.backend} could not be asked"
            if reason is not None
            else "record only: another user's job on a backend that runs as its submitter"
        )
        # nothing seen: the record's own words, never a guess at what the scheduler holds
        status = project(job, Discovery(backend=job.backend, at=now), now)
        state = (
            State.HELD.value
            if job.hold is not None
            else State.PENDING.value
            if job.current is None or job.current.object_id is None
            else "active"
        )
    else:
        status = project(job, discovery or Discovery(backend=job.backend, at=now), now)
        state = status.state.value
    cause = status.cause if job.outcome is None and discovery is not None else None
    if job.outcome is not None:
        cause = job.outcome.cause
    current = job.current
    budgets = status.budgets
    left = sum(max(v, 0) for v in budgets.values()) if budgets else None
    made = len(job.submissions)
    return Listed(
        job_id=job.job_id,
        name=job.name,
        backend=job.backend,
        created_at=job.created_at,
        state=state,
        object_id=current.object_id if current is not None else None,
        cause=cause.kind.value if cause is not None else None,
        cause_detail=cause.detail if cause is not None else None,
        attempt=made,
        attempts=max(made, 1) + (left or 0) if job.outcome is None else made,
        budget_left=left,
        nodes=job.spec.resources.nodes,
        waiting=waiting_for(status) if discovery is not None else None,
        settled=status.settled,
        note=note,
        outcome=job.outcome.state.value if job.outcome is not None else None,
        version=summary.version,
    )


@dataclass(frozen=True)
class GroupRow:
    """One sweep in ``dispatch list``: its members among the rows read, counted by state."""

    group_id: str
    name: str
    backend: str
    created_at: datetime
    #: members of the group (its size) and how many of them the listing read
    size: int
    listed: int
    #: state -> members in it, among those listed
    states: dict[str, int]
    #: the members' job ids listed, in member order
    members: tuple[str, ...]
    #: whether a supervisor watches its members not ended (the first such member's)
    supervisor: Supervision | None = None

    def as_row(self) -> Listed:
        """The group as a table row: its state cell the counts."""
        return Listed(
            job_id=self.group_id,
            name=self.name,
            backend=self.backend,
            created_at=self.created_at,
            state=self.counts(),
            members=f"{self.listed}/{self.size} members"
            if self.listed < self.size
            else f"{self.size} members",
            supervisor=self.supervisor,
        )

    def counts(self) -> str:
        """``2 running, 1 pending, 5 succeeded``: the states in their usual order."""
        order = {s.value: i for i, s in enumerate(State)}
        ranked = sorted(self.states.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))
        return ", ".join(f"{n} {state}" for state, n in ranked)


def grouped(rows: Sequence[Listed], sizes: dict[str, int]) -> list[Listed | GroupRow]:
    """The rows with the members of each sweep replaced by one row for the group, where
    its newest member was; ``sizes`` is each group's size, when known."""
    from dispatch.sweep import group_of, index_of

    members: dict[str, list[Listed]] = {}
    for row in rows:
        group = group_of(row.job_id)
        if group is not None:
            members.setdefault(group, []).append(row)
    out: list[Listed | GroupRow] = []
    seen: set[str] = set()
    for row in rows:
        group = group_of(row.job_id)
        if group is None:
            out.append(row)
            continue
        if group in seen:
            continue
        seen.add(group)
        listed = sorted(members[group], key=lambda r: index_of(r.job_id))
        states: dict[str, int] = {}
        for member in listed:
            states[member.state] = states.get(member.state, 0) + 1
        out.append(
            GroupRow(
                group_id=group,
                name=listed[0].name,
                backend=listed[0].backend,
                created_at=listed[0].created_at,
                size=sizes.get(group, len(listed)),
                listed=len(listed),
                states=states,
                members=tuple(r.job_id for r in listed),
                supervisor=next((r.supervisor for r in listed if r.supervisor), None),
            )
        )
    return out


def waiting_for(status: Status) -> str | None:
    """Why a pending job waits, in the scheduler's words: the latest object's pending
    reason, else its cause, else its state word; None unless the job is pending."""
    if status.state is not State.PENDING:
        return None
    if not status.submissions:
        if status.group is not None and status.group.max_running is not None:
            return SWEEP_SLOT
        return "not submitted yet"
    latest = status.submissions[-1]
    alive = [o for o in latest.objects if o.alive]
    if not alive:
        return None if latest.object_id else "not submitted yet"
    obj = alive[-1]
    if obj.pending_reason:
        return obj.pending_reason
    if obj.cause is not None and obj.cause.detail:
        return obj.cause.detail
    return obj.scheduler_state or None


__all__ = [
    "STATE_CHOICES",
    "GroupRow",
    "Listed",
    "Listing",
    "grouped",
    "list_jobs",
    "supervised",
    "waiting_for",
]
