"""A supervisor the Python API runs (``Client.supervise``) records a beat each tick and its
stop, and ``Client.status`` says whether one watches the job; the one tick a command runs
on its own job (submit's first submission) is no supervisor and records none."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dispatch import Client
from dispatch_testing.waiting import eventually


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DISPATCH_STORE", raising=False)
    with Client(f"sqlite://{tmp_path / 'record.db'}") as opened:
        yield opened


def test_the_loop_beats_each_tick_holds_the_job_and_records_its_stop(client: Client) -> None:
    job = client.submit(["sleep", "300"])
    first = client.status(job.job_id).supervisor
    assert first is not None and not first.watched
    assert first.message.startswith("no supervisor has ever ticked")
    assert client.store.beats() == [], "submit's own tick is not a supervisor"

    stop = threading.Event()
    ticks: list[object] = []
    loop = threading.Thread(
        target=client.supervise,
        kwargs={"interval": 0.1, "stop": stop, "on_tick": ticks.append},
        daemon=True,
    )
    loop.start()
    try:
        seen = eventually(
            lambda: client.status(job.job_id).supervisor,
            until=lambda s: s is not None and s.holds_lease,
            what="the running supervisor holds the job",
        )
        assert seen is not None and seen.watched
        assert (seen.host, seen.pid) == (socket.gethostname(), os.getpid())
        assert seen.message.startswith(f"supervised by {socket.gethostname()}:{os.getpid()}")
        eventually(lambda: len(ticks) >= 3, what="three ticks")
        (beat,) = client.store.beats()
        assert beat.stopped_at is None and (beat.interval, beat.lease) == (0.1, 90.0)
        assert beat.last_tick >= beat.started_at
    finally:
        stop.set()
        loop.join(timeout=60)
    assert not loop.is_alive()
    (beat,) = client.store.beats()
    assert beat.stopped_at is not None
    after = client.status(job.job_id).supervisor
    assert after is not None and not after.watched and "was stopped" in after.message
    client.job(job.job_id).cancel()


def test_an_ended_job_says_nothing_about_supervisors(client: Client) -> None:
    job = client.submit(["true"])
    final = job.wait(timeout=60, interval=0.1)
    assert final.state.value == "succeeded"
    assert client.status(job.job_id).supervisor is None
    assert client.status(job.job_id, record=False, backend="local").supervisor is None


def test_a_single_tick_records_its_stop_so_nobody_is_named_after_it_exits(
    client: Client,
) -> None:
    """``supervise --once`` (cron's way) beats and then records its stop: status does not
    name the exited process as the job's supervisor for the rest of its lease."""
    job = client.submit(["true"], start=False)
    client.supervise(once=True)
    (beat,) = client.store.beats()
    assert beat.stopped_at is not None, "a single tick left its beat running"
    after = client.status(job.job_id).supervisor
    assert after is not None and not after.watched, after
    assert not after.message.startswith("supervised by"), after.message
