"""A supervisor acts on a local job only as its submitter's uid (S-51), with the uid it
runs as given to it: the rule, the once-only notice, the lease it leaves to a supervisor
already at work, and what a person sees. The real second Unix user is in
``tests/security/test_security_submitter.py``."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import Client, Identity, JobSpec, RecoveryPolicy, Registry
from dispatch.cli.render import history_text, status_text
from dispatch.cli.supervise import tick_line
from dispatch.client import LeftToSubmitter
from dispatch.core import interventions
from dispatch.core.folding import fold
from dispatch.core.job import Job
from dispatch.core.policy import Plan
from dispatch.core.projection import project
from dispatch.core.submitters import refusal, refusal_notice
from dispatch.job_records import create_job, load_job, status_of
from dispatch.model.discovery import Discovery
from dispatch.model.errors import Unreachable
from dispatch.model.events import (
    EscalationRaised,
    JobCreated,
    SubmissionCreated,
    SubmissionRequested,
)
from dispatch.store import open_store
from dispatch.store.base import RecordStore
from dispatch.supervisor import Supervisor

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OTHER = 4242 if os.getuid() != 4242 else 4243


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RecordStore:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    return open_store(f"sqlite:///{tmp_path}/record.db")


def _job(store: RecordStore, registry: Registry, marker: Path, uid: int) -> str:
    return create_job(
        store,
        registry,
        backend="local",
        spec=JobSpec(command=("sh", "-c", f"touch {marker}")),
        policy=RecoveryPolicy(),
        by=Identity(uid=uid),
        now=T0,
    )


def test_a_job_is_refused_by_a_supervisor_of_another_uid_and_told_once_S51(
    record: RecordStore, tmp_path: Path
) -> None:
    registry = Registry.from_entry_points()
    marker = tmp_path / "ran"
    job_id = _job(record, registry, marker, OTHER)
    sup = Supervisor(record, registry, uid=OTHER + 1, owner="other")
    reports = [sup.tick(T0 + timedelta(seconds=n)) for n in range(3)]

    why = (
        f"submitted by uid {OTHER}; this supervisor runs as uid {OTHER + 1} and runs local "
        "jobs only as their submitter: run `dispatch supervise` as that user"
    )
    assert [r.refused for r in reports] == [{job_id: why}] * 3
    assert tick_line(reports[0]).endswith("  left to their submitters=1")
    assert [(r.submitted, r.leased) for r in reports] == [(0, 0)] * 3
    job = load_job(record, job_id)
    assert [t.event for t in job.history] == ["escalation-raised"]  # once, not every tick
    assert job.escalations[0].reason == why and job.submissions == ()
    assert job.history[0].by == Identity(uid=OTHER + 1)
    assert not marker.exists()
    # The lease was given back: the submitter's supervisor takes the job at once.
    assert record.acquire_leases([job_id], "mine", timedelta(minutes=1), T0).keys() == {job_id}


def test_no_notice_while_another_supervisor_holds_the_lease_S51(
    record: RecordStore, tmp_path: Path
) -> None:
    registry = Registry.from_entry_points()
    job_id = _job(record, registry, tmp_path / "ran", OTHER)
    record.acquire_leases([job_id], "the-submitters", timedelta(minutes=10), T0)
    report = Supervisor(record, registry, uid=OTHER + 1, owner="root").tick(T0)
    assert job_id in report.refused and report.appended == 0
    assert load_job(record, job_id).escalations == ()


def test_the_submitters_own_supervisor_runs_it_S51(record: RecordStore, tmp_path: Path) -> None:
    registry = Registry.from_entry_points()
    marker = tmp_path / "ran"
    job_id = _job(record, registry, marker, os.getuid())
    report = Supervisor(record, registry).tick()
    assert report.refused == {} and report.submitted == 1
    assert load_job(record, job_id).submitter == Identity(uid=os.getuid(), role=None)


def test_status_shows_the_submitter_and_the_refusal_without_asking_for_objects_S51(
    record: RecordStore, tmp_path: Path
) -> None:
    registry = Registry.from_entry_points()
    job_id = _job(record, registry, tmp_path / "ran", OTHER)
    Supervisor(record, registry, owner="root").tick()
    shown = status_text(status_of(record, registry, job_id))
    assert f"submitter uid {OTHER}\n" in shown
    assert f"submitted by uid {OTHER}; this supervisor runs as uid {os.getuid()}" in shown


def test_status_of_another_uids_running_job_says_whose_objects_they_are_S51(
    record: RecordStore, tmp_path: Path
) -> None:
    registry = Registry.from_entry_points()
    job_id = _job(record, registry, tmp_path / "ran", OTHER)
    job = load_job(record, job_id)
    record.append(
        job_id,
        job.version,
        [
            SubmissionRequested(job_id=job_id, seq=2, at=T0, submission=1),
            SubmissionCreated(job_id=job_id, seq=3, at=T0, submission=1, object_id="local-x1"),
        ],
    )
    with pytest.raises(Unreachable) as raised:
        status_of(record, registry, job_id)
    assert "local-x1" in str(raised.value) and f"submitted by uid {OTHER}" in str(raised.value)


def _legacy_plan() -> Plan:
    return Plan.bind(RecoveryPolicy(), Registry.from_entry_points().get("local").declarations)


def _folded(submitter: Identity | None, backend: str = "local") -> Job:
    created = JobCreated(
        job_id="j1",
        seq=1,
        at=T0,
        name="train",
        backend=backend,
        spec=JobSpec(command=("true",)),
        plan=_legacy_plan(),
        by=submitter,
    )
    return fold([created])


def test_an_actor_name_is_shown_with_the_real_uid_and_role() -> None:
    """LOGNAME names the actor; the uid and role recorded beside it are what the process was."""
    job = _folded(Identity(uid=1001, role="alice"))
    who = Identity(uid=1002, role="alice")
    job = fold(interventions.cancel(job, actor="root", now=T0, by=who), job)
    status = project(job, Discovery(backend="local", at=T0, objects=()), T0)
    shown = history_text(status)
    assert "cancelled by root (uid 1002, role alice)" in shown
    assert shown.endswith("by root (uid 1002, role alice)")
    assert "submitter uid 1001, role alice" in status_text(status)


def test_the_rule_spares_other_backends_and_legacy_records_off_root_S51() -> None:
    legacy = _folded(None)
    assert refusal(legacy, uid=1000, runs_as_caller=True) is None
    assert refusal(legacy, uid=0, runs_as_caller=True) is not None
    mine = _folded(Identity(uid=1000))
    assert refusal(mine, uid=1000, runs_as_caller=True) is None
    assert refusal(mine, uid=0, runs_as_caller=False) is None  # a cluster's scheduler
    why = refusal(mine, uid=0, runs_as_caller=True)
    assert why is not None
    (notice,) = refusal_notice(mine, why, by=Identity(uid=0), now=T0)
    assert isinstance(notice, EscalationRaised) and notice.seq == mine.version + 1
    told = fold([notice], mine)
    assert refusal_notice(told, why, by=Identity(uid=0), now=T0) == []
    # On a store with roles, the role that created the job (the database's fact) decides
    # too: a record claiming the supervisor's uid does not make another role's job its own.
    claims_root = _folded(Identity(uid=0, role="sup"))
    assert refusal(claims_root, uid=0, runs_as_caller=True, role="sup", owner_role="sup") is None
    forged = refusal(claims_root, uid=0, runs_as_caller=True, role="sup", owner_role="alice")
    assert forged is not None and forged.startswith("created by database role alice;")


def test_a_request_on_another_uids_job_is_recorded_and_left_to_its_submitter_S51(
    record: RecordStore, tmp_path: Path
) -> None:
    registry = Registry.from_entry_points()
    job_id = _job(record, registry, tmp_path / "ran", OTHER)
    client = Client(record, registry=registry, actor="mallory")
    with pytest.raises(LeftToSubmitter) as raised:
        client.job(job_id).cancel()
    assert "cancel requested (recorded, not carried out)" in str(raised.value)
    assert f"submitted by uid {OTHER}" in str(raised.value)
    job = load_job(record, job_id)
    assert job.cancel is not None and job.outcome is None
    assert job.history[0].by == Identity(uid=os.getuid())
    # Its submitter's supervisor commits the cancel.
    Supervisor(record, registry, uid=OTHER).tick()
    done = load_job(record, job_id)
    assert done.outcome is not None and done.outcome.state.value == "cancelled"


def test_a_record_written_before_submitters_were_recorded_still_decodes_S6() -> None:
    from dispatch.model.events import decode_event, encode_event

    created = _folded(Identity(uid=1001, role="alice"))
    event = JobCreated(
        job_id="j1",
        seq=1,
        at=T0,
        name="train",
        backend="local",
        spec=created.spec,
        plan=created.plan,
    )
    old = encode_event(event).replace(',"by":null', "")
    assert '"by"' not in old
    decoded = decode_event(old)
    assert isinstance(decoded, JobCreated) and decoded.by is None
    assert fold([decoded]).submitter is None
    asked = decode_event(
        '{"job_id":"j1","seq":2,"at":"2026-03-01T12:00:00Z","actor":"ann",'
        '"type":"cancel-requested","cause":{"kind":"cancelled","provenance":"actor"}}'
    )
    assert getattr(asked, "by", "missing") is None
