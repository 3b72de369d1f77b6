"""Stall escalation on the local backend (S-47): a job that stops touching its heartbeat
for its progress window gets one escalation, with the last progress time, delivered by
the notifier; its state and cause do not change and it goes on running."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from dispatch import Client
from dispatch.model.enums import State
from dispatch.notify import Notifier
from dispatch_testing.waiting import eventually

#: beats three times, then hangs (as a rank stuck in a collective would), printing nothing
HANGS = """#!/bin/sh
for i in 1 2 3; do touch "$DISPATCH_HEARTBEAT"; sleep 0.2; done
echo "heartbeat=$DISPATCH_HEARTBEAT" > "$OUT"
exec sleep 600
"""


def test_a_silent_heartbeat_raises_one_escalation_and_a_notification_S47(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DISPATCH_LOCAL_STOP_GRACE", "1")
    store = f"sqlite:///{tmp_path / 'record.db'}"
    got = tmp_path / "notified.jsonl"
    sink = [
        sys.executable,
        "-c",
        f"import sys; open({str(got)!r}, 'a').write(sys.stdin.read() + '\\n')",
    ]
    notifier = Notifier(
        store, cursor=tmp_path / "cursor.json", command=sink, events=["escalation-raised"]
    )
    client = Client(store, notifier=notifier)
    out = tmp_path / "out"
    handle = client.submit(
        script=HANGS,
        name="hangs",
        backend="local",
        env={"OUT": str(out)},
        progress_window="3s",
        checkpoint_dir=tmp_path / "ck",
    )

    def escalated() -> tuple:
        client.supervise(once=True)
        return client.store.read(handle.job_id) and _escalations(client, handle.job_id)

    try:
        escalations = eventually(escalated, timeout=60, interval=0.5, what="an escalation")
        assert len(escalations) == 1, escalations
        (raised,) = escalations
        assert raised.reason.startswith("no progress for ")
        assert "(window 3 s); last progress " in raised.reason
        assert raised.cause is None
        beat = Path(out.read_text().split("heartbeat=")[1].strip())
        assert beat == tmp_path / "ck" / ".dispatch-heartbeat"
        status = client.status(handle.job_id)
        assert status.state is State.RUNNING and status.cause is None
        for _ in range(4):  # the same silence is escalated once
            client.supervise(once=True)
            time.sleep(0.3)  # lets the silence go on, as it would between ticks
        assert len(_escalations(client, handle.job_id)) == 1
        assert notifier.flush(timeout=30)
        bodies = [json.loads(line) for line in got.read_text().splitlines() if line.strip()]
        assert [b["event"]["type"] for b in bodies] == ["escalation-raised"]
        assert bodies[0]["event"]["reason"] == raised.reason
    finally:
        handle.cancel()
        client.supervise(once=True)
        client.close()


def _escalations(client: Client, job_id: str) -> tuple:
    from dispatch.core.folding import fold

    return fold(client.store.read(job_id)).escalations
