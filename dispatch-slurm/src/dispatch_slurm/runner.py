"""The one place Slurm commands are run: argv lists, a timeout on every call, a call count.

Turning "Slurm could not be asked" into :class:`dispatch.Unreachable` happens here and
only here, so no parser ever sees the output of a controller that was down (S-5).
What counts as unreachable was measured on Slurm 22.05 (see the package README):

- slurmctld down: ``squeue``/``sinfo``/``sbatch``/``scontrol`` exit 1 after ~9 s with
  ``Unable to contact slurm controller (connect failure)``; ``scancel`` exits 8 with it;
- slurmdbd down: ``sacct`` exits 1 at once with ``Connection refused`` /
  ``Problem talking to the database``;
- slurmctld stopped in the middle of a call: ``Connection reset by peer`` (srun said it
  on 24.11.7); a submit so cut off may have made the job, which is found by its tag;
- a command that outlives its timeout, or is not installed on this host.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from dispatch import Unreachable

#: stderr fragments that mean the controller or the accounting daemon did not answer
UNREACHABLE_MARKERS = (
    "Unable to contact slurm controller",
    "Socket timed out on send/recv operation",
    "Problem talking to the database",
    "slurm_persist_conn_open",
    "Connection refused",
    "Connection reset by peer",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "Slurm backup controller in standby mode",
)

DEFAULT_TIMEOUT = 30.0

P = ParamSpec("P")
T = TypeVar("T")


def beside(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """``call`` started on a daemon thread of its own, its answer (or error) in the future.

    Not a thread pool: the interpreter waits for a pool's threads at exit, so a process
    interrupted (Ctrl-C of ``dispatch watch``) while a slow ``sacct`` is asked would wait
    for it for up to the command's timeout. A command left running so ends on its own."""
    future: Future[T] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            future.set_result(call(*args, **kwargs))
        except BaseException as exc:  # handed to the caller's thread as it is
            future.set_exception(exc)

    threading.Thread(target=run, name=f"dispatch-slurm-{call.__name__}", daemon=True).start()
    return future


#: variables that change what squeue/sacct print (fields, order, time format): removed
#: from the environment of every call, so the pinned formats are what comes back
FORMAT_VARIABLES = (
    "SQUEUE_FORMAT",
    "SQUEUE_FORMAT2",
    "SQUEUE_SORT",
    "SACCT_FORMAT",
    "SINFO_FORMAT",
    "SINFO_SORT",
    "SLURM_TIME_FORMAT",
)


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def words(self) -> str:
        """What the command said, verbatim and stripped: stderr, else stdout."""
        return self.stderr.strip() or self.stdout.strip()


def unreachable_words(text: str) -> bool:
    return any(marker in text for marker in UNREACHABLE_MARKERS)


class Runner:
    """Runs Slurm commands; ``calls`` counts every command started (S-32 evidence)."""

    def __init__(self, timeout: float | None = None, path_prefix: str = "") -> None:
        self.timeout = (
            timeout
            if timeout is not None
            else float(os.environ.get("DISPATCH_SLURM_TIMEOUT", DEFAULT_TIMEOUT))
        )
        self.path_prefix = path_prefix
        self._lock = threading.Lock()
        self.calls = 0
        self.calls_by_command: dict[str, int] = {}

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        check_unreachable: bool = True,
        inherit_env: bool = True,
    ) -> Result:
        """Run one command. Never raises for a non-zero exit: callers read the result.

        ``env`` is added to this process's environment, or replaces it when
        ``inherit_env`` is False; :data:`FORMAT_VARIABLES` are removed from either.

        :raises Unreachable: timeout, command missing, or (when ``check_unreachable``)
            a non-zero exit whose stderr says the controller or slurmdbd did not answer.
        """
        if isinstance(argv, str):
            raise TypeError("Runner.run takes an argument list, never a shell string")
        command = list(argv)
        if self.path_prefix:
            command[0] = os.path.join(self.path_prefix, command[0])
        with self._lock:
            self.calls += 1
            self.calls_by_command[argv[0]] = self.calls_by_command.get(argv[0], 0) + 1
        full_env = dict(env or {}) if not inherit_env else {**os.environ, **(env or {})}
        for variable in FORMAT_VARIABLES:
            full_env.pop(variable, None)
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=full_env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise Unreachable(f"slurm: {argv[0]} did not answer within {self.timeout:g} s") from exc
        except FileNotFoundError as exc:
            raise Unreachable(f"slurm: {argv[0]} is not installed on this host ({exc})") from exc
        result = Result(tuple(argv), done.returncode, done.stdout, done.stderr)
        if check_unreachable and not result.ok and unreachable_words(result.stderr):
            raise Unreachable(f"slurm: {argv[0]} exited {result.returncode}: {result.words()}")
        return result
