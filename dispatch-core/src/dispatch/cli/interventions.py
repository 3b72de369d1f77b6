"""A person's requests: ``cancel``, ``resubmit``, ``give-up``, ``supersede``.

Each is appended to the record, then one supervisor tick on the job carries it out now
(through :meth:`dispatch.Client.request`); with the scheduler unreachable the request
stays recorded for any supervisor, and the command exits 3.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx

if TYPE_CHECKING:
    from dispatch.client import JobHandle
    from dispatch.core.status import Status


def _request(c: Context, job_id: str, act: Callable[[JobHandle], Status], as_json: bool) -> None:
    from dispatch.cli import exit_codes
    from dispatch.cli.common import message_lines
    from dispatch.cli.render import emit_json, status_text
    from dispatch.client import Deferred

    handle = c.client.job(job_id)
    try:
        result = act(handle)
    except Deferred as exc:
        click.echo(f"dispatch: {message_lines(str(exc))}", err=True)
        if as_json:
            emit_json({"job_id": job_id, "recorded": True})
        sys.exit(exit_codes.UNREACHABLE)
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(_DONE[act.__name__])
        click.echo(status_text(result))


_DONE = {"cancel": "cancel requested", "resubmit": "resubmitted", "give_up": "gave up"}


@click.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def cancel(c: Context, job_id: str, as_json: bool) -> None:
    """Cancel a job: stop its objects and commit cancelled (actor: you). Given a sweep's
    group id, cancel each of its members not ended yet (one request each)."""
    from dispatch.client import JobHandle
    from dispatch.sweep import is_group_id

    if is_group_id(job_id):
        _cancel_group(c, job_id, as_json)
        return
    _request(c, job_id, JobHandle.cancel, as_json)


def _cancel_group(c: Context, group_id: str, as_json: bool) -> None:
    """Each member not ended is cancelled as ``cancel`` cancels a job: those waiting for
    a slot first, so that no member is submitted into a slot a cancelled one freed."""
    from dispatch.cli import exit_codes
    from dispatch.cli.common import message_lines
    from dispatch.cli.render import emit_json, escaped
    from dispatch.client import Deferred
    from dispatch.job_records import load_group

    members = [m for m in load_group(c.client.store, group_id) if m.outcome is None]
    members.sort(key=lambda m: (bool(m.submissions), m.group.index if m.group else 0))
    done: list[dict[str, object]] = []
    deferred = False
    for member in members:
        try:
            result = c.client.job(member.job_id).cancel()
        except Deferred as exc:
            click.echo(f"dispatch: {message_lines(str(exc))}", err=True)
            deferred = True
            done.append({"job_id": member.job_id, "recorded": True})
            continue
        done.append(result.model_dump(mode="json"))
        if not as_json:
            click.echo(escaped(f"{member.job_id}  {result.state.value}"))
    if as_json:
        emit_json({"group_id": group_id, "cancelled": done})
    else:
        click.echo(f"cancel requested for {len(members)} member(s) of {group_id}")
    if deferred:
        sys.exit(exit_codes.UNREACHABLE)


@click.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def resubmit(c: Context, job_id: str, as_json: bool) -> None:
    """Release a held job with a new submission (spends no budget)."""
    from dispatch.client import JobHandle

    _request(c, job_id, JobHandle.resubmit, as_json)


@click.command(name="give-up")
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def give_up(c: Context, job_id: str, as_json: bool) -> None:
    """End a held job as failed, with the cause that ended its execution."""
    from dispatch.client import JobHandle

    _request(c, job_id, JobHandle.give_up, as_json)


@click.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def supersede(c: Context, job_id: str, as_json: bool) -> None:
    """Run a finished job again as a new job that names the old one; print the new id."""
    from dispatch.cli.render import emit_json, escaped

    new = c.client.job(job_id).supersede()
    if as_json:
        emit_json({"job_id": new.job_id, "supersedes": job_id})
    else:
        click.echo(escaped(new.job_id))
