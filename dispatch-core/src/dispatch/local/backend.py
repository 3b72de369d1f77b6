"""The ``local`` backend's hooks: submit, discover, open a gate, stop (S-30).

Configuration comes from the environment, read once when the backend is loaded:

- ``DISPATCH_LOCAL_DIR``: the state directory (default ``$XDG_STATE_HOME/dispatch/local``,
  ``~/.local/state/dispatch/local`` when XDG_STATE_HOME is unset);
- ``DISPATCH_LOCAL_STOP_GRACE``: seconds between SIGTERM and SIGKILL when stopping
  (default 5), recorded with each object so its runner and every later stop agree.

One module for the backend's hooks, as each adapter has: the object directory's layout,
the runner, the survivors and the logs live in their own modules beside it.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dispatch.core.cause import Cause
from dispatch.hookspecs import API_VERSION
from dispatch.local import collect, environment, survivors
from dispatch.local.layout import (
    CLAIM,
    OBJECT_ID,
    ObjectDir,
    StateDir,
    claim_name,
    create_once,
    new_object_id,
    present,
    private_mkdir,
    write_atomic,
)
from dispatch.local.observe import STARTUP_WINDOW, observe, vanished
from dispatch.local.processes import exit_code, exit_words, gone, hostname, is_here
from dispatch.local.records import (
    Ending,
    Exited,
    ObjectMeta,
    ProcessIdentity,
    Started,
    StopRequest,
    exit_file,
    read,
)
from dispatch.model.declarations import Declarations
from dispatch.model.discovery import Discovery, ObjectView
from dispatch.model.enums import Capability, CauseKind, Provenance
from dispatch.model.errors import (
    BadInput,
    DecodeError,
    NoSpace,
    SubmitRefused,
    Unreachable,
    no_space,
)
from dispatch.model.prepared import Prepared
from dispatch.model.selection import LogSelection
from dispatch.model.spec import JobSpec
from dispatch.plugin import hookimpl

NAME = "local"
log = logging.getLogger("dispatch.local")
DEFAULT_STOP_GRACE = 5.0
#: How much longer than the grace ``dispatch_stop`` waits for the runner to record the end.
STOP_MARGIN = 3.0
_STOP_POLL = 0.05

DECLARATIONS = Declarations(
    name=NAME,
    description=(
        "Runs each submission as a process group on this machine, detached from the CLI; "
        "no cluster needed. Cannot report preempted, node-lost, out-of-memory or no-capacity."
    ),
    node_loss_window=timedelta(seconds=30),
    reports=frozenset(
        {
            CauseKind.NONE,
            CauseKind.NON_ZERO_EXIT,
            CauseKind.TIME_LIMIT,
            CauseKind.LAUNCH_FAILED,
            CauseKind.CANCELLED,
            CauseKind.UNKNOWN,
        }
    ),
    capabilities=frozenset({Capability.GATING, Capability.TIME_LIMIT, Capability.LOGS}),
    max_discovery_batch=None,
    options={},
    api_version=API_VERSION,
    runs_as_caller=True,
)


def default_state_dir() -> Path:
    configured = os.environ.get("DISPATCH_LOCAL_DIR")
    if configured:
        return Path(configured).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "dispatch" / "local"


def _grace(value: float | str, where: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise BadInput(f"{where}={value!r} is not a number of seconds (0 or more)")
    return seconds


def default_stop_grace() -> float:
    configured = os.environ.get("DISPATCH_LOCAL_STOP_GRACE")
    if configured is None or configured == "":
        return DEFAULT_STOP_GRACE
    return _grace(configured, "DISPATCH_LOCAL_STOP_GRACE")


def _refusal(spec: JobSpec) -> str | None:
    """Why this host cannot run ``spec`` as asked, or None."""
    if spec.options:
        return f"the local backend takes no options; got {', '.join(sorted(spec.options))}"
    resources = spec.resources
    if resources.nodes > 1:
        return (
            f"the local backend runs on this host only; resources.nodes={resources.nodes} "
            "asks for more"
        )
    if resources.tasks_per_node > 1:
        return (
            "the local backend starts one process; "
            f"resources.tasks_per_node={resources.tasks_per_node} asks for more "
            "(start the ranks from the command, e.g. torchrun --nproc-per-node)"
        )
    if spec.exclude_nodes:
        return (
            "the local backend runs on this host only; it cannot keep off the nodes "
            f"{', '.join(sorted(spec.exclude_nodes))}"
        )
    if resources.gpus_per_node:
        return (
            f"the local backend does not allocate GPUs; resources.gpus_per_node="
            f"{resources.gpus_per_node} asks for some (leave it unset and choose devices "
            "with CUDA_VISIBLE_DEVICES in env)"
        )
    return None


def _now() -> datetime:
    return datetime.now(UTC)


def _runner_argv(obj: ObjectDir) -> list[str]:
    return [sys.executable, "-m", "dispatch.local.runner", str(obj.path)]


class LocalBackend:
    """The embedded default backend: this machine, no cluster.

    :param state_dir: where objects live (default: see the module docstring).
    :param stop_grace: seconds between SIGTERM and SIGKILL (default: see the module).
    """

    def __init__(
        self, state_dir: str | Path | None = None, stop_grace: float | None = None
    ) -> None:
        root = Path(state_dir).expanduser().absolute() if state_dir else default_state_dir()
        self.state = StateDir(root)
        self.stop_grace = (
            default_stop_grace() if stop_grace is None else _grace(stop_grace, "stop_grace")
        )
        self._children: set[int] = set()
        #: One process-table scan per discovery, made only if an object directory is gone.
        self._scanned: tuple[datetime, dict[str, survivors.Survivors]] | None = None

    def _reap(self) -> None:
        """Collect runners this process started that have exited (no zombies left behind
        by a long-lived supervisor)."""
        for pid in list(self._children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self._children.discard(pid)

    def _unreachable(self, exc: OSError) -> Unreachable:
        if no_space(exc):
            return NoSpace(f"the local state directory {self.state.root}", str(exc))
        return Unreachable(f"local state directory {self.state.root}: {exc}")

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return DECLARATIONS

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        self._reap()
        now = _now()
        objects: list[ObjectView] = []
        try:
            for job_id in dict.fromkeys(job_ids):
                objects.extend(self._objects_of(job_id, now))
        except OSError as exc:
            raise self._unreachable(exc) from exc
        return Discovery(backend=NAME, at=now, objects=tuple(objects))

    def _objects_of(self, job_id: str, now: datetime) -> list[ObjectView]:
        index = self.state.job_index(job_id)
        try:
            names = os.listdir(index)
        except FileNotFoundError:
            return []
        indexed: dict[str, int | None] = {}
        for name in names:
            claimed = CLAIM.match(name)
            if claimed is not None:  # published, maybe not indexed yet (a submit cut short)
                try:
                    holder = (index / name).read_text()
                except FileNotFoundError:
                    continue
                if OBJECT_ID.match(holder):
                    indexed.setdefault(holder, int(claimed.group(1)))
            elif OBJECT_ID.match(name):
                try:
                    indexed[name] = int((index / name).read_text())
                except (ValueError, FileNotFoundError):
                    indexed[name] = None
        views = []
        for name, submission in indexed.items():
            obj = self.state.object_dir(name)
            if not present(obj.path):
                views.append(self._vanished(obj, job_id, submission or 1, now))
                continue
            view = observe(obj, job_id, submission, now)
            if view is not None:
                views.append(view)
        views.sort(key=lambda v: (v.submission, v.created_at or now, v.object_id))
        return views

    def _vanished(self, obj: ObjectDir, job_id: str, submission: int, now: datetime) -> ObjectView:
        """An indexed object whose directory was deleted: running while any of its processes
        lives (so nothing replaces it beside them), else ended ``unknown``."""
        if self._scanned is None or self._scanned[0] != now:
            self._scanned = (now, survivors.scan(self.state.objects))
        found = self._scanned[1].get(obj.object_id)
        return vanished(obj, job_id, submission, found.words() if found else None)

    @hookimpl
    def dispatch_prepare(
        self, job_id: str, submission: int, spec: JobSpec, gated: bool
    ) -> Prepared:
        """The object as it will be written and run: its id, the runner's argv, and the
        command, directory and environment the runner will use (decided here, read by the
        runner, so a dry run shows what runs)."""
        refusal = _refusal(spec)
        if refusal is not None:
            raise SubmitRefused(refusal)
        object_id = new_object_id()
        try:
            cwd = os.getcwd()
        except FileNotFoundError as exc:
            raise SubmitRefused(f"the current directory no longer exists: {exc}") from exc
        obj = self.state.object_dir(object_id)
        if spec.command:
            command = list(spec.command)
        elif (spec.script or "").startswith("#!"):
            command = [str(obj.script)]
        else:
            command = ["/bin/sh", str(obj.script)]
        try:
            env = environment.added(self.state, job_id, submission, object_id, spec)
        except OSError as exc:
            raise self._unreachable(exc) from exc
        meta = ObjectMeta(
            object_id=object_id,
            job_id=job_id,
            submission=submission,
            spec=spec,
            gated=gated,
            created_at=_now(),
            cwd=cwd,
            stop_grace=self.stop_grace,
            command=tuple(command),
            directory=os.path.join(cwd, spec.workdir) if spec.workdir else cwd,
            env=env,
        )
        shown = meta.model_dump(mode="json", exclude={"command", "directory", "env"})
        return Prepared(
            backend=NAME,
            job_id=job_id,
            submission=submission,
            gated=gated,
            parts={
                "runner": _runner_argv(obj),
                "command": command,
                "directory": meta.directory,
                "environment": env,
                "object": shown,
            },
            notes=(
                "the command's environment is the submitter's, kept for the job when it was "
                "recorded (without DISPATCH_* variables), with `environment` on top",
                f"the runner starts in a session of its own; {obj.path}/meta.json holds "
                "`object` with the command, directory and environment",
            ),
        )

    @hookimpl
    def dispatch_send(self, prepared: Prepared) -> str:
        """Write the prepared object, start its runner, index it."""
        self._reap()
        meta = ObjectMeta.model_validate(
            {
                **prepared.mapping("object"),
                "command": prepared.words("command"),
                "directory": prepared.text("directory"),
                "env": prepared.mapping("environment"),
            }
        )
        # Each step leaves something recoverable: a draft or an object nobody
        # indexed is invisible (a new submit replaces it, garbage collection removes it);
        # its runner, started before the index entry, waits for that entry and ends the
        # object unrun if it never comes; once indexed, the object is found and its runner
        # is already on its way.
        obj = None
        try:
            obj = self._move_in(self._draft(meta))
            self._start_runner(obj, prepared.words("runner"))
            holder = self._publish(meta)
        except OSError as exc:
            if obj is not None:
                _abandon(obj, f"the submit failed before the object was indexed: {exc}")
            raise self._unreachable(exc) from exc
        if holder != meta.object_id:  # obj is set: _publish ran
            assert obj is not None
            why = (
                f"submission {meta.submission} of job {meta.job_id} is already object "
                f"{holder}, published by another submit (this one was held up past its "
                "lease); nothing was run"
            )
            _abandon(obj, why)
            raise SubmitRefused(why)
        self._collect_now_and_then()
        return meta.object_id

    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        """Prepare and send at once, for a caller holding the backend itself (not a hook:
        dispatch calls :meth:`dispatch_prepare` and :meth:`dispatch_send`)."""
        return self.dispatch_send(self.dispatch_prepare(job_id, submission, spec, gated))

    def _draft(self, meta: ObjectMeta) -> ObjectDir:
        """Write the object's files under a temporary name."""
        self._prepare()
        draft = ObjectDir(self.state.objects / f".draft-{meta.object_id}")
        private_mkdir(draft.path)
        write_atomic(draft.meta, meta.model_dump_json())
        script = meta.spec.script
        if script is not None:
            write_atomic(draft.script, script)  # 0600, the user's alone (S-51)
            draft.script.chmod(0o700 if script.startswith("#!") else 0o600)
        return draft

    def _prepare(self) -> None:
        """Create the state directory safely (S-51); one replaced by a file is unreachable
        (S-5: an OSError the hooks report as ``Unreachable``), not bad input."""
        if os.path.lexists(self.state.root) and not os.path.isdir(self.state.root):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(self.state.root))
        self.state.prepare()

    def _move_in(self, draft: ObjectDir) -> ObjectDir:
        """Move the drafted object into place whole."""
        final = self.state.object_dir(draft.path.name.removeprefix(".draft-"))
        os.rename(draft.path, final.path)
        return final

    def _publish(self, meta: ObjectMeta) -> str:
        """Claim the submission for the object, then index it under its job: from the claim
        on, discovery finds it and its runner runs it (S-34). Returns the claim's holder.

        The claim is made once (a hard link): of two submits of one submission (a supervisor
        held up mid-submit past its lease, and the one that took its jobs over and found
        nothing published) exactly one object is ever published, and the other never runs."""
        index = self.state.job_index(meta.job_id)
        private_mkdir(index)
        claim = index / claim_name(meta.submission)
        if not create_once(claim, meta.object_id):
            holder = claim.read_text()
            if holder != meta.object_id:
                return holder
        write_atomic(index / meta.object_id, str(meta.submission))
        return meta.object_id

    def collect_garbage(self, active: Collection[str] | None = None) -> list[str]:
        """Remove what nothing can reach any more and ended objects past their retention
        (:mod:`dispatch.local.collect`); ``active``: the record's active jobs, kept whatever
        their age. Returns what was removed, relative to the state directory."""
        try:
            return collect.collect(
                self.state, retention=collect.retention_from_env(), active=active
            ).removed
        except OSError as exc:
            raise self._unreachable(exc) from exc

    def _collect_now_and_then(self) -> None:
        """At most once an hour per state directory (a marker's age says when it last ran),
        from a submit: the state directory never grows without bound, unattended."""
        marker = self.state.root / ".collected"
        try:
            if time.time() - marker.stat().st_mtime < collect.GRACE.total_seconds():
                return
        except FileNotFoundError:
            pass
        try:
            marker.touch()
            removed = collect.collect(self.state, retention=collect.retention_from_env())
        except (OSError, BadInput) as exc:
            log.warning("garbage collection of %s skipped: %s", self.state.root, exc)
            return
        if removed.removed:
            log.info(
                "removed %d unreachable or expired entries from %s",
                len(removed.removed),
                self.state.root,
            )

    def keep_environment(self, job_id: str, environ: Mapping[str, str]) -> None:
        """Keep the submitter's environment for the job's every submission (called by
        :func:`dispatch.job_records.create_job` in the submitting process; see
        :mod:`dispatch.local.environment`)."""
        try:
            self._prepare()
            environment.keep(self.state, job_id, environ)
        except OSError as exc:
            raise self._unreachable(exc) from exc

    def _start_runner(self, obj: ObjectDir, argv: list[str]) -> None:
        """Start the object's runner in a session of its own, so it outlives this process.

        ``posix_spawn`` rather than ``subprocess``: the runner is not ours to wait for (a
        Popen left running warns when collected); :meth:`_reap` collects it if we outlive it.
        The runner records itself in ``runner.json`` once it is ready.
        """
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        try:
            pid = os.posix_spawn(
                argv[0],
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, str(obj.runner_log), flags, 0o600),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                ],
                setsid=True,
            )
        except OSError as exc:
            now = _now()
            detail = f"could not start the local runner {sys.executable}: {exc}"
            cause = Cause(
                kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=detail, at=now
            )
            ending = Ending(
                state="launch-failed", cause=cause, ended_at=now, launched=False, host=hostname()
            )
            create_once(obj.end, ending.model_dump_json())
            return
        self._children.add(pid)

    @hookimpl
    def dispatch_validate(self, spec: JobSpec) -> None:
        """Refuse before anything is recorded what ``dispatch_submit`` would refuse."""
        refusal = _refusal(spec)
        if refusal is not None:
            raise BadInput(refusal)

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        """The object's stdout or stderr file (see :mod:`dispatch.local.logs`)."""
        from dispatch.local.logs import read_output

        return read_output(self.state, object_id, selection)

    def _existing(self, object_id: str) -> ObjectDir | None:
        obj = self.state.object_dir(object_id)
        return obj if present(obj.meta) else None

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        """Idempotent; an unknown object id is not an error either (discovery shows it
        absent, which is what the supervisor acts on)."""
        self._reap()
        try:
            obj = self._existing(object_id)
            if obj is not None and not present(obj.gate):
                create_once(obj.gate, _now().isoformat())
        except OSError as exc:
            raise self._unreachable(exc) from exc

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        """Ask the runner to stop the object and wait, at most the grace plus a margin, for
        it to record the ending; take over if the runner is gone. Idempotent (S-30)."""
        self._reap()
        try:
            obj = self._existing(object_id)
            if obj is None and not present(self.state.object_dir(object_id).path):
                survivors.stop(self.state.objects, object_id, self.stop_grace)
                return
            if obj is None or present(obj.end):
                return
            try:
                meta = read(obj.meta, ObjectMeta)
            except DecodeError:
                meta = None
            if meta is None:
                return  # an object we cannot read is not one we can stop safely
            create_once(obj.stop, StopRequest(cause=cause, at=_now()).model_dump_json())
            deadline = time.monotonic() + meta.stop_grace + STOP_MARGIN
            while not present(obj.end) and time.monotonic() < deadline:
                if self._runner_gone(obj, meta):
                    self._stop_orphan(obj, meta)
                    return
                time.sleep(_STOP_POLL)
        except PermissionError as exc:
            # Another user's object (its files, or kill answering EPERM): not stopped, and
            # said so; the stop stays asked for a supervisor running as its submitter.
            where = f" ({exc.filename})" if exc.filename else ""
            raise Unreachable(
                f"local object {object_id} was not stopped: this process (uid {os.getuid()}) "
                f"may not stop it: {exc.strerror}{where}; only its submitter's supervisor can"
            ) from exc
        except OSError as exc:
            raise self._unreachable(exc) from exc

    def _runner_gone(self, obj: ObjectDir, meta: ObjectMeta) -> bool:
        try:
            runner = read(obj.runner, ProcessIdentity)
        except DecodeError:
            return False
        if runner is None:
            return _now() - meta.created_at >= STARTUP_WINDOW
        return is_here(runner) and gone(runner) is not None

    def _stop_orphan(self, obj: ObjectDir, meta: ObjectMeta) -> None:
        """Stop a command whose runner died, and record that its exit status is lost.

        A command that is not running any more is left alone: discovery already reports
        what was found, and that is the truth a stop must not overwrite.
        """
        try:
            started = read(obj.started, Started)
            stop = read(obj.stop, StopRequest)
        except DecodeError:
            return
        if present(obj.end) or started is None or gone(started.process) is not None:
            return
        leader = started.process
        os.killpg(leader.pid, signal.SIGTERM)
        sent = "sent SIGTERM to its process group"
        if not _wait_gone(leader, meta.stop_grace):
            os.killpg(leader.pid, signal.SIGKILL)
            sent += f", then SIGKILL after a grace of {meta.stop_grace:g}s"
            _wait_gone(leader, STOP_MARGIN)
        asked = stop.cause if stop is not None else None
        words = (asked.detail if asked else "") or (
            f"stopped by dispatch (cause {asked.kind})" if asked else "stopped by dispatch"
        )
        exited = _kept_exit(obj, started)
        how = (
            f"the command ended: {exit_words(exited.returncode)}"
            if exited is not None
            else "the command's exit status is not known"
        )
        now = _now()
        cause = Cause(
            kind=CauseKind.CANCELLED,
            provenance=Provenance.ACTOR,
            actor=asked.actor if asked else None,
            detail=f"{words}; its local runner was gone, so dispatch {sent}; {how}",
            exit_code=exit_code(exited.returncode) if exited is not None else None,
            at=now,
        )
        ending = Ending(
            state="cancelled",
            cause=cause,
            ended_at=now,
            started_at=started.started_at,
            launched=True,
            host=leader.host,
        )
        create_once(obj.end, ending.model_dump_json())


def _kept_exit(obj: ObjectDir, started: Started) -> Exited | None:
    """The exit status the command's keeper records once it has reaped the command."""
    deadline = time.monotonic() + STOP_MARGIN
    while True:
        try:
            exited = read(exit_file(obj.path), Exited)
        except DecodeError:
            return None
        keeper_alive = started.keeper is not None and gone(started.keeper) is None
        if exited is not None or not keeper_alive or time.monotonic() >= deadline:
            return exited
        time.sleep(_STOP_POLL)


def _abandon(obj: ObjectDir, why: str) -> None:
    """End an object nobody will see, so its runner (if it started) exits without running."""
    now = _now()
    cause = Cause(kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=why, at=now)
    ending = Ending(state="abandoned", cause=cause, ended_at=now, launched=False, host=hostname())
    try:
        create_once(obj.end, ending.model_dump_json())
    except OSError:
        pass  # the runner gives up on its own after its publication window


def _wait_gone(process: ProcessIdentity, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while gone(process) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_STOP_POLL)
    return True
