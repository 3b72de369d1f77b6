"""Commands that read: ``status``, ``list``, ``history``, ``watch``, ``logs``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx, seconds_option

if TYPE_CHECKING:
    from dispatch.logs import LogChunk
    from dispatch.store.base import RecordStore


@click.command()
@click.argument("job_id")
@click.option("--no-record", is_flag=True, help="Ask the backend only (S-29): never terminal.")
@click.option("--backend", help="Backend to ask with --no-record.")
@seconds_option(
    "--timeout",
    30.0,
    "Seconds to wait for the scheduler before showing the record alone (a discovery also "
    "loads the backend's client library, which on a busy machine takes seconds).",
)
@json_option
@pass_ctx
@handles_errors
def status(
    c: Context,
    job_id: str,
    no_record: bool,
    backend: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Show a job: the record plus one fresh look at the scheduler.

    When the scheduler cannot be asked (or does not answer within --timeout), shows what
    the record knows, says so with the scheduler's words, and exits 3; nothing changes.
    """
    from dispatch.cli import exit_codes
    from dispatch.cli.render import emit_json, status_text
    from dispatch.sweep import is_group_id

    if is_group_id(job_id) and not no_record:
        _group_status(c, job_id, as_json)
        return
    result = c.client.status(job_id, backend=backend, record=not no_record, timeout=timeout)
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(status_text(result))
    # a committed outcome is final whatever the scheduler says now: only an answer the
    # scheduler could still change exits with the unreachable code
    final = result.settled and result.state.terminal
    if result.unreachable is not None and not final:
        sys.exit(exit_codes.UNREACHABLE)


def _group_status(c: Context, group_id: str, as_json: bool) -> None:
    """``status GROUP``: the sweep's members, one row each (``list --group``)."""
    from dispatch.cli.render import emit_json
    from dispatch.job_records import load_group

    members = load_group(c.client.store, group_id)  # UnknownJob when there is no such group
    read = _listing(c, None, None, None, None, group_id)
    if as_json:
        first = members[0].group
        values = {m.job_id: m.group.values for m in members if m.group is not None}
        emit_json(
            {
                "group_id": group_id,
                "size": len(members),
                "max_running": first.max_running if first is not None else None,
                "members": [
                    {**_row_json(r, read[1]), "values": values.get(r.job_id, {})}
                    for r in read[0].rows
                ],
            }
        )
        return
    listing, waiting = read
    _print_table(listing, None, waiting)


_STATES = [
    "active",
    "pending",
    "held",
    "running",
    "recovering",
    "succeeded",
    "failed",
    "cancelled",
    "unknown",
]
_CAUSES = [
    "none",
    "preempted",
    "node-lost",
    "out-of-memory",
    "time-limit",
    "non-zero-exit",
    "launch-failed",
    "no-capacity",
    "held",
    "released",
    "requeued",
    "cancelled",
    "duplicate",
    "unknown",
]
#: rows the table shows without --limit
_TABLE_LIMIT = 50


@click.command(name="list")
@click.option(
    "--state",
    type=click.Choice(_STATES),
    help="Only jobs in this state: the live state, as status computes it (active: any "
    "but succeeded, failed, cancelled).",
)
@click.option("--cause", type=click.Choice(_CAUSES), help="Only jobs whose cause is this.")
@click.option("--backend", help="Only jobs on this backend.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help=f"At most N jobs, newest first [default: {_TABLE_LIMIT} in the table, all with --json].",
)
@click.option(
    "--group",
    help="The members of this sweep (its group id), one row each; without it, a sweep's "
    "members are one row counted by state.",
)
@click.option("--watch", is_flag=True, help="Draw the table again every --interval seconds.")
@seconds_option("--interval", 2.0, "Seconds between refreshes with --watch.")
@json_option
@pass_ctx
@handles_errors
def list_jobs(
    c: Context,
    state: str | None,
    cause: str | None,
    backend: str | None,
    limit: int | None,
    group: str | None,
    watch: bool,
    interval: float,
    as_json: bool,
) -> None:
    """List jobs as a table: the live state, cause, attempts, budget left, nodes, age.

    Reads only the jobs shown, and asks each backend once for its active jobs among them
    (one discovery per backend); a backend that cannot be asked leaves its jobs as the
    record has them, with a note. A job whose record does not decode is listed as
    quarantined, with what is wrong; an active job whose last recorded event is an
    escalation (a supervisor left it to a person) shows that escalation's reason.
    """
    from dispatch.cli.render import emit_json
    from dispatch.model.errors import BadInput
    from dispatch.sweep import is_group_id

    if watch and as_json:
        raise click.UsageError("--watch draws a table: it does not go with --json")
    if group is not None and not is_group_id(group):
        raise BadInput(f"--group {group!r}: not a sweep's group id (g and 12 hex digits)")
    if as_json:
        listing, waiting = _listing(c, state, cause, backend, limit, group)
        emit_json([_any_json(r, waiting) for r in _collapse(c, listing.rows, group)])
        return
    shown = limit or _TABLE_LIMIT
    if watch:
        _watch_table(
            c,
            lambda: _shown(c, _listing(c, state, cause, backend, shown, group), group),
            shown,
            interval,
        )
        return
    listing, waiting = _shown(c, _listing(c, state, cause, backend, shown, group), group)
    _print_table(listing, shown, waiting)


def _listing(
    c: Context,
    state: str | None,
    cause: str | None,
    backend: str | None,
    limit: int | None,
    group: str | None = None,
) -> tuple[Any, dict[str, str]]:
    from dispatch.listing import list_jobs as rows_of

    listing = rows_of(
        c.client.store,
        c.client.registry,
        state=state,
        cause=cause,
        backend=backend,
        limit=limit,
        group=group,
        now=c.client.record_clock(),  # leases judged by the supervisors' clock
    )
    active = [r.job_id for r in listing.rows if r.outcome is None and not r.quarantined]
    return listing, _escalated(c.client.store, active)


def _collapse(c: Context, rows: list[Any], group: str | None) -> list[Any]:
    """Without ``--group``, each sweep's members as one :class:`GroupRow`."""
    from dispatch.listing import grouped
    from dispatch.sweep import group_of

    if group is not None:
        return rows
    groups = {g for g in (group_of(r.job_id) for r in rows) if g is not None}
    return grouped(rows, _sizes(c, groups)) if groups else rows


def _sizes(c: Context, groups: Iterable[str]) -> dict[str, int]:
    """Each group's size, from its first member's record."""
    from dispatch.job_records import load_job
    from dispatch.model.errors import DispatchError
    from dispatch.sweep import member_id

    sizes: dict[str, int] = {}
    for group in groups:
        try:
            first = load_job(c.client.store, member_id(group, 0)).group
        except DispatchError:
            continue
        if first is not None:
            sizes[group] = first.size
    return sizes


def _shown(c: Context, read: tuple[Any, dict[str, str]], group: str | None) -> tuple[Any, Any]:
    """The listing as the table shows it: a sweep's members as one row, unless --group."""
    from dataclasses import replace

    from dispatch.listing import GroupRow

    listing, waiting = read
    rows = [r.as_row() if isinstance(r, GroupRow) else r for r in _collapse(c, listing.rows, group)]
    return replace(listing, rows=rows), waiting


def _any_json(r: Any, waiting: dict[str, str]) -> dict[str, Any]:
    from dispatch.listing import GroupRow

    if isinstance(r, GroupRow):
        return {
            "group_id": r.group_id,
            "name": r.name,
            "backend": r.backend,
            "created_at": r.created_at.isoformat(),
            "size": r.size,
            "listed": r.listed,
            "states": r.states,
            "members": list(r.members),
        }
    return _row_json(r, waiting)


def _row_json(r: Any, waiting: dict[str, str]) -> dict[str, Any]:
    from dispatch.sweep import group_of

    return {
        "job_id": r.job_id,
        "group_id": group_of(r.job_id),
        "name": r.name,
        "backend": r.backend,
        "created_at": r.created_at.isoformat(),
        "outcome": r.outcome,
        "version": r.version,
        "quarantined": r.quarantined,
        "escalated": waiting.get(r.job_id),
        "state": r.state,
        "settled": r.settled,
        "object_id": r.object_id,
        "cause": r.cause,
        "cause_detail": r.cause_detail,
        "attempt": r.attempt,
        "attempts": r.attempts,
        "budget_left": r.budget_left,
        "nodes": r.nodes,
        "waiting": r.waiting,
        "note": r.note,
        "supervisor": None if r.supervisor is None else r.supervisor.model_dump(mode="json"),
    }


def _print_table(listing: Any, limit: int | None, waiting: dict[str, str]) -> None:
    from dispatch.cli.table import plain, rich_table, terminal
    from dispatch.job_records import utc_now

    now = utc_now()
    console = terminal()
    if console is not None:
        console.print(rich_table(listing, now, limit, waiting))
    else:
        click.echo(plain(listing, now, limit, waiting))


def _watch_table(c: Context, read: Any, limit: int, interval: float) -> None:
    """``list --watch``: on a terminal the table redrawn in place; piped, the table again
    (under a time line) each time a row changes. Ctrl-C ends it."""
    import time

    from dispatch.cli.table import plain, rich_table, terminal
    from dispatch.job_records import utc_now

    try:
        console = terminal()
        if console is not None:
            from rich.live import Live

            listing, waiting = read()
            with Live(
                rich_table(listing, utc_now(), limit, waiting),
                console=console,
                auto_refresh=False,
                screen=False,
            ) as live:
                while True:
                    time.sleep(interval)
                    listing, waiting = read()
                    live.update(rich_table(listing, utc_now(), limit, waiting), refresh=True)
        last = None
        while True:
            listing, waiting = read()
            now = utc_now()
            key = [(r.job_id, r.state, r.cause, r.attempt, r.waiting) for r in listing.rows]
            if key != last:
                click.echo(f"--- {now:%Y-%m-%d %H:%M:%S}")
                click.echo(plain(listing, now, limit, waiting))
                last = key
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _active(row: object) -> bool:
    return getattr(row, "outcome", None) is None and _quarantine(row) is None


def _escalated(store: RecordStore, job_ids: list[str]) -> dict[str, str]:
    """The reason of each job's last event when that event is an escalation: e.g. another
    user's local job a supervisor will not run (S-51), until its submitter's supervisor
    acts. Reads only these jobs' records (``read_feed`` with ``job_ids``)."""
    from dispatch.model.events import EscalationRaised

    last: dict[str, object] = {}
    position = 0
    while job_ids:
        feed = store.read_feed(position, _PAGE, job_ids=job_ids)
        for event in feed.events:
            last[event.job_id] = event
        if feed.position == position:
            break
        position = feed.position
    return {j: e.reason for j, e in last.items() if isinstance(e, EscalationRaised)}


_PAGE = 20_000


def _quarantine(row: object) -> str | None:
    """The store's words for a row it could not decode (``JobSummary.quarantined``)."""
    q = getattr(row, "quarantined", None)
    return None if q is None else str(getattr(q, "message", q))


@click.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def history(c: Context, job_id: str, as_json: bool) -> None:
    """Show the committed transitions of a job (recoveries, holds, outcome...)."""
    from dispatch.cli.render import emit_json, history_text
    from dispatch.core.status import Status  # history only: no scheduler call needed
    from dispatch.model.enums import Level, State

    job = c.client.job(job_id).record()
    if as_json:
        emit_json([t.model_dump(mode="json") for t in job.history])
        return
    shown = Status(
        job_id=job.job_id,
        state=job.outcome.state if job.outcome else State.PENDING,
        level=Level.RECORD,
        settled=True,
        at=job.created_at,
        history=job.history,
    )
    click.echo(history_text(shown))


@click.command()
@click.argument("job_id")
@seconds_option("--interval", 2.0, "Seconds between checks.")
@json_option
@pass_ctx
@handles_errors
def watch(c: Context, job_id: str, interval: float, as_json: bool) -> None:
    """Follow a job until it ends or is held, supervising it here if nobody else is."""
    from dispatch.cli.submit import follow

    follow(c.client.job(job_id), interval, as_json)


@click.command()
@click.argument("job_id")
@click.option("--submission", type=click.IntRange(min=1), help="Only this submission.")
@click.option("--node", help="Only what tasks on this node printed.")
@click.option("--rank", type=click.IntRange(min=0), help="Only what this rank printed.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Standard error instead of output.")
@click.option("--tail", type=click.IntRange(min=0), help="Only the last N lines (per submission).")
@click.option("--follow", "-f", is_flag=True, help="Go on printing until the job ends or is held.")
@seconds_option("--interval", 1.0, "Seconds between looks with --follow.")
@json_option
@pass_ctx
@handles_errors
def logs(
    c: Context,
    job_id: str,
    submission: int | None,
    node: str | None,
    rank: int | None,
    use_stderr: bool,
    tail: int | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Print what a job printed: every submission in order (earlier ones after a recovery
    too), or one; per node or rank on multi-node backends. Streams; --follow goes on."""
    handle = c.client.job(job_id)
    several = submission is None and len(handle.record().submissions) > 1
    chunks = handle.logs(
        submission=submission,
        stream="stderr" if use_stderr else "stdout",
        node=node,
        rank=rank,
        tail=tail,
        follow=follow,
        interval=interval,
    )
    if as_json:
        _json_lines(chunks)
    else:
        _raw(chunks, several and submission is None)


def _raw(chunks: Iterable[LogChunk], headers: bool) -> None:
    """The job's own bytes as it printed them (as ``cat`` would show its log file); only
    dispatch's header lines are escaped."""
    from dispatch.cli.render import escaped

    out = sys.stdout.buffer
    last: int | None = None
    for chunk in chunks:
        if chunk.submission != last and (headers or last is not None):
            if last is not None:
                out.write(b"\n")
            header = escaped(f"==> submission {chunk.submission} ({chunk.object_id}) <==")
            out.write(f"{header}\n".encode())
        last = chunk.submission
        out.write(chunk.data)
        out.flush()


def _json_lines(chunks: Iterable[LogChunk]) -> None:
    """One JSON object per printed line: submission, object, stream and the line's text."""
    partial = b""
    last: LogChunk | None = None

    def emit(chunk: LogChunk, line: bytes) -> None:
        record = {
            "submission": chunk.submission,
            "object_id": chunk.object_id,
            "stream": chunk.stream,
            "line": line.decode("utf-8", "replace"),
        }
        click.echo(json.dumps(record))

    for chunk in chunks:
        if last is not None and chunk.submission != last.submission and partial:
            emit(last, partial)
            partial = b""
        last = chunk
        parts = (partial + chunk.data).split(b"\n")
        partial = parts.pop()
        for part in parts:
            emit(chunk, part)
    if last is not None and partial:
        emit(last, partial)
