"""PostgreSQL restarts and lost connections under the record (S-33, S-34).

On a private server (never the shared one): a connection lost mid-call is reconnected; an
append whose COMMIT reached the server but whose answer was lost is read back, found, and
not appended again; one cut before its commit is appended again, once; reads and leases
go on after ``pg_terminate_backend`` and after a fast and an immediate restart; a
supervisor loop outlives the server's restarts. The campaign with supervisor processes
and CLI traffic is ``benchmarks/pg_restart_campaign.py``; its short run is the last test.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from dispatch.model.errors import Unreachable
from dispatch.store.postgres import PostgresStore
from dispatch_testing.private_postgres import CuttingProxy, PrivatePostgres

from conftest import Events

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def server() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    yield pg
    pg.close()


@pytest.fixture
def proxy(server: PrivatePostgres) -> Iterator[CuttingProxy]:
    cutting = CuttingProxy(server.port)
    yield cutting
    cutting.close()


def schema() -> str:
    return f"dispatch_r_{uuid.uuid4().hex[:10]}"


def events_of(server: PrivatePostgres, name: str, job_id: str) -> list[tuple[int, str]]:
    import psycopg

    with psycopg.connect(server.dsn) as conn:
        rows = conn.execute(
            f"SELECT seq, type FROM {name}.dispatch_events WHERE job_id = %s ORDER BY seq",
            (job_id,),
        ).fetchall()
    return [(int(seq), str(kind)) for seq, kind in rows]


def test_an_append_whose_commit_answer_was_lost_is_read_back_not_appended_again_S33(
    server: PrivatePostgres, proxy: CuttingProxy, ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    name = schema()
    dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    with PostgresStore(dsn, schema=name) as store:
        store.append("j-lost", 0, [ev.created("j-lost")])
        proxy.arm(b"COMMIT")  # the COMMIT reaches the server; its answer never comes back
        with caplog.at_level(logging.WARNING, logger="dispatch.store.postgres"):
            version = store.append("j-lost", 1, [ev.requested("j-lost", 2)])
        assert proxy.cuts == 1
        assert version == 2
        assert "was committed; not appending it again" in caplog.text
        assert [e.seq for e in store.read("j-lost")] == [1, 2]
    assert events_of(server, name, "j-lost") == [(1, "job-created"), (2, "submission-requested")]


def test_an_append_cut_before_its_commit_is_appended_again_once_S33(
    server: PrivatePostgres, proxy: CuttingProxy, ev: Events, caplog: pytest.LogCaptureFixture
) -> None:
    name = schema()
    dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    with PostgresStore(dsn, schema=name) as store:
        store.append("j-cut", 0, [ev.created("j-cut")])
        proxy.arm(b"COMMIT", before_server=True)  # the server never sees the COMMIT
        with caplog.at_level(logging.WARNING, logger="dispatch.store.postgres"):
            version = store.append("j-cut", 1, [ev.requested("j-cut", 2)])
        assert proxy.cuts == 1 and version == 2
        assert "was not committed; appending it again" in caplog.text
    assert events_of(server, name, "j-cut") == [(1, "job-created"), (2, "submission-requested")]


def test_a_lost_create_is_read_back_so_a_job_is_recorded_once_S33(
    server: PrivatePostgres, proxy: CuttingProxy, ev: Events
) -> None:
    name = schema()
    dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    with PostgresStore(dsn, schema=name) as store:
        proxy.arm(b"COMMIT")
        assert store.append("j-new", 0, [ev.created("j-new")]) == 1
        assert [s.job_id for s in store.jobs()] == ["j-new"]


@pytest.mark.parametrize("fault", ["terminate", "fast", "immediate"])
def test_reads_appends_and_leases_go_on_after_the_connection_is_dropped_S33(
    server: PrivatePostgres, ev: Events, fault: str
) -> None:
    name = schema()
    with PostgresStore(server.dsn, schema=name) as store:
        store.append("j-1", 0, [ev.created("j-1")])
        if fault == "terminate":
            assert server.terminate() >= 1
        else:
            server.restart(fault)
        assert [e.seq for e in store.read("j-1")] == [1]  # reconnected for the read
        if fault == "terminate":
            assert server.terminate() >= 1
        assert store.append("j-1", 1, [ev.requested("j-1", 2)]) == 2
        if fault == "terminate":
            assert server.terminate() >= 1
        from datetime import UTC, datetime

        got = store.acquire_leases(["j-1"], "sup-a", timedelta(seconds=30), datetime.now(UTC))
        assert "j-1" in got
    assert events_of(server, name, "j-1") == [(1, "job-created"), (2, "submission-requested")]


def test_a_server_that_stays_down_is_unreachable_after_the_window_S5(
    server: PrivatePostgres, ev: Events
) -> None:
    name = schema()
    store = PostgresStore(server.dsn, schema=name, reconnect_window=1.0)
    try:
        store.append("j-down", 0, [ev.created("j-down")])
        server.stop("fast")
        try:
            with pytest.raises(Unreachable, match="record store"):
                store.read("j-down")
        finally:
            server.start()
        assert [e.seq for e in store.read("j-down")] == [1]
    finally:
        store.close()


def test_a_supervisor_loop_outlives_restarts_of_its_record_S34(
    server: PrivatePostgres, ev: Events
) -> None:
    """Supervisor.run keeps ticking through a fast and an immediate restart."""
    from dispatch import Registry
    from dispatch.supervisor import Supervisor, TickReport
    from dispatch_testing.simulated import SimScheduler, SimulatedBackend

    name = schema()
    store = PostgresStore(server.dsn, schema=name, reconnect_window=1.0)
    registry = Registry.from_plugins({"simulated": SimulatedBackend(SimScheduler())})
    supervisor = Supervisor(store, registry, owner="sup-loop")
    ticks: list[TickReport] = []
    seen = threading.Condition()
    stop = threading.Event()

    def on_tick(report: TickReport) -> None:
        with seen:
            ticks.append(report)
            seen.notify_all()

    def ticked(more: int) -> None:
        with seen:
            goal = len(ticks) + more
            assert seen.wait_for(lambda: len(ticks) >= goal, timeout=120), ticks[-3:]

    loop = threading.Thread(
        target=supervisor.run, kwargs={"interval": 0.05, "stop": stop, "on_tick": on_tick}
    )
    loop.start()
    try:
        ticked(2)
        for mode in ("fast", "immediate"):
            server.stop(mode)
            ticked(2)  # ticks while the server is down: skipped, the loop alive
            server.start()
            ticked(3)
        assert any(e.startswith("tick skipped") for r in ticks for e in r.errors)
        assert ticks[-1].errors == [] and loop.is_alive()
    finally:
        stop.set()
        loop.join(120)
        store.close()
    assert not loop.is_alive()


def test_the_restart_campaign_short_run_breaks_nothing_S34() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "pg_restart_campaign.py"), "--short", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert rows and all(r["tried"] > 0 for r in rows), rows
    assert all(r["broke"] == 0 for r in rows), rows
