"""One supervisor tick over many active jobs on the simulated (in-memory) scheduler.

Target (issue 2/3): <= 1 s per steady-state tick for 10,000 active jobs of ~20 events
each, on a 2-core machine. The record is a real SQLite file. The first tick also reads
and folds every record (a supervisor's start-up); it is reported apart.

Run: python benchmarks/supervisor_tick.py [--jobs 10000] [--ticks 5] [--store URL]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta

from dispatch import Action, CauseKind, JobSpec, Plan, Provenance, RecoveryPolicy, Registry, Rule
from dispatch.cause import Cause
from dispatch.enums import Enforcer
from dispatch.events import JobCreated, RecoveryStarted, SubmissionCreated, SubmissionRequested
from dispatch.store import open_store
from dispatch.store.base import Batch
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

RECOVERIES = 6  # 1 + 6 * 3 + 2 = 21 events per job


def build(jobs: int, store_url: str) -> tuple[Supervisor, SimScheduler]:
    sched = SimScheduler()
    backend = SimulatedBackend(sched)
    registry = Registry.from_plugins({"simulated": backend})
    store = open_store(store_url)
    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=10),)
    )
    plan = Plan.bind(policy, registry.get("simulated").declarations)
    spec = JobSpec(command=("python", "train.py"))
    t0 = sched.now()
    batches = []
    for n in range(jobs):
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
    for start in range(0, len(batches), 1000):
        store.append_many(batches[start : start + 1000])
    sched.advance(1)
    return Supervisor(
        store, registry, owner="bench", clock=sched.now, lease_ttl=timedelta(minutes=5)
    ), sched


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument(
        "--store", default=None, help="record store URL (default: a temporary SQLite file)"
    )
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    url = args.store or f"sqlite:///{tmp}/bench.db"
    t = time.perf_counter()
    sup, sched = build(args.jobs, url)
    print(
        f"built {args.jobs} jobs x {1 + RECOVERIES * 3 + 2} events "
        f"in {time.perf_counter() - t:.1f} s ({url.split(':')[0]})"
    )
    for n in range(args.ticks + 1):
        sched.advance(5)
        calls = sched.calls
        t = time.perf_counter()
        report = sup.tick()
        took = time.perf_counter() - t
        label = "first tick (reads and folds every record)" if n == 0 else f"tick {n}"
        print(
            f"{label:<42} {took:6.3f} s  active={report.active} leased={report.leased} "
            f"appended={report.appended} discovery calls={report.discovery_calls} "
            f"scheduler calls={sched.calls - calls}"
        )


if __name__ == "__main__":
    main()
