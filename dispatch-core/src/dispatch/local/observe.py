"""What one object directory shows now, as an :class:`~dispatch.ObjectView` (S-19).

Reading only: discovery never writes, so any number of processes may look at once. The
files say how far the object got (gated, starting, running, stopping, ended). When they
say it is still alive but its runner is gone (the machine rebooted, the runner was
killed), the object is reported ended with cause ``unknown`` and what was found, never
running for ever. A file that does not decode is reported the same way, with its text
verbatim (S-4).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import AwareDatetime

from dispatch.core.cause import Cause
from dispatch.local.layout import ObjectDir, present
from dispatch.local.processes import exit_cause, exit_words, gone, is_here
from dispatch.local.records import (
    Ending,
    Exited,
    ObjectMeta,
    ProcessIdentity,
    Started,
    exit_file,
    read,
)
from dispatch.model.discovery import Execution, ObjectView
from dispatch.model.enums import CauseKind, Phase, Provenance
from dispatch.model.errors import DecodeError

#: How long after its submission an object may have no runner on record: a runner records
#: itself within a second of its start, so only a runner that never got going (an
#: interrupted submit, a Python that cannot import dispatch) takes longer.
STARTUP_WINDOW = timedelta(seconds=30)


def _view(
    object_id: str,
    job_id: str,
    submission: int,
    created_at: AwareDatetime | None,
    phase: Phase,
    state: str,
    cause: Cause | None = None,
    executions: tuple[Execution, ...] = (),
) -> ObjectView:
    return ObjectView(
        object_id=object_id,
        job_id=job_id,
        submission=submission,
        phase=phase,
        scheduler_state=state,
        cause=cause,
        executions=executions,
        created_at=created_at,
    )


def _unknown(detail: str) -> Cause:
    return Cause(kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail)


def _unreadable(
    object_id: str, job_id: str, submission: int, created_at: AwareDatetime | None, exc: DecodeError
) -> ObjectView:
    detail = str(exc)
    if isinstance(exc.value, str):
        detail += f"\n{exc.value}"
    return _view(
        object_id, job_id, submission, created_at, Phase.ENDED, "unreadable", _unknown(detail)
    )


def observe(
    obj: ObjectDir, job_id: str, submission: int | None, now: datetime
) -> ObjectView | None:
    """The object as its files show it, or None if it is not an object of ``job_id``.

    :param submission: the number the job index holds, used only when ``meta.json``
        itself does not decode.
    """
    try:
        meta = read(obj.meta, ObjectMeta)
    except DecodeError as exc:
        if submission is None:
            exc = DecodeError(
                f"{exc} (and its job index entry holds no submission number)",
                field=exc.field,
                value=exc.value,
            )
        return _unreadable(obj.object_id, job_id, submission or 1, None, exc)
    if meta is None or meta.job_id != job_id:
        return None
    try:
        return _observe(obj, meta, now)
    except DecodeError as exc:
        return _unreadable(meta.object_id, meta.job_id, meta.submission, meta.created_at, exc)


def _observe(obj: ObjectDir, meta: ObjectMeta, now: datetime) -> ObjectView:
    ending = read(obj.end, Ending)
    started = read(obj.started, Started)
    lost: str | None = None
    if ending is None:
        ending = _kept(obj, started)
    if ending is None:
        lost = _lost(obj, meta, started, now)
        if lost is not None:
            ending = read(obj.end, Ending)  # it may have ended while we looked
    if ending is not None:
        executions: tuple[Execution, ...] = ()
        if ending.launched:
            execution = Execution(
                index=0,
                started_at=ending.started_at,
                ended_at=ending.ended_at,
                nodes=(ending.host,),
                cause=ending.cause,
            )
            executions = (execution,)
        return _view(
            meta.object_id,
            meta.job_id,
            meta.submission,
            meta.created_at,
            Phase.ENDED,
            ending.state,
            ending.cause,
            executions,
        )
    if lost is not None:
        cause = _unknown(lost)
        executions = ()
        if started is not None:
            executions = (
                Execution(
                    index=0,
                    started_at=started.started_at,
                    nodes=(started.process.host,),
                    cause=cause,
                ),
            )
        return _view(
            meta.object_id,
            meta.job_id,
            meta.submission,
            meta.created_at,
            Phase.ENDED,
            "lost",
            cause,
            executions,
        )
    if started is not None:
        execution = Execution(index=0, started_at=started.started_at, nodes=(started.process.host,))
        return _view(
            meta.object_id,
            meta.job_id,
            meta.submission,
            meta.created_at,
            Phase.RUNNING,
            "stopping" if present(obj.stop) else "running",
            executions=(execution,),
        )
    if meta.gated and not present(obj.gate):
        return _view(
            meta.object_id, meta.job_id, meta.submission, meta.created_at, Phase.GATED, "gated"
        )
    return _view(
        meta.object_id, meta.job_id, meta.submission, meta.created_at, Phase.PENDING, "starting"
    )


def _kept(obj: ObjectDir, started: Started | None) -> Ending | None:
    """The ending the command's keeper recorded, when its runner died before it could:
    a command that exited 0 after its runner was killed succeeded."""
    if started is None:
        return None
    exited = read(exit_file(obj.path), Exited)
    if exited is None:
        return None
    runner = read(obj.runner, ProcessIdentity)
    if runner is None or not is_here(runner):
        return None
    runner_gone = gone(runner)
    if runner_gone is None:
        return None  # the runner records the ending itself, with why it stopped it
    detail = (
        f"{exit_words(exited.returncode)} (its local runner was gone: {runner_gone}; "
        "the exit status was kept by the command's keeper)"
    )
    return Ending(
        state="exited",
        cause=exit_cause(exited.returncode, detail).model_copy(update={"at": exited.at}),
        ended_at=exited.at,
        started_at=started.started_at,
        launched=True,
        host=started.process.host,
    )


def _lost(obj: ObjectDir, meta: ObjectMeta, started: Started | None, now: datetime) -> str | None:
    """What was found, in words, if the object can never record an ending; else None.

    A runner on another host (a state directory on a shared file system) cannot be checked
    from here and is trusted. A command still running after its runner died is reported
    running: it is, and :meth:`LocalBackend.dispatch_stop` can still stop it.
    """
    runner = read(obj.runner, ProcessIdentity)
    if runner is None:
        if now - meta.created_at < STARTUP_WINDOW:
            return None
        return (
            f"no local runner was recorded in the {STARTUP_WINDOW.total_seconds():g}s after "
            "the submission (the submitting process stopped before starting it, or the "
            f"runner failed to start: see {obj.runner_log}); the command never started"
        )
    if not is_here(runner):
        return None
    runner_gone = gone(runner)
    if runner_gone is None:
        return None
    if started is None:
        return (
            f"the local runner is gone ({runner_gone}) and the command never started; "
            f"see {obj.runner_log}"
        )
    command_gone = gone(started.process)
    if command_gone is None:
        return None
    if started.keeper is not None and gone(started.keeper) is None:
        return None  # its keeper is writing down how it ended
    if read(exit_file(obj.path), Exited) is not None:
        # the keeper wrote it and exited after `_kept` looked: the next look reads it
        return None
    return (
        f"the local runner is gone ({runner_gone}) and so is the command ({command_gone}) "
        "without an exit status on record (the machine rebooted, or both were killed); "
        f"see {obj.runner_log}"
    )


def vanished(obj: ObjectDir, job_id: str, submission: int, alive: str | None) -> ObjectView:
    """An object its job's index names whose directory is gone (deleted by hand, a
    cleanup gone wrong): ``alive`` says which of its processes still run, so nothing
    replaces an object whose command lives on."""
    if alive is not None:
        return _view(
            obj.object_id,
            job_id,
            submission,
            None,
            Phase.RUNNING,
            f"running, its object directory deleted ({alive})",
            executions=(Execution(index=0, cause=None),),
        )
    detail = (
        f"its object directory {obj.path} was deleted and no process of it is left; "
        "how it ended is not known"
    )
    cause = _unknown(detail)
    return _view(
        obj.object_id,
        job_id,
        submission,
        None,
        Phase.ENDED,
        "lost",
        cause,
        (Execution(index=0, cause=cause),),
    )
