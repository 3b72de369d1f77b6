"""A tick that outlasts its lease does no side effect another supervisor may be doing too
(S-49, S-34, S-35): two real supervisor processes on one SQLite record and
the local backend, the first one slowed down by stops that wait out a grace."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from dispatch import JobSpec, RecoveryPolicy, Registry
from dispatch.core.interventions import cancel
from dispatch.job_records import append_request, create_job, load_job
from dispatch.store.sqlite import SQLiteStore
from dispatch_testing.crash import Machine

GRACE = "1.5"  # each stop of a job ignoring SIGTERM waits this long before SIGKILL
LEASE = "2"


def test_a_submission_never_runs_twice_when_a_tick_outlasts_its_lease_S49(
    machine: Machine,
) -> None:
    registry = Registry.from_entry_points()
    slow = {**machine.env, "DISPATCH_LOCAL_STOP_GRACE": GRACE}
    ready = [machine.root / f"ready-{n}" for n in range(3)]
    runs = machine.root / "runs"
    with SQLiteStore(machine.record) as store:
        # Job ids sort the stubborn jobs first: their stops come before the late submit.
        stubborn = [
            create_job(
                store,
                registry,
                backend="local",
                spec=JobSpec(
                    command=("sh", "-c", f"trap '' TERM; touch {mark}; exec sleep 300"),
                    env=machine.tag,
                ),
                policy=RecoveryPolicy(),
                job_id=f"a-stubborn-{n}",
            )
            for n, mark in enumerate(ready)
        ]
    assert machine.run("supervise", "--once", env=slow).returncode == 0
    machine.until(lambda: all(mark.exists() for mark in ready))
    with SQLiteStore(machine.record) as store:
        # Recorded without the CLI's own tick, so the stops are left to the supervisors.
        for job in stubborn:
            folded = load_job(store, job)
            append_request(store, folded, cancel(folded, actor="ann", now=datetime.now(UTC)))
        late = create_job(
            store,
            registry,
            backend="local",
            spec=JobSpec(command=("sh", "-c", f"echo ran >> {runs}"), env=machine.tag),
            policy=RecoveryPolicy(),
            job_id="z-late",
            now=datetime.now(UTC),
        )

    first = machine.start("supervise", "--once", "--lease", LEASE, env=slow)
    # The first supervisor's tick stops three jobs of 1.5 s each: its 2 s lease runs out
    # in the middle, and a second supervisor starts then.
    time.sleep(2.6)
    second = machine.start("supervise", "--once", "--lease", LEASE, env=slow)
    for proc in (first, second):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (out, err)

    machine.until(lambda: machine.run("supervise", "--once").returncode == 0 and _settled(machine))
    assert len(machine.objects_of(late)) == 1, machine.objects_of(late)
    machine.until(runs.exists)
    assert runs.read_text() == "ran\n"
    status = machine.json("status", late)
    assert [len(s["objects"]) for s in status["submissions"]] == [1]


def _settled(machine: Machine) -> bool:
    return all(
        machine.json("status", job)["settled"]
        for job in ("a-stubborn-0", "a-stubborn-1", "a-stubborn-2", "z-late")
    )
