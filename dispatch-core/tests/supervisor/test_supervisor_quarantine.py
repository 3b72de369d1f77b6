"""One undecodable row quarantines its job only, in the supervisor too (S-48, issue
15.4): every other job is supervised as usual; the bad one is named with job and seq in
every tick and nothing is appended for it. Bad rows are planted with the driver."""

from __future__ import annotations

from core_bench import policy
from dispatch import JobSpec, Registry
from dispatch.job_records import create_job
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

from conftest import Harness

AT = "2026-03-01T12:00:02+00:00"


def test_one_undecodable_row_never_stops_the_supervisor_for_the_other_jobs_S48(
    harness: Harness,
) -> None:
    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    with harness.open() as store:
        for job in ("job-a", "job-b"):
            create_job(
                store,
                registry,
                backend="simulated",
                spec=JobSpec(command=("train",)),
                policy=policy(),
                job_id=job,
                now=sched.now(),
            )
            sched.plan(job, 1, runs_forever())
        harness.raw(
            "INSERT INTO dispatch_events (job_id, seq, type, at, body) VALUES (?, ?, ?, ?, ?)",
            ("job-a", 2, "hold-placed", AT, '{"type": "hold-placed", "job_id": "job-a", '),
        )
        harness.raw("UPDATE dispatch_jobs SET version = 2 WHERE job_id = 'job-a'")
        sup = Supervisor(store, registry, owner="sup", clock=sched.now)
        for _ in range(2):
            report = sup.tick()
            assert any("'job-a'" in e and "seq 2" in e for e in report.errors), report.errors
            sched.advance(1)
        tags = [o.tags[SimScheduler.TAG_JOB] for o in sched.objects()]
        assert tags == ["job-b"]  # the good job runs; nothing is done for the bad one
    rows = harness.raw("SELECT seq FROM dispatch_events WHERE job_id = 'job-a' ORDER BY seq")
    assert rows == [(1,), (2,)]  # nothing appended for it
