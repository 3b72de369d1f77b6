"""Notifications on a record shared by supervisors: once per (job, seq) (issue of two
cursors: a person told twice, or not at all).

Two ``dispatch supervise`` processes, each with a state directory (and so a notification
cursor) of its own, as on two hosts, share one PostgreSQL record (a private server) and
one receiver. Jobs end; every ``outcome-committed`` reaches the receiver once, whoever
delivers it; a delivery the receiver refuses (503) is tried again by whichever supervisor
comes next, and still arrives once. The delivery table in the record says ``delivered``
for each, and every request carried its ``Idempotency-Key`` (``job:seq``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from dispatch_testing.crash import DISPATCH
from dispatch_testing.private_postgres import PrivatePostgres

WAIT = 180.0


class Receiver:
    """An HTTP receiver counting the requests per Idempotency-Key; the first request for a
    job named in ``refuse_first`` is answered 503."""

    def __init__(self) -> None:
        self.ok: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.refuse_first = {"n0", "n1"}
        self.bodies: dict[str, Any] = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    name = (body.get("status") or {}).get("name")
                    refuse = name in receiver.refuse_first and not receiver.refused[key]
                    if refuse:
                        receiver.refused[key] += 1
                    else:
                        receiver.ok[key] += 1
                        receiver.bodies[key] = body
                self.send_response(503 if refuse else 200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    yield pg
    pg.close()


def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_two_supervisors_on_one_record_deliver_each_notification_once(
    server: PrivatePostgres, tmp_path: Path
) -> None:
    database = f"notify_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    dsn = server.dsn.rsplit("/", 1)[0] + f"/{database}"
    receiver = Receiver()
    base = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    base |= {
        "DISPATCH_STORE": dsn,
        "DISPATCH_NOTIFY_URL": receiver.url,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }

    def env(host: str) -> dict[str, str]:
        return base | {"XDG_STATE_HOME": str(tmp_path / host)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args], capture_output=True, text=True, env=env("cli"), timeout=WAIT
        )

    def sql(query: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn) as conn:
            return conn.execute(query).fetchall()

    assert run("list").returncode == 0  # creates the record's tables
    logs = [tmp_path / f"supervisor-{n}.log" for n in (1, 2)]
    supervisors = []
    for n, log in enumerate(logs, start=1):
        with open(log, "w") as err:
            supervisors.append(
                subprocess.Popen(
                    [DISPATCH, "supervise", "--interval", "0.3", "--lease", "60"],
                    env=env(f"host{n}"),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    try:
        until(
            "both supervisors to tick",
            lambda: len(sql("SELECT owner FROM dispatch_supervisors")) == 2,
        )
        until(
            "the sink's start to be recorded",
            lambda: len(sql("SELECT sink FROM dispatch_delivery_sinks")) == 1,
        )
        jobs = []
        for n in range(8):
            command = ["true"] if n % 2 else ["sh", "-c", "exit 3"]
            out = run("submit", "--no-start", "--name", f"n{n}", "--", *command)
            assert out.returncode == 0, out.stderr
            jobs.append(out.stdout.split()[0])

        def outcome_keys() -> set[str]:
            rows = sql("SELECT job_id, seq FROM dispatch_events WHERE type = 'outcome-committed'")
            return {f"{job}:{seq}" for job, seq in rows}

        until("every job to end", lambda: len(outcome_keys()) == len(jobs))
        # what a person is told: every outcome, and the escalations before the failed ones
        told = sql(
            "SELECT job_id, seq FROM dispatch_events WHERE type IN "
            "('hold-placed', 'escalation-raised', 'outcome-committed')"
        )
        keys = {f"{job}:{seq}" for job, seq in told}
        assert outcome_keys() < keys
        until(
            "every outcome to be delivered",
            lambda: (
                sql("SELECT count(*) FROM dispatch_deliveries WHERE state = 'delivered'")[0][0]
                == len(keys)
            ),
        )
        # both supervisors go on ticking (and reading the feed) a while longer
        ticks = dict(sql("SELECT owner, last_tick FROM dispatch_supervisors"))
        until(
            "both supervisors to tick again",
            lambda: all(
                t > ticks[o] for o, t in sql("SELECT owner, last_tick FROM dispatch_supervisors")
            ),
        )
        for sup, log in zip(supervisors, logs, strict=True):
            assert sup.poll() is None, log.read_text()[-3000:]
    finally:
        for sup in supervisors:
            sup.send_signal(signal.SIGTERM)
        for sup in supervisors:
            sup.wait(WAIT)
    with receiver.lock:
        assert set(receiver.ok) == keys, (receiver.ok, keys)
        assert all(n == 1 for n in receiver.ok.values()), receiver.ok  # once per (job, seq)
        assert all(receiver.bodies[k]["key"] == k for k in keys)
    rows = sql("SELECT job_id, seq, state, attempts FROM dispatch_deliveries")
    assert {f"{j}:{s}" for j, s, _, _ in rows} == keys
    assert {state for _, _, state, _ in rows} == {"delivered"}
    retried = {f"{j}:{s}" for j, s, _, attempts in rows if attempts == 1}
    assert retried == set(receiver.refused), (retried, receiver.refused)
    assert {k.split(":")[0] for k in retried} == set(jobs[:2])  # n0, n1: refused once each
