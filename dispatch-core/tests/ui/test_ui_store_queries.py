"""The web view asks the record store for what it shows, on SQLite and PostgreSQL alike:
the list's filters (recorded state, backend, cause) and its pages (``after``: the page
after a job) are parts of one query; the summary counts jobs by state in the store and
reads only the events that begin and end attempts of jobs with an ending in the last
week. A page reads the jobs it shows, however many others the record holds."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from html import unescape
from typing import Any

import pytest
from core_bench import T0
from dispatch import CauseKind, Client, JobSpec, Provenance, RecoveryPolicy, State
from dispatch.core.cause import Cause
from dispatch.core.policy import Plan
from dispatch.model.errors import BadInput
from dispatch.model.events import (
    Event,
    HoldPlaced,
    JobCreated,
    OutcomeCommitted,
    SubmissionCreated,
    SubmissionFailed,
    SubmissionRequested,
)
from dispatch.store.base import Batch, RecordStore
from dispatch.ui import views
from dispatch.ui.server import UI
from ui.test_ui_pages import Counting, ids_in
from ui.ui_record import Record

MINUTE = timedelta(minutes=1)
#: the jobs of the small record: j000 oldest ... j029 newest, a minute apart
JOBS = 30


def _cause(kind: CauseKind, at: datetime, nodes: tuple[str, ...] = ()) -> Cause:
    return Cause(kind=kind, provenance=Provenance.SCHEDULER, detail=kind.value, at=at, nodes=nodes)


class Builder:
    """Records jobs straight into a store (their events as a supervisor writes them)."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.plan = Plan.bind(
            RecoveryPolicy(), Record(store).registry.get("simulated").declarations
        )
        self.batches: list[Batch] = []

    def job(self, n: int, at: datetime, *steps: str, backend: str = "simulated") -> str:
        """Job ``j{n:03d}`` created at ``at``; each step one minute after the last:
        ``run`` (submission asked for and made), ``fail:KIND`` (the submission failed),
        ``hold`` (held for a person after an ending), ``end:STATE:KIND`` (the outcome)."""
        job_id = f"j{n:03d}"
        spec = JobSpec(name=f"train-{n}", command=("python", "train.py"))
        events: list[Event] = [
            JobCreated(
                job_id=job_id,
                seq=1,
                at=at,
                name=spec.name or "",
                backend=backend,
                spec=spec,
                plan=self.plan,
            )
        ]
        submission = 0
        for step in steps:
            at += MINUTE
            seq = len(events) + 1
            word, _, rest = step.partition(":")
            if word == "run":
                submission += 1
                events.append(
                    SubmissionRequested(job_id=job_id, seq=seq, at=at, submission=submission)
                )
                events.append(
                    SubmissionCreated(
                        job_id=job_id,
                        seq=seq + 1,
                        at=at,
                        submission=submission,
                        object_id=f"{job_id}-{submission}",
                    )
                )
            elif word == "fail":
                events.append(
                    SubmissionFailed(
                        job_id=job_id,
                        seq=seq,
                        at=at,
                        submission=submission,
                        cause=_cause(CauseKind(rest), at, ("node7",)),
                    )
                )
            elif word == "hold":
                events.append(
                    HoldPlaced(
                        job_id=job_id,
                        seq=seq,
                        at=at,
                        submission=submission,
                        cause=_cause(CauseKind.NON_ZERO_EXIT, at),
                    )
                )
            else:
                state, _, kind = rest.partition(":")
                events.append(
                    OutcomeCommitted(
                        job_id=job_id,
                        seq=seq,
                        at=at,
                        state=State(state),
                        cause=_cause(CauseKind(kind), at),
                    )
                )
        self.batches.append(Batch(job_id, 0, events))
        return job_id

    def write(self) -> None:
        for start in range(0, len(self.batches), 2000):
            self.store.append_many(self.batches[start : start + 2000])
        self.batches.clear()


def small_record(store: RecordStore) -> Builder:
    """30 jobs: j000 failed preempted; j001 active after a launch failure; j002 held;
    j003 preempted once, then succeeded; every other job succeeded. Backends alternate
    (even: simulated, odd: slurm)."""
    b = Builder(store)
    for n in range(JOBS):
        at = T0 + n * 10 * MINUTE
        backend = "simulated" if n % 2 == 0 else "slurm"
        steps = {
            0: ("run", "end:failed:preempted"),
            1: ("run", "fail:launch-failed", "run"),
            2: ("run", "hold"),
            3: ("run", "fail:preempted", "run", "end:succeeded:none"),
        }.get(n, ("run", "end:succeeded:none"))
        b.job(n, at, *steps, backend=backend)
    b.write()
    return b


def ids(summaries: list[Any]) -> list[str]:
    return [s.job_id for s in summaries]


def test_the_store_filters_jobs_by_cause_backend_and_state_in_its_query(
    store: RecordStore,
) -> None:
    small_record(store)
    newest_first = [f"j{n:03d}" for n in reversed(range(JOBS))]
    # an ended job by its outcome's cause alone (j003 was preempted, then succeeded)
    assert ids(store.jobs(cause="preempted", state="failed")) == ["j000"]
    assert ids(store.jobs(cause="preempted")) == ["j000"]
    # a job not ended by any cause its record names: the caller folds it to know
    assert ids(store.jobs(cause="launch-failed")) == ["j001"]
    assert ids(store.jobs(cause="non-zero-exit", state="active")) == ["j002"]
    assert ids(store.jobs(cause="none")) == [j for j in newest_first if j >= "j003"]
    assert ids(store.jobs(cause="none", backend="slurm", limit=3)) == ["j029", "j027", "j025"]
    assert ids(store.jobs(cause="out-of-memory")) == []
    assert ids(store.jobs(backend="simulated", state="active")) == ["j002"]
    with pytest.raises(BadInput, match="unknown cause 'martian'"):
        store.jobs(cause="martian")


def test_pages_go_on_after_a_job_or_an_offset_alike(store: RecordStore) -> None:
    small_record(store)
    pages: list[str] = []
    after = None
    while True:
        page = ids(store.jobs(limit=7, before=after))
        pages += page
        if len(page) < 7:
            break
        after = page[-1]
    assert pages == [f"j{n:03d}" for n in reversed(range(JOBS))]
    assert ids(store.jobs(limit=7, offset=7)) == pages[7:14]
    assert ids(store.jobs(limit=2, before="j010", cause="none")) == ["j009", "j008"]
    assert store.jobs(before="no-such-job") == []


def test_the_store_counts_jobs_and_reads_the_recent_endings_alone(store: RecordStore) -> None:
    small_record(store)
    assert store.count_jobs() == {None: 2, "failed": 1, "succeeded": 27}
    # jobs 25..29 ended after this moment (each ends two minutes after it was created)
    since = T0 + 25 * 10 * MINUTE
    feed = store.ending_events(since)
    assert {e.job_id for e in feed.events} == {f"j{n:03d}" for n in range(25, JOBS)}
    assert {e.type for e in feed.events} == {"submission-requested", "outcome-committed"}
    positions = [e.seq for e in feed.events if e.job_id == "j025"]
    assert positions == [2, 4]  # its request and its outcome; created and made are left out
    assert feed.quarantined == []


def ui_of(store: RecordStore, now: datetime) -> tuple[UI, Counting]:
    counting = SummaryCounting(store)
    client = Client(counting, registry=Record(store).registry)  # type: ignore[arg-type]
    return UI(client, clock=lambda: now), counting


class SummaryCounting(Counting):
    READS = (*Counting.READS, "count_jobs", "ending_events")


def test_the_cause_filter_reads_the_jobs_it_shows_not_the_record(store: RecordStore) -> None:
    b = Builder(store)
    b.job(0, T0, "run", "end:failed:preempted")  # the oldest job: the one that matches
    for n in range(1, 1500):
        b.job(n, T0 + n * MINUTE, "run", "end:succeeded:none")
    b.write()
    ui, counting = ui_of(store, T0 + timedelta(days=2))
    status, _, body = ui.answer("/?cause=preempted")
    assert status == 200, body[:300]
    assert ids_in(body.decode()) == ["j000"]
    assert counting.asked == {"j000"}  # folded: the job shown alone
    assert counting.calls.count("jobs") == 1  # one query for the page
    counting.calls.clear()
    counting.asked.clear()
    status, _, body = ui.answer("/?cause=none&state=succeeded")
    assert ids_in(body.decode()) == [f"j{n:03d}" for n in range(1499, 1499 - views.PAGE_SIZE, -1)]
    assert len(counting.asked) == views.PAGE_SIZE and counting.calls.count("jobs") == 1


def test_the_older_link_reads_the_next_page_alone(store: RecordStore) -> None:
    b = Builder(store)
    for n in range(400):
        b.job(n, T0 + n * MINUTE, "run", "end:succeeded:none")
    b.write()
    ui, counting = ui_of(store, T0 + timedelta(days=2))
    path = "/?cause=none"
    shown: list[str] = []
    for _ in range(4):
        counting.asked.clear()
        body = ui.answer(path)[2].decode()
        page = ids_in(body)
        assert counting.asked == set(page)  # this page's jobs, not the pages before it
        shown += page
        older = re.search(r'<a href="(/\?[^"]+)">older</a>', body)
        assert older is not None
        path = unescape(older.group(1))
        assert "after=" in path
    assert shown == [f"j{n:03d}" for n in range(399, 399 - 4 * views.PAGE_SIZE, -1)]


def test_the_summary_counts_in_the_store_and_reads_the_weeks_endings(
    store: RecordStore,
) -> None:
    now = T0 + timedelta(days=30)
    b = Builder(store)
    for n in range(300):  # a month ago: counted by state, their endings not read
        b.job(n, T0 + n * MINUTE, "run", "end:succeeded:none")
    recent = now - timedelta(hours=3)
    b.job(300, recent, "run", "fail:preempted", "run", "end:succeeded:none")
    b.job(301, recent, "run", "fail:node-lost", "run", "hold")
    # asked for nine days ago, preempted two days ago: the week's part of it is lost
    b.job(302, now - timedelta(days=9), "run")
    b.write()
    at = now - timedelta(days=2)
    store.append(
        "j302",
        3,
        [
            SubmissionFailed(
                job_id="j302", seq=4, at=at, submission=1, cause=_cause(CauseKind.PREEMPTED, at)
            )
        ],
    )
    ui, counting = ui_of(store, now)
    status, _, raw = ui.answer("/summary")
    body = raw.decode()
    assert status == 200, body[:300]
    assert counting.asked == set()  # no job's whole record
    assert "jobs" not in counting.calls and "read_feed" not in counting.calls
    assert counting.calls.count("ending_events") == 1 and counting.calls.count("count_jobs") == 1
    by_state = dict(re.findall(r"<tr><th>([a-z]+)</th><td>(\d+)</td></tr>", body))
    assert by_state == {"active": "2", "succeeded": "301"}
    by_cause = re.findall(
        r'<tr><td data-colour="([a-z-]+)">[a-z-]+</td><td>(\d+)</td><td>(\d+)', body
    )
    assert by_cause == [
        ("node-lost", "1", "1"),
        ("non-zero-exit", "1", "1"),
        ("none", "1", "1"),
        ("preempted", "1", "2"),
    ]
    # j300: one minute; j302: the seven days of the week up to its preemption two days ago
    assert '<p id="lost">120h 1m 0s</p>' in body
    assert "<tr><td>node7</td><td>2</td></tr>" in body  # named by the two recent failures
