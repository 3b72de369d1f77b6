"""``dispatch status`` while the scheduler cannot be asked (S-5): it shows what the record
knows, says the scheduler is unreachable with its words and since when, exits with the
unreachable code (3) and appends nothing. A scheduler that does not answer at all (a
frozen controller) is bounded by ``--timeout``: status does not wait out its hang.

The scheduler is the simulated one: its unreachable fault, and a discovery that blocks
until the test lets it go (a frozen controller, as SIGSTOP of slurmctld makes one).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from core_bench import policy
from dispatch import Action, CauseKind, JobSpec, Registry
from dispatch.cli import exit_codes
from dispatch.cli.common import Context
from dispatch.cli.main import cli
from dispatch.job_records import create_job
from dispatch.model.discovery import Discovery
from dispatch.plugin import hookimpl
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor
from dispatch_testing.simulated import SimScheduler, SimulatedBackend
from dispatch_testing.simulated.scheduler import runs_forever

from conftest import Harness

SPEC = JobSpec(command=("python", "train.py"), name="train")
PREEMPT = ([CauseKind.PREEMPTED], Action.RESUBMIT, 2)


class FrozenBackend(SimulatedBackend):
    """The simulated scheduler whose controller stops answering while ``frozen`` is set:
    a discovery blocks until it is cleared (as a SIGSTOPped slurmctld leaves squeue)."""

    def __init__(self, scheduler: SimScheduler) -> None:
        super().__init__(scheduler)
        self.frozen = threading.Event()
        self.thawed = threading.Event()

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        if self.frozen.is_set():
            self.thawed.wait(600)
        return super().dispatch_discover(job_ids)


@pytest.fixture(autouse=True)
def _no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture
def frozen_sim() -> Iterator[tuple[SimScheduler, FrozenBackend]]:
    sched = SimScheduler()
    backend = FrozenBackend(sched)
    yield sched, backend
    backend.thawed.set()


def running_job(store: RecordStore, sched: SimScheduler, registry: Registry) -> str:
    job = create_job(
        store, registry, backend="simulated", spec=SPEC, policy=policy(PREEMPT), now=sched.now()
    )
    sched.plan(job, 1, runs_forever())
    sup = Supervisor(store, registry, owner="sup", clock=sched.now)
    for _ in range(3):
        sup.tick()
        sched.advance(2)
    sup.release()
    return job


def status(harness: Harness, registry: Registry, *args: str) -> Any:
    """``dispatch status ARGS`` on a store of its own (the command closes it)."""
    obj = Context(store=harness.open(), registry=registry)
    return CliRunner().invoke(cli, ["status", *args], obj=obj)


def test_status_with_the_scheduler_down_shows_the_record_and_exits_unreachable_S5(
    store: RecordStore, harness: Harness
) -> None:
    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    job = running_job(store, sched, registry)
    healthy = status(harness, registry, job)
    assert healthy.exit_code == 0 and "running" in healthy.output, healthy.output
    before = store.read(job)
    with sched.down():
        out = status(harness, registry, job)
        data = json.loads(status(harness, registry, job, "--json").output)
    assert out.exit_code == exit_codes.UNREACHABLE, out.output
    text = out.output
    assert f"job       {job}  (train)" in text
    assert "state     unknown" in text  # running or not, only the scheduler knows
    assert "scheduler UNREACHABLE since " in text and "(this call)" in text
    assert "simulated scheduler:" in text  # the scheduler's own words
    assert "#1  sim-" in text  # the recorded object
    assert data["unreachable"]["backend"] == "simulated"
    assert data["unreachable"]["words"].startswith("simulated scheduler:")
    assert data["unreachable"]["since"] and data["state"] == "unknown"
    assert data["submissions"][0]["object_id"]
    assert store.read(job) == before  # nothing appended
    after = status(harness, registry, job)
    assert after.exit_code == 0 and "running" in after.output and "UNREACHABLE" not in after.output


def test_status_of_a_committed_job_with_the_scheduler_down_is_final_and_exits_0_S5(
    store: RecordStore, harness: Harness
) -> None:
    """A committed outcome never changes, so the scheduler being down changes nothing a
    script waiting on the job's ending needs: exit 0, the outcome, the outage noted."""
    from dispatch_testing.simulated.outcomes import succeed

    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    job = create_job(
        store, registry, backend="simulated", spec=SPEC, policy=policy(PREEMPT), now=sched.now()
    )
    sched.plan(job, 1, succeed(after=1))
    sup = Supervisor(store, registry, owner="sup", clock=sched.now)
    for _ in range(5):
        sup.tick()
        sched.advance(2)
    sup.release()
    with sched.down():
        out = status(harness, registry, job, "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert (data["state"], data["settled"]) == ("succeeded", True)
    assert data["unreachable"]["backend"] == "simulated"


def test_status_of_a_held_job_with_the_scheduler_down_keeps_the_records_hold_S5(
    store: RecordStore, harness: Harness
) -> None:
    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    job = create_job(
        store, registry, backend="simulated", spec=SPEC, policy=policy(PREEMPT), now=sched.now()
    )
    with sched.down():
        out = status(harness, registry, job, "--json")
    assert out.exit_code == exit_codes.UNREACHABLE, out.output
    data = json.loads(out.output)
    assert data["state"] == "pending"  # not submitted yet: the record knows it
    assert data["unreachable"]["backend"] == "simulated"


def test_a_cancel_of_a_job_never_sent_shows_as_asked_with_the_scheduler_down_S5(
    store: RecordStore, harness: Harness
) -> None:
    """Nothing was ever sent, so no object can exist and the record is the whole truth:
    the cancel shows as asked and not yet committed, never ``unknown``."""
    from dispatch.core.interventions import cancel
    from dispatch.job_records import append_request, load_job

    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    job = create_job(
        store, registry, backend="simulated", spec=SPEC, policy=policy(PREEMPT), now=sched.now()
    )
    folded = load_job(store, job)
    append_request(store, folded, cancel(folded, actor="ann", now=sched.now()))
    with sched.down():
        out = status(harness, registry, job, "--json")
    assert out.exit_code == exit_codes.UNREACHABLE, out.output
    data = json.loads(out.output)
    assert (data["state"], data["settled"]) == ("cancelled", False), data
    assert data["cause"]["kind"] == "cancelled"
    assert data["unreachable"]["backend"] == "simulated"


def test_status_does_not_wait_out_a_frozen_scheduler_S5(
    store: RecordStore, harness: Harness, frozen_sim: tuple[SimScheduler, FrozenBackend]
) -> None:
    sched, backend = frozen_sim
    registry = Registry.from_plugins({"simulated": backend})
    job = running_job(store, sched, registry)
    before = store.read(job)
    backend.frozen.set()
    started = time.monotonic()
    out = status(harness, registry, job, "--timeout", "1")
    waited = time.monotonic() - started
    assert out.exit_code == exit_codes.UNREACHABLE, out.output
    assert "did not answer within 1 s" in out.output
    assert "state     unknown" in out.output
    # bounded by --timeout, not by the scheduler (which would hang for 600 s here)
    assert waited < 300, waited
    assert store.read(job) == before


def test_without_a_record_an_unreachable_scheduler_is_an_error_S5(
    store: RecordStore, harness: Harness
) -> None:
    sched = SimScheduler()
    registry = Registry.from_plugins({"simulated": SimulatedBackend(sched)})
    with sched.down():
        out = status(harness, registry, "j-none", "--no-record", "--backend", "simulated")
    assert out.exit_code == exit_codes.UNREACHABLE, out.output
