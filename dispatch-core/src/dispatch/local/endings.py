"""How the local backend carries out a job's warning, checkpoint directory and heartbeat
(S-44, S-45, S-47; dispatch-core/docs/endings.md).

- **Warning** (``spec.warn``, e.g. USR1@90s): for the time limit, the signal goes to the
  command's process group ``before`` ahead of the limit and SIGKILL at the limit; for
  dispatch's stop (or a signal to the runner) the signal goes at once and SIGKILL after
  ``before``. Without a warning the runner sends SIGTERM and SIGKILL after the stop grace,
  as it always did. Either way the ending is classified by what made the runner act (the
  time limit, the stop), whatever the command exited with afterwards: a command that
  catches the warning, checkpoints and exits 0 ended by its time limit (S-45).
- **Checkpoint directory**: ``spec.checkpoint_dir`` when given (created 0700 if missing,
  left as it is otherwise), else ``<state>/checkpoints/<job key>`` (0700): one per job,
  the same for every submission; dispatch never deletes it (it is the user's work).
- **Heartbeat** (``spec.heartbeat``, set with a progress window): the path is given to the
  command as ``DISPATCH_HEARTBEAT``; the runner also touches it whenever the command's
  stdout or stderr grows, so a job that prints counts as progressing.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

from dispatch.core.warning import EndWarning
from dispatch.local.layout import ObjectDir, StateDir, job_key, private_mkdir
from dispatch.local.records import ObjectMeta
from dispatch.model.spec import JobSpec


def signal_number(warning: EndWarning) -> int:
    return int(getattr(signal, f"SIG{warning.signal}"))


def warn_at(warning: EndWarning | None, deadline: float | None) -> float | None:
    """The monotonic time the time limit's warning is due, None without one."""
    if warning is None or deadline is None:
        return None
    return deadline - warning.before.total_seconds()


def opening(
    warning: EndWarning | None, grace: float, deadline: float | None, now: float
) -> tuple[int, float]:
    """The first signal to send and the seconds until SIGKILL."""
    if warning is None:
        return signal.SIGTERM, grace
    wait = warning.before.total_seconds()
    if deadline is not None:
        wait = min(wait, max(0.0, deadline - now))
    return signal_number(warning), wait


def sent_words(first: int, wait: float, killed: bool) -> str:
    sent = f"sent {signal.Signals(first).name} to its process group"
    if killed:
        sent += f", then SIGKILL after a grace of {round(wait, 1):g}s"
    return sent


def warned_detail(warning: EndWarning, limit: timedelta | None) -> str:
    signal_name = f"SIG{warning.signal}"
    return f"time limit of {limit} reached: warned with {signal_name} {warning.seconds}s before it"


def checkpoint_path(state: StateDir, job_id: str, spec: JobSpec) -> Path:
    """The job's checkpoint directory (the spec's, else one of the job's own)."""
    given = spec.checkpoint_dir
    if given is not None:
        return Path(given)
    return state.root / "checkpoints" / job_key(job_id)


def checkpoint_dir(state: StateDir, meta: ObjectMeta) -> Path:
    """The job's checkpoint directory, created 0700 if missing."""
    path = checkpoint_path(state, meta.job_id, meta.spec)
    if meta.spec.checkpoint_dir is not None:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path
    private_mkdir(path.parent)
    private_mkdir(path)
    return path


def environment(state: StateDir, job_id: str, spec: JobSpec) -> dict[str, str]:
    """What the endings add to one execution's environment (nothing is created)."""
    added = {"DISPATCH_CHECKPOINT_DIR": str(checkpoint_path(state, job_id, spec))}
    if spec.heartbeat is not None:
        added["DISPATCH_HEARTBEAT"] = spec.heartbeat
    return added


def make_directories(state: StateDir, meta: ObjectMeta) -> None:
    """Create what :func:`environment` names, 0700, before the command starts."""
    checkpoint_dir(state, meta)
    if meta.spec.heartbeat is not None:
        Path(meta.spec.heartbeat).parent.mkdir(mode=0o700, parents=True, exist_ok=True)


class LogBeat:
    """Touches the heartbeat when the command's output grows (the log counts as progress)."""

    def __init__(self, obj: ObjectDir, heartbeat: str | None) -> None:
        self.paths = (obj.stdout, obj.stderr)
        self.heartbeat = heartbeat
        self.sizes: tuple[int, ...] = (0, 0)

    def follow(self) -> None:
        if self.heartbeat is None:
            return
        sizes = tuple(_size(p) for p in self.paths)
        if sizes != self.sizes and any(sizes):
            self.sizes = sizes
            try:
                with open(self.heartbeat, "a"):
                    os.utime(self.heartbeat)
            except OSError:
                pass  # a heartbeat that cannot be touched is a silence, escalated in time


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
