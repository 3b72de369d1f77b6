"""Who supervises the record: a supervisor's heartbeat, and what ``status`` says about it.

A running ``dispatch supervise`` writes one :class:`SupervisorBeat` per tick (one row per
supervisor, replaced in place). ``status`` joins the job's lease (which supervisor holds
it) with the beats (when that supervisor last ticked) into a :class:`Supervision`.
"""

from __future__ import annotations

from pydantic import AwareDatetime

from dispatch.model.base import Model


class SupervisorBeat(Model):
    """One supervisor's last tick, as the record store keeps it."""

    #: The name its leases carry (``HOST:PID``).
    owner: str
    host: str
    pid: int
    started_at: AwareDatetime
    last_tick: AwareDatetime
    #: Seconds between its ticks, and how long a job stays its after a tick: a supervisor
    #: whose last tick is older than ``lease`` seconds has stopped or hangs.
    interval: float
    lease: float
    #: When it stopped cleanly (SIGTERM, ``dispatch supervise --stop``); None while it runs.
    stopped_at: AwareDatetime | None = None


class Supervision(Model):
    """Whether a supervisor watches a job now (``status``, ``status --json``).

    ``watched`` is False when no supervisor has ticked within its lease: nothing will be
    recovered until one runs. ``message`` says it in words; the rest is the same as data.
    """

    watched: bool
    message: str
    #: The supervisor that holds the job's lease, or else the one that ticked last.
    owner: str | None = None
    host: str | None = None
    pid: int | None = None
    last_tick: AwareDatetime | None = None
    #: Seconds since ``last_tick`` when the status was made.
    seconds_since_tick: float | None = None
    #: True when ``owner`` holds the job's lease now.
    holds_lease: bool = False
