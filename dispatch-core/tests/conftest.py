"""Fixtures for the record-store contract suite and the supervisor tests: one
``harness`` per real storage.

``harness`` is parametrised over SQLite (a file in tmp_path) and PostgreSQL (a real
server, one fresh schema per test). The PostgreSQL server is started by the project's
idempotent ``.ci/start-postgres.sh`` when it does not answer; if it still does not answer
the test fails with advice: it is never skipped.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest
from dispatch.core.cause import Cause
from dispatch.core.policy import Plan, RecoveryPolicy, Rule
from dispatch.model.declarations import Declarations
from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.events import (
    Event,
    HoldPlaced,
    JobCreated,
    OutcomeCommitted,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.model.spec import JobSpec
from dispatch.store.base import RecordStore
from dispatch.store.postgres import PostgresStore
from dispatch.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[3]
START_POSTGRES = REPO / ".ci" / "start-postgres.sh"
DEFAULT_DSN = "postgresql://dispatch:dispatch@127.0.0.1:5432/dispatch_test"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _answers(dsn: str) -> str | None:
    """None when the server accepts a connection, else why not."""
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.Error as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    dsn = os.environ.get("DISPATCH_TEST_POSTGRES") or DEFAULT_DSN
    if _answers(dsn) is None:
        return dsn
    run = subprocess.run(
        ["bash", str(START_POSTGRES)], capture_output=True, text=True, timeout=600, check=False
    )
    if run.returncode != 0:
        pytest.fail(
            f"PostgreSQL at {dsn} does not answer and {START_POSTGRES} failed "
            f"(exit {run.returncode}):\n{run.stderr}\nRun it as root, or set "
            "DISPATCH_TEST_POSTGRES to the DSN of a server you started.",
            pytrace=False,
        )
    if not os.environ.get("DISPATCH_TEST_POSTGRES"):
        dsn = run.stdout.strip().splitlines()[-1]
    why = _answers(dsn)
    if why is not None:
        pytest.fail(
            f"PostgreSQL at {dsn} still does not answer after {START_POSTGRES}: {why}\n"
            "Check /var/log/postgresql/ and DISPATCH_TEST_POSTGRES.",
            pytrace=False,
        )
    return dsn


class Harness(Protocol):
    """The per-storage glue of the contract suite (the fsspec pattern): everything else is
    shared. ``raw`` runs SQL with the driver directly, bypassing the store, written with
    ``?`` placeholders."""

    kind: str

    def open(self) -> RecordStore: ...

    def raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def child_open(self) -> str: ...


@dataclass
class SQLiteHarness:
    path: Path
    kind: str = "sqlite"

    def open(self) -> RecordStore:
        return SQLiteStore(self.path)

    def raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            with db:
                return db.execute(sql, tuple(params)).fetchall()
        finally:
            db.close()

    def child_open(self) -> str:
        return (
            "from dispatch.store.sqlite import SQLiteStore; "
            f"store = SQLiteStore({str(self.path)!r})"
        )


@dataclass
class PostgresHarness:
    dsn: str
    schema: str
    kind: str = "postgres"

    def open(self) -> RecordStore:
        return PostgresStore(self.dsn, schema=self.schema)

    def raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg
        from psycopg import sql as pgsql

        with psycopg.connect(self.dsn) as conn:
            conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
            cursor = conn.execute(sql.replace("?", "%s"), tuple(params))  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def child_open(self) -> str:
        return (
            "from dispatch.store.postgres import PostgresStore; "
            f"store = PostgresStore({self.dsn!r}, schema={self.schema!r})"
        )


@pytest.fixture(params=["sqlite", "postgres"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "sqlite":
        yield SQLiteHarness(tmp_path / "state" / "record.db")
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    schema = f"dispatch_test_{uuid.uuid4().hex[:12]}"
    yield PostgresHarness(dsn, schema)
    import psycopg
    from psycopg import sql as pgsql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


@pytest.fixture
def store(harness: Harness) -> Iterator[RecordStore]:
    with harness.open() as opened:
        yield opened


PLAN = Plan.bind(
    RecoveryPolicy(rules=(Rule(on=(CauseKind.PREEMPTED,), action="resubmit", budget=2),)),
    Declarations(name="local", node_loss_window=timedelta(minutes=5), reports=frozenset(CauseKind)),
)


class Events:
    """Builds valid events; tests change one thing at a time from these."""

    def created(
        self, job_id: str, *, backend: str = "local", name: str = "train", at: datetime = T0
    ) -> JobCreated:
        return JobCreated(
            job_id=job_id,
            seq=1,
            at=at,
            name=name,
            backend=backend,
            spec=JobSpec(name=name, command=("python", "train.py")),
            plan=PLAN,
        )

    def requested(self, job_id: str, seq: int, submission: int = 1) -> SubmissionRequested:
        return SubmissionRequested(
            job_id=job_id, seq=seq, at=T0 + timedelta(seconds=seq), submission=submission
        )

    def object_created(self, job_id: str, seq: int, object_id: str = "4242") -> SubmissionCreated:
        return SubmissionCreated(
            job_id=job_id,
            seq=seq,
            at=T0 + timedelta(seconds=seq),
            submission=1,
            object_id=object_id,
        )

    def hold(self, job_id: str, seq: int) -> HoldPlaced:
        return HoldPlaced(
            job_id=job_id,
            seq=seq,
            at=T0 + timedelta(seconds=seq),
            cause=Cause(kind=CauseKind.HELD, provenance=Provenance.ACTOR, actor="ana"),
        )

    def outcome(self, job_id: str, seq: int, state: State = State.SUCCEEDED) -> OutcomeCommitted:
        kind = {
            State.SUCCEEDED: CauseKind.NONE,
            State.FAILED: CauseKind.NON_ZERO_EXIT,
            State.CANCELLED: CauseKind.CANCELLED,
        }[state]
        return OutcomeCommitted(
            job_id=job_id,
            seq=seq,
            at=T0 + timedelta(seconds=seq),
            state=state,
            cause=Cause(kind=kind, provenance=Provenance.SCHEDULER, detail="exit 0"),
        )

    def record(self, job_id: str, length: int, **created: Any) -> list[Event]:
        """A valid record of ``length`` events: created, then submission steps."""
        events: list[Event] = [self.created(job_id, **created)]
        events += [self.requested(job_id, seq, submission=seq - 1) for seq in range(2, length + 1)]
        return events


@pytest.fixture
def ev() -> Events:
    return Events()
