"""A job's warning and checkpoint directory on Slurm (S-44, S-45; dispatch-core/docs/endings.md).

- **Warning** (``spec.warn``, e.g. USR1@90s) becomes ``sbatch --signal=B:USR1@90``:
  Slurm signals the batch shell (dispatch's launch wrapper) that long before the time
  limit (up to 60 s earlier: slurmctld looks once a minute). The wrapper, which traps it,
  writes one line to the submission's log directory, ``warnings``, with what Slurm's
  ``squeue`` says of the job at that moment (time left, time limit), and passes the signal
  on to every step (``scancel --signal``), so each rank gets it.
- **Classification** (S-45): Slurm records a job that caught the warning and exited by
  itself as ``COMPLETED`` (or ``FAILED``), not ``TIMEOUT``; the evidence that its time limit
  ended it is the wrapper's line for that execution. :func:`reclassify` turns such an
  execution's application ending into ``time-limit`` (provenance scheduler), its detail
  holding both the wrapper's words (Slurm's time left) and Slurm's own state and exit.
  A preemption needs nothing: sacct says ``PREEMPTED`` whatever the exit code.
- **Checkpoint directory**: ``spec.checkpoint_dir``, else ``<log root>/job-<key>/checkpoint``
  (0700, one per job, the same for every submission and requeue), exported as
  ``DISPATCH_CHECKPOINT_DIR``; must be on a file system every node reaches, like the logs.

A batch script given as ``spec.script`` runs as the child of a short prelude
(:func:`dispatch_slurm.launch.script_body`): the prelude is the batch shell that gets
Slurm's signal, notes it the same way (in ``DISPATCH_WARNINGS``) and passes it on to the
script and to its steps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from dispatch import Cause, CauseKind, JobSpec, ObjectView, Provenance
from dispatch.core.warning import EndWarning

from dispatch_slurm.launch import log_dir, log_root
from dispatch_slurm.tags import encode_job_id

#: the line the wrapper writes when Slurm's signal reaches it
LINE = re.compile(r"^execution=(\d+) signal=(\S+) (.*)$")
#: the application endings a warning turns into the time limit's
APPLICATION_ENDINGS = frozenset({CauseKind.NONE, CauseKind.NON_ZERO_EXIT})


def signal_option(warning: EndWarning | None) -> list[str]:
    return [] if warning is None else [f"--signal=B:{warning.signal}@{warning.seconds}"]


def checkpoint_dir(job_id: str, spec: JobSpec) -> Path:
    if spec.checkpoint_dir is not None:
        return Path(spec.checkpoint_dir)
    return log_root() / f"job-{encode_job_id(job_id)}" / "checkpoint"


def environment(job_id: str, spec: JobSpec, submission: int = 1) -> dict[str, str]:
    """What the job's environment gets for its endings (:func:`make_directories` creates
    the directories it names)."""
    directory = checkpoint_dir(job_id, spec)
    added = {"DISPATCH_CHECKPOINT_DIR": str(directory)}
    if spec.warn is not None:
        added["DISPATCH_WARN_SIGNAL"] = spec.warn.signal
        added["DISPATCH_WARNINGS"] = str(log_dir(job_id, submission) / "warnings")
    if spec.heartbeat is not None:
        added["DISPATCH_HEARTBEAT"] = spec.heartbeat
    return added


def make_directories(env: dict[str, str]) -> None:
    """Create (0700) the checkpoint directory and the heartbeat's directory ``env`` names."""
    if "DISPATCH_CHECKPOINT_DIR" in env:
        Path(env["DISPATCH_CHECKPOINT_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    if "DISPATCH_HEARTBEAT" in env:
        Path(env["DISPATCH_HEARTBEAT"]).parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def warnings(job_id: str, submission: int) -> dict[int, str]:
    """The wrapper's words per execution index, from the submission's log directory."""
    try:
        text = (log_dir(job_id, submission) / "warnings").read_text(errors="replace")
    except OSError:
        return {}
    found: dict[int, str] = {}
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if match and int(match.group(1)) not in found:
            found[int(match.group(1))] = f"{match.group(2)} {match.group(3)}"
    return found


def _warned(cause: Cause | None, words: str) -> Cause | None:
    if cause is None or cause.kind not in APPLICATION_ENDINGS:
        return cause
    detail = (
        f"time limit: Slurm sent the warning {words}; the job then ended by itself: {cause.detail}"
    )
    return cause.model_copy(
        update={"kind": CauseKind.TIME_LIMIT, "provenance": Provenance.SCHEDULER, "detail": detail}
    )


def _may_be_warned(view: ObjectView) -> bool:
    """Whether the wrapper's words could change anything: only an application ending
    (of the object, or of an execution that ended) is ever turned into the time limit's."""
    if view.cause is not None and view.cause.kind in APPLICATION_ENDINGS:
        return True
    return any(e.cause is not None and e.cause.kind in APPLICATION_ENDINGS for e in view.executions)


#: the wrapper's words for objects seen ended, by (warnings file, object id): an ended
#: object's file is complete (the wrapper writes its line before the job ends), so it is
#: read once, not at every discovery (a file read per job made discovery 1.7x
#: the bare squeue + sacct). Forgotten all at once when full.
_ENDED: dict[tuple[Path, str], dict[int, str]] = {}
_ENDED_MAX = 100_000


def _said(view: ObjectView) -> dict[int, str]:
    if view.alive:
        return warnings(view.job_id, view.submission)
    key = (log_dir(view.job_id, view.submission), view.object_id)
    said = _ENDED.get(key)
    if said is None:
        if len(_ENDED) >= _ENDED_MAX:
            _ENDED.clear()
        said = _ENDED[key] = warnings(view.job_id, view.submission)
    return said


def reclassify(objects: Iterable[ObjectView]) -> list[ObjectView]:
    """Each execution ended after the time limit's warning is the time limit's (S-45).

    Only objects with an application ending are looked at, and an ended object's words
    are read once (``_ENDED``): a tick over many jobs reads no file for most of them."""
    out: list[ObjectView] = []
    for view in objects:
        said = _said(view) if _may_be_warned(view) else None
        if not said:
            out.append(view)
            continue
        executions = tuple(
            e.model_copy(update={"cause": _warned(e.cause, said[e.index])})
            if e.index in said and e.ended
            else e
            for e in view.executions
        )
        cause = view.cause
        last = executions[-1] if executions else None
        if cause is not None and last is not None and last.index in said and last.ended:
            cause = _warned(cause, said[last.index])
        out.append(view.model_copy(update={"executions": executions, "cause": cause}))
    return out
