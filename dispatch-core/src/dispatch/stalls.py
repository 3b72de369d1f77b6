"""Stall escalation in the supervisor (S-47): a job's heartbeat silent for its declared
progress window while it runs raises an escalation, and nothing else.

The supervisor calls :func:`progress_effects` for a job its decision left alone this
tick; this reads the one thing the pure check cannot (the heartbeat file's modification
time, on this host or a shared file system) and lets
:func:`dispatch.core.progress.stall` say whether an escalation is due. The escalation is
an ``escalation-raised`` event (so the notifier tells a person, as for any escalation)
with no cause: a hang is not an ending, the closed list of causes is not stretched, the
job's state and cause stay what discovery says. Stopping a stalled job is a person's
decision (``dispatch cancel`` / ``resubmit``).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from dispatch.core.effects import Append, Effect
from dispatch.core.job import Job
from dispatch.core.progress import stall
from dispatch.discovery import Discovery
from dispatch.enums import Phase
from dispatch.events import EscalationRaised

#: how an escalation of this kind reads, so a later tick finds the last one raised
PREFIX = "no progress for "


def last_progress(path: str | None) -> datetime | None:
    if path is None:
        return None
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, UTC)
    except OSError:
        return None


def progress_effects(job: Job, discovery: Discovery, now: datetime) -> list[Effect]:
    window = job.spec.progress_window
    current = job.current
    if window is None or job.outcome is not None or job.hold is not None or current is None:
        return []
    running = [
        v
        for v in discovery.of_job(job.job_id)
        if v.submission == current.number and v.phase is Phase.RUNNING and v.executions
    ]
    if not running or running[0].executions[-1].started_at is None:
        return []
    started = running[0].executions[-1].started_at
    raised = [e.at for e in job.escalations if e.reason.startswith(PREFIX)]
    due = stall(
        job.job_id,
        window=window,
        started=started,
        last_progress=last_progress(job.spec.heartbeat),
        now=now,
        raised_for=max(raised) if raised else None,
    )
    if due is None:
        return []
    event = EscalationRaised(job_id=job.job_id, seq=job.version + 1, at=now, reason=due.message())
    return [Append(job.job_id, job.version, (event,))]
