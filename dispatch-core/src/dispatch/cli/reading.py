"""Commands that read: ``status``, ``list``, ``history``, ``watch``, ``logs``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx, seconds_option

if TYPE_CHECKING:
    from dispatch.logs import LogChunk
    from dispatch.store.base import RecordStore


@click.command()
@click.argument("job_id")
@click.option("--no-record", is_flag=True, help="Ask the backend only (S-29): never terminal.")
@click.option("--backend", help="Backend to ask with --no-record.")
@json_option
@pass_ctx
@handles_errors
def status(c: Context, job_id: str, no_record: bool, backend: str | None, as_json: bool) -> None:
    """Show a job: the record plus one fresh look at the scheduler."""
    from dispatch.cli.render import emit_json, status_text

    result = c.client.status(job_id, backend=backend, record=not no_record)
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(status_text(result))


@click.command(name="list")
@click.option(
    "--state",
    type=click.Choice(["active", "succeeded", "failed", "cancelled"]),
    help="Only jobs in this state (from the record).",
)
@click.option("--limit", type=click.IntRange(min=1))
@json_option
@pass_ctx
@handles_errors
def list_jobs(c: Context, state: str | None, limit: int | None, as_json: bool) -> None:
    """List jobs from the record (no scheduler call); a job whose record does not decode
    is listed as quarantined, with what is wrong; an active job whose last recorded event
    is an escalation (a supervisor left it to a person) shows that escalation's reason."""
    from dispatch.cli.render import emit_json, escaped

    rows = c.client.jobs(state=state, limit=limit)
    waiting = _escalated(c.client.store, [r.job_id for r in rows if _active(r)])
    if as_json:
        emit_json(
            [
                {
                    "job_id": r.job_id,
                    "name": r.name,
                    "backend": r.backend,
                    "created_at": r.created_at.isoformat(),
                    "outcome": r.outcome.value if r.outcome else None,
                    "version": r.version,
                    "quarantined": _quarantine(r),
                    "escalated": waiting.get(r.job_id),
                }
                for r in rows
            ]
        )
        return
    for r in rows:
        bad = _quarantine(r)
        shown = "quarantined" if bad else r.outcome.value if r.outcome else "active"
        why = waiting.get(r.job_id)
        click.echo(
            escaped(
                f"{r.job_id}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.backend:<10} {shown:<10} "
                f"{r.name}" + (f"  [{bad}]" if bad else "") + (f"  [{why}]" if why else "")
            )
        )


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
