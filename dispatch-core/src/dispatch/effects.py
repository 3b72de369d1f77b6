"""The old name of :mod:`dispatch.core.effects`, kept so existing imports keep working."""

from dispatch.core.effects import (
    Append,
    Effect,
    OpenGate,
    Stop,
    Submit,
)

__all__ = [
    "Append",
    "Effect",
    "OpenGate",
    "Stop",
    "Submit",
]
