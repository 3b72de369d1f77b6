"""``dispatch ui`` (a read-only web view of the record) and ``dispatch metrics`` (the
record as Prometheus text, the same as the view's ``/metrics``): :mod:`dispatch.ui`."""

from __future__ import annotations

import sys

import click

from dispatch.cli.common import Context, handles_errors, pass_ctx


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="DISPATCH_UI_TOKEN",
    help="Needed to bind anything but loopback: requests carry it as "
    "'Authorization: Bearer TOKEN' (or ?token=TOKEN once, kept as a cookie) "
    "[env DISPATCH_UI_TOKEN].",
)
@pass_ctx
@handles_errors
def ui(c: Context, host: str, port: int, token: str | None) -> None:
    """Serve a read-only web view of the record: the job list, each job's timeline of
    attempts and causes, a summary, and /metrics. GET only; nothing is appended."""
    from dispatch.ui.server import UI, make_server

    view = UI(c.client, token=token)
    server = make_server(view, host, port)
    view.warm()
    bound_host, bound_port = server.server_address[:2]
    click.echo(f"serving the record on http://{bound_host!s}:{bound_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@click.command()
@pass_ctx
@handles_errors
def metrics(c: Context) -> None:
    """Print the record's metrics in Prometheus text format (what `dispatch ui` serves at
    /metrics): jobs by state, endings by cause, recoveries by rule and action, holds,
    escalations, the supervisors' last ticks."""
    from dispatch.ui.metrics import RecordMetrics, render

    sys.stdout.write(render(RecordMetrics(c.client.store)).decode())
