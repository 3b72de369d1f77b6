"""The old name of :mod:`dispatch.core.job`, kept so existing imports keep working."""

from dispatch.core.job import (
    Escalation,
    Hold,
    Job,
    Outcome,
    Submission,
    Transition,
)

__all__ = [
    "Escalation",
    "Hold",
    "Job",
    "Outcome",
    "Submission",
    "Transition",
]
