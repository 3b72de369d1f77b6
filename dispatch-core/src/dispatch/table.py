"""The old name of :mod:`dispatch.core.table`, kept so existing imports keep working."""

from dispatch.core.table import (
    ENDING_TABLE,
    EXECUTION_TABLE,
    SHOWN_TABLE,
    Ruling,
    Verdict,
    render_markdown,
    rule_on_ending,
    rule_on_execution,
    shown,
)

__all__ = [
    "ENDING_TABLE",
    "EXECUTION_TABLE",
    "SHOWN_TABLE",
    "Ruling",
    "Verdict",
    "render_markdown",
    "rule_on_ending",
    "rule_on_execution",
    "shown",
]
