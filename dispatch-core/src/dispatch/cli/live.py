"""What ``watch`` and ``submit --wait`` show while a job goes on.

One line per change (state, cause, the scheduler's pending reason, a new object, an
escalation), in the form ``09:45:22  pending    -  waiting 2m13s: Priority``. Piped, that
is all (plain lines, nothing redrawn). On a terminal a last line is kept up to date in
place by rich (imported only then): the state, how long it has lasted, why it waits and
the scheduler's object, counting every second.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.render import cause_line, escaped, watch_line

if TYPE_CHECKING:
    from dispatch.core.status import Status


def since(status: Status, created: datetime) -> datetime:
    """When what the status shows began: a pending job's object was made, a running
    one's execution started; else the job was recorded."""
    from dispatch.model.enums import State

    latest = status.submissions[-1] if status.submissions else None
    objects = [o for o in latest.objects if o.alive] if latest is not None else []
    if objects:
        obj = objects[-1]
        if status.state is State.RUNNING and obj.executions:
            started = obj.executions[-1].started_at
            if started is not None:
                return started
        if status.state is State.PENDING and obj.created_at is not None:
            return obj.created_at
    return created


def line(status: Status, created: datetime, now: datetime) -> str:
    """The line for a change: time, state, cause and, while pending, how long and why."""
    from dispatch.cli.table import age
    from dispatch.listing import waiting_for

    text = f"{status.at:%H:%M:%S}  {status.state.value:<10} {cause_line(status.cause)}"
    reason = waiting_for(status)
    if reason is not None:
        text += f"  waiting {age(now - since(status, created))}: {escaped(reason)}"
    return text


class Follow:
    """Fed every status a wait sees (``on_status``); prints as the module says."""

    def __init__(self, created: datetime, tty: bool | None = None) -> None:
        self.created = created
        self.tty = tty  # False: plain lines only; None: the live line on a terminal
        self.key: tuple[object, ...] | None = None
        self.escalations = 0
        self.watcher: tuple[object, ...] | None = None
        self.current: Status | None = None
        self.lock = threading.Lock()
        self.live: Any = None

    def __enter__(self) -> Follow:
        from dispatch.cli.table import terminal

        console = terminal() if self.tty is not False else None
        if console is not None:
            from rich.live import Live

            self.live = Live(_Now(self), console=console, refresh_per_second=1, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def status(self, status: Status) -> None:
        from dispatch.job_records import utc_now
        from dispatch.listing import waiting_for

        cause = status.cause
        latest = status.submissions[-1] if status.submissions else None
        key = (
            status.state,
            (cause.kind, cause.detail, cause.exit_code) if cause else None,
            waiting_for(status),
            latest.object_id if latest else None,
            len(status.escalations),
        )
        lines: list[str] = []
        with self.lock:  # not held while printing: drawing the live line takes it
            self.current = status
            if key != self.key:
                self.key = key
                lines = [line(status, self.created, utc_now())] + [
                    f"{e.at:%H:%M:%S}  escalation: {escaped(e.reason)}"
                    for e in status.escalations[self.escalations :]
                ]
                self.escalations = len(status.escalations)
            lines += self.watched(status)
        for text in lines:
            self.echo(text)

    def watched(self, status: Status) -> list[str]:
        """The ``watch:`` line (who supervises the job, as ``status`` says it) when that
        changed: another supervisor, none any more, or this one following it alone; not
        each time the age of its last tick does."""
        sup = status.supervisor
        key = None if sup is None else (sup.watched, sup.owner, sup.holds_lease)
        if sup is None or key == self.watcher:
            return []
        self.watcher = key
        return [f"{status.at:%H:%M:%S}  watch: {escaped(watch_line(sup))}"]

    def echo(self, text: str) -> None:
        if self.live is not None:
            from rich.text import Text

            self.live.console.print(Text(text), soft_wrap=True)
        else:
            click.echo(text)

    def now_line(self) -> str:
        """The line kept up to date on a terminal."""
        from dispatch.cli.table import age
        from dispatch.job_records import utc_now
        from dispatch.listing import waiting_for

        with self.lock:
            status = self.current
        if status is None:
            return "looking at the job..."
        now = utc_now()
        text = f"{status.state.value} for {age(now - since(status, self.created))}"
        reason = waiting_for(status)
        if reason is not None:
            text += f", waiting: {escaped(reason)}"
        latest = status.submissions[-1] if status.submissions else None
        if latest is not None and latest.object_id:
            text += f"  ({escaped(status.backend or '')} {escaped(latest.object_id)})"
        return text + f"  [{time.strftime('%H:%M:%S')}]"


class _Now:
    """A rich renderable that reads the follower each time it is drawn."""

    def __init__(self, follow: Follow) -> None:
        self.follow = follow

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.follow.now_line(), style="bold")
