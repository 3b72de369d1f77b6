"""Whether a supervisor watches a job: the job's lease joined with the supervisors' beats.

Pure: the caller reads the lease and the beats from the record store and passes the time.
A supervisor is *ticking* while its last tick is younger than its lease (twice its interval
if that is longer): past that, the jobs it held are free for another, and if none runs,
nothing is recovered.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from dispatch.model.supervision import Supervision, SupervisorBeat

RUN_ONE = "nothing will be recovered; run `dispatch supervise`"


def ticking(beat: SupervisorBeat, now: datetime) -> bool:
    """The supervisor has ticked recently enough to be taken as running."""
    if beat.stopped_at is not None:
        return False
    window = timedelta(seconds=max(beat.lease, 2 * beat.interval))
    return now - beat.last_tick <= window


def ago(seconds: float) -> str:
    """``4 s``, ``12 min``, ``3 h``, ``2 d``: an age as a person reads it."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{int(seconds)} s"
    if seconds < 120 * 60:
        return f"{int(seconds // 60)} min"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def supervision(
    lease_owner: str | None, beats: Iterable[SupervisorBeat], now: datetime
) -> Supervision:
    """What ``status`` says about who watches a job.

    ``lease_owner`` is the owner of the job's lease when that lease is live (None when
    nobody holds it); ``beats`` are the record's supervisors.
    """
    known = sorted(beats, key=lambda b: b.last_tick, reverse=True)
    by_owner = {b.owner: b for b in known}
    holder = by_owner.get(lease_owner) if lease_owner else None
    if holder is not None and ticking(holder, now):
        return _watched(holder, now, holds=True)
    if lease_owner and holder is None:
        return _following(lease_owner)
    running = [b for b in known if ticking(b, now)]
    if running:
        return _watched(running[0], now, holds=False)
    if not known:
        return Supervision(watched=False, message=f"no supervisor has ever ticked: {RUN_ONE}")
    last = known[0]
    since = (now - last.last_tick).total_seconds()
    stopped = f"; {last.host}:{last.pid} was stopped" if last.stopped_at is not None else ""
    return Supervision(
        watched=False,
        message=f"no supervisor has ticked for {ago(since)}{stopped}: {RUN_ONE}",
        owner=last.owner,
        host=last.host,
        pid=last.pid,
        last_tick=last.last_tick,
        seconds_since_tick=since,
    )


def _following(owner: str) -> Supervision:
    """A live lease held by a process that records no beats: one supervising this job
    alone (``dispatch watch``, ``submit --wait``, ``JobHandle.wait``), or the one tick a
    command runs on it. It acts on the job while its lease lasts."""
    host, _, pid = owner.rpartition(":")
    return Supervision(
        watched=True,
        message=f"supervised by {owner}, which follows this job alone "
        "(`dispatch watch` or `submit --wait`)",
        owner=owner,
        host=host or None,
        pid=int(pid) if pid.isdigit() else None,
        holds_lease=True,
    )


def _watched(beat: SupervisorBeat, now: datetime, *, holds: bool) -> Supervision:
    since = (now - beat.last_tick).total_seconds()
    message = f"supervised by {beat.host}:{beat.pid}, last tick {ago(since)} ago"
    if not holds:
        message += " (it takes this job at its next tick)"
    return Supervision(
        watched=True,
        message=message,
        owner=beat.owner,
        host=beat.host,
        pid=beat.pid,
        last_tick=beat.last_tick,
        seconds_since_tick=since,
        holds_lease=holds,
    )
