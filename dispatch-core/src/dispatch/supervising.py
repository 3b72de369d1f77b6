"""Keeping a supervisor running, and visible.

- :class:`Heartbeat`: a running supervisor records one beat per tick (host, pid, last
  tick) in the record store, so ``status`` can say who watches a job and since when.
- :class:`Detached`: ``dispatch supervise --detach`` without root: the supervisor runs in
  its own session, with a pid file and a log file under the state directory. The pid file
  is locked (``flock``) by the supervisor for as long as it runs: the lock, not the file's
  presence, says whether one runs, so a stale file from a crash or a reused pid never
  blocks or fools anyone. One per record and host.
- :func:`systemd_unit`: the same supervisor as a ``systemctl --user`` unit.
- :func:`network_file_system`: SQLite's locking is unreliable on network file systems,
  and a record there invites a supervisor on each host that mounts it; a supervisor
  refuses such a record unless told otherwise.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dispatch.job_records import utc_now
from dispatch.model.errors import BadInput, DispatchError
from dispatch.model.supervision import SupervisorBeat
from dispatch.store.base import RecordStore
from dispatch.store.permissions import private_dirs

log = logging.getLogger("dispatch.supervising")

#: File system types whose locking SQLite cannot rely on (``/proc/self/mountinfo`` names).
NETWORK_FILE_SYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "glusterfs",
        "9p",
        "afs",
        "ocfs2",
        "gfs2",
        "fuse.sshfs",
        "fuse.ceph",
        "fuse.glusterfs",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.rclone",
    }
)


#: Where the kernel lists this process's mounts (a test points it at a file of its own).
MOUNTINFO = Path("/proc/self/mountinfo")


def owner_name() -> str:
    """The name this process's leases carry, as :class:`dispatch.supervisor.Supervisor`
    gives it by default."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat:
    """Records one beat per tick for the supervisor running in this process.

    A beat that cannot be written is logged and skipped: the record store being briefly
    unreachable must not stop the supervisor (its next tick writes again).
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        interval: float,
        lease: float,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = f"{self.host}:{self.pid}"
        self.interval = interval
        self.lease = lease
        self.clock = clock
        self.started_at = clock()
        self.last: datetime | None = None

    def _beat(self, at: datetime, stopped: datetime | None) -> SupervisorBeat:
        return SupervisorBeat(
            owner=self.owner,
            host=self.host,
            pid=self.pid,
            started_at=self.started_at,
            last_tick=at,
            interval=self.interval,
            lease=self.lease,
            stopped_at=stopped,
        )

    def tick(self, at: datetime) -> None:
        """The supervisor ticked at ``at``."""
        self.last = at
        try:
            self.store.record_beat(self._beat(at, None))
        except DispatchError as exc:
            log.warning("could not record this supervisor's tick: %s", exc)

    def stopped(self) -> None:
        """The supervisor stopped cleanly: ``status`` says so instead of waiting out the lease."""
        now = self.clock()
        try:
            self.store.record_beat(self._beat(self.last or now, now))
        except DispatchError as exc:
            log.warning("could not record this supervisor's stop: %s", exc)


# ---------------------------------------------------------------------- network file systems
def mount_of(path: str | os.PathLike[str], mountinfo: str) -> tuple[str, str]:
    """The mount point and file system type that hold ``path`` (an absolute, resolved
    path), from the text of ``/proc/self/mountinfo``: the longest mount point above it,
    the last one mounted there winning."""
    target = os.path.normpath(os.fspath(path))
    best = ("/", "")
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields = before.split()
        if not sep or len(fields) < 5 or not after.split():
            continue
        point = _unescape(fields[4])
        inside = point == "/" or target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, after.split()[0])
    return best


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def network_file_system(
    path: str | os.PathLike[str], mountinfo: str | None = None
) -> tuple[str, str] | None:
    """``(mount point, type)`` when ``path`` lies on a network file system, else None."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text()
        except OSError:
            return None  # not Linux, or no /proc: nothing to go on
    point, kind = mount_of(os.path.realpath(path), mountinfo)
    return (point, kind) if kind in NETWORK_FILE_SYSTEMS else None


def record_on_network_fs(store: RecordStore, mountinfo: str | None = None) -> str | None:
    """Why a supervisor should not run on this record, when it is a SQLite file on a
    network file system; None otherwise (PostgreSQL, or a local disk)."""
    path = getattr(store, "path", None)
    if not store.location.startswith("sqlite://") or path is None:
        return None
    found = network_file_system(Path(path).parent, mountinfo)
    if found is None:
        return None
    point, kind = found
    return (
        f"the record store {store.location} is on a {kind} file system (mounted at {point}): "
        "SQLite's file locking is not reliable there, so two processes (a supervisor on each "
        "host that mounts it) can corrupt the record or act on one job twice; keep a SQLite "
        "record on a local disk of the one host that supervises it, or use PostgreSQL for "
        "supervisors on several hosts (DISPATCH_STORE=postgresql://...)"
    )


# ---------------------------------------------------------------------- detached supervisor
@dataclass(frozen=True)
class Running:
    """A detached supervisor found running: its pid (None while it is starting)."""

    pid: int | None
    pid_file: Path
    log_file: Path


class AlreadyRunning(BadInput):
    """``--detach`` while one runs for this record on this host (exit 2, naming its pid)."""

    def __init__(self, running: Running, location: str) -> None:
        self.running = running
        pid = "pid unknown yet (it is starting)" if running.pid is None else f"pid {running.pid}"
        super().__init__(
            f"a detached supervisor already runs for {location} on this host: {pid} "
            f"(pid file {running.pid_file}, log {running.log_file}); stop it with "
            "`dispatch supervise --stop`"
        )


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/dispatch/supervise`` (``~/.local/state/...`` when unset)."""
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "dispatch" / "supervise"


class Detached:
    """The detached supervisor of one record on this host: its pid file and log file."""

    def __init__(self, location: str, directory: Path | None = None) -> None:
        self.location = location
        self.host = socket.gethostname()
        self.directory = directory or state_dir()
        key = hashlib.sha256(location.encode()).hexdigest()[:12]
        stem = f"{self.host}-{key}"
        self.pid_file = self.directory / f"{stem}.pid"
        self.log_file = self.directory / f"{stem}.log"

    # -- finding one ----------------------------------------------------------------------
    def running(self) -> Running | None:
        """The supervisor holding the pid file's lock, or None when none does."""
        try:
            fd = os.open(self.pid_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                return Running(_read_pid(fd), self.pid_file, self.log_file)
            return None
        finally:
            os.close(fd)

    # -- being one ------------------------------------------------------------------------
    def hold(self) -> int:
        """Take the pid file for this process (the detached supervisor itself) and write
        its pid; the returned descriptor holds the lock until the process ends. Raises
        :class:`AlreadyRunning` when another holds it."""
        private_dirs(self.directory, "the supervisor's state directory")
        fd = os.open(self.pid_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise AlreadyRunning(
                    Running(pid, self.pid_file, self.log_file), self.location
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.fsync(fd)
        return fd

    def release(self, fd: int) -> None:
        """Empty the pid file and drop the lock (the file stays: removing it would let a
        starter that opened it before lock a file nobody else finds)."""
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    # -- starting and stopping one --------------------------------------------------------
    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        timeout: float = 60.0,
        poll: float = 0.05,
    ) -> int:
        """Start ``argv`` (a ``dispatch supervise --pid-file ...`` command) in its own
        session, its output appended to the log file; return its pid once it holds the
        pid file. Raises :class:`AlreadyRunning` when one runs, and ``DispatchError``
        naming the log when it exits first or does not start within ``timeout``."""
        found = self.running()
        if found is not None:
            raise AlreadyRunning(found, self.location)
        private_dirs(self.directory, "the supervisor's state directory")
        out = os.open(
            self.log_file,
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=dict(env),
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(out)
        deadline = time.monotonic() + timeout
        while True:
            found = self.running()
            if found is not None and found.pid == child.pid:
                return child.pid
            code = child.poll()
            if code is not None:
                if found is not None:
                    raise AlreadyRunning(found, self.location)
                raise DispatchError(
                    f"the detached supervisor exited at once (exit {code}); its last words "
                    f"are in {self.log_file}:\n{tail(self.log_file)}"
                )
            if time.monotonic() > deadline:
                raise DispatchError(
                    f"the detached supervisor (pid {child.pid}) did not take its pid file "
                    f"{self.pid_file} within {timeout:g} s; see {self.log_file}"
                )
            time.sleep(poll)

    def stop(self, *, timeout: float = 120.0, poll: float = 0.1) -> Running | None:
        """SIGTERM the running one and wait until it has let go of the pid file (it ends
        its tick, gives up its leases and records its stop). None when none runs.
        Raises ``DispatchError`` when it still runs after ``timeout`` seconds."""
        found = self.running()
        if found is None:
            return None
        if found.pid is None:
            raise DispatchError(
                f"a supervisor holds {self.pid_file} but has not written its pid yet; try again"
            )
        try:
            os.kill(found.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while self.running() is not None:
            if time.monotonic() > deadline:
                raise DispatchError(
                    f"the detached supervisor (pid {found.pid}) still runs {timeout:g} s after "
                    f"SIGTERM; see {self.log_file}, or end it with kill -KILL {found.pid}"
                )
            time.sleep(poll)
        return found


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def tail(path: Path, lines: int = 10) -> str:
    """The last lines of a log file, for an error message."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def dispatch_command() -> list[str]:
    """How to run this installation's ``dispatch``: its console script beside this Python,
    else this Python running the CLI."""
    script = Path(sys.executable).parent / "dispatch"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from dispatch.cli.main import main; main()"]


# ---------------------------------------------------------------------- systemd user unit
def systemd_unit(
    command: Sequence[str],
    store_url: str,
    location: str,
    env: Mapping[str, str],
    *,
    has_secret: bool,
) -> str:
    """A ``systemctl --user`` unit that runs ``command`` (a foreground ``dispatch
    supervise``) and restarts it when it fails. The record store is passed in the unit's
    environment, or, when its URL holds a password, in an environment file of the user's
    that the unit names (a unit file is no place for a password)."""
    lines = [
        f"# dispatch supervisor for {location}, as a systemd user unit.",
        "# Save as ~/.config/systemd/user/dispatch-supervise.service, then:",
        "#   systemctl --user daemon-reload",
        "#   systemctl --user enable --now dispatch-supervise",
        "#   loginctl enable-linger $USER   # keep it running when you are logged out",
        "[Unit]",
        f"Description=dispatch supervisor for {location}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=exec",
        "ExecStart=" + " ".join(_systemd_quote(a) for a in command),
    ]
    if has_secret:
        lines += [
            "# DISPATCH_STORE=postgresql://... in this file, readable by you alone (chmod 600)",
            "EnvironmentFile=%h/.config/dispatch/supervise.env",
        ]
    else:
        lines.append(f"Environment={_systemd_quote('DISPATCH_STORE=' + store_url)}")
    for name in ("DISPATCH_PROFILE", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "PATH"):
        value = env.get(name)
        if value:
            lines.append(f"Environment={_systemd_quote(f'{name}={value}')}")
    lines += [
        "Restart=on-failure",
        "RestartSec=10",
        "TimeoutStopSec=120",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def _systemd_quote(value: str) -> str:
    """One word of a unit's command line or environment, quoted as systemd reads it
    (``%`` doubled: systemd expands specifiers there)."""
    value = value.replace("%", "%%")
    if value and all(c.isalnum() or c in "-_./:=@,+" for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
