"""Stall escalation in the supervisor (S-47): the I/O the pure stall decision needs.

The supervisor calls :func:`progress_effects` for a job its decision left alone this
tick; this reads the one thing the pure core cannot (the heartbeat file's modification
time, on this host or a shared file system; each backend folds the job's log growth into
it) and lets :func:`dispatch.core.progress.on_stall` decide: an ``escalation-raised``
event with no cause (the notifier tells a person, as for any escalation; state and cause
unchanged), or, under the policy's stall rule ``resubmit``, the same escalation followed
by dispatch's own stop and a resubmission (docs/endings.md).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from dispatch.core.effects import Effect
from dispatch.core.job import Job
from dispatch.core.progress import PREFIX, on_stall
from dispatch.model.discovery import Discovery

__all__ = ["PREFIX", "last_progress", "progress_effects"]


def last_progress(path: str | None) -> datetime | None:
    if path is None:
        return None
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, UTC)
    except OSError:
        return None


def progress_effects(job: Job, discovery: Discovery, now: datetime) -> list[Effect]:
    if job.spec.progress_window is None:
        return []  # no stat for the jobs that declare no window
    return on_stall(job, discovery, job.plan, now, last_progress(job.spec.heartbeat))
