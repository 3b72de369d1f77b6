"""``dispatch supervise``: the supervisor loop, and the notifications it triggers.

Also the ways to keep one running without root (``--detach``, ``--stop``, ``--status``,
``--print-systemd-unit``: :mod:`dispatch.supervising`). Each tick records the
supervisor's beat, so ``dispatch status`` says whether a supervisor watches a job.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli import exit_codes
from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx, seconds_option

if TYPE_CHECKING:
    from dispatch.supervising import Detached
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
@seconds_option(
    "--discovery-timeout",
    10.0,
    "Seconds a tick waits for each backend's discovery (all are asked at once); one "
    "that has not answered by then is unreachable for that tick.",
    "discovery_timeout",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Run in the background (no root needed): a pid file and a log file under "
    "$XDG_STATE_HOME/dispatch/supervise; one per record and host.",
)
@click.option("--stop", is_flag=True, help="Stop the detached supervisor of this record.")
@click.option(
    "--status",
    "show_status",
    is_flag=True,
    help="Say whether a detached supervisor runs for this record on this host "
    "(exit 0 if it does, 1 if not).",
)
@click.option(
    "--print-systemd-unit",
    "print_unit",
    is_flag=True,
    help="Print a systemd user unit (systemctl --user) that runs this supervisor.",
)
@click.option(
    "--allow-network-fs",
    is_flag=True,
    help="Supervise a SQLite record on a network file system anyway (warned, not refused).",
)
@click.option(
    "--metrics",
    "metrics_at",
    metavar="HOST:PORT",
    help="Also serve /metrics (Prometheus text: the record's, and this supervisor's tick "
    "durations, last tick, unreachable backends) on HOST:PORT; an address beyond "
    "loopback needs DISPATCH_UI_TOKEN. See docs/ui.md.",
)
@click.option("--pid-file", hidden=True, help="Set by --detach: the pid file to hold.")
@json_option
@pass_ctx
@handles_errors
def supervise(
    c: Context,
    once: bool,
    interval: float,
    lease_seconds: float,
    detach: bool,
    stop: bool,
    show_status: bool,
    print_unit: bool,
    allow_network_fs: bool,
    pid_file: str | None,
    as_json: bool,
    metrics_at: str | None = None,
    discovery_timeout: float = 10.0,
) -> None:
    """Run the supervisor: act on every active job; exits cleanly on SIGTERM/SIGINT.

    One supervisor per record is enough (more are safe: each job is leased to one). Run it
    where it keeps running: `--detach` on a login node, a systemd user unit
    (`--print-systemd-unit`), or on several hosts against a PostgreSQL record.
    """
    chosen = [n for n, on in (("--detach", detach), ("--stop", stop)) if on]
    chosen += [
        n for n, on in (("--status", show_status), ("--print-systemd-unit", print_unit)) if on
    ]
    chosen += ["--once"] if once else []
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} do not go together; choose one")
    if metrics_at is not None and (stop or show_status):
        raise click.UsageError("--metrics goes with a supervisor that runs, not --stop or --status")
    if stop or show_status:
        _stop_or_status(c, stop=stop, as_json=as_json)
        return
    args = _supervise_args(interval, lease_seconds, allow_network_fs, metrics_at, discovery_timeout)
    if print_unit:
        _print_unit(c, args)
        return
    _check_record(c, allow_network_fs)
    if detach:
        _detach(c, args, as_json)
        return
    _run(c, once, interval, lease_seconds, pid_file, as_json, metrics_at, discovery_timeout)


def _run(
    c: Context,
    once: bool,
    interval: float,
    lease_seconds: float,
    pid_file: str | None,
    as_json: bool,
    metrics_at: str | None = None,
    discovery_timeout: float = 10.0,
) -> None:
    import dataclasses
    import signal
    import threading

    from dispatch.supervising import Detached, owner_name

    held: tuple[Detached, int] | None = None
    if pid_file is not None:
        detached = Detached(c.store.location)
        if str(detached.pid_file) != pid_file:
            raise click.UsageError("--pid-file is set by --detach; use --detach")
        held = (detached, detached.hold())
    stop = threading.Event()
    unreachable: list[str] = []
    owner = owner_name()

    ticks = _serve_metrics(c, metrics_at) if metrics_at is not None else None

    def report_tick(report: TickReport) -> None:
        if ticks is not None:
            ticks.observe(report, c.client.record_clock())  # the clock the tick was timed by
        unreachable[:] = sorted(report.unreachable)
        if held is not None and not _eventful(report):
            return  # a detached supervisor's log keeps what happened, not every quiet tick
        if as_json:
            click.echo(json.dumps(dataclasses.asdict(report), default=str))
        else:
            click.echo(tick_line(report), err=not once)

    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    if held is not None:
        click.echo(
            f"supervisor {owner} started for {c.store.location} "
            f"(interval {interval:g} s, lease {lease_seconds:g} s)",
            err=True,
        )
    try:
        c.client.supervise(
            once=once,
            interval=interval,
            lease=lease_seconds,
            stop=stop,
            on_tick=report_tick,
            discovery_timeout=discovery_timeout,
        )
    finally:
        if held is not None:
            click.echo(f"supervisor {owner} stopped", err=True)
            held[0].release(held[1])
    if once and unreachable:
        # the tick ran (leases released) but could not ask every backend: exit 3, as
        # docs/cli.md defines for an unreachable scheduler, so a cron job or a unit sees it
        raise SystemExit(exit_codes.UNREACHABLE)


def _serve_metrics(c: Context, where: str) -> Any:
    """Start serving /metrics on ``where`` (HOST:PORT) from a thread with its own
    connection to the record; the collector the loop feeds after each tick."""
    import os
    import threading

    from dispatch.client import Client
    from dispatch.model.errors import BadInput
    from dispatch.store import open_store
    from dispatch.ui.metrics import TickMetrics
    from dispatch.ui.server import UI, make_server

    host, sep, port = where.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise BadInput(f"--metrics takes HOST:PORT (e.g. 127.0.0.1:9464); got {where!r}")
    ticks = TickMetrics()
    url, _ = _store_url(c)
    reader = Client(open_store(url), registry=c.client.registry)
    ui = UI(reader, token=os.environ.get("DISPATCH_UI_TOKEN"), pages=False, collectors=[ticks])
    server = make_server(ui, host.strip("[]"), int(port))
    ui.warm()
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    bound = server.server_address
    click.echo(f"metrics on http://{bound[0]!s}:{bound[1]}/metrics", err=True)
    return ticks


def _eventful(report: Any) -> bool:
    return bool(
        report.appended
        or report.submitted
        or report.stopped
        or report.unreachable
        or report.errors
        or report.conflicts
        or report.fenced
    )


def _check_record(c: Context, allow: bool) -> None:
    """Refuse (or, with --allow-network-fs, warn about) a SQLite record on a network file
    system, saying why."""
    from dispatch.model.errors import BadInput
    from dispatch.supervising import record_on_network_fs

    why = record_on_network_fs(c.store)
    if why is None:
        return
    if not allow:
        raise BadInput(f"refusing to supervise: {why}; --allow-network-fs runs it anyway")
    click.echo(f"dispatch: warning: {why}", err=True)


def _store_url(c: Context) -> tuple[str, bool]:
    """The record store's URL for a child process or a unit (a SQLite path made
    absolute), and whether it holds a secret."""
    from dispatch.store.redact import secrets_in

    path = getattr(c.store, "path", None)
    if path is not None and c.store.location.startswith("sqlite://"):
        return f"sqlite://{path}", False
    url = str(c.config.value("store"))
    return url, bool(secrets_in(url))


def _supervise_args(
    interval: float,
    lease_seconds: float,
    allow_network_fs: bool,
    metrics_at: str | None = None,
    discovery_timeout: float = 10.0,
) -> list[str]:
    """The arguments of the ``dispatch supervise`` a detached supervisor or a unit runs."""
    args = ["supervise", "--interval", f"{interval:g}", "--lease", f"{lease_seconds:g}"]
    if discovery_timeout != 10.0:
        args += ["--discovery-timeout", f"{discovery_timeout:g}"]
    args += ["--metrics", metrics_at] if metrics_at is not None else []
    return args + (["--allow-network-fs"] if allow_network_fs else [])


def _detach(c: Context, args: list[str], as_json: bool) -> None:
    import os

    from dispatch.supervising import Detached, dispatch_command

    detached = Detached(c.store.location)
    url, _ = _store_url(c)
    env = dict(os.environ, DISPATCH_STORE=url)  # never on the command line: ps shows that
    if c.profile:
        env["DISPATCH_PROFILE"] = c.profile
    argv = [*dispatch_command(), *args]
    argv += ["--pid-file", str(detached.pid_file)]
    pid = detached.start(argv, env)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "pid": pid,
                    "pid_file": str(detached.pid_file),
                    "log_file": str(detached.log_file),
                    "store": c.store.location,
                }
            )
        )
        return
    click.echo(
        f"supervisor started in the background: pid {pid}\n"
        f"  record    {c.store.location}\n"
        f"  log       {detached.log_file}\n"
        f"  pid file  {detached.pid_file}\n"
        "stop it with `dispatch supervise --stop`"
    )


def _stop_or_status(c: Context, *, stop: bool, as_json: bool) -> None:
    from dispatch.core.supervision import ago
    from dispatch.job_records import utc_now
    from dispatch.supervising import Detached

    detached: Detached = Detached(c.store.location)
    if stop:
        stopped = detached.stop()
        if as_json:
            click.echo(json.dumps({"stopped": None if stopped is None else stopped.pid}))
        elif stopped is None:
            click.echo(f"no detached supervisor runs for {c.store.location} on this host")
        else:
            click.echo(f"stopped the detached supervisor (pid {stopped.pid})")
        return
    found = detached.running()
    beat = None
    if found is not None and found.pid is not None:
        owner = f"{detached.host}:{found.pid}"
        beat = next((b for b in c.store.beats() if b.owner == owner), None)
    now = utc_now()
    since = None if beat is None else (now - beat.last_tick).total_seconds()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "running": found is not None,
                    "pid": None if found is None else found.pid,
                    "pid_file": str(detached.pid_file),
                    "log_file": str(detached.log_file),
                    "store": c.store.location,
                    "last_tick": None if beat is None else beat.last_tick.isoformat(),
                    "seconds_since_tick": since,
                }
            )
        )
    elif found is None:
        click.echo(f"no detached supervisor runs for {c.store.location} on this host")
    else:
        tick = "no tick yet" if since is None else f"last tick {ago(since)} ago"
        click.echo(
            f"detached supervisor running: pid {found.pid}, {tick}\n"
            f"  record    {c.store.location}\n"
            f"  log       {detached.log_file}\n"
            f"  pid file  {detached.pid_file}"
        )
    if found is None:
        raise SystemExit(exit_codes.FAILED)


def _print_unit(c: Context, args: list[str]) -> None:
    import os

    from dispatch.supervising import dispatch_command, systemd_unit

    url, secret = _store_url(c)
    env = dict(os.environ)
    if c.profile:
        env["DISPATCH_PROFILE"] = c.profile
    command = [*dispatch_command(), *args]
    click.echo(systemd_unit(command, url, c.store.location, env, has_secret=secret), nl=False)


def tick_line(report: Any) -> str:
    """One tick as a line; the schedulers' words and errors in it escaped."""
    from dispatch.cli.render import escaped

    bits = [
        f"{report.at:%H:%M:%S} active={report.active} appended={report.appended} "
        f"submitted={report.submitted} stopped={report.stopped}"
    ]
    if report.refused:  # another uid's local jobs (S-51); `dispatch status` says why
        bits.append(f"left to their submitters={len(report.refused)}")
    bits += [f"unreachable {k}: {v}" for k, v in report.unreachable.items()]
    bits += [f"error: {e}" for e in report.errors]
    return escaped("  ".join(bits))
