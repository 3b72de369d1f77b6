"""Record-store throughput (S-33): how many events per second a supervisor can append and read.

Measures, for SQLite (a file in a temporary directory) and PostgreSQL (a fresh schema on
the server named by DISPATCH_TEST_POSTGRES, default the one .ci/start-postgres.sh creates):

- create: N jobs' job-created events in one append_many;
- tick: N jobs x 1 event per tick in one append_many (what a supervisor writes per tick),
  without and with a lease per job (the fenced path the supervisor uses);
- single: sequential append() calls, one event each, one transaction each;
- read_many: all N records in one call;
- read_since: the whole feed from position 0, in pages; read_feed (the quarantining feed
  the supervisor uses, S-48) the same way;
- one job: read(job) and read_feed(job_ids=[job]) on the N-job record, 200 times each: what
  a per-job command pays (it must not grow with the record).

Usage: .venv/bin/python benchmarks/store_append.py [--jobs 10000] [--ticks 3] [--singles 500]
       [--stores sqlite,postgres] [--one-job-scale 100000]

``--one-job-scale N`` instead compares one job's reads on a record of N jobs (5 events
each) with the same reads on a record of that one job (the README's per-job target).
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta

from dispatch.core.policy import Plan, RecoveryPolicy, Rule
from dispatch.model.declarations import Declarations
from dispatch.model.enums import CauseKind
from dispatch.model.events import Event, JobCreated, SubmissionRequested
from dispatch.model.spec import JobSpec
from dispatch.store.base import Batch, RecordStore
from dispatch.store.postgres import PostgresStore
from dispatch.store.sqlite import SQLiteStore

DEFAULT_DSN = "postgresql://dispatch:dispatch@127.0.0.1:5432/dispatch_test"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
PLAN = Plan.bind(
    RecoveryPolicy(rules=(Rule(on=(CauseKind.PREEMPTED,), action="resubmit", budget=3),)),
    Declarations(name="local", node_loss_window=timedelta(minutes=5), reports=frozenset(CauseKind)),
)
SPEC = JobSpec(name="bench", command=("python", "train.py"))


@contextmanager
def sqlite_store() -> Iterator[RecordStore]:
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(os.path.join(tmp, "record.db")) as s:
        yield s


@contextmanager
def postgres_store() -> Iterator[RecordStore]:
    import psycopg
    from psycopg import sql

    dsn = os.environ.get("DISPATCH_TEST_POSTGRES") or DEFAULT_DSN
    schema = f"dispatch_bench_{uuid.uuid4().hex[:8]}"
    try:
        with PostgresStore(dsn, schema=schema) as store:
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


STORES: dict[str, Callable[[], AbstractContextManager[RecordStore]]] = {
    "sqlite": sqlite_store,
    "postgres": postgres_store,
}


def report(store: str, what: str, events: int, seconds: float) -> None:
    rate = events / seconds if seconds > 0 else float("inf")
    print(f"{store:9} {what:34} {events:8d} events {seconds:8.3f} s {rate:12,.0f} events/s")


def requested(job_id: str, seq: int) -> Event:
    return SubmissionRequested(
        job_id=job_id, seq=seq, at=T0 + timedelta(seconds=seq), submission=seq - 1
    )


def bench(name: str, store: RecordStore, jobs: int, ticks: int, singles: int) -> None:
    ids = [f"bench-{n:06d}" for n in range(jobs)]
    created = [
        Batch(
            j,
            0,
            [
                JobCreated(
                    job_id=j, seq=1, at=T0, name="bench", backend="local", spec=SPEC, plan=PLAN
                )
            ],
        )
        for j in ids
    ]
    start = time.perf_counter()
    store.append_many(created)
    report(name, f"create {jobs} jobs (append_many)", jobs, time.perf_counter() - start)

    version = 1
    for tick in range(ticks):
        batches = [Batch(j, version, [requested(j, version + 1)]) for j in ids]
        start = time.perf_counter()
        result = store.append_many(batches)
        elapsed = time.perf_counter() - start
        report(name, f"tick {tick + 1}: {jobs} x 1 (append_many)", jobs, elapsed)
        if any(v != version + 1 for v in result.values()):
            raise SystemExit(f"{name}: tick {tick + 1} met conflicts; figures are meaningless")
        version += 1

    leases = store.acquire_leases(ids, "bench", timedelta(minutes=5), T0)
    batches = [Batch(j, version, [requested(j, version + 1)], leases[j]) for j in ids]
    start = time.perf_counter()
    store.append_many(batches)
    report(name, f"tick: {jobs} x 1 with leases", jobs, time.perf_counter() - start)
    version += 1

    start = time.perf_counter()
    for j in ids[:singles]:
        store.append(j, version, [requested(j, version + 1)])
    report(name, f"single append() x {singles}", singles, time.perf_counter() - start)

    start = time.perf_counter()
    records = store.read_many(ids)
    count = sum(len(r) for r in records.values())
    report(name, f"read_many({jobs} jobs)", count, time.perf_counter() - start)

    start = time.perf_counter()
    position, count = 0, 0
    while True:
        page, position = store.read_since(position, limit=10_000)
        if not page:
            break
        count += len(page)
    report(name, "read_since(0) in pages of 10000", count, time.perf_counter() - start)

    start = time.perf_counter()
    position, count = 0, 0
    while True:
        feed = store.read_feed(position, limit=10_000)
        if not feed.events and not feed.quarantined:
            break
        position = feed.position
        count += len(feed.events)
    report(name, "read_feed(0) in pages of 10000", count, time.perf_counter() - start)

    probes = ids[:: max(1, len(ids) // 200)][:200]
    start = time.perf_counter()
    count = sum(len(store.read(j)) for j in probes)
    report(name, f"read(one job) x {len(probes)}", count, time.perf_counter() - start)
    start = time.perf_counter()
    count = sum(len(store.read_feed(0, job_ids=[j]).events) for j in probes)
    report(name, f"read_feed(job_ids=[one]) x {len(probes)}", count, time.perf_counter() - start)


def one_job_reads(store: RecordStore, job_id: str, repeat: int) -> tuple[float, float]:
    """Seconds per read(job) and per read_feed(job_ids=[job]), best of three rounds."""
    rounds: list[tuple[float, float]] = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            store.read(job_id)
        middle = time.perf_counter()
        for _ in range(repeat):
            store.read_feed(0, job_ids=[job_id])
        rounds.append(((middle - start) / repeat, (time.perf_counter() - middle) / repeat))
    return min(r[0] for r in rounds), min(r[1] for r in rounds)


def record_of(job_id: str) -> list[Event]:
    created = JobCreated(
        job_id=job_id, seq=1, at=T0, name="bench", backend="local", spec=SPEC, plan=PLAN
    )
    return [created, *(requested(job_id, seq) for seq in range(2, 6))]


def scale(name: str, jobs: int, repeat: int = 200) -> None:
    with STORES[name]() as small:
        small.append("probe", 0, record_of("probe"))
        alone = one_job_reads(small, "probe", repeat)
    with STORES[name]() as big:
        ids = [f"bench-{n:07d}" for n in range(jobs)]
        for chunk in range(0, jobs, 5000):
            big.append_many(Batch(j, 0, record_of(j)) for j in ids[chunk : chunk + 5000])
        middle = ids[jobs // 2]
        crowded = one_job_reads(big, middle, repeat)
    for what, one, many in zip(
        ("read(job)", "read_feed(job_ids=[job])"), alone, crowded, strict=True
    ):
        print(
            f"{name:9} {what:26} 1-job record {one * 1e3:7.3f} ms   {jobs}-job record "
            f"{many * 1e3:7.3f} ms   ratio {many / one:5.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--singles", type=int, default=500)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--one-job-scale", type=int, default=0)
    args = parser.parse_args()
    if args.one_job_scale:
        for name in args.stores.split(","):
            scale(name, args.one_job_scale)
        return
    for name in args.stores.split(","):
        with STORES[name]() as store:
            print(f"# {store!r}")
            bench(name, store, args.jobs, args.ticks, min(args.singles, args.jobs))


if __name__ == "__main__":
    main()
