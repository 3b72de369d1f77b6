"""Access control on a shared PostgreSQL record (S-51), with real roles.

The model (docs/record.md): the database role is the identity; a job belongs to the role
that created it; only that role and members of ``dispatch_operator`` (supervisors) see or
change its rows. ``dispatch_alice`` and ``dispatch_bob`` are two users, ``dispatch_sup`` a
supervisor; ``.ci/start-postgres.sh`` creates them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from dispatch.model.errors import BadInput, RecordConflict, UnknownJob
from dispatch.store.postgres import PostgresStore
from psycopg import sql

REPO = Path(__file__).resolve().parents[3]
ROLES = ("dispatch_alice", "dispatch_bob", "dispatch_sup", "dispatch_operator")


def role_dsn(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return f"postgresql://{role}:{role}@{parts.hostname}:{parts.port or 5432}{parts.path}"


@dataclass
class Shared:
    dsn: str
    schema: str

    def store(self, role: str) -> PostgresStore:
        return PostgresStore(role_dsn(self.dsn, role), schema=self.schema)

    def raw(self, role: str) -> psycopg.Connection:
        conn = psycopg.connect(role_dsn(self.dsn, role), autocommit=True)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return conn


@pytest.fixture
def shared(postgres_dsn) -> Iterator[Shared]:
    with psycopg.connect(postgres_dsn) as conn:
        have = {r for (r,) in conn.execute("SELECT rolname FROM pg_roles").fetchall()}
    if not set(ROLES) <= have:
        done = subprocess.run(
            ["bash", str(REPO / ".ci" / "start-postgres.sh")], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(f"start-postgres.sh could not create the roles:\n{done.stderr}")
    schema = f"dispatch_acl_{uuid.uuid4().hex[:10]}"
    # The tables' owner opens the record first, as a deployment's administrator would.
    PostgresStore(postgres_dsn, schema=schema).close()
    yield Shared(postgres_dsn, schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def two_users(shared, ev):
    alice, bob = shared.store("dispatch_alice"), shared.store("dispatch_bob")
    alice.append("job-a", 0, ev.record("job-a", 2))
    bob.append("job-b", 0, ev.record("job-b", 1))
    yield alice, bob
    alice.close()
    bob.close()


def test_each_user_sees_only_their_own_jobs_S51(two_users, ev):
    alice, bob = two_users
    assert [s.job_id for s in alice.jobs()] == ["job-a"]
    assert [s.job_id for s in bob.jobs()] == ["job-b"]
    assert alice.active_jobs() == ["job-a"] and bob.active_jobs() == ["job-b"]
    assert {e.job_id for e in bob.read_feed(0).events} == {"job-b"}
    assert {e.job_id for e in bob.read_since(0)[0]} == {"job-b"}
    with pytest.raises(UnknownJob):
        bob.read("job-a")
    with pytest.raises(UnknownJob):
        alice.read_many(["job-a", "job-b"])


def test_another_user_cannot_cancel_or_change_a_job_S51(two_users, ev):
    alice, bob = two_users
    with pytest.raises(RecordConflict):
        bob.append("job-a", 2, [ev.hold("job-a", 3)])
    with pytest.raises(RecordConflict):
        bob.append("job-a", 0, [ev.created("job-a", name="hijack")])
    assert alice.read("job-a") == ev.record("job-a", 2)
    assert alice.append("job-a", 2, [ev.hold("job-a", 3)]) == 3


def test_raw_sql_as_another_user_cannot_touch_a_job_either_S51(shared, two_users, ev):
    """The store is not the guard: the database refuses what the policies do not allow."""
    with shared.raw("dispatch_bob") as bob:
        hold = ev.hold("job-a", 3).model_dump_json()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(
                "INSERT INTO dispatch_events (job_id, seq, type, at, body) "
                "VALUES ('job-a', 3, 'hold-placed', now(), %s)",
                (hold,),
            )
        cancel = "UPDATE dispatch_jobs SET outcome = 'cancelled' WHERE job_id = 'job-a'"
        assert bob.execute(cancel).rowcount == 0
        assert bob.execute("UPDATE dispatch_leases SET owner = 'bob'").rowcount == 0
        assert bob.execute("SELECT count(*) FROM dispatch_events").fetchone() == (1,)
        # Not even one's own history can be rewritten: the record is append-only.
        assert bob.execute("UPDATE dispatch_events SET body = '{}'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute("DELETE FROM dispatch_events")
    with shared.raw("dispatch_bob") as bob:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(
                "INSERT INTO dispatch_jobs (job_id, name, backend, created_at, version, "
                "owner_role) VALUES ('job-x', 'x', 'local', now(), 1, 'dispatch_alice')"
            )
    with shared.raw("dispatch_bob") as bob:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(
                "INSERT INTO dispatch_events (job_id, seq, type, at, body, role) "
                "VALUES ('job-b', 2, 'hold-placed', now(), %s, 'dispatch_alice')",
                (ev.hold("job-b", 2).model_dump_json(),),
            )
    with shared.raw("dispatch_alice") as alice:
        assert alice.execute("SELECT max(seq) FROM dispatch_events").fetchone() == (2,)


def test_each_event_names_the_role_that_appended_it_S51(shared, two_users, ev):
    alice, _ = two_users
    with shared.store("dispatch_sup") as sup:
        sup.append("job-a", 2, [ev.hold("job-a", 3)])
    with shared.raw("dispatch_sup") as conn:
        rows = conn.execute(
            "SELECT seq, role FROM dispatch_events WHERE job_id = 'job-a' ORDER BY seq"
        ).fetchall()
        owners = conn.execute(
            "SELECT job_id, owner_role FROM dispatch_jobs ORDER BY job_id"
        ).fetchall()
    assert rows == [(1, "dispatch_alice"), (2, "dispatch_alice"), (3, "dispatch_sup")]
    assert owners == [("job-a", "dispatch_alice"), ("job-b", "dispatch_bob")]
    assert [s.owner for s in alice.jobs()] == ["dispatch_alice"]


def test_a_supervisor_role_sees_and_acts_on_every_job_S51(shared, two_users, ev):
    from datetime import UTC, datetime, timedelta

    alice, bob = two_users
    with shared.store("dispatch_sup") as sup:
        assert sorted(s.job_id for s in sup.jobs()) == ["job-a", "job-b"]
        assert {e.job_id for e in sup.read_feed(0).events} == {"job-a", "job-b"}
        now = datetime.now(UTC)
        leases = sup.acquire_leases(["job-a", "job-b"], "sup-1", timedelta(minutes=5), now)
        assert set(leases) == {"job-a", "job-b"}
        assert sup.append("job-b", 1, [ev.hold("job-b", 2)], lease=leases["job-b"]) == 2
        # The owner sees the supervisor's lease on their job and cannot take it; another
        # user cannot even find it.
        assert alice.acquire_leases(["job-a"], "alice-cli", timedelta(minutes=5), now) == {}
        assert bob.acquire_leases(["job-a"], "bob-cli", timedelta(minutes=5), now) == {}
    assert [e.seq for e in bob.read("job-b")] == [1, 2]


def test_dispatch_cancel_of_another_users_job_exits_2_and_changes_nothing_S51(
    shared, two_users, ev, tmp_path
):
    alice, _ = two_users
    dsn = role_dsn(shared.dsn, "dispatch_bob") + f"?options=-csearch_path%3D{shared.schema}"
    env = {**os.environ, "DISPATCH_STORE": dsn, "XDG_STATE_HOME": str(tmp_path)}
    dispatch = Path(sys.executable).parent / "dispatch"
    done = subprocess.run(
        [str(dispatch), "cancel", "job-a"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "job-a" in done.stderr and "Traceback" not in done.stderr
    assert "dispatch_bob:dispatch_bob" not in done.stderr
    assert alice.read("job-a") == ev.record("job-a", 2)


def test_a_role_that_may_not_create_the_tables_gets_a_clear_refusal_S51(postgres_dsn):
    """A new schema, first opened by an ordinary user without the right to create it."""
    schema = f"dispatch_acl_{uuid.uuid4().hex[:10]}"
    with pytest.raises(BadInput) as refused:
        PostgresStore(role_dsn(postgres_dsn, "dispatch_alice"), schema=schema)
    assert "may not create or upgrade its tables" in str(refused.value)
    assert "dispatch_alice:dispatch_alice" not in str(refused.value)
