"""The stall rule on the local backend, end to end (S-47): a job whose heartbeat stops is
escalated, then stopped by dispatch and resubmitted under ``resubmit_on_stall``; its record
says why (the escalation with the last progress time, a stop cancelled by actor dispatch
naming the stall, a recovery spending the stall rule's budget), and the resubmission runs
to success. The stall is not written as any other cause."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch import Client, RecoveryPolicy
from dispatch.model.enums import Action, CauseKind, Provenance, State
from dispatch.model.events import (
    EscalationRaised,
    OutcomeCommitted,
    RecoveryStarted,
    StopRequested,
    SubmissionRequested,
)
from dispatch_testing.waiting import eventually

#: the first submission beats, then hangs printing nothing; the second one finishes
HANGS_ONCE = """#!/bin/sh
echo "submission $DISPATCH_SUBMISSION resumed=$DISPATCH_RESUMED" >> "$OUT"
if [ "$DISPATCH_SUBMISSION" = 2 ]; then touch "$DISPATCH_HEARTBEAT"; exit 0; fi
for i in 1 2 3; do touch "$DISPATCH_HEARTBEAT"; sleep 0.2; done
exec sleep 600
"""


def test_a_stalled_job_is_stopped_by_dispatch_and_resubmitted_and_says_why_S47(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1")
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    out = tmp_path / "out"
    handle = client.submit(
        script=HANGS_ONCE,
        name="hangs-once",
        backend="local",
        policy=RecoveryPolicy(resubmit_on_stall=1),
        env={"OUT": str(out)},
        progress_window="3s",
        checkpoint_dir=tmp_path / "ck",
    )
    try:

        def ended() -> bool:
            client.supervise(once=True)
            return handle.record().terminal

        eventually(ended, timeout=90, interval=0.5, what="the job ends")
        status = client.status(handle.job_id)
        assert status.state is State.SUCCEEDED, status
        assert out.read_text().splitlines() == [
            "submission 1 resumed=0",
            "submission 2 resumed=1",
        ]
        events = client.store.read(handle.job_id)
        kinds = [type(e) for e in events]
        first = kinds.index(EscalationRaised)
        assert kinds[first : first + 4] == [
            EscalationRaised,
            StopRequested,
            RecoveryStarted,
            SubmissionRequested,
        ]
        raised, stop, recovery, request = events[first : first + 4]
        assert isinstance(raised, EscalationRaised) and raised.cause is None
        assert raised.reason.startswith("no progress for ")
        assert "(window 3 s); last progress " in raised.reason
        assert raised.reason.endswith(
            "stall rule (rule 1: resubmit_on_stall budget=1): dispatch stops it and "
            "resubmits it (1 of 1)"
        )
        assert isinstance(stop, StopRequested) and stop.submission == 1
        why = stop.cause
        assert (why.kind, why.provenance, why.actor) == (
            CauseKind.CANCELLED,
            Provenance.ACTOR,
            "dispatch",
        )
        assert why.detail.startswith("stopped by dispatch for no progress for ")
        assert isinstance(recovery, RecoveryStarted)
        assert (recovery.rule, recovery.action, recovery.cause) == (0, Action.RESUBMIT, why)
        assert isinstance(request, SubmissionRequested) and request.submission == 2
        # the stopped execution's ending is what dispatch did; nothing else was invented
        assert [e.type for e in events if isinstance(e, EscalationRaised)] == ["escalation-raised"]
        (outcome,) = [e for e in events if isinstance(e, OutcomeCommitted)]
        assert outcome.state is State.SUCCEEDED
        job = handle.record()
        assert job.spent == {0: 1}
        (stopped_object,) = status.submissions[0].objects
        assert stopped_object.phase.value == "ended"
        assert [s.number for s in status.submissions] == [1, 2]
        assert [e.reason for e in status.escalations] == [raised.reason]
    finally:
        if not client.status(handle.job_id).state.terminal:
            handle.cancel()
            client.supervise(once=True)
        client.close()
