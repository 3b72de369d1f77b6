"""The old name of :mod:`dispatch.core.status`, kept so existing imports keep working."""

from dispatch.core.status import (
    Status,
    SubmissionStatus,
)

__all__ = [
    "Status",
    "SubmissionStatus",
]
