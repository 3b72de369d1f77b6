"""The supervisors' beats and the lease owners, run unchanged against every store.

``status`` says who watches a job from two reads: the owner of the job's live lease, and
the beat (last tick) each supervisor records once per tick.
"""

from __future__ import annotations

import sqlite3
import subprocess
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from dispatch.model.errors import BadInput
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.base import BEATS_KEPT
from dispatch.store.sqlite import SQLiteStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)


def beat(owner: str = "login1:4242", at: datetime = T0, **changes: object) -> SupervisorBeat:
    host, pid = owner.rsplit(":", 1)
    values: dict[str, object] = {
        "owner": owner,
        "host": host,
        "pid": int(pid),
        "started_at": T0,
        "last_tick": at,
        "interval": 5.0,
        "lease": 90.0,
    }
    values.update(changes)
    return SupervisorBeat.model_validate(values)


def test_a_beat_round_trips_and_replaces_the_supervisors_previous_one(store):
    assert store.beats() == []
    store.record_beat(beat(at=T0))
    store.record_beat(beat(at=T0 + timedelta(seconds=5)))
    assert store.beats() == [beat(at=T0 + timedelta(seconds=5))]


def test_beats_come_most_recent_first_with_a_clean_stop_kept(store):
    store.record_beat(beat("login1:1", at=T0))
    store.record_beat(beat("login2:2", at=T0 + timedelta(seconds=9)))
    stopped = beat("login1:1", at=T0 + timedelta(seconds=3), stopped_at=T0 + timedelta(seconds=4))
    store.record_beat(stopped)
    assert store.beats() == [beat("login2:2", at=T0 + timedelta(seconds=9)), stopped]


def test_supervisors_silent_longer_than_kept_are_forgotten(store):
    store.record_beat(beat("old:1", at=T0))
    store.record_beat(beat("new:2", at=T0 + BEATS_KEPT + timedelta(seconds=1)))
    assert [b.owner for b in store.beats()] == ["new:2"]


def test_a_beat_that_is_not_a_beat_is_refused(store):
    with pytest.raises(BadInput):
        store.record_beat({"owner": "x"})
    assert store.beats() == []


def test_lease_owners_names_live_leases_only(store):
    store.acquire_leases(["job-a", "job-b", "job-c"], "login1:4242", TTL, T0)
    store.release_leases(["job-b"], "login1:4242")
    store.acquire_leases(["job-d"], "login2:7", TTL, T0 - 2 * TTL)  # expired by T0
    owners = store.lease_owners(["job-a", "job-b", "job-c", "job-d", "job-e"], T0)
    assert owners == {"job-a": "login1:4242", "job-c": "login1:4242"}
    assert store.lease_owners([], T0) == {}
    assert store.lease_owners(["job-a"], T0 + TTL + timedelta(seconds=1)) == {}


def test_a_read_only_record_from_before_beats_reads_as_no_beats(tmp_path):
    """A record file written before supervisors recorded beats, on a read-only file system
    (a real tmpfs remounted read-only), says no supervisor has ticked instead of failing."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {mounted.stderr}", pytrace=False)
    try:
        path = mount / "record.db"
        SQLiteStore(path).close()
        db = sqlite3.connect(path)
        db.execute("DROP TABLE dispatch_supervisors")
        db.commit()
        db.close()
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        with SQLiteStore(path) as store:
            assert store.read_only
            assert store.beats() == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_postgres_record_of_schema_2_gains_the_beats_table_when_opened(postgres_dsn):
    """A database written before beats (schema 2) is upgraded in place by the next open."""
    from dispatch.store.postgres import SCHEMA_VERSION

    from conftest import PostgresHarness

    harness = PostgresHarness(postgres_dsn, f"dispatch_beats_{uuid.uuid4().hex[:10]}")
    try:
        harness.open().close()
        harness.raw("DROP TABLE dispatch_supervisors")
        harness.raw("UPDATE dispatch_schema SET version = 2")
        with harness.open() as store:
            store.record_beat(beat())
            assert store.beats() == [beat()]
        assert harness.raw("SELECT version FROM dispatch_schema") == [(SCHEMA_VERSION,)]
    finally:
        harness.raw(f"DROP SCHEMA IF EXISTS {harness.schema} CASCADE")
