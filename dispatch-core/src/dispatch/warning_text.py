"""What people type for a job's endings: ``--warn USR1@90s``, ``--checkpoint-dir``,
``--progress-window 20m`` (S-36: a clear error naming the option and the value).

The model itself is :class:`dispatch.core.warning.EndWarning`; this module parses text
into it and fills what dispatch chooses for the job (the heartbeat file's path).
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError

from dispatch import units
from dispatch.core.warning import MAX_WARNING, WARNING_SIGNALS, EndWarning
from dispatch.model.errors import BadInput


def parse_warning(text: str, option: str = "--warn") -> EndWarning:
    """``SIG@DURATION``: ``USR1@90``, ``SIGUSR2@2m``, ``TERM@0:01:30``."""
    name, sep, when = text.strip().partition("@")
    if not sep or not name or not when:
        raise BadInput(f"{option} {text!r}: give SIGNAL@DURATION, e.g. USR1@90s")
    try:
        before = units.duration(when, option)
    except BadInput as exc:
        said = str(exc).partition(": ")[2].replace("a time limit", "a warning")
        raise BadInput(f"{option} {text!r}: {said}") from None
    if before > MAX_WARNING:
        raise BadInput(
            f"{option} {text!r}: at most {int(MAX_WARNING.total_seconds())} s before the end "
            "(Slurm's --signal limit)"
        )
    try:
        return EndWarning(signal=name, before=before)
    except ValidationError:
        raise BadInput(
            f"{option} {text!r}: {name!r} is not a signal a job can be warned with; "
            f"use one of {', '.join(sorted(WARNING_SIGNALS))}"
        ) from None


def as_warning(value: EndWarning | str | None, option: str = "warn") -> EndWarning | None:
    if value is None or isinstance(value, EndWarning):
        return value
    if isinstance(value, str):
        return parse_warning(value, option)
    raise BadInput(f"{option}: {value!r} is neither SIGNAL@DURATION nor an EndWarning")


def as_window(
    value: timedelta | str | float | None, option: str = "progress_window"
) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise BadInput(f"{option} {value}: a progress window must be more than 0")
        return value
    if isinstance(value, bool):
        raise BadInput(f"{option} {value!r}: give a duration such as 20m")
    return units.duration(str(value), option)


def as_checkpoint_dir(
    value: str | os.PathLike[str] | None, option: str = "checkpoint_dir"
) -> str | None:
    """An absolute directory path (the job may run in another working directory)."""
    if value is None:
        return None
    text = os.fspath(value)
    if not text or "\0" in text:
        raise BadInput(f"{option} {text!r}: give a directory path")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise BadInput(f"{option} {text!r}: exists and is not a directory")
    return str(path.absolute())


def heartbeat_root() -> Path:
    """Where heartbeat files go unless a checkpoint directory holds it: the user's state."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "dispatch" / "heartbeats"


def heartbeat_for(checkpoint_dir: str | None) -> str:
    """The heartbeat file of a job declaring a progress window: in its checkpoint
    directory when it has one (both survive resubmissions), else a fresh file of the
    user's state, read by the supervisor on the same host (or a shared file system)."""
    if checkpoint_dir is not None:
        return str(Path(checkpoint_dir) / ".dispatch-heartbeat")
    return str(heartbeat_root() / f"{uuid.uuid4().hex}.heartbeat")


def endings(
    *,
    warn: EndWarning | str | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    progress_window: timedelta | str | float | None = None,
    options: tuple[str, str, str] = ("warn", "checkpoint_dir", "progress_window"),
    time_limit: timedelta | None = None,
) -> dict[str, object]:
    """The JobSpec fields for these choices (only those set), checked; a warning must
    come before the start, so it is shorter than the time limit."""
    fields: dict[str, object] = {}
    warning = as_warning(warn, options[0])
    if warning is not None and time_limit is not None and warning.before >= time_limit:
        raise BadInput(
            f"{options[0]} {warning.signal}@{warning.seconds}s: the warning must come less "
            f"than the time limit ({time_limit}) before the end"
        )
    directory = as_checkpoint_dir(checkpoint_dir, options[1])
    window = as_window(progress_window, options[2])
    if warning is not None:
        fields["warn"] = warning
    if directory is not None:
        fields["checkpoint_dir"] = directory
    if window is not None:
        fields["progress_window"] = window
        fields["heartbeat"] = heartbeat_for(directory)
    return fields
