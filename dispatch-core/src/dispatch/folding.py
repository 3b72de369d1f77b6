"""The old name of :mod:`dispatch.core.folding`, kept so existing imports keep working."""

from dispatch.core.folding import (
    fold,
)

__all__ = [
    "fold",
]
