"""The files an object directory holds, as strict models.

Each file is written once, atomically, by exactly one side (the backend or the runner), so a
reader in any process sees either nothing or the whole file. A file that does not decode is
reported, never guessed at (S-4, S-6): see :mod:`dispatch.local.observe`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import AwareDatetime, Field

from dispatch.core.cause import Cause
from dispatch.model.base import Model
from dispatch.model.errors import DecodeError
from dispatch.model.spec import JobSpec

M = TypeVar("M", bound=Model)


class ProcessIdentity(Model):
    """A process as the kernel names it for life: a pid alone is reused, a pid plus its
    start time (in clock ticks since boot) plus the boot id is not."""

    pid: int = Field(ge=1)
    start_ticks: int = Field(ge=0)
    boot_id: str
    host: str


class ObjectMeta(Model):
    """``meta.json``: what was submitted; written by the backend before anything runs, so
    the object is found by its job id even if the submit call's answer is lost (S-34).

    ``command``, ``directory`` and ``env`` are what the runner runs, where, and what it
    adds to the submitter's kept environment, all decided by ``dispatch_prepare``: the
    runner reads them, it computes none of them (so a dry run shows what runs)."""

    object_id: str
    job_id: str
    submission: int = Field(ge=1)
    spec: JobSpec
    gated: bool
    created_at: AwareDatetime
    cwd: str
    stop_grace: float = Field(ge=0)
    command: tuple[str, ...] = Field(min_length=1)
    directory: str
    env: dict[str, str]


class Started(Model):
    """``started.json``: the command's process group leader, written by the runner, and
    the keeper: the command's parent, which outlives a runner that was killed."""

    process: ProcessIdentity
    started_at: AwareDatetime
    keeper: ProcessIdentity | None = None


class Exited(Model):
    """``exit.json``: the command's wait status (``subprocess`` convention: negative is
    killed by that signal), written by its keeper, the one process that can learn it. A
    runner killed before the command ended therefore does not lose how it ended."""

    returncode: int
    at: AwareDatetime


def exit_file(path: Path) -> Path:
    """Where the keeper of the object in directory ``path`` writes :class:`Exited`."""
    return path / "exit.json"


class StopRequest(Model):
    """``stop.json``: dispatch asked for the object to be stopped, and why. The first
    request wins; later ones are no-ops (S-30)."""

    cause: Cause
    at: AwareDatetime


class Ending(Model):
    """``end.json``: how the object ended, written once by whoever saw it end.

    ``launched`` says whether a launch of the command was attempted (so the object has an
    execution); ``state`` is the local word shown to people as the scheduler state.
    """

    state: str
    cause: Cause
    ended_at: AwareDatetime
    started_at: AwareDatetime | None = None
    launched: bool
    host: str


def read(path: Path, model: type[M]) -> M | None:
    """The model in ``path``, or None if there is no such file.

    :raises DecodeError: the file exists and does not decode; the message names the file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{path}: not UTF-8 text: {exc}", value=None) from None
    try:
        return model.model_validate_json(text)
    except DecodeError as exc:
        raise DecodeError(f"{path}: {exc}", field=exc.field, value=text) from None
