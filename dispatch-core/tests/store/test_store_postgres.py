"""What only the PostgreSQL store promises: lazy driver, Unreachable, reconnection."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid

import psycopg
import pytest
from dispatch.model.errors import DecodeError, Unreachable
from dispatch.store.postgres import PostgresStore
from psycopg import sql


def free_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def schema(postgres_dsn):
    name = f"dispatch_pg_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_importing_the_store_package_does_not_import_psycopg_S31():
    """Only a postgresql:// store pays for the driver."""
    code = (
        "import sys, tempfile, os\n"
        "from dispatch.store import open_store\n"
        "import dispatch.store.postgres\n"
        "d = tempfile.mkdtemp()\n"
        "open_store('sqlite:///' + os.path.join(d, 'r.db')).close()\n"
        "print('psycopg' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_server_that_does_not_answer_is_unreachable_without_the_password_S5():
    dsn = f"postgresql://dispatch:s3cret@127.0.0.1:{free_port()}/dispatch_test"
    with pytest.raises(Unreachable) as unreachable:
        PostgresStore(dsn, connect_timeout=3)
    assert isinstance(unreachable.value, ConnectionError)
    message = str(unreachable.value)
    assert "127.0.0.1" in message and "s3cret" not in message


def test_a_lost_connection_is_reconnected_and_the_append_made_once_S5(postgres_dsn, schema, ev):
    """A store whose connection was cut reconnects; the append it was making is read back
    (not there: the cut came before it) and made once."""
    name = f"dispatch-test-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(postgres_dsn, schema=schema, application_name=name)
    try:
        store.append("job-a", 0, ev.record("job-a", 1))
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            pid = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
            assert pid, "the store's connection was not found"
            for (backend_pid,) in pid:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend_pid,))
        assert store.append("job-a", 1, [ev.requested("job-a", 2)]) == 2
        assert [e.seq for e in store.read("job-a")] == [1, 2]
    finally:
        store.close()


def test_database_written_by_a_newer_build_is_refused_S6(postgres_dsn, schema):
    PostgresStore(postgres_dsn, schema=schema).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.dispatch_schema SET version = 42").format(sql.Identifier(schema))
        )
    with pytest.raises(DecodeError, match=r"schema version 42.*newer dispatch"):
        PostgresStore(postgres_dsn, schema=schema)


def test_two_stores_opening_one_new_schema_at_once_both_work(postgres_dsn, schema, ev):
    """Supervisors starting together on an empty database must not trip over CREATE TABLE."""
    import threading

    stores: list[PostgresStore] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def open_one() -> None:
        barrier.wait(timeout=30)
        try:
            stores.append(PostgresStore(postgres_dsn, schema=schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    stores[0].append("job-a", 0, ev.record("job-a", 1))
    assert [s.job_id for s in stores[2].jobs()] == ["job-a"]
    for store in stores:
        store.close()
