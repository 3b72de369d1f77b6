"""The old name of :mod:`dispatch.core.cause`, kept so existing imports keep working."""

from dispatch.core.cause import (
    Cause,
    root_cause,
)

__all__ = [
    "Cause",
    "root_cause",
]
