"""``dispatch list`` as a table, and how long ago something happened, for people.

On a terminal the table is drawn by rich (imported here only, when a table is drawn, so
``dispatch --help`` and ``status`` never load it); piped, it is plain text: a header
line and columns separated by spaces, one job a line, nothing but text. Every text a user
or a scheduler wrote goes through :func:`dispatch.cli.render.escaped` first, and reaches
rich as a ``Text`` (never as markup, so ``[red]`` in a job name is shown as written).
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from dispatch.cli.render import escaped

if TYPE_CHECKING:
    from dispatch.listing import Listed, Listing

HEADER = ("JOB", "NAME", "BACKEND", "STATE", "CAUSE", "ATTEMPT", "BUDGET", "NODES", "AGE")
#: a name longer than this is cut (with "...") in the table; --json has it whole
NAME_WIDTH = 32

_STYLES = {
    "succeeded": "green",
    "running": "cyan",
    "pending": "yellow",
    "recovering": "magenta",
    "held": "bold yellow",
    "failed": "bold red",
    "cancelled": "dim",
    "unknown": "red",
    "quarantined": "bold red",
}


def terminal() -> Any | None:
    """A rich ``Console`` drawing on the terminal, or None when output is not one.

    It writes to the terminal itself, past the stream that escapes every control
    character a command prints (:func:`dispatch.cli.common.escaping_output`), so that its
    own attributes and redrawing reach the terminal; what it draws is dispatch's words and
    untrusted text escaped cell by cell, given as ``Text`` (never markup).
    """
    stream = sys.__stdout__
    if stream is None or not sys.stdout.isatty() or not stream.isatty():
        return None
    from rich.console import Console

    return Console(file=stream)


def age(delta: timedelta) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``: how long, to the unit that matters."""
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s" if seconds < 600 else f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def cells(row: Listed, now: datetime) -> tuple[str, ...]:
    """One row's cells, escaped."""
    name = escaped(row.name)
    if len(name) > NAME_WIDTH:
        name = name[: NAME_WIDTH - 3] + "..."
    where = row.backend + (f" {row.object_id}" if row.object_id else "")
    if row.members is not None:  # a sweep: its members counted by state
        where = f"{row.backend} ({row.members})"
    if row.state == "quarantined" or row.members is not None:
        cause = "-"
    elif row.waiting:
        cause = f"({row.waiting})"
    else:
        cause = row.cause or "-"
    state = row.state if row.settled else f"{row.state}*"
    plain_row = row.state != "quarantined" and row.members is None
    attempt = f"{row.attempt}/{row.attempts or '?'}" if plain_row else "-"
    return (
        escaped(row.job_id),
        name,
        escaped(where),
        state,
        escaped(cause),
        attempt,
        "-" if row.budget_left is None else str(row.budget_left),
        "-" if row.nodes is None else str(row.nodes),
        age(now - row.created_at),
    )


def notes(listing: Listing, limit: int | None, escalated: dict[str, str]) -> list[str]:
    """The lines under the table: what a cell cannot say."""
    lines = []
    if any(not r.settled for r in listing.rows):
        lines.append("* not yet committed: what the supervisor will record on its next tick")
    for r in listing.rows:
        if r.quarantined:
            lines.append(f"{r.job_id}: quarantined: {r.quarantined}")
        if r.note:
            lines.append(f"{r.job_id}: {r.note}")
        if r.job_id in escalated:
            lines.append(f"{r.job_id}: escalated: {escalated[r.job_id]}")
    for name, why in sorted(listing.unreachable.items()):
        lines.append(f"{name} could not be asked: {why}")
    lines.extend(watch_lines(listing))
    if listing.more:
        shown = len(listing.rows)
        lines.append(f"the newest {shown} shown; --limit N shows more" if limit else "")
    return [escaped(line) for line in lines if line]


def watch_lines(listing: Listing) -> list[str]:
    """Whether a supervisor watches the jobs not ended, in ``status``'s words
    (:func:`dispatch.cli.render.watch_line`): one line when they all get the same answer,
    else one line per answer naming its jobs."""
    from dispatch.cli.render import watch_line

    said: dict[str, list[str]] = {}
    for r in listing.rows:
        if r.supervisor is not None:
            said.setdefault(watch_line(r.supervisor), []).append(r.job_id)
    if len(said) == 1:
        return [f"watch: {text}" for text in said]
    return [f"watch: {text} ({', '.join(jobs)})" for text, jobs in said.items()]


def _widths(listing: Listing, now: datetime) -> list[int]:
    rows = [HEADER, *(cells(r, now) for r in listing.rows)]
    return [max(len(row[i]) for row in rows) for i in range(len(HEADER))]


def plain(listing: Listing, now: datetime, limit: int | None, escalated: dict[str, str]) -> str:
    """The table as plain text (piped output)."""
    rows = [HEADER, *(cells(r, now) for r in listing.rows)]
    widths = _widths(listing, now)
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if not listing.rows:
        lines = ["no jobs"]
    return "\n".join(lines + notes(listing, limit, escalated))


def rich_table(
    listing: Listing, now: datetime, limit: int | None, escalated: dict[str, str]
) -> Any:
    """The table as a rich renderable (a terminal)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    fixed = {"JOB", "STATE", "ATTEMPT", "BUDGET", "NODES", "AGE"}
    for title, width in zip(HEADER, _widths(listing, now), strict=True):
        table.add_column(
            title,
            justify="right" if title in ("ATTEMPT", "BUDGET", "NODES", "AGE") else "left",
            no_wrap=title in fixed,
            min_width=width if title in fixed else None,
            overflow="fold",
        )
    for r in listing.rows:
        row = cells(r, now)
        table.add_row(
            *(
                Text(cell, style=_STYLES.get(r.state, "") if i == 3 else "")
                for i, cell in enumerate(row)
            )
        )
    if not listing.rows:
        return Text("no jobs")
    below = [Text(line, style="dim") for line in notes(listing, limit, escalated)]
    return Group(table, *below)
