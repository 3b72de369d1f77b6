"""The old name of :mod:`dispatch.core.policy`, kept so existing imports keep working."""

from dispatch.core.policy import (
    Binding,
    Plan,
    RecoveryPolicy,
    Rule,
)

__all__ = [
    "Binding",
    "Plan",
    "RecoveryPolicy",
    "Rule",
]
