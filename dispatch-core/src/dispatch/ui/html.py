"""The one place where text becomes HTML: every value is escaped unless it is ``Markup``
that this module built.

A job's name, its command, the scheduler's words and log lines are untrusted: a job named
``<script>...`` must show as text. ``html(template, *values)`` escapes each value (quotes
too, so a value is safe inside an attribute) and returns ``Markup``; only ``Markup`` passes
through unescaped, and only this module and its callers' own literal templates make it.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable


class Markup(str):
    """Text already made safe for HTML (built by :func:`html` or :func:`join`)."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """``value`` as HTML text: ``Markup`` as it is, anything else escaped (``&<>"'``)."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    return Markup(_html.escape(str(value), quote=True))


def html(template: str, *values: object) -> Markup:
    """``template`` (a literal of the caller's, with ``{}`` fields) filled with the escaped
    ``values``."""
    return Markup(template.format(*(escape(v) for v in values)))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    return Markup(sep.join(escape(p) for p in parts))


__all__ = ["Markup", "escape", "html", "join"]
