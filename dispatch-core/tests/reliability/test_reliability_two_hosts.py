"""Two hosts, one record (S-35, S-49): supervisors whose clocks disagree by up to a minute
share one PostgreSQL record, and leases still fence and notifications are delivered once.

A supervisor acts by the record's clock (``RecordClock``: the host's clock plus the
database server's offset from it), not the host's: a host whose clock runs 30 s ahead
never sees another host's live lease as expired. The campaign ``benchmarks/two_hosts.py`` runs the
whole: two ``dispatch supervise`` processes, each in a network namespace of its own that
reaches a private server over its own veth pair only, clocks skewed +30 s and -30 s
(``DISPATCH_TEST_CLOCK_SKEW``), jobs recorded for them to submit, one host frozen past
its lease in turns, a receiver refusing first tries; its short run is a test here.
Network namespaces need root: without it the campaign fails, never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch.job_records import RecordClock
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.postgres import PostgresStore
from dispatch.store.sqlite import SQLiteStore
from dispatch_testing.crash import DISPATCH
from dispatch_testing.private_postgres import PrivatePostgres

from conftest import Events

ROOT = Path(__file__).resolve().parents[3]
SKEW = timedelta(seconds=30)
TTL = timedelta(seconds=20)


@pytest.fixture(scope="module")
def server() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    yield pg
    pg.close()


def test_hosts_whose_clocks_disagree_time_leases_by_the_record_s_clock_S49(
    server: PrivatePostgres, ev: Events
) -> None:
    """Host "behind" (-30 s) takes a 20 s lease; host "ahead" (+30 s) asks for it at the
    same moment. By the host clocks the lease ran out 40 s ago and "ahead" takes it: two
    supervisors would act on one job. By the record's clock, which every supervisor acts
    by (``RecordClock``), it has 20 s left and is not taken."""

    def host(skew: timedelta) -> Callable[[], datetime]:
        return lambda: datetime.now(UTC) + skew

    with PostgresStore(server.dsn, schema=f"dispatch_h_{uuid.uuid4().hex[:10]}") as store:
        for job in ("j-host-clocks", "j-record-clock"):
            store.append(job, 0, [ev.created(job)])
        # the host clocks: the lease is taken while it is live
        store.acquire_leases(["j-host-clocks"], "behind", TTL, host(-SKEW)())
        stolen = store.acquire_leases(["j-host-clocks"], "ahead", TTL, host(SKEW)())
        assert stolen["j-host-clocks"].token == 2

        behind, ahead = RecordClock(store, host(-SKEW)), RecordClock(store, host(SKEW))
        assert abs(ahead() - behind()) < timedelta(seconds=2)
        assert abs(ahead() - datetime.now(UTC)) < timedelta(seconds=2)  # the server's clock
        got = store.acquire_leases(["j-record-clock"], "behind", TTL, behind())
        assert got["j-record-clock"].expires_at - behind() > TTL - timedelta(seconds=2)
        assert store.acquire_leases(["j-record-clock"], "ahead", TTL, ahead()) == {}
        assert store.lease_owners(["j-record-clock"], ahead()) == {"j-record-clock": "behind"}
        # released by its holder, the other host takes it over (the next token)
        store.release_leases(["j-record-clock"], "behind")
        taken = store.acquire_leases(["j-record-clock"], "ahead", TTL, ahead())
        assert taken["j-record-clock"].token == 2
        assert store.acquire_leases(["j-record-clock"], "behind", TTL, behind()) == {}


def test_the_record_clock_of_a_one_machine_record_is_the_host_clock(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "record.db") as store:
        clock = RecordClock(store, lambda: datetime(2030, 1, 1, tzinfo=UTC))
        assert clock() == datetime(2030, 1, 1, tzinfo=UTC) and clock.offset == timedelta(0)


def test_two_hosts_campaign_short_run_breaks_nothing_S35_S49() -> None:
    """The campaign's short run: hosts in network namespaces, skewed clocks, freezes."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "two_hosts.py"), "--short", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert rows and all(r["tried"] > 0 for r in rows), rows
    assert all(r["broke"] == 0 for r in rows), rows
    seen = json.loads(done.stdout.strip().splitlines()[-2].split("; ", 1)[1])
    assert seen["host clocks (s)"] == [30, -30], seen  # the hosts' clocks really differ
    assert abs(seen["skew seen in the record (s)"]) <= 2, seen  # the record's clock is one


def test_status_and_list_on_a_host_whose_clock_runs_ahead_name_the_live_supervisor_S49(
    server: PrivatePostgres, tmp_path: Path
) -> None:
    """A supervisor ticked and holds a job's 20 s lease, by the record's clock; ``dispatch
    status`` on a host 30 s ahead still says it watches the job (by the host clock its
    lease and its tick would look 30 s old: "no supervisor has ticked")."""
    database = f"status_{uuid.uuid4().hex[:8]}"
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    dsn = server.dsn.rsplit("/", 1)[0] + f"/{database}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    env |= {
        "DISPATCH_STORE": dsn,
        "XDG_STATE_HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path),
    }

    def dispatch(*args: str, skew: int = 0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            env=env | {"DISPATCH_TEST_CLOCK_SKEW": str(skew)},
            timeout=120,
            check=False,
        )

    out = dispatch("submit", "--no-start", "--", "true")
    assert out.returncode == 0, out.stderr
    job = out.stdout.split()[0]
    with PostgresStore(dsn) as store:
        now = RecordClock(store)()
        store.acquire_leases([job], "host1:42", TTL, now)
        beat = SupervisorBeat(
            owner="host1:42", host="host1", pid=42, started_at=now, last_tick=now,
            interval=1.0, lease=TTL.total_seconds(),
        )  # fmt: skip
        store.record_beat(beat)
    for skew in (30, -30):
        shown = dispatch("status", job, "--json", skew=skew)
        assert shown.returncode == 0, shown.stderr
        watch = json.loads(shown.stdout)["supervisor"]
        assert watch["watched"] and watch["holds_lease"] and watch["owner"] == "host1:42", watch
        listed = dispatch("list", "--json", skew=skew)  # list judges it by the same clock
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)
        watch = row["supervisor"]
        assert watch["watched"] and watch["holds_lease"] and watch["owner"] == "host1:42", watch
        assert abs(watch["seconds_since_tick"]) < 10, watch
