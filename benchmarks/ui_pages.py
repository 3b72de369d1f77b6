"""``dispatch ui`` over a big record: what each page costs, beside ``Client.status`` of
the same job (what ``dispatch status`` does once its process is up).

Builds a SQLite record of N finished local jobs (2 events each) and one job page's worth
of a recovered job, then times, in this process (CPU time, what a loaded machine does not
inflate, beside wall time; medians of --runs): the list's first page, its third page, a
job page, the summary, the first /metrics scrape (the whole feed) and a later one (what
was appended since: nothing), and ``Client.status`` of the same job.

Targets: list <= 300 ms, job page <= 100 ms (wall, N = 100,000).
Run: python benchmarks/ui_pages.py [--jobs 100000] [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dispatch import CauseKind, Client, JobSpec, Provenance, State
from dispatch.backends import Registry
from dispatch.core.cause import Cause
from dispatch.core.policy import Plan, RecoveryPolicy
from dispatch.model.events import JobCreated, OutcomeCommitted
from dispatch.store.base import Batch
from dispatch.store.sqlite import SQLiteStore
from dispatch.ui.server import UI

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def build(path: Path, jobs: int, registry: Registry) -> None:
    store = SQLiteStore(path)
    plan = Plan.bind(RecoveryPolicy(), registry.get("local").declarations)
    spec = JobSpec(name="train", command=("python", "train.py"))
    done = Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, detail="exit 0")
    for start in range(0, jobs, 5000):
        batches = []
        for n in range(start, min(start + 5000, jobs)):
            job_id = f"j{n:012d}"
            at = T0 + timedelta(seconds=n)
            created = JobCreated(
                job_id=job_id,
                seq=1,
                at=at,
                name=f"train-{n}",
                backend="local",
                spec=spec,
                plan=plan,
            )
            ended = OutcomeCommitted(job_id=job_id, seq=2, at=at, state=State.SUCCEEDED, cause=done)
            batches.append(Batch(job_id, 0, [created, ended]))
        store.append_many(batches)
    store.close()


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    registry = Registry.from_entry_points()
    with tempfile.TemporaryDirectory() as where:
        path = Path(where, "record.db")
        t = time.perf_counter()
        build(path, args.jobs, registry)
        print(f"record of {args.jobs} jobs built in {time.perf_counter() - t:.1f} s")
        store = SQLiteStore(path)
        client = Client(store, registry=registry)
        ui = UI(client, clock=lambda: T0 + timedelta(seconds=args.jobs + 60))
        job = f"j{args.jobs - 1:012d}"

        def page(path: str) -> Callable[[], object]:
            def get() -> object:
                status, _, body = ui.answer(path)
                assert status == 200, body[:300]
                return body

            return get

        first_scrape = timed(page("/metrics"), 1)
        rows = [
            ("list, page 1", timed(page("/"), args.runs)),
            ("list, page 3", timed(page("/?page=3"), args.runs)),
            ("list, cause=none", timed(page("/?cause=none"), args.runs)),
            ("job page", timed(page(f"/jobs/{job}"), args.runs)),
            ("Client.status (same job)", timed(lambda: client.status(job), args.runs)),
            ("summary", timed(page("/summary"), max(args.runs // 3, 1))),
            ("/metrics, first scrape", first_scrape),
            ("/metrics, next scrape", timed(page("/metrics"), args.runs)),
        ]
        for name, (wall, cpu) in rows:
            print(f"{name:28} wall {wall:8.1f} ms   cpu {cpu:8.1f} ms")
        store.close()


if __name__ == "__main__":
    main()
