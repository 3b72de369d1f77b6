"""Whether a running job has stopped making progress (S-47): a pure function of times.

A job declaring a progress window is given a heartbeat file (``DISPATCH_HEARTBEAT``) to
touch; its last modification (or the job's log growing, where the backend folds that into
the heartbeat) is its last sign of progress. A job hung in a collective, frozen or
deadlocked ends by itself only at its time limit, if it has one; it is no ending, so no
cause is invented for it: the supervisor raises an escalation and a person decides.

The escalation is due once per silence: when nothing moved for the whole window since
the later of the last progress and the execution's start, and not already raised for
that same last progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Stall:
    """An escalation to raise: silent since ``since`` (the last progress, or the start)."""

    job_id: str
    since: datetime
    silent_for: timedelta
    window: timedelta
    progressed: bool

    def message(self) -> str:
        last = (
            f"last progress {self.since:%Y-%m-%d %H:%M:%S} UTC"
            if self.progressed
            else f"no heartbeat since it started at {self.since:%Y-%m-%d %H:%M:%S} UTC"
        )
        return (
            f"no progress for {words(self.silent_for)} "
            f"(window {words(self.window)}); {last}; state and cause unchanged, "
            "a person decides"
        )


def words(span: timedelta) -> str:
    """``20 min``, ``1 h 5 min``, ``45 s``: a span as people read it."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    hours, rest = divmod(seconds // 60, 60)
    return f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"


def stall(
    job_id: str,
    *,
    window: timedelta,
    started: datetime,
    last_progress: datetime | None,
    now: datetime,
    raised_for: datetime | None = None,
) -> Stall | None:
    """The escalation due now, if any.

    :param started: when the running execution started (a heartbeat older than it is an
        earlier execution's and counts as none).
    :param last_progress: the heartbeat's modification time, None when never touched.
    :param raised_for: the ``since`` of the escalation already raised for this job, so a
        silence is escalated once and a new silence (after progress) again.
    """
    progressed = last_progress is not None and last_progress > started
    since = last_progress if progressed and last_progress is not None else started
    silent = now - since
    if silent < window:
        return None
    if raised_for is not None and raised_for >= since:
        return None
    return Stall(
        job_id=job_id, since=since, silent_for=silent, window=window, progressed=progressed
    )
