"""The old name of :mod:`dispatch.core.projection`, kept so existing imports keep working."""

from dispatch.core.projection import (
    project,
)

__all__ = [
    "project",
]
