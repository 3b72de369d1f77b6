"""Telling whether a recorded process is still the one we started (Linux ``/proc``).

A pid alone proves nothing after a crash: it may belong to another process now, or the
machine may have rebooted. A :class:`~dispatch.local.records.ProcessIdentity` adds the
start time from ``/proc/<pid>/stat`` and the kernel's boot id, and :func:`gone` compares
all three, so a dead runner is never reported running for ever.
"""

from __future__ import annotations

import signal
import socket
from functools import cache
from pathlib import Path

from dispatch.core.cause import Cause
from dispatch.local.records import ProcessIdentity
from dispatch.model.enums import CauseKind, Provenance

_PROC = Path("/proc")


@cache
def boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def hostname() -> str:
    return socket.gethostname()


def _stat(pid: int) -> tuple[str, int] | None:
    """The state letter and start time of ``pid``, or None if there is no such process."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses: fields resume after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def identify(pid: int) -> ProcessIdentity:
    """The lifelong identity of a live (or not yet reaped) process."""
    found = _stat(pid)
    if found is None:
        raise ProcessLookupError(f"no process has pid {pid}")
    return ProcessIdentity(pid=pid, start_ticks=found[1], boot_id=boot_id(), host=hostname())


def is_here(process: ProcessIdentity) -> bool:
    """Whether ``process`` ran on this machine, so its pid means something here."""
    return process.host == hostname()


def gone(process: ProcessIdentity) -> str | None:
    """None while ``process`` still runs; otherwise what was found instead, in words.

    Only meaningful for a process of this host (:func:`is_here`).
    """
    now_boot = boot_id()
    if process.boot_id and now_boot and process.boot_id != now_boot:
        return f"the machine rebooted since pid {process.pid} started (boot id changed)"
    found = _stat(process.pid)
    if found is None:
        return f"no process has pid {process.pid} any more"
    state, start_ticks = found
    if start_ticks != process.start_ticks:
        return (
            f"pid {process.pid} now belongs to another process "
            f"(started at tick {start_ticks}, not {process.start_ticks})"
        )
    if state in ("Z", "X", "x"):
        return f"pid {process.pid} has exited (state {state})"
    return None


def signal_words(number: int) -> str:
    """``signal 9 (SIGKILL)``: the number a person sees in logs and the name they search."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    return f"signal {number} ({name})"


def exit_words(returncode: int) -> str:
    """A ``subprocess`` return code in words: negative means killed by that signal."""
    if returncode < 0:
        return f"killed by {signal_words(-returncode)}"
    return f"exited with code {returncode}"


def exit_code(returncode: int) -> int:
    """The shell's convention: a death by signal S is exit code 128 + S."""
    return 128 - returncode if returncode < 0 else returncode


def exit_cause(returncode: int, detail: str | None = None) -> Cause:
    """How a command that ended by itself ended: ``none`` for 0, else ``non-zero-exit``."""
    words = detail or exit_words(returncode)
    if returncode == 0:
        return Cause(
            kind=CauseKind.NONE, provenance=Provenance.APPLICATION, detail=words, exit_code=0
        )
    return Cause(
        kind=CauseKind.NON_ZERO_EXIT,
        provenance=Provenance.APPLICATION,
        detail=words,
        exit_code=exit_code(returncode),
    )
