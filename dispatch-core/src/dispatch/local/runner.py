"""The detached process that carries one local object from its gate to its ending.

The backend starts it as ``python -m dispatch.local.runner <object dir>`` in a session of
its own, with its input and output on files, so it outlives the CLI that submitted. It
starts the command through a *keeper* (:mod:`dispatch.local.keeper`), the command's
parent, which records the exit status in ``exit.json`` even if the runner itself is
killed; all the runner learns goes to files of the object directory, which any later
process reads.

Why it ends a command, first come first served: a stop request from dispatch
(``stop.json``), a SIGTERM, SIGINT or SIGHUP sent to the runner itself, the time limit.
Each sends SIGTERM to the command's process group and SIGKILL after the grace.

A signal to the runner is told apart by its sender, which the kernel reports: from a
process of a user (``kill <runner pid>``) it is a cancel outside dispatch, as an admin's
``scancel`` is on Slurm (``cancelled``, provenance scheduler, the sender named); from the
kernel or the init process it is the host shutting down, which says nothing about the
job (``unknown``). The runner therefore blocks those signals and takes them with
``sigtimedwait``, which also wakes it the moment the command exits (SIGCHLD).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TypeVar

from dispatch.core.cause import Cause
from dispatch.local import endings, environment, keeper
from dispatch.local.layout import ObjectDir, StateDir, claim_name, create_once, write_atomic
from dispatch.local.processes import (
    exit_cause,
    exit_code,
    exit_words,
    hostname,
    identify,
    signal_words,
)
from dispatch.local.records import (
    Ending,
    Exited,
    ObjectMeta,
    ProcessIdentity,
    StopRequest,
    exit_file,
    read,
)
from dispatch.model.enums import CauseKind, Provenance
from dispatch.model.errors import DecodeError

#: Seconds between looks at the stop file and the clock while the command runs; the
#: command's exit and signals to the runner wake it at once.
POLL = 0.1
#: Seconds between looks at the gate file while gated (gates can stay shut for long).
GATE_POLL = 0.2
#: Seconds the runner keeps trying to record what it learnt while the state directory
#: cannot be written (an NFS outage) before it gives up.
PERSIST_WINDOW = 600.0

#: Seconds a runner waits for the submit that started it to index its object.
PUBLISH_WINDOW = 60.0
PUBLISH_POLL = 0.01

T = TypeVar("T")

_STOPPING = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
_WAKING = _STOPPING | {signal.SIGCHLD}


def _now() -> datetime:
    return datetime.now(UTC)


def _signal_group(pgid: int, number: int) -> None:
    try:
        os.killpg(pgid, number)
    except ProcessLookupError:
        pass


def _unblock_signals() -> None:
    """In the command, before exec: it must not inherit the runner's blocked signals."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _output(path: Path) -> BinaryIO:
    """A command's output file: appended to, the user's alone (0600), never a symlink."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, 0o600), "ab")


def _exited(pid: int) -> bool:
    """Whether the command has exited, leaving it unreaped: while the leader is a zombie
    its pid, and so its process group id, cannot be reused, so signalling the group after
    the exit can only reach the command's own stragglers."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


class Runner:
    def __init__(self, obj: ObjectDir, meta: ObjectMeta) -> None:
        self.obj = obj
        self.meta = meta
        self.host = hostname()
        self.signalled: signal.struct_siginfo | None = None
        #: The keeper's pid and the command's identity once launched (its pid is its group).
        self.launched: tuple[int, ProcessIdentity] | None = None
        self.started_at: datetime | None = None

    def _pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a signal to the runner or the command's exit wakes it."""
        info = signal.sigtimedwait(_WAKING, seconds)
        if info is not None and info.si_signo in _STOPPING and self.signalled is None:
            self.signalled = info

    def run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAKING)
        # Recorded only now: a runner on record is one whose signals mean what the module
        # says, never a Python still starting up that a SIGTERM would simply kill. The
        # first runner on record is the object's only one: a second one leaves at once.
        if not create_once(self.obj.runner, identify(os.getpid()).model_dump_json()):
            return
        if not self._wait_for_publication():
            return
        if self.meta.gated and not self._wait_for_gate():
            return
        before = self._stop_request() or self._signal_reason()
        if before is not None:
            state, cause = before
            self._end(state, cause, launched=False)
            return
        try:
            keeper_pid, started = keeper.start(self.obj, self._launch)
        except OSError as exc:
            cause = Cause(
                kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=str(exc)
            )
            self._end("launch-failed", cause, launched=True)
            return
        self.launched = (keeper_pid, started.process)
        # the keeper's record, written again (it may have failed through an outage): one
        # start time, whichever of the two writes a reader saw
        self.started_at = started.started_at
        self._persist(lambda: write_atomic(self.obj.started, started.model_dump_json()))
        self._watch(keeper_pid, started.process.pid)

    def _wait_for_publication(self) -> bool:
        """Wait for the submit to publish the object (it starts the runner just before):
        the job index's claim of the submission naming this object, or its index entry.

        An object never published is one nobody will ever see: the submitting process died
        mid-submit, and the supervisor after it submits anew. It is ended unrun; so is one
        whose submission another object was published for (its submit was held up past
        its lease and the supervisor after it submitted anew, S-34).
        """
        index = StateDir(self.obj.path.parent.parent).job_index(self.meta.job_id)
        entry = index / self.meta.object_id
        claim = index / claim_name(self.meta.submission)
        deadline = time.monotonic() + PUBLISH_WINDOW
        while not entry.exists():
            if self.obj.end.exists():
                return False  # the submit failed and said so
            try:
                holder = claim.read_text()
            except FileNotFoundError:
                holder = None
            if holder == self.meta.object_id:
                return True
            if holder is not None or time.monotonic() >= deadline:
                detail = (
                    f"submission {self.meta.submission} is object {holder}, published by "
                    "another submit; nothing was run"
                    if holder is not None
                    else f"the submitting process never indexed this object in "
                    f"{PUBLISH_WINDOW:g}s (it stopped in the middle of the submit); "
                    "nothing was run"
                )
                cause = Cause(
                    kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=detail
                )
                self._end("abandoned", cause, launched=False)
                return False
            self._pause(PUBLISH_POLL)
        return True

    def _wait_for_gate(self) -> bool:
        while not self.obj.gate.exists():
            why = self._stop_request() or self._signal_reason()
            if why is not None:
                state, cause = why
                detail = f"{cause.detail}; stopped before its gate opened"
                self._end(state, cause.model_copy(update={"detail": detail}), launched=False)
                return False
            self._pause(GATE_POLL)
        return True

    def _launch(self) -> subprocess.Popen[bytes]:
        """Run what the object was prepared with: its command, directory, environment."""
        env = environment.for_job(StateDir(self.obj.path.parent.parent), self.meta)
        with _output(self.obj.stdout) as out, _output(self.obj.stderr) as err:
            return subprocess.Popen(
                list(self.meta.command),
                cwd=self.meta.directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                process_group=0,
                preexec_fn=_unblock_signals,  # the keeper has no threads: safe here
            )

    def _watch(self, keeper_pid: int, command: int) -> None:
        """Watch the command through its keeper (our child): stop it when asked, at the time
        limit or on a signal to us, and record how it ended once the keeper has."""
        limit = self.meta.spec.resources.time_limit
        deadline = time.monotonic() + limit.total_seconds() if limit is not None else None
        grace = self.meta.stop_grace
        reason: tuple[str, Cause] | None = None
        kill_at = 0.0
        killed = False
        warning = self.meta.spec.warn  # S-45: dispatch.local.endings
        warn_at = endings.warn_at(warning, deadline)
        first: int = signal.SIGTERM
        beat = endings.LogBeat(self.obj, self.meta.spec.heartbeat)
        while not _exited(keeper_pid):
            beat.follow()
            if reason is None:
                reason = self._stop_request() or self._signal_reason() or self._timed_out(deadline)
                reason = reason or self._warned(warn_at)
                if reason is not None:
                    first, grace = endings.opening(warning, grace, deadline, time.monotonic())
                    _signal_group(command, first)
                    kill_at = time.monotonic() + grace
            elif not killed and time.monotonic() >= kill_at:
                _signal_group(command, signal.SIGKILL)
                killed = True
            self._pause(POLL)
        os.waitpid(keeper_pid, 0)
        exited = self._persist(lambda: read(exit_file(self.obj.path), Exited))
        if exited is None:
            _signal_group(command, signal.SIGKILL)
            cause = Cause(
                kind=CauseKind.UNKNOWN,
                provenance=Provenance.SCHEDULER,
                detail=(
                    f"the command's keeper (pid {keeper_pid}) died without recording how the "
                    f"command ended; its process group was killed; see {self.obj.runner_log}"
                ),
            )
            self._end("lost", cause, launched=True)
            return
        returncode = exited.returncode
        if reason is None:
            self._end("exited", exit_cause(returncode), launched=True)
            return
        state, why = reason
        sent = endings.sent_words(first, grace, killed)
        detail = f"{why.detail}; {sent}; the command ended: {exit_words(returncode)}"
        cause = why.model_copy(update={"detail": detail, "exit_code": exit_code(returncode)})
        self._end(state, cause, launched=True)

    def _timed_out(self, deadline: float | None) -> tuple[str, Cause] | None:
        if deadline is None or time.monotonic() < deadline:
            return None
        detail = f"time limit of {self.meta.spec.resources.time_limit} reached"
        cause = Cause(kind=CauseKind.TIME_LIMIT, provenance=Provenance.SCHEDULER, detail=detail)
        return "timed-out", cause

    def _warned(self, warn_at: float | None) -> tuple[str, Cause] | None:
        """The time limit's warning is due: the ending is the time limit's (S-45)."""
        timed_out = self._timed_out(warn_at)
        if timed_out is None or self.meta.spec.warn is None:
            return None
        limit = self.meta.spec.resources.time_limit
        detail = endings.warned_detail(self.meta.spec.warn, limit)
        return timed_out[0], timed_out[1].model_copy(update={"detail": detail})

    def _signal_reason(self) -> tuple[str, Cause] | None:
        """A signal the runner received, as the ending it means (see the module)."""
        info = self.signalled
        if info is None:
            return None
        got = f"the local runner (pid {os.getpid()}) received {signal_words(info.si_signo)}"
        if info.si_pid in (0, 1):
            sender = "the kernel" if info.si_pid == 0 else "the init process (pid 1)"
            detail = f"{got} from {sender}: the host is shutting down or stopping its processes"
            return "interrupted", Cause(
                kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail
            )
        detail = f"cancelled outside dispatch: {got} from pid {info.si_pid} (uid {info.si_uid})"
        return "cancelled", Cause(
            kind=CauseKind.CANCELLED, provenance=Provenance.SCHEDULER, detail=detail
        )

    def _stop_request(self) -> tuple[str, Cause] | None:
        """dispatch's stop request, as a ``cancelled`` ending in the stop cause's words.

        A state directory that cannot be read just now (an NFS outage) is no request: the
        command goes on, and the next look may find one.
        """
        try:
            stop = read(self.obj.stop, StopRequest)
        except OSError:
            return None
        except DecodeError as exc:
            cause = Cause(
                kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail=f"stop request: {exc}"
            )
            return "cancelled", cause
        if stop is None:
            return None
        asked = stop.cause
        words = asked.detail or f"stopped by dispatch (cause {asked.kind})"
        cause = Cause(
            kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor=asked.actor, detail=words
        )
        return "cancelled", cause

    def _end(self, state: str, cause: Cause, *, launched: bool) -> None:
        ended_at = _now()
        ending = Ending(
            state=state,
            cause=cause.model_copy(update={"at": ended_at}),
            ended_at=ended_at,
            started_at=self.started_at,
            launched=launched,
            host=self.host,
        )
        self._persist(lambda: create_once(self.obj.end, ending.model_dump_json()))

    def _persist(self, write: Callable[[], T]) -> T:
        """Write (or read) a record, retrying through a passing outage of the state
        directory: the runner is the only one who knows what it holds."""
        deadline = time.monotonic() + PERSIST_WINDOW
        while True:
            try:
                return write()
            except OSError:
                if time.monotonic() >= deadline:
                    raise
                self._pause(1.0)

    def fail(self, exc: BaseException) -> None:
        """A bug in the runner: kill the command it can no longer watch, and say so."""
        if self.launched is not None:
            keeper_pid, command = self.launched
            _signal_group(command.pid, signal.SIGKILL)
            try:
                os.waitpid(keeper_pid, 0)
            except ChildProcessError:
                pass
        detail = (
            f"the local runner failed: {type(exc).__name__}: {exc}; "
            f"the command was killed; see {self.obj.runner_log}"
        )
        cause = Cause(kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail)
        self._end("lost", cause, launched=self.launched is not None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dispatch.local.runner <object directory>", file=sys.stderr)
        return 2
    os.chdir("/")  # hold no directory busy; the command gets its own working directory
    obj = ObjectDir(Path(args[0]))
    meta = read(obj.meta, ObjectMeta)
    if meta is None:
        print(f"{obj.meta} does not exist", file=sys.stderr)
        return 2
    runner = Runner(obj, meta)
    try:
        runner.run()
    except Exception as exc:
        runner.fail(exc)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
