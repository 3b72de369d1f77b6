"""The keeper: the command's parent, forked from the runner, so a killed runner loses
nothing of how the command ended.

Only a parent learns a process's exit status. The runner used to be the command's parent,
so a runner killed while the command ran (an OOM kill, a ``kill -9``) left a command
nobody could learn the exit of: reported ``unknown`` even when it exited 0. The runner now
forks this small keeper, which starts a session of its own (so signals to the runner's
group do not reach it), starts the command in a process group of its own inside it, and
does nothing but wait: when the command exits it kills what is left of that group (before
reaping, so the group id cannot have been reused), reaps it and writes ``exit.json``.
Signals for the command (stops, the time limit) go to the command's group, never to the
keeper.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime

from dispatch.local.layout import ObjectDir, write_atomic
from dispatch.local.processes import identify
from dispatch.local.records import Exited, Started, exit_file

#: Seconds the keeper keeps trying to write ``exit.json`` through an outage.
PERSIST_WINDOW = 600.0


def keep(obj: ObjectDir, spawn: Callable[[], subprocess.Popen[bytes]], report: int) -> None:
    """In the forked child: start the command, tell the runner its ``started.json`` record on
    ``report`` (a pipe; ``error <words>`` if it could not start), wait for it, record its
    exit. Never returns: the child must not run on into the runner's code."""
    try:
        os.setsid()
        try:
            proc = spawn()
        except OSError as exc:
            os.write(report, f"error {exc}".encode())
            os._exit(0)
        # Identified before it is waited for: until then even a command that died at once
        # is a zombie whose /proc entry (its start time) is still there. Recorded here
        # first, so a runner killed right after the launch leaves a command on record (the
        # runner writes the same file again when it hears of it).
        command = identify(proc.pid)
        started = Started(
            process=command, started_at=datetime.now(UTC), keeper=identify(os.getpid())
        )
        try:
            write_atomic(obj.started, started.model_dump_json())
        except OSError:
            pass  # the runner retries it through an outage
        os.write(report, f"started {started.model_dump_json()}".encode())
        os.close(report)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers, as Slurm ends a job step
        except ProcessLookupError:
            pass
        exited = Exited(returncode=proc.wait(), at=datetime.now(UTC))
        deadline = time.monotonic() + PERSIST_WINDOW
        while True:
            try:
                write_atomic(exit_file(obj.path), exited.model_dump_json())
                break
            except FileNotFoundError:
                break  # the object directory was deleted: nobody to tell
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(1.0)
    finally:
        os._exit(0)


def start(obj: ObjectDir, spawn: Callable[[], subprocess.Popen[bytes]]) -> tuple[int, Started]:
    """Fork the keeper; return its pid and the ``started.json`` record it wrote (the one
    start time every reader sees: the runner writes the same record again). Raises OSError,
    with the OS's words, when the command could not be started."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        keep(obj, spawn, write_end)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 4096):
        chunks.append(chunk)
    os.close(read_end)
    answer = b"".join(chunks).decode(errors="replace")
    if not answer.startswith("started "):
        os.waitpid(pid, 0)
        raise OSError(answer.removeprefix("error ") or "the keeper died before the command started")
    return pid, Started.model_validate_json(answer.removeprefix("started "))
