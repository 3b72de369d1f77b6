"""The old name of :mod:`dispatch.core.decisions`, kept so existing imports keep working."""

from dispatch.core.decisions import (
    decide,
)

__all__ = [
    "decide",
]
