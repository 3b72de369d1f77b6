"""Crash injection for dispatch's own code, kept out of the product (issue 9, S-34).

``python -m dispatch_testing.crash STEP[@N] [STEP[@N] ...] -- dispatch ARGS...`` runs the
``dispatch`` CLI in this process with crash points installed: the process SIGKILLs itself
the N-th time (default: the first) it reaches one of the named steps, as a power cut or
an OOM kill would stop it. Exit status -9 (or 137 from a shell) says it died there; any
other status says the step was never reached.

The points are installed into dispatch's own classes (the supervisor's ``step`` callback
and the local backend's submit steps), never into a client library, and only in the
process this launcher starts: a product install has no fault hook at all.

Steps (:data:`STEPS`):

- supervisor: ``intent-recorded`` (intents appended, no effect done), ``submitted`` (a
  submit returned, its result not recorded), ``stopped``, ``gate-opened``,
  ``result-recorded``;
- local backend, inside one submit: ``local-draft-written`` (the object's files written
  under their draft name), ``local-object-created`` (moved into place, no runner, not
  indexed), ``local-runner-started`` (its runner started, not indexed yet),
  ``local-indexed`` (indexed, the submit about to return).

:class:`Machine` runs ``dispatch`` (plain or under crash points) for tests, on a state
directory of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPERVISOR_STEPS = ("intent-recorded", "submitted", "stopped", "gate-opened", "result-recorded")
#: The local backend's submit steps, each after the method of LocalBackend that ends it.
LOCAL_STEPS = {
    "local-draft-written": "_draft",
    "local-object-created": "_move_in",
    "local-runner-started": "_start_runner",
    "local-indexed": "_publish",
}
STEPS = (*SUPERVISOR_STEPS, *LOCAL_STEPS)

USAGE = "usage: python -m dispatch_testing.crash STEP[@N] [STEP[@N] ...] -- dispatch ARGS..."


def parse(words: Sequence[str]) -> dict[str, int]:
    """``["submitted@2"]`` → ``{"submitted": 2}``; a clear error for an unknown step."""
    wanted: dict[str, int] = {}
    for word in words:
        name, _, count = word.partition("@")
        if name not in STEPS:
            raise SystemExit(f"unknown crash step {name!r}; steps: {', '.join(STEPS)}")
        try:
            times = int(count) if count else 1
        except ValueError:
            times = 0
        if times < 1:
            raise SystemExit(f"{word!r}: the count after @ must be a positive integer")
        wanted[name] = times
    return wanted


class Points:
    """The steps to die at, counting how often each was reached."""

    def __init__(self, wanted: dict[str, int]) -> None:
        self.wanted = wanted
        self.reached: dict[str, int] = {}

    def reach(self, name: str) -> None:
        if name not in self.wanted:
            return
        self.reached[name] = self.reached.get(name, 0) + 1
        if self.reached[name] == self.wanted[name]:
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Wrap the supervisor's step callback and the local backend's submit steps."""
        from dispatch.local.backend import LocalBackend
        from dispatch.supervisor import Supervisor

        points = self
        init = Supervisor.__init__

        def supervisor_init(sup: Supervisor, *args: Any, **kwargs: Any) -> None:
            given: Callable[[str], None] | None = kwargs.pop("step", None)

            def step(name: str) -> None:
                points.reach(name)
                if given is not None:
                    given(name)

            init(sup, *args, step=step, **kwargs)

        Supervisor.__init__ = supervisor_init  # type: ignore[method-assign]
        for name, method in LOCAL_STEPS.items():
            setattr(LocalBackend, method, _after(getattr(LocalBackend, method), name, points))


def _after(fn: Callable[..., Any], name: str, points: Points) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        points.reach(name)
        return result

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(USAGE, file=sys.stderr)
        return 2
    cut = args.index("--")
    steps, command = args[:cut], args[cut + 1 :]
    if not steps or not command or Path(command[0]).name != "dispatch":
        print(USAGE, file=sys.stderr)
        return 2
    Points(parse(steps)).install()
    from dispatch.cli.main import cli

    cli.main(args=command[1:], prog_name="dispatch")
    return 0


#: Set in a test's environment and its jobs', so a cleanup finds what a test left running.
TAG = "RELIABILITY_TEST_TAG"
DISPATCH = str(Path(sys.executable).with_name("dispatch"))
TIMEOUT = 60.0


def tagged(tag: str) -> list[int]:
    """Every live process (but this one) carrying ``TAG=tag`` in its environment."""
    marker = f"{TAG}={tag}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            pids.append(int(entry.name))
    return pids


@dataclass
class Machine:
    """One user's dispatch on this host, its state under ``root``: a SQLite record and
    the local backend (``XDG_STATE_HOME=root/state``)."""

    root: Path
    env: dict[str, str]

    @property
    def tag(self) -> dict[str, str]:
        """The environment entry marking a job as this machine's (for ``spec.env``)."""
        return {TAG: str(self.root)}

    @property
    def local(self) -> Path:
        return self.root / "state" / "dispatch" / "local"

    @property
    def record(self) -> Path:
        return self.root / "state" / "dispatch" / "record.db"

    def argv(self, args: Sequence[str], crash: Sequence[str] = ()) -> list[str]:
        if not crash:
            return [DISPATCH, *args]
        return [sys.executable, "-m", "dispatch_testing.crash", *crash, "--", "dispatch", *args]

    def run(
        self, *args: str, env: dict[str, str] | None = None, crash: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(args, crash),
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=TIMEOUT,
            check=False,
        )

    def start(
        self, *args: str, env: dict[str, str] | None = None, crash: Sequence[str] = ()
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(args, crash),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
        )

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        if done.returncode != 0:
            raise AssertionError(f"dispatch {' '.join(args)}: exit {done.returncode}\n{done}")
        return json.loads(done.stdout)

    def objects_of(self, job_id: str) -> list[str]:
        """Every object directory the local backend made for ``job_id``, run or not."""
        found = []
        for meta in sorted(self.local.glob("objects/local-*/meta.json")):
            if json.loads(meta.read_text())["job_id"] == job_id:
                found.append(meta.parent.name)
        return found

    def until(self, what: Callable[[], bool], timeout: float = TIMEOUT, every: float = 0.1) -> None:
        """Wait, bounded, for ``what()``; fail naming it."""
        deadline = time.monotonic() + timeout
        while not what():
            if time.monotonic() > deadline:
                raise AssertionError(f"not true after {timeout}s: {what.__doc__ or what}")
            time.sleep(every)


if __name__ == "__main__":
    sys.exit(main())
