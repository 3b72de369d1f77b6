"""The web view's cause filter and summary, asked of the record store, beside reading
every job (every summary row, every job's events folded: what a page that filters in
Python has to do).

Builds a record of N jobs (SQLite, or PostgreSQL in a schema of its own with
--postgres DSN) over the last 30 days: most ran once and succeeded, 1 in 100 was
preempted and failed, 1 in 20 was preempted once and then succeeded. Then times, in this
process (medians of --runs; CPU time of this process beside wall time, so the database
server's own work on PostgreSQL shows in wall time only):

- the list filtered on a rare cause (``cause=preempted``) and on a common one, page 1;
- the summary (jobs by state, the week's endings by cause, time lost, nodes);
- reading every job, as those pages did before they asked the store.

Run: python benchmarks/ui_queries.py [--jobs 10000] [--runs 7] [--postgres DSN]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dispatch import CauseKind, Client, JobSpec, Provenance, State
from dispatch.backends import Registry
from dispatch.core.cause import Cause
from dispatch.core.folding import fold
from dispatch.core.policy import Plan, RecoveryPolicy
from dispatch.model.events import (
    Event,
    JobCreated,
    OutcomeCommitted,
    SubmissionCreated,
    SubmissionFailed,
    SubmissionRequested,
)
from dispatch.store.base import Batch, RecordStore
from dispatch.ui.server import UI

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def events_of(n: int, jobs: int, plan: Plan) -> list[Event]:
    job_id = f"j{n:09d}"
    at = NOW - timedelta(days=30) + timedelta(days=30) * n / jobs
    spec = JobSpec(name=f"train-{n}", command=("python", "train.py"))
    out: list[Event] = [
        JobCreated(
            job_id=job_id, seq=1, at=at, name=spec.name or "", backend="local", spec=spec, plan=plan
        )
    ]

    def add(event_type: type[Event], **fields: object) -> None:
        seq = len(out) + 1
        out.append(event_type(job_id=job_id, seq=seq, at=at + timedelta(minutes=seq), **fields))  # type: ignore[call-arg]

    def cause(kind: CauseKind) -> Cause:
        return Cause(
            kind=kind, provenance=Provenance.SCHEDULER, detail=kind.value, nodes=("node3",)
        )

    add(SubmissionRequested, submission=1)
    add(SubmissionCreated, submission=1, object_id=f"{n}-1")
    if n % 100 == 0:
        add(OutcomeCommitted, state=State.FAILED, cause=cause(CauseKind.PREEMPTED))
        return out
    if n % 20 == 0:
        add(SubmissionFailed, submission=1, cause=cause(CauseKind.PREEMPTED))
        add(SubmissionRequested, submission=2)
        add(SubmissionCreated, submission=2, object_id=f"{n}-2")
    add(OutcomeCommitted, state=State.SUCCEEDED, cause=cause(CauseKind.NONE))
    return out


def build(store: RecordStore, jobs: int, registry: Registry) -> None:
    plan = Plan.bind(RecoveryPolicy(), registry.get("local").declarations)
    for start in range(0, jobs, 2000):
        store.append_many(
            Batch(f"j{n:09d}", 0, events_of(n, jobs, plan))
            for n in range(start, min(start + 2000, jobs))
        )


def every_job(store: RecordStore) -> int:
    """Every summary row, then every job's events (by job, a page at a time), folded."""
    summaries = store.jobs()
    ids = [s.job_id for s in summaries]
    folded = 0
    for start in range(0, len(ids), 200):
        page = ids[start : start + 200]
        feed = store.read_feed(0, job_ids=page)
        per: dict[str, list[Event]] = {}
        for e in feed.events:
            per.setdefault(e.job_id, []).append(e)
        for events in per.values():
            fold(events)
            folded += 1
    return folded


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def open_store(where: str, dsn: str | None) -> tuple[RecordStore, Callable[[], None]]:
    if dsn is None:
        from dispatch.store.sqlite import SQLiteStore

        store: RecordStore = SQLiteStore(Path(where, "record.db"))
        return store, store.close
    import psycopg
    from dispatch.store.postgres import PostgresStore
    from psycopg import sql

    schema = f"bench_ui_{os.getpid()}"
    pg = PostgresStore(dsn, schema=schema)

    def drop() -> None:
        pg.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    return pg, drop


def analyze(dsn: str) -> None:
    """Gather the planner's statistics now, as autovacuum does within a minute of a
    record this size being written: a record in use has them."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        schema = f"bench_ui_{os.getpid()}"  # the schema open_store made
        for table in ("dispatch_jobs", "dispatch_events"):
            conn.execute(
                sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--postgres", metavar="DSN", help="a PostgreSQL record instead of SQLite")
    args = parser.parse_args()
    registry = Registry.from_entry_points()
    with tempfile.TemporaryDirectory() as where:
        store, close = open_store(where, args.postgres)
        try:
            t = time.perf_counter()
            build(store, args.jobs, registry)
            kind = "PostgreSQL" if args.postgres else "SQLite"
            print(f"{kind} record of {args.jobs} jobs built in {time.perf_counter() - t:.1f} s")
            if args.postgres:
                analyze(args.postgres)
            ui = UI(Client(store, registry=registry), clock=lambda: NOW)

            def page(path: str) -> Callable[[], object]:
                def get() -> object:
                    status, _, body = ui.answer(path)
                    assert status == 200, body[:300]
                    return body

                return get

            base = timed(lambda: every_job(store), max(args.runs // 2, 1))
            rows = [
                ("list, cause=preempted", timed(page("/?cause=preempted"), args.runs)),
                ("list, cause=none", timed(page("/?cause=none"), args.runs)),
                ("summary", timed(page("/summary"), args.runs)),
            ]
            print(f"{'reading every job':24} wall {base[0]:8.1f} ms   cpu {base[1]:8.1f} ms")
            for name, (wall, cpu) in rows:
                print(
                    f"{name:24} wall {wall:8.1f} ms   cpu {cpu:8.1f} ms   "
                    f"ratio to every job: wall {wall / base[0]:.3f}  cpu {cpu / base[1]:.3f}"
                )
        finally:
            close()


if __name__ == "__main__":
    main()
