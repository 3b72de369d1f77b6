"""Finding an object's processes by what survives its object directory.

A deleted object directory takes with it every file that names the object's processes,
but not the processes: the command (and whatever it started) still carries
``DISPATCH_OBJECT_ID`` in its environment, and the runner and keeper still carry the
directory's path in their argv. Discovery reports such an object running while any of
them lives, and a stop kills them, so no replacement ever runs beside a command nobody
watches. Reading every process's ``/proc`` entry costs one pass over the process table,
paid only when a job's index names an object whose directory is gone.

A process that is exiting loses its memory (so its ``environ`` and ``cmdline`` read empty)
before it becomes a zombie: a scan stops finding it while ``/proc/<pid>/stat`` still says it
runs. So a stop waits on the processes it signalled, by :func:`~dispatch.local.processes.gone`
(an exited process, zombie or reaped, is gone), not on the scan coming back empty.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.local.processes import gone, identify
from dispatch.local.records import ProcessIdentity

_PROC = Path("/proc")
_RUNNER = b"dispatch.local.runner"
_ENV = b"DISPATCH_OBJECT_ID="
#: Seconds a stop waits for killed processes to be gone.
KILL_WAIT = 3.0


@dataclass
class Survivors:
    """The live processes of one object: its command's and its runner's (and keeper's)."""

    commands: list[int] = field(default_factory=list)
    runners: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.commands or self.runners)

    def words(self) -> str:
        parts = []
        if self.commands:
            parts.append("command pid " + ", ".join(map(str, self.commands)))
        if self.runners:
            parts.append("runner/keeper pid " + ", ".join(map(str, self.runners)))
        return "; ".join(parts)


def scan(objects: Path) -> dict[str, Survivors]:
    """One pass over the process table: every live process of an object under ``objects``
    (the state directory's ``objects/``), by object id."""
    found: dict[str, Survivors] = {}
    prefix = str(objects).encode() + b"/"
    me = os.getpid()
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            argv = (_PROC / entry.name / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            if _RUNNER in argv and argv[-1].startswith(prefix):
                name = argv[-1][len(prefix) :].decode(errors="replace")
                found.setdefault(name, Survivors()).runners.append(pid)
                continue
            for item in (_PROC / entry.name / "environ").read_bytes().split(b"\0"):
                if item.startswith(_ENV):
                    name = item[len(_ENV) :].decode(errors="replace")
                    found.setdefault(name, Survivors()).commands.append(pid)
                    break
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def stop(objects: Path, object_id: str, grace: float) -> str:
    """Stop every process of ``object_id``: SIGTERM to the commands' process groups,
    SIGKILL after ``grace``, then the runner and keeper. Returns what was done, in words."""
    first = scan(objects).get(object_id, Survivors())
    if not first:
        return "no process of it was left"
    signalled = _identities([*first.commands, *first.runners])
    groups = set()
    for pid in first.commands:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    groups.discard(os.getpgrp())
    for group in groups:
        _signal(group, signal.SIGTERM, group=True)
    deadline = time.monotonic() + grace
    left = first
    while left.commands and time.monotonic() < deadline:
        time.sleep(0.05)
        left = scan(objects).get(object_id, Survivors())
    killed = bool(left.commands)
    known = {process.pid for process in signalled}
    signalled += _identities([p for p in (*left.commands, *left.runners) if p not in known])
    for pid in left.commands:
        _signal(pid, signal.SIGKILL)
    for pid in [*first.runners, *left.runners]:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT
    while time.monotonic() < deadline and any(gone(p) is None for p in signalled):
        time.sleep(0.05)  # a SIGKILL is delivered, not done, when kill() returns
    sent = f"sent SIGTERM to {first.words()}"
    if killed:
        sent += f", then SIGKILL after a grace of {grace:g}s"
    return sent


def _identities(pids: list[int]) -> list[ProcessIdentity]:
    """The lifelong identities of ``pids`` (those that still exist), so a wait on them is
    never fooled by a pid that was reused meanwhile."""
    found = []
    for pid in pids:
        try:
            found.append(identify(pid))
        except ProcessLookupError:
            pass
    return found


def _signal(target: int, number: int, *, group: bool = False) -> None:
    try:
        if group:
            os.killpg(target, number)
        else:
            os.kill(target, number)
    except ProcessLookupError:
        pass
