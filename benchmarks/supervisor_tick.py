"""Supervisor ticks over many active jobs on the simulated (in-memory) scheduler.

Targets (README, Scale), jobs of 21 events each:
- cold start (the first tick: read, fold, first decision): <= 2 s over 10,000 jobs and
  <= 10 s over 50,000;
- steady tick over 50,000 active jobs: <= 0.5 s CPU, the worst of 50 ticks;
- peak memory <= 8 KiB per active job: the whole process's peak resident set (reset after
  the record is built) over the jobs; also printed, that peak less the resident set before
  the supervisor started;
- both stores side by side: ``--store sqlite postgres`` (PostgreSQL from
  DISPATCH_TEST_POSTGRES, in a schema of its own).

Lease writes per tick are counted (a fresh lease is not written again), and the jobs each
tick decided afresh (the others were quiet and unchanged). Each tick's wall time and its CPU
time (this process's) are printed: on a shared machine the CPU time is the steadier figure,
read it beside the load average. ``--profile`` profiles every steady tick (in CPU time)
and prints the worst one's profile.
Run: python benchmarks/supervisor_tick.py [--jobs 10000] [--ticks 50] [--store sqlite postgres]
    [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import statistics
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from dispatch import Action, CauseKind, JobSpec, Plan, Provenance, RecoveryPolicy, Registry, Rule
from dispatch.core.cause import Cause
from dispatch.model.enums import Enforcer
from dispatch.model.events import (
    JobCreated,
    RecoveryStarted,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.store import open_store
from dispatch.store.base import Batch, RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

RECOVERIES = 6  # 1 + 6 * 3 + 2 = 21 events per job


def build(jobs: int, store: RecordStore) -> tuple[Supervisor, SimScheduler]:
    sched = SimScheduler()
    backend = SimulatedBackend(sched)
    registry = Registry.from_plugins({"simulated": backend})
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=10),)
    )
    plan = Plan.bind(policy, registry.get("simulated").declarations)
    spec = JobSpec(command=("python", "train.py"))
    t0 = sched.now()
    batches = []
    for n in range(jobs):
        if len(batches) == 1000:
            store.append_many(batches)
            batches = []
        job_id = f"job-{n:06d}"
        events: list = [
            JobCreated(
                job_id=job_id, seq=1, at=t0, name="train", backend="simulated", spec=spec, plan=plan
            )
        ]
        for sub in range(1, RECOVERIES + 2):
            sched.plan(job_id, sub, runs_forever())
            events.append(
                SubmissionRequested(job_id=job_id, seq=len(events) + 1, at=t0, submission=sub)
            )
            oid = sched.submit(
                {SimScheduler.TAG_JOB: job_id, SimScheduler.TAG_SUBMISSION: str(sub)}, spec
            )
            events.append(
                SubmissionCreated(
                    job_id=job_id, seq=len(events) + 1, at=t0, submission=sub, object_id=oid
                )
            )
            if sub <= RECOVERIES:
                sched.preempt(oid)
                cause = Cause(
                    kind=CauseKind.PREEMPTED,
                    provenance=Provenance.SCHEDULER,
                    detail="preempted",
                    at=t0,
                )
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
    store.append_many(batches)
    sched.advance(1)
    return Supervisor(
        store, registry, owner="bench", clock=sched.now, lease_ttl=timedelta(minutes=5)
    ), sched


class Counting:
    """The store, counting the leases each tick asks it to write."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self.leases = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def acquire_leases(self, job_ids, *args, **kwargs):  # type: ignore[no-untyped-def]
        ids = list(job_ids)
        self.leases += len(ids)
        return self.store.acquire_leases(ids, *args, **kwargs)


def _memory(field: str) -> int:
    """A line of /proc/self/status, in KiB (VmRSS now, VmHWM the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/self/status")


def _open(kind: str, where: str) -> tuple[RecordStore, str]:
    if kind == "sqlite":
        return open_store(f"sqlite:///{where}/bench.db"), "sqlite"
    from dispatch.store.postgres import PostgresStore

    dsn = os.environ.get("DISPATCH_TEST_POSTGRES")
    if not dsn:
        raise SystemExit("--store postgres: set DISPATCH_TEST_POSTGRES to a PostgreSQL URL")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    return PostgresStore(dsn, schema=schema), f"postgres (schema {schema})"


def run(kind: str, jobs: int, ticks: int, profile: bool = False) -> None:
    store, label = _open(kind, tempfile.mkdtemp())
    t = time.perf_counter()
    plain, sched = build(jobs, store)
    print(
        f"{label}: built {jobs} jobs x {1 + RECOVERIES * 3 + 2} events "
        f"in {time.perf_counter() - t:.1f} s; load average {os.getloadavg()[0]:.1f} (2 cores)"
    )
    counting = Counting(store)
    sup = Supervisor(
        counting,  # type: ignore[arg-type]
        plain.registry,
        owner="bench",
        clock=sched.now,
        lease_ttl=timedelta(minutes=5),
    )
    del plain
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
    before = _memory("VmRSS")
    steady: list[float] = []
    cpu: list[float] = []
    leases: list[int] = []
    decided: list[int] = []
    worst: tuple[float, str] = (0.0, "")
    for n in range(ticks + 1):
        sched.advance(5)
        counting.leases = 0
        profiler = cProfile.Profile(time.process_time) if profile and n > 0 else None
        c = time.process_time()
        t = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        report = sup.tick()
        if profiler is not None:
            profiler.disable()
        took = time.perf_counter() - t
        took_cpu = time.process_time() - c
        if n == 0:
            print(
                f"  cold start (first tick: read, fold, decide) {took:6.2f} s "
                f"(CPU {took_cpu:.2f} s, load average {os.getloadavg()[0]:.1f})  "
                f"active={report.active} leased={report.leased} decided={report.decided} "
                f"appended={report.appended} lease writes={counting.leases}"
            )
            continue
        steady.append(took)
        cpu.append(took_cpu)
        leases.append(counting.leases)
        decided.append(report.decided)
        if profiler is not None and took_cpu > worst[0]:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
            worst = (took_cpu, out.getvalue())
    whole = _memory("VmHWM")
    peak = whole - before
    if steady:
        w = steady.index(max(steady))
        print(
            f"  steady tick over {ticks} ticks: wall p50 {statistics.median(steady):.3f} s, "
            f"max {max(steady):.3f} s (tick {w + 1}, {leases[w]} lease writes), "
            f"min {min(steady):.3f} s; CPU p50 {statistics.median(cpu):.3f} s, "
            f"max {max(cpu):.3f} s (tick {cpu.index(max(cpu)) + 1}); "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"  lease writes per tick p50 {statistics.median(leases):.0f}, max {max(leases)}; "
            f"jobs decided afresh per tick p50 {statistics.median(decided):.0f}, "
            f"max {max(decided)}"
        )
        if profile:
            print(f"  profile of the tick that took the most CPU ({worst[0]:.3f} s):")
            print(worst[1])
    print(
        f"  peak memory {peak / 1024:.0f} MiB over the resident set before the start: "
        f"{peak / jobs:.2f} KiB per active job; the whole process's peak resident set "
        f"{whole / 1024:.0f} MiB: {whole / jobs:.2f} KiB per active job (with the simulated "
        f"scheduler's own objects)"
    )
    sup.release()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--store", nargs="+", choices=("sqlite", "postgres"), default=["sqlite"])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for kind in args.store:
        run(kind, args.jobs, args.ticks, args.profile)


if __name__ == "__main__":
    main()
