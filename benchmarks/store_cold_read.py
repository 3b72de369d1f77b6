"""A cold start's record side, on SQLite and PostgreSQL side by side: read the whole feed
page by page, decode it and fold every job, as a supervisor that just started does.

The README's scale targets put the whole cold start (read, fold, first decision) at
<= 2 s over 10,000 jobs and <= 10 s over 50,000; this measures the read-and-fold part
alone (the first discovery and decision are the supervisor's, ``supervisor_tick.py``),
and splits it into the SQL fetch, the decode and the fold. Memory: what the folded jobs
hold, per job (resident set after the read less before it), and the peak over the read.

Jobs have 21 events as in ``supervisor_tick.py`` (created; 7 submissions requested and
created, with a scheduler object id each; 6 recoveries). The codec's and fold's caches
are emptied first: a fresh process.
Run: python benchmarks/store_cold_read.py [--jobs 10000] [--store sqlite postgres]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dispatch import Action, CauseKind, JobSpec, Plan, Provenance, RecoveryPolicy, Rule
from dispatch.core.cause import Cause
from dispatch.core.folding import fold
from dispatch.core.folding import forget as forget_transitions
from dispatch.model.declarations import Declarations
from dispatch.model.enums import Capability, Enforcer
from dispatch.model.events import (
    Event,
    JobCreated,
    RecoveryStarted,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.store import open_store
from dispatch.store.base import Batch, RecordStore, decode_row
from dispatch.store.codec import collector_paused, forget
from dispatch.store.sql import SQLStore

RECOVERIES = 6
PAGE = 20_000  # the supervisor's FEED_PAGE


def records(jobs: int) -> list[Batch]:
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=10),)
    )
    declarations = Declarations(
        name="simulated",
        node_loss_window=timedelta(minutes=5),
        reports=frozenset(CauseKind),
        capabilities=frozenset({Capability.GATING}),
    )
    plan = Plan.bind(policy, declarations)
    spec = JobSpec(command=("python", "train.py"))
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    cause = Cause(kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER, detail="preempted")
    batches = []
    for n in range(jobs):
        job_id = f"job-{n:06d}"
        events: list[Event] = [
            JobCreated(
                job_id=job_id, seq=1, at=t0, name="train", backend="simulated", spec=spec, plan=plan
            )
        ]
        for sub in range(1, RECOVERIES + 2):
            events.append(
                SubmissionRequested(job_id=job_id, seq=len(events) + 1, at=t0, submission=sub)
            )
            events.append(
                SubmissionCreated(
                    job_id=job_id,
                    seq=len(events) + 1,
                    at=t0,
                    submission=sub,
                    object_id=f"sim-{n * 8 + sub}",
                )
            )
            if sub <= RECOVERIES:
                events.append(
                    RecoveryStarted(
                        job_id=job_id,
                        seq=len(events) + 1,
                        at=t0,
                        submission=sub,
                        rule=0,
                        action=Action.RESUBMIT,
                        enforcer=Enforcer.SUPERVISOR,
                        cause=cause,
                    )
                )
        batches.append(Batch(job_id, 0, events))
    return batches


def _open(kind: str, where: str) -> tuple[RecordStore, str]:
    if kind == "sqlite":
        return open_store(f"sqlite:///{where}/cold.db"), "sqlite"
    from dispatch.store.postgres import PostgresStore

    dsn = os.environ.get("DISPATCH_TEST_POSTGRES")
    if not dsn:
        raise SystemExit("--store postgres: set DISPATCH_TEST_POSTGRES to a PostgreSQL URL")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    return PostgresStore(dsn, schema=schema), f"postgres (schema {schema})"


def _drop(store: RecordStore) -> None:
    schema = getattr(store, "_schema", None)
    if schema is not None and schema.startswith("bench_"):
        store._transaction(  # type: ignore[attr-defined]
            "drop", lambda c: c.execute(f"DROP SCHEMA {schema} CASCADE")
        )


def _memory(field: str) -> int:
    """A line of /proc/self/status, in KiB (VmRSS now, VmHWM the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/self/status")


def cold_read(store: RecordStore) -> dict[str, Any]:
    """The supervisor's refresh: page by page, each job folded (continued across pages)."""
    jobs: dict[str, Any] = {}
    position = 0
    with collector_paused():
        while True:
            feed = store.read_feed(position, PAGE)
            if feed.position == position:
                break
            position = feed.position
            by_job: dict[str, list[Event]] = {}
            for event in feed.events:
                by_job.setdefault(event.job_id, []).append(event)
            for job_id, new in by_job.items():
                jobs[job_id] = fold(new, jobs.get(job_id))
    return jobs


def split(store: SQLStore) -> tuple[float, float, float]:
    """CPU seconds of the same read in three parts: SQL fetch, decode, fold."""
    forget()
    forget_transitions()
    fetch = decode = folding = 0.0
    position = 0
    jobs: dict[str, Any] = {}
    with collector_paused(freeze_over=None):
        while True:
            t = time.process_time()
            rows = store._feed_rows(position, PAGE, None)
            fetch += time.process_time() - t
            if not rows:
                break
            position = int(rows[-1][0])
            t = time.process_time()
            events = [decode_row(job_id, seq, body) for _, job_id, seq, body in rows]
            decode += time.process_time() - t
            t = time.process_time()
            by_job: dict[str, list[Event]] = {}
            for event in events:
                by_job.setdefault(event.job_id, []).append(event)
            for job_id, new in by_job.items():
                jobs[job_id] = fold(new, jobs.get(job_id))
            folding += time.process_time() - t
    return fetch, decode, folding


def run(kind: str, jobs: int) -> None:
    store, label = _open(kind, tempfile.mkdtemp())
    try:
        t = time.perf_counter()
        batches = records(jobs)
        for start in range(0, len(batches), 1000):
            store.append_many(batches[start : start + 1000])
        events = sum(len(b.events) for b in batches)
        del batches
        print(
            f"{label}: {jobs} jobs x {events // jobs} events written in "
            f"{time.perf_counter() - t:.1f} s; load average {os.getloadavg()[0]:.1f} (2 cores)"
        )
        gc.collect()
        forget()
        forget_transitions()
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
        before = _memory("VmRSS")
        wall, cpu = time.perf_counter(), time.process_time()
        folded = cold_read(store)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        held, peak = _memory("VmRSS") - before, _memory("VmHWM") - before
        assert len(folded) == jobs and all(j.version == events // jobs for j in folded.values())
        print(
            f"  cold read + decode + fold: {wall:.2f} s wall, {cpu:.2f} s CPU "
            f"({events / wall:,.0f} events/s wall); load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"  folded jobs hold {held / jobs:.2f} KiB per job (resident set), "
            f"peak over the read {peak / jobs:.2f} KiB per job"
        )
        del folded
        gc.unfreeze()
        gc.collect()
        if isinstance(store, SQLStore):
            fetch, decode, folding = split(store)
            total = fetch + decode + folding
            print(
                f"  CPU split: SQL fetch {fetch:.2f} s, decode {decode:.2f} s "
                f"({events / decode:,.0f} events/s), fold {folding:.2f} s "
                f"({events / folding:,.0f} events/s); decode + fold "
                f"{events / (decode + folding):,.0f} events/s; total {total:.2f} s"
            )
    finally:
        _drop(store)
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--store", nargs="+", choices=("sqlite", "postgres"), default=["sqlite"])
    args = parser.parse_args()
    for kind in args.store:
        run(kind, args.jobs)


if __name__ == "__main__":
    main()
