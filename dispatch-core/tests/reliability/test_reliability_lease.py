"""A tick that outlasts its lease does no side effect another supervisor may be doing too
(S-49, S-34, S-35): two real supervisor processes on one SQLite record and
the local backend, the first one slowed down by stops that wait out a grace."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import UTC, datetime

from dispatch import JobSpec, RecoveryPolicy, Registry
from dispatch.core.interventions import cancel
from dispatch.job_records import append_request, create_job, load_job
from dispatch.store.sqlite import SQLiteStore
from dispatch_testing.crash import Machine
from dispatch_testing.waiting import eventually

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

    started_us = time.time() * 1_000_000
    first = machine.start("supervise", "--once", "--lease", LEASE, env=slow)
    # The first supervisor's tick stops three jobs of 1.5 s each: its 2 s lease runs out
    # in the middle, and a second supervisor starts then (however slowly the first started).

    def a_lease_ran_out() -> bool:
        if first.poll() is not None:
            return True  # its tick is over: nothing left to race with
        with closing(sqlite3.connect(f"file:{machine.record}?mode=ro", uri=True)) as db:
            held = db.execute("SELECT expires_us FROM dispatch_leases WHERE owner != ''")
            expiries = [expires_us for (expires_us,) in held.fetchall()]
        # taken by the first supervisor (after it started), and one of them past: it renews
        # the others' after each stop, so they do not all run out at once
        return bool(expiries) and started_us < min(expiries) < time.time() * 1e6

    eventually(a_lease_ran_out, timeout=60, what="a lease of the first supervisor runs out")
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
