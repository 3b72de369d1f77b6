"""The detached process that carries one local object from its gate to its ending.

The backend starts it as ``python -m dispatch.local.runner <object dir>`` in a session of
its own, with its input and output on files, so it outlives the CLI that submitted. It is
the command's only parent, hence the only process that can learn its exit status; all it
learns goes to files of the object directory, which any later process reads.

Why it ends a command, in order of precedence once the command runs: a stop request from
dispatch (``stop.json``), a signal sent to the runner itself from outside dispatch, the
time limit. Each sends SIGTERM to the command's process group and SIGKILL after the grace.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from dispatch.cause import Cause
from dispatch.enums import CauseKind, Provenance
from dispatch.errors import DecodeError
from dispatch.local.layout import ObjectDir, create_once, write_atomic
from dispatch.local.processes import (
    exit_code,
    exit_words,
    hostname,
    identify,
    signal_words,
)
from dispatch.local.records import Ending, ObjectMeta, Started, StopRequest, read

#: Seconds between looks at the stop file and the clock while the command runs; the
#: command's exit itself wakes the runner at once.
POLL = 0.1
#: Seconds between looks at the gate file while gated (gates can stay shut for long).
GATE_POLL = 0.2


def _now() -> datetime:
    return datetime.now(UTC)


def _signal_group(pgid: int, number: int) -> None:
    try:
        os.killpg(pgid, number)
    except ProcessLookupError:
        pass


class _ExitWatch:
    """Waits for the command to exit without reaping it.

    While the leader is unreaped its pid, and so its process group id, cannot be reused,
    so signalling the group after the exit can only reach the command's own stragglers.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except OSError:
            self.fd = None

    def exited(self) -> bool:
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout``, waking at once if the command exits."""
        if self.fd is not None:
            select.select([self.fd], [], [], timeout)
        else:
            time.sleep(timeout)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Runner:
    def __init__(self, obj: ObjectDir, meta: ObjectMeta) -> None:
        self.obj = obj
        self.meta = meta
        self.host = hostname()
        self.signalled: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: datetime | None = None

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        if self.signalled is None:
            self.signalled = number

    def run(self) -> None:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, self._on_signal)
        if self.meta.gated and not self._wait_for_gate():
            return
        stop = self._stop_request()
        if stop is not None:
            self._end("cancelled", self._cancelled(stop), launched=False)
            return
        try:
            self.proc = self._launch()
        except OSError as exc:
            cause = Cause(
                kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=str(exc)
            )
            self._end("launch-failed", cause, launched=True)
            return
        self.started_at = _now()
        started = Started(process=identify(self.proc.pid), started_at=self.started_at)
        write_atomic(self.obj.started, started.to_json())
        self._watch(self.proc)

    def _wait_for_gate(self) -> bool:
        while not self.obj.gate.exists():
            stop = self._stop_request()
            if stop is not None:
                cause = self._cancelled(stop)
                detail = f"{cause.detail}; stopped before its gate opened"
                self._end("cancelled", cause.model_copy(update={"detail": detail}), launched=False)
                return False
            if self.signalled is not None:
                detail = (
                    f"the local runner (pid {os.getpid()}) received "
                    f"{signal_words(self.signalled)} from outside dispatch while waiting for "
                    "its gate; the command never started"
                )
                cause = Cause(
                    kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail
                )
                self._end("lost", cause, launched=False)
                return False
            time.sleep(GATE_POLL)
        return True

    def _argv(self) -> list[str]:
        spec = self.meta.spec
        if spec.command:
            return list(spec.command)
        script = str(self.obj.script)
        if (spec.script or "").startswith("#!"):
            return [script]
        return ["/bin/sh", script]

    def _launch(self) -> subprocess.Popen[bytes]:
        spec = self.meta.spec
        env = {
            **os.environ,
            "DISPATCH_JOB_ID": self.meta.job_id,
            "DISPATCH_SUBMISSION": str(self.meta.submission),
            "DISPATCH_OBJECT_ID": self.meta.object_id,
            **spec.env,
        }
        cwd = os.path.join(self.meta.cwd, spec.workdir) if spec.workdir else self.meta.cwd
        with open(self.obj.stdout, "ab") as out, open(self.obj.stderr, "ab") as err:
            proc = subprocess.Popen(
                self._argv(),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        return proc

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        limit = self.meta.spec.resources.time_limit
        deadline = time.monotonic() + limit.total_seconds() if limit is not None else None
        grace = self.meta.stop_grace
        reason: tuple[str, Cause] | None = None
        kill_at = 0.0
        killed = False
        watch = _ExitWatch(proc.pid)
        try:
            while not watch.exited():
                if reason is None:
                    reason = self._reason_to_stop(deadline)
                    if reason is not None:
                        _signal_group(proc.pid, signal.SIGTERM)
                        kill_at = time.monotonic() + grace
                elif not killed and time.monotonic() >= kill_at:
                    _signal_group(proc.pid, signal.SIGKILL)
                    killed = True
                watch.wait(POLL)
            _signal_group(proc.pid, signal.SIGKILL)
        finally:
            watch.close()
        returncode = proc.wait()
        if reason is None:
            words = exit_words(returncode)
            if returncode == 0:
                cause = Cause(
                    kind=CauseKind.NONE,
                    provenance=Provenance.APPLICATION,
                    detail=words,
                    exit_code=0,
                )
            else:
                cause = Cause(
                    kind=CauseKind.NON_ZERO_EXIT,
                    provenance=Provenance.APPLICATION,
                    detail=words,
                    exit_code=exit_code(returncode),
                )
            self._end("exited", cause, launched=True)
            return
        state, why = reason
        sent = "sent SIGTERM to its process group"
        if killed:
            sent += f", then SIGKILL after a grace of {grace:g}s"
        detail = f"{why.detail}; {sent}; the command ended: {exit_words(returncode)}"
        cause = why.model_copy(update={"detail": detail, "exit_code": exit_code(returncode)})
        self._end(state, cause, launched=True)

    def _reason_to_stop(self, deadline: float | None) -> tuple[str, Cause] | None:
        stop = self._stop_request()
        if stop is not None:
            return "cancelled", self._cancelled(stop)
        if self.signalled is not None:
            detail = (
                f"the local runner (pid {os.getpid()}) received "
                f"{signal_words(self.signalled)} from outside dispatch"
            )
            return "lost", Cause(
                kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail
            )
        if deadline is not None and time.monotonic() >= deadline:
            limit = self.meta.spec.resources.time_limit
            return "timed-out", Cause(
                kind=CauseKind.TIME_LIMIT,
                provenance=Provenance.SCHEDULER,
                detail=f"time limit of {limit} reached",
            )
        return None

    def _stop_request(self) -> StopRequest | None:
        try:
            return read(self.obj.stop, StopRequest)
        except DecodeError as exc:
            cause = Cause(
                kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail=f"stop request: {exc}"
            )
            return StopRequest(cause=cause, at=_now())

    @staticmethod
    def _cancelled(stop: StopRequest) -> Cause:
        asked = stop.cause
        words = asked.detail or f"stopped by dispatch (cause {asked.kind})"
        return Cause(
            kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor=asked.actor, detail=words
        )

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
        create_once(self.obj.end, ending.to_json())

    def fail(self, exc: BaseException) -> None:
        """A bug in the runner: kill the command it can no longer watch, and say so."""
        if self.proc is not None and self.proc.returncode is None:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        detail = (
            f"the local runner failed: {type(exc).__name__}: {exc}; "
            f"the command was killed; see {self.obj.runner_log}"
        )
        cause = Cause(kind=CauseKind.UNKNOWN, provenance=Provenance.SCHEDULER, detail=detail)
        self._end("lost", cause, launched=self.proc is not None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dispatch.local.runner <object directory>", file=sys.stderr)
        return 2
    obj = ObjectDir(Path(args[0]))
    meta = read(obj.meta, ObjectMeta)
    if meta is None:
        print(f"{obj.meta} does not exist", file=sys.stderr)
        return 2
    create_once(obj.runner, identify(os.getpid()).to_json())
    runner = Runner(obj, meta)
    try:
        runner.run()
    except Exception as exc:
        runner.fail(exc)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
