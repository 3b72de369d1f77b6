"""The old name of :mod:`dispatch.core.table`, kept so existing imports keep working."""

from dispatch.core.table import (
    Ruling,
    Verdict,
    rule_on_ending,
    rule_on_execution,
)

__all__ = [
    "Ruling",
    "Verdict",
    "rule_on_ending",
    "rule_on_execution",
]
