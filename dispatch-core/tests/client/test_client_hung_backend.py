"""A backend whose discovery never returns holds up no request and no ``wait`` past the
client's ``discovery_timeout`` (S-5): a third-party adapter may have no timeout of its own,
and a person who asked to cancel must hear "recorded, a supervisor will carry it out"
rather than wait on a frozen scheduler.

The hung discovery blocks on an event the test sets at the end. Nothing here measures
time: each call runs on a thread joined with a generous limit, which only a call that
waits for the event (the fault) can exceed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dispatch import BadInput, CauseKind, Client, Declarations, Discovery, JobSpec, hookimpl
from dispatch.backends import Registry
from dispatch.client import Deferred
from dispatch.handle import JobHandle, WaitTimeout
from dispatch.job_records import load_job
from dispatch.store.base import RecordStore

LIMIT = 60.0  # only a call waiting for the release comes near it


class Freezing:
    """Submits at once; once ``frozen``, its discovery waits for ``released``."""

    def __init__(self) -> None:
        self.frozen = False
        self.released = threading.Event()
        self.discoveries = 0

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name="freezing",
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE, CauseKind.UNKNOWN}),
        )

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        self.discoveries += 1
        if self.frozen:
            self.released.wait()
        return Discovery(backend="freezing", at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        return f"obj-{job_id}-{submission}"

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Any) -> None:
        return None


@pytest.fixture
def backend() -> Iterator[Freezing]:
    made = Freezing()
    try:
        yield made
    finally:
        made.released.set()  # the daemon threads left waiting end


def _within_limit(call: Callable[[], Any]) -> BaseException | None:
    """What ``call`` raised (None if it returned), failing the test if it did not end."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMIT)
    assert raised, "the call waited on the frozen scheduler"
    return raised[0]


@pytest.fixture
def job(store: RecordStore, backend: Freezing) -> JobHandle:
    """A job submitted (an object to stop), then its scheduler frozen."""
    client = Client(
        store, registry=Registry.from_plugins({"freezing": backend}), discovery_timeout=0.3
    )
    job = client.submit(["train"], backend="freezing")
    assert load_job(store, job.job_id).current is not None
    backend.frozen = True
    return job


def test_a_cancel_on_a_frozen_scheduler_is_recorded_and_deferred_S5(
    store: RecordStore, job: JobHandle
) -> None:
    raised = _within_limit(job.cancel)
    assert isinstance(raised, Deferred), raised
    assert "a supervisor will carry it out" in str(raised)
    assert "did not answer within 0.3 s" in str(raised) or "no answer within 0.3 s" in str(raised)
    folded = load_job(store, job.job_id)
    assert folded.cancel is not None  # the request is on the record
    assert folded.outcome is None  # nothing decided on a scheduler that did not answer


def test_wait_on_a_frozen_scheduler_times_out_as_asked_S5(job: JobHandle) -> None:
    problems: list[str] = []
    raised = _within_limit(
        lambda: job.wait(
            timeout=1.0, interval=0.1, on_unreachable=lambda _name, why: problems.append(why)
        )
    )
    assert isinstance(raised, WaitTimeout), raised
    assert problems, "the frozen scheduler was never reported"


def test_the_discovery_timeout_is_checked_like_any_duration_S36(store: RecordStore) -> None:
    with pytest.raises(BadInput, match="discovery timeout"):
        Client(store, discovery_timeout=-1)
