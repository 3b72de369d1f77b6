"""A stall is visible where a person looks (S-47): `watch` / `JobHandle.wait` report an
escalation that changes neither state nor cause, and the stall rule shows in the plan and
in the status's budgets as the rule after the listed ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from dispatch import Client, RecoveryPolicy
from dispatch.cli.render import plan_text
from dispatch.core.status import Status
from dispatch.handle import WaitTimeout
from dispatch.model.enums import Action, CauseKind, State

HANGS = """#!/bin/sh
for i in 1 2 3; do touch "$DISPATCH_HEARTBEAT"; sleep 0.2; done
exec sleep 600
"""


def test_wait_reports_a_stall_escalation_that_changes_neither_state_nor_cause_S47(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1")
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    handle = client.submit(script=HANGS, name="hangs", backend="local", progress_window="3s")
    told: list[Status] = []
    try:
        with pytest.raises(WaitTimeout):
            handle.wait(timeout=20, interval=0.5, on_change=told.append)
        assert told[-1].state is State.RUNNING
        assert len(told[-1].escalations) == 1, told[-1]
        assert told[-1].escalations[0].reason.startswith("no progress for ")
        # the change told last is the escalation alone: same state and cause as before it
        before = told[-2]
        assert (before.state, before.cause) == (told[-1].state, told[-1].cause)
        assert before.escalations == ()
    finally:
        handle.cancel()
        client.supervise(once=True)
        client.close()


def test_the_stall_rule_shows_in_the_plan_and_the_budgets_S47(tmp_path: Path) -> None:
    from dispatch.core.policy import Rule

    policy = RecoveryPolicy(
        rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=2),),
        resubmit_on_stall=3,
    )
    client = Client(f"sqlite:///{tmp_path / 'record.db'}")
    try:
        plan = client.plan(policy=policy, backend="local")
        text = plan_text(plan)
        assert "  rule 2: resubmit_on_stall budget=3 -> enforced by supervisor" in text
        job = client.submit(["true"], policy=policy, backend="local")
        budgets = client.status(job.job_id).budgets
        assert budgets == {"rule 1": 2, "rule 2 (stall)": 3}
    finally:
        client.close()
