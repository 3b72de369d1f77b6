"""Python functions as jobs: :meth:`dispatch.Client.submit_function` and
:meth:`dispatch.Client.map` (docs/functions.md).

The function and its arguments are pickled by cloudpickle (the optional extra
``dispatch-core[functions]``) into the job's checkpoint directory, which every node of a
Slurm job reaches; the job's command is ``<python> -m dispatch.function_runner --python
<major.minor>`` (:mod:`dispatch.function_runner`), and rank 0 writes the outcome there.
:meth:`FunctionHandle.result` waits for the job as :meth:`dispatch.JobHandle.wait` does,
then reads the outcome: the value, or the function's exception raised again with its
remote traceback.

A function or an argument that cannot be pickled is refused before anything is recorded,
with the pickler's reason (:class:`dispatch.BadInput`).
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.function_runner import (
    CALL,
    FORMAT,
    FUNCTION,
    OUTCOME,
    RETURNED,
    STAGE_CALL,
    call_dir,
    version_text,
    write_atomically,
)
from dispatch.handle import JobHandle, WaitTimeout
from dispatch.model.errors import BadInput, DispatchError

if TYPE_CHECKING:
    from dispatch.client import Client
    from dispatch.core.job import Job

#: The sweep key of a map's members: the item's index.
MAP_KEY = "i"


def resumed() -> bool:
    """True in an execution of a job that an earlier execution of the same job ran before
    (``DISPATCH_RESUMED=1``, S-44): a resubmission or a requeue after a preemption, a lost
    node, a time limit. A function that checkpoints reads its checkpoint when this is true;
    otherwise a recovered job runs again from the start."""
    return os.environ.get("DISPATCH_RESUMED") == "1"


class FunctionError(DispatchError):
    """A function job ended without a value: it failed, was cancelled or is held before
    the function returned (a preemption, a lost node, a time limit, the runner refusing
    the interpreter). The message says how the job ended; ``job`` is its record."""

    def __init__(self, message: str, job: Job | None = None) -> None:
        self.job = job
        super().__init__(message)


class RemoteError(FunctionError):
    """The function raised. ``type_name`` is the exception's class (``module.Name``),
    ``message`` its text, ``traceback`` the traceback as the job printed it.

    :meth:`FunctionHandle.result` raises the original exception when it unpickles here,
    with this error as its ``__cause__`` (so the remote traceback prints above it), and
    this error itself when it does not."""

    def __init__(self, type_name: str, message: str, traceback: str, job: Job | None) -> None:
        self.type_name = type_name
        self.message = message
        self.traceback = traceback
        where = f"job {job.job_id}: " if job is not None else ""
        text = f"{where}the function raised {type_name}: {message}"
        if traceback:
            text += f"\n\nremote traceback:\n{traceback.rstrip()}"
        super().__init__(text, job)


def pickled(value: object, what: str) -> bytes:
    """``value`` pickled by cloudpickle, or :class:`BadInput` with the pickler's reason."""
    cloudpickle = _cloudpickle()
    try:
        return bytes(cloudpickle.dumps(value))
    except Exception as exc:
        raise BadInput(f"{what} cannot be pickled: {type(exc).__name__}: {exc}") from exc


def _cloudpickle() -> Any:
    try:
        import cloudpickle  # type: ignore[import-untyped]
    except ImportError as exc:
        raise BadInput(
            "Python functions travel by cloudpickle, which is not installed: "
            "pip install 'dispatch-core[functions]'"
        ) from exc
    return cloudpickle


def function_name(fn: Callable[..., Any]) -> str:
    """A job name from the function (``train``; a lambda is ``lambda``)."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return re.sub(r"[^A-Za-z0-9_.-]+", "", str(name)) or "function"


def default_root() -> Path:
    """Where a function job's checkpoint directory goes when none is given:
    ``$XDG_DATA_HOME/dispatch/functions`` (``~/.local/share/dispatch/functions``), which
    must be on a file system every node reaches (a shared home), as Slurm's logs are."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(data).absolute() / "dispatch" / "functions"


def command(python: str | os.PathLike[str] | None, function: Path | None = None) -> list[str]:
    """The job's command: the interpreter (default: this one) running the runner, with
    this interpreter's major.minor for the runner to compare with its own."""
    interpreter = os.fspath(python) if python is not None else sys.executable
    if not interpreter:
        raise BadInput("python: give the interpreter the job runs (a path or a command)")
    words = [interpreter, "-m", "dispatch.function_runner", "--python", version_text()]
    if function is not None:
        words += ["--function", str(function)]
    return words


class Written:
    """The files a submit wrote, removed again when the job is refused before recording."""

    def __init__(self) -> None:
        self.created: list[Path] = []

    def directory(self, path: Path) -> Path:
        """Make ``path`` (0700) and its missing parents, remembering the first one made."""
        missing = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if missing:
            self.created.append(missing[-1])
        return path

    def file(self, path: Path, data: bytes) -> None:
        write_atomically(path, data)
        self.created.append(path)

    def remove(self) -> None:
        import shutil

        for path in reversed(self.created):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def write_call(
    written: Written,
    checkpoint_dir: str | os.PathLike[str],
    call: bytes | None = None,
    function: bytes | None = None,
) -> Path:
    """Put a call and a function (each when given) into a checkpoint directory."""
    directory = written.directory(call_dir(checkpoint_dir))
    if function is not None:
        written.file(directory / FUNCTION, function)
    if call is not None:
        written.file(directory / CALL, call)
    return directory


class FunctionHandle(JobHandle):
    """A job running a Python function: a :class:`dispatch.JobHandle` whose
    :meth:`result` is the function's value."""

    def __repr__(self) -> str:
        return f"FunctionHandle({self.job_id!r})"

    def directory(self) -> Path:
        """Where the job's call and outcome are (in its checkpoint directory)."""
        directory = self.record().spec.checkpoint_dir
        if directory is None:
            raise BadInput(f"job {self.job_id} is not a function job: it has no checkpoint dir")
        return call_dir(directory)

    def result(self, timeout: float | None = None, *, interval: float = 2.0) -> Any:
        """Supervise the job here until it ends or is held (:meth:`wait`), then the
        function's value.

        :raises RemoteError: the function raised (the original exception is raised
            instead when it unpickles here, with the :class:`RemoteError` as its cause).
        :raises FunctionError: the job ended without a value (failed, cancelled, held).
        :raises WaitTimeout: ``timeout`` seconds passed first (the job goes on).
        """
        self.wait(timeout=timeout, interval=interval)
        return outcome_of(self.record())


def outcome_of(job: Job) -> Any:
    """The value of a function job that ended (or is held), from its outcome file; the
    function's exception, or :class:`FunctionError`, when it left no value."""
    from dispatch.model.enums import State

    if job.spec.checkpoint_dir is None:
        raise FunctionError(f"job {job.job_id} is not a function job", job)
    path = call_dir(job.spec.checkpoint_dir) / OUTCOME
    try:
        outcome = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        outcome = None
    except Exception as exc:
        raise FunctionError(
            f"job {job.job_id}: its outcome {path} does not read: {exc}", job
        ) from exc
    if outcome is not None and outcome.get("format") != FORMAT:
        raise FunctionError(
            f"job {job.job_id}: {path} is of format {outcome.get('format')!r}, "
            f"this dispatch reads {FORMAT}",
            job,
        )
    succeeded = job.outcome is not None and job.outcome.state is State.SUCCEEDED
    if succeeded and outcome is not None and outcome["stage"] == RETURNED:
        try:
            return _cloudpickle().loads(outcome["value"])
        except Exception as exc:
            raise FunctionError(
                f"job {job.job_id}: the function returned a value that does not unpickle "
                f"here: {type(exc).__name__}: {exc}",
                job,
            ) from exc
    if outcome is not None and outcome["stage"] == STAGE_CALL:
        remote = RemoteError(outcome["type"], outcome["message"], outcome["traceback"], job)
        original = _exception(outcome.get("exception"))
        if original is not None:
            raise original from remote
        raise remote
    if outcome is not None and outcome["stage"] != RETURNED:
        raise FunctionError(f"job {job.job_id}: {outcome['message']}", job)
    if outcome is not None:  # rank 0 returned; another rank, or what came after, failed
        raise FunctionError(
            f"job {job.job_id} {_ended(job)}; rank 0's function returned, but the job did "
            "not succeed (see dispatch logs)",
            job,
        )
    raise FunctionError(f"job {job.job_id} {_ended(job)}; the function left no value", job)


def _exception(data: bytes | None) -> BaseException | None:
    if data is None:
        return None
    try:
        found = _cloudpickle().loads(data)
    except Exception:
        return None
    return found if isinstance(found, BaseException) else None


def _ended(job: Job) -> str:
    if job.outcome is not None:
        cause, state = job.outcome.cause, job.outcome.state.value
    elif job.hold is not None:
        cause, state = job.hold.cause, "is held"
    else:
        return "has not ended"
    words = f"{state}: {cause.kind.value} ({cause.provenance.value})"
    if cause.exit_code is not None:
        words += f", exit {cause.exit_code}"
    return f"{words}, {cause.detail}" if cause.detail else words


@dataclass(frozen=True)
class FunctionSweep:
    """A recorded :meth:`dispatch.Client.submit_map`: one member per item, in order."""

    group_id: str
    members: tuple[FunctionHandle, ...]

    @property
    def job_ids(self) -> list[str]:
        return [m.job_id for m in self.members]

    def results(self, timeout: float | None = None, *, interval: float = 2.0) -> list[Any]:
        """Supervise every member here until each has ended or is held, then their values
        in item order; the first member (in order) without a value raises as
        :meth:`FunctionHandle.result` does."""
        if not self.members:
            return []
        jobs = wait_all(self.members[0].client, self.job_ids, timeout, interval)
        return [outcome_of(job) for job in jobs]


def wait_all(
    client: Client, job_ids: Sequence[str], timeout: float | None, interval: float
) -> list[Job]:
    """Supervise ``job_ids`` in this process until each has an outcome or a hold; their
    records, in order. One supervisor over all of them: one discovery per tick."""
    import threading

    from dispatch import units

    interval = units.seconds(interval, "interval")
    if timeout is not None:
        timeout = units.seconds(timeout, "timeout", maximum=float("inf"))
    deadline = None if timeout is None else time.monotonic() + timeout
    supervisor = client.supervisor(list(job_ids))
    stop = threading.Event()
    found: list[list[Job]] = []

    def settled(job: Job | None) -> bool:
        return job is not None and (job.outcome is not None or job.hold is not None)

    def on_tick(_report: object) -> None:
        jobs = [supervisor.job(job_id) for job_id in job_ids]
        if all(settled(job) for job in jobs):
            found.append([job for job in jobs if job is not None])
            stop.set()
        elif deadline is not None and time.monotonic() >= deadline:
            stop.set()

    try:
        supervisor.run(interval=interval, stop=stop, on_tick=on_tick)
    finally:
        supervisor.release()
    if found:
        return found[0]
    waiting = next(j for j in job_ids if not settled(supervisor.job(j)))
    raise WaitTimeout(client.status(waiting), timeout or 0.0)


__all__ = [
    "FUNCTION",
    "FunctionError",
    "FunctionHandle",
    "FunctionSweep",
    "RemoteError",
    "call_dir",
    "command",
    "default_root",
    "function_name",
    "outcome_of",
    "pickled",
    "resumed",
    "wait_all",
]
