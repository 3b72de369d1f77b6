"""How the simulated scheduler scales: the supervisor benchmark runs 10,000 active jobs
through it, so its own costs must stay small and its discovery one call.

    python benchmarks/kit_simulated_scale.py [jobs]

Prints seconds for: submitting N jobs, one discovery of all N (and the scheduler calls
it made), advancing the clock through N endings, the discovery after that, and one more
with nothing changed (the adapter maps only rows that changed). Then the same for N/5
multi-node jobs (2-4 nodes x 2 tasks, on a cluster of 4 nodes per job, every fifth with a rank
failure and every seventh losing a node): named node allocation, per-task launch
contract, kills in a failure's wake and the root-cause mapping all cost something.
"""

from __future__ import annotations

import sys
import time

from dispatch import JobSpec, Resources
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated import scheduler as sim


def main(jobs: int) -> None:
    scheduler = SimScheduler(nodes=None)
    backend = SimulatedBackend(scheduler)
    ids = [f"job-{n}" for n in range(jobs)]
    for n, job_id in enumerate(ids):
        scheduler.plan(job_id, 1, sim.exit_with(1 + n % 7, after=60 + n % 600))
    spec = JobSpec(command=("sleep", "3600"))

    start = time.perf_counter()
    for job_id in ids:
        backend.dispatch_submit(job_id, 1, spec, False)
    submitted = time.perf_counter() - start

    calls = scheduler.calls
    start = time.perf_counter()
    discovery = backend.dispatch_discover(ids)
    discovered = time.perf_counter() - start
    assert len(discovery.objects) == jobs
    discovery_calls = scheduler.calls - calls

    start = time.perf_counter()
    scheduler.advance(700)
    advanced = time.perf_counter() - start

    start = time.perf_counter()
    ended = backend.dispatch_discover(ids)
    rediscovered = time.perf_counter() - start
    assert all(not o.alive for o in ended.objects)

    start = time.perf_counter()
    backend.dispatch_discover(ids)
    unchanged = time.perf_counter() - start

    print(f"jobs                          {jobs}")
    print(f"submit all (s)                {submitted:.3f}  ({jobs / submitted:,.0f} jobs/s)")
    print(f"discover all, running (s)     {discovered:.3f}  ({discovery_calls} scheduler call)")
    print(f"advance through endings (s)   {advanced:.3f}")
    print(f"discover all, ended (s)       {rediscovered:.3f}")
    print(f"discover all, unchanged (s)   {unchanged:.3f}")


def multi_node(jobs: int) -> None:
    scheduler = SimScheduler(nodes=4 * jobs)
    backend = SimulatedBackend(scheduler)
    ids = [f"wide-{n}" for n in range(jobs)]
    for n, job_id in enumerate(ids):
        if n % 5 == 0:
            scheduler.plan(job_id, 1, sim.rank_fails(1, 3, after=60 + n % 600))
        elif n % 7 == 0:
            scheduler.plan(job_id, 1, sim.node_loss(60 + n % 600))
        else:
            scheduler.plan(job_id, 1, sim.succeed(60 + n % 600))

    start = time.perf_counter()
    for n, job_id in enumerate(ids):
        spec = JobSpec(
            command=("sleep", "3600"), resources=Resources(nodes=2 + n % 3, tasks_per_node=2)
        )
        backend.dispatch_submit(job_id, 1, spec, False)
    submitted = time.perf_counter() - start
    start = time.perf_counter()
    running = backend.dispatch_discover(ids)
    discovered = time.perf_counter() - start
    start = time.perf_counter()
    scheduler.advance(700)
    advanced = time.perf_counter() - start
    start = time.perf_counter()
    ended = backend.dispatch_discover(ids)
    rediscovered = time.perf_counter() - start
    assert len(running.objects) == jobs and all(not o.alive for o in ended.objects)
    tasks = sum(len(e.node_causes) for o in ended.objects for e in o.executions)
    print(f"multi-node jobs               {jobs}  ({tasks:,} task endings mapped)")
    print(f"submit all (s)                {submitted:.3f}")
    print(f"discover all, running (s)     {discovered:.3f}")
    print(f"advance through endings (s)   {advanced:.3f}")
    print(f"discover all, ended (s)       {rediscovered:.3f}")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    main(count)
    multi_node(count // 5)
