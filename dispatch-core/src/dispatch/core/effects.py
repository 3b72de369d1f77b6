"""What ``decide`` asks the supervisor to do (S-22), in the order it must be done.

An ``Append`` always comes before the side effect it announces (S-34: intent first), so a
crash between the two leaves the intent in the record for the next supervisor to finish.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.core.cause import Cause
from dispatch.model.events import Event
from dispatch.model.spec import JobSpec


@dataclass(frozen=True)
class Append:
    """Append these events to the job's record, expecting it at ``expected_version``."""

    job_id: str
    expected_version: int
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Submit:
    """Create submission ``submission``'s object; record submission-created (or -failed)."""

    job_id: str
    submission: int
    spec: JobSpec
    gated: bool


@dataclass(frozen=True)
class OpenGate:
    job_id: str
    submission: int
    object_id: str


@dataclass(frozen=True)
class Stop:
    job_id: str
    submission: int
    object_id: str
    cause: Cause


Effect = Append | Submit | OpenGate | Stop
