"""``dispatch supervise``: the supervisor loop, and the notifications it triggers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli import exit_codes
from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx, seconds_option

if TYPE_CHECKING:
    from dispatch.supervisor import TickReport


@click.command()
@click.option("--once", is_flag=True, help="Run one tick and exit.")
@seconds_option("--interval", 5.0, "Seconds between ticks.")
@seconds_option(
    "--lease",
    90.0,
    "Seconds a job stays this supervisor's after its last tick; another "
    "supervisor takes over a crashed one's jobs after that.",
    "lease_seconds",
)
@json_option
@pass_ctx
@handles_errors
def supervise(c: Context, once: bool, interval: float, lease_seconds: float, as_json: bool) -> None:
    """Run the supervisor: act on every active job; exits cleanly on SIGTERM/SIGINT."""
    import dataclasses
    import signal
    import threading

    stop = threading.Event()
    unreachable: list[str] = []

    def report_tick(report: TickReport) -> None:
        unreachable[:] = sorted(report.unreachable)
        if as_json:
            click.echo(json.dumps(dataclasses.asdict(report), default=str))
        else:
            click.echo(tick_line(report), err=not once)

    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    c.client.supervise(
        once=once, interval=interval, lease=lease_seconds, stop=stop, on_tick=report_tick
    )
    if once and unreachable:
        # the tick ran (leases released) but could not ask every backend: exit 3, as
        # docs/cli.md defines for an unreachable scheduler, so a cron job or a unit sees it
        raise SystemExit(exit_codes.UNREACHABLE)


def tick_line(report: Any) -> str:
    """One tick as a line; the schedulers' words and errors in it escaped."""
    from dispatch.cli.render import escaped

    bits = [
        f"{report.at:%H:%M:%S} active={report.active} appended={report.appended} "
        f"submitted={report.submitted} stopped={report.stopped}"
    ]
    bits += [f"unreachable {k}: {v}" for k, v in report.unreachable.items()]
    bits += [f"error: {e}" for e in report.errors]
    return escaped("  ".join(bits))
