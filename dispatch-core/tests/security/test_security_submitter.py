"""A supervisor runs a command only as the user who submitted it (S-51), proved with real
Unix users on a shared PostgreSQL record.

Two ordinary users are made with ``useradd`` when absent (``dispatch-ann``, ``dispatch-ben``)
and run dispatch through ``runuser``; this needs root, which CI is. Their interpreter is
one they may execute: this one if they can, else a virtual environment of the system's
Python of the same version that imports this checkout's packages. Ann submits as the
database role ``dispatch_alice``; Ben shares that role; the root supervisor connects as
``dispatch_sup`` (a member of ``dispatch_operator``), so it sees everyone's jobs.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg
import pytest
from dispatch.backends import Registry
from dispatch.job_records import load_job
from dispatch.model.events import Identity
from dispatch.store.postgres import PostgresStore
from dispatch.supervisor import Supervisor
from dispatch_testing.waiting import eventually
from psycopg import sql

REPO = Path(__file__).resolve().parents[3]
USERS = ("dispatch-ann", "dispatch-ben")
ROLES = ("dispatch_alice", "dispatch_sup", "dispatch_operator")
DEADLINE = 120.0
SBIN = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"


def _tool(name: str) -> str:
    found = shutil.which(name, path=SBIN)
    if found is None:
        pytest.fail(f"{name} is not installed: it is needed to act as a second user")
    return found


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "this test proves S-51 with real second Unix users: it must run as root to create "
            f"them with useradd ({', '.join(USERS)}) and run dispatch as them with runuser "
            f"(running as uid {os.geteuid()}); CI runs it as root",
            pytrace=False,
        )


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    done = subprocess.run(
        [_tool("useradd"), "--no-create-home", "--home-dir", "/nonexistent", "--shell",
         "/usr/sbin/nologin", "--user-group", name],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 9):  # 9: created meanwhile by another run
        pytest.fail(f"useradd {name} failed: {done.stderr}", pytrace=False)
    return pwd.getpwnam(name)


def _runs_as(user: str, python: str) -> bool:
    done = subprocess.run(
        [_tool("runuser"), "-u", user, "--", python, "-c", "import dispatch, psycopg"],
        capture_output=True, cwd="/", check=False,
    )  # fmt: skip
    return done.returncode == 0


def _interpreter(user: str, shared: Path) -> str:
    """A Python the other users may execute that imports this checkout's dispatch."""
    if _runs_as(user, sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
    if base is None:
        pytest.fail(
            f"{sys.executable} cannot be run by other users and there is no system {version} "
            "to build one they can run",
            pytrace=False,
        )
    venv = shared / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    here = sysconfig.get_paths()["purelib"]
    (site / "dispatch_checkout.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    python = str(venv / "bin" / "python")
    if not _runs_as(user, python):
        pytest.fail(f"{python} (a venv of {base}) cannot import dispatch as {user}")
    return python


@dataclass
class World:
    dsn: str
    schema: str
    python: str
    shared: Path
    uids: dict[str, int]
    pids: list[int] = field(default_factory=list)

    def url(self, role: str) -> str:
        parts = urlsplit(self.dsn)
        where = quote(f"-csearch_path={self.schema}")
        return (
            f"postgresql://{role}:{role}@{parts.hostname}:{parts.port or 5432}{parts.path}"
            f"?options={where}"
        )

    def home(self, user: str) -> Path:
        return self.shared / user

    def env(self, user: str, role: str, **extra: str) -> dict[str, str]:
        home = self.home(user)
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LOGNAME": user,
            "USER": user,
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "DISPATCH_LOCAL_DIR": str(home / "local"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
            "DISPATCH_STORE": self.url(role),
            **extra,
        }

    def python_as(
        self, user: str, role: str, code: str, *args: str, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        # runuser sets HOME, USER and LOGNAME itself: the environment is set after it.
        env = [f"{k}={v}" for k, v in self.env(user, role, **extra).items()]
        return subprocess.run(
            [
                _tool("runuser"),
                "-u",
                user,
                "--",
                _tool("env"),
                "-i",
                *env,
                self.python,
                "-c",
                code,
                *args,
            ],
            cwd=self.home(user),
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )

    def dispatch_as(
        self, user: str, role: str, *args: str, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return self.python_as(
            user, role, "from dispatch.cli.main import main; main()", *args, **extra
        )

    def submit_as(self, user: str, command: str) -> str:
        """``dispatch submit --no-start`` as ``user``: the job is recorded, and a
        supervisor is to make its first submission."""
        done = self.dispatch_as(
            user, "dispatch_alice", "submit", "--no-start", "--", "sh", "-c", command
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    def record_as(self, user: str, command: str, claim: str) -> str:
        """Record a local job as ``user`` through the Python API, its record claiming
        ``claim`` (an ``Identity``) submitted it."""
        code = (
            "import sys; from dispatch import Identity, RecoveryPolicy, JobSpec, Registry;"
            "from dispatch.store import open_store; from dispatch.job_records import create_job;"
            "store = open_store();"
            "print(create_job(store, Registry.from_entry_points(), backend='local',"
            " spec=JobSpec(command=('sh', '-c', sys.argv[1])), policy=RecoveryPolicy(),"
            f" actor='ann', by={claim}))"
        )
        done = self.python_as(user, "dispatch_alice", code, command)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def world(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    _require_root()
    with psycopg.connect(postgres_dsn) as conn:
        have = {r for (r,) in conn.execute("SELECT rolname FROM pg_roles").fetchall()}
    if not set(ROLES) <= have:
        done = subprocess.run(
            ["bash", str(REPO / ".ci" / "start-postgres.sh")], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(f"start-postgres.sh could not create the roles:\n{done.stderr}")
    uids = {name: _user(name).pw_uid for name in USERS}
    shared = Path(tempfile.mkdtemp(prefix="dispatch-submitter-"))
    shared.chmod(0o755)
    for name in USERS:
        home = shared / name
        home.mkdir(mode=0o700)
        os.chown(home, uids[name], pwd.getpwnam(name).pw_gid)
    root_home = shared / "root"
    root_home.mkdir(mode=0o700)
    schema = f"dispatch_uid_{uuid.uuid4().hex[:10]}"
    PostgresStore(postgres_dsn, schema=schema).close()  # the tables' owner creates them
    monkeypatch.setenv("DISPATCH_LOCAL_DIR", str(root_home / "local"))
    made = World(postgres_dsn, schema, _interpreter(USERS[0], shared), shared, uids)
    try:
        yield made
    finally:
        for pid in made.pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(shared, ignore_errors=True)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _root_supervisor(world: World) -> Supervisor:
    return Supervisor(PostgresStore(world.url("dispatch_sup")), Registry.from_entry_points())


def test_a_root_supervisor_never_runs_another_users_local_job_S51(world: World) -> None:
    ann = world.uids["dispatch-ann"]
    marker = world.home("dispatch-ann") / "ran"
    job_id = world.submit_as("dispatch-ann", f"id -u > {marker}")

    supervisor = _root_supervisor(world)
    try:
        first = supervisor.tick()
        again = supervisor.tick()
        events = supervisor.store.read(job_id)
    finally:
        supervisor.release()
        supervisor.store.close()

    why = (
        f"submitted by uid {ann}; this supervisor runs as uid 0 and runs local jobs only as "
        "their submitter: run `dispatch supervise` as that user"
    )
    assert first.refused == {job_id: why} and again.refused == {job_id: why}
    assert (first.submitted, again.submitted, again.appended) == (0, 0, 0)
    assert [e.type for e in events] == ["job-created", "escalation-raised"]  # once
    created, notice = events
    assert created.by == Identity(uid=ann, role="dispatch_alice")
    assert notice.by == Identity(uid=0, role="dispatch_sup")
    assert not marker.exists()  # nothing was started: no submission, no runner
    assert not os.path.exists(world.shared / "root" / "local" / "objects") or not os.listdir(
        world.shared / "root" / "local" / "objects"
    )

    shown = world.dispatch_as("root", "dispatch_sup", "status", job_id)
    assert shown.returncode == 0, shown.stderr
    assert f"submitter uid {ann}, role dispatch_alice" in shown.stdout
    assert why in shown.stdout and "state     pending" in shown.stdout
    listed = world.dispatch_as("root", "dispatch_sup", "list")
    assert listed.returncode == 0, listed.stderr
    assert why in listed.stdout

    # Its submitter's own supervisor runs it, as its submitter.
    ran = world.dispatch_as("dispatch-ann", "dispatch_alice", "supervise", "--once")
    assert ran.returncode == 0, ran.stderr
    eventually(
        lambda: marker.exists() and marker.read_text().strip(),
        timeout=DEADLINE,
        what="the job to run as ann",
    )
    assert marker.read_text().strip() == str(ann)
    objects = world.home("dispatch-ann") / "local" / "objects"
    eventually(
        lambda: list(objects.glob("*/end.json")),
        timeout=DEADLINE,
        what="ann's runner to record the ending",
    )


def test_a_job_whose_record_claims_roots_uid_is_not_run_for_another_role_S51(
    world: World,
) -> None:
    """The uid in a record is what the submitting process said; the role that created the
    job is the database's own fact. Ann writes a job claiming uid 0 and the supervisor's
    role: the root supervisor still refuses it, for the role that created it."""
    marker = world.home("dispatch-ann") / "ran"
    job_id = world.record_as(
        "dispatch-ann", f"id -u > {marker}", claim="Identity(uid=0, role='dispatch_sup')"
    )
    supervisor = _root_supervisor(world)
    try:
        report = supervisor.tick()
        events = supervisor.store.read(job_id)
    finally:
        supervisor.release()
        supervisor.store.close()
    assert report.refused == {
        job_id: "created by database role dispatch_alice; this supervisor connects as "
        "dispatch_sup and runs local jobs only for the role that created them: run "
        "`dispatch supervise` as their submitter, with that role"
    }
    assert report.submitted == 0 and not marker.exists()
    assert [e.type for e in events] == ["job-created", "escalation-raised"]


def test_a_cancel_by_another_user_sharing_the_role_commits_nothing_that_did_not_happen_S51(
    world: World,
) -> None:
    ann, ben = world.uids["dispatch-ann"], world.uids["dispatch-ben"]
    pidfile = world.home("dispatch-ann") / "pid"
    job_id = world.submit_as("dispatch-ann", f"echo $$ > {pidfile}; exec sleep 300")
    ran = world.dispatch_as("dispatch-ann", "dispatch_alice", "supervise", "--once")
    assert ran.returncode == 0, ran.stderr
    pid = int(
        str(
            eventually(
                lambda: pidfile.exists() and pidfile.read_text().strip(),
                timeout=DEADLINE,
                what="pid",
            )
        )
    )
    world.pids.append(pid)
    with PostgresStore(world.url("dispatch_sup")) as store:
        (object_id,) = [s.object_id for s in load_job(store, job_id).submissions]
    assert object_id is not None

    # Ben shares Ann's database role, and says he is root.
    cancel = world.dispatch_as("dispatch-ben", "dispatch_alice", "cancel", job_id, LOGNAME="root")
    assert cancel.returncode == 3, (cancel.stdout, cancel.stderr)
    assert "cancel requested (recorded, not carried out)" in cancel.stderr
    assert object_id in cancel.stderr
    assert f"submitted by uid {ann}; this supervisor runs as uid {ben}" in cancel.stderr

    with PostgresStore(world.url("dispatch_sup")) as store:
        events = store.read(job_id)
        job = load_job(store, job_id)
    types = [e.type for e in events]
    assert "object-missing" not in types and "outcome-committed" not in types, types
    assert job.outcome is None and job.cancel is not None
    os.kill(pid, 0)  # the command still runs: nothing was stopped, nothing pretended
    # Asked of the local backend directly, Ben's stop of Ann's object is refused in words
    # naming the object and the reason, and stops nothing.
    stop = world.python_as(
        "dispatch-ben",
        "dispatch_alice",
        "import sys; from dispatch.local.backend import LocalBackend;"
        "from dispatch import Cause, CauseKind, Provenance, Unreachable\n"
        "try:\n"
        "    LocalBackend(sys.argv[1]).dispatch_stop(sys.argv[2],"
        " Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR))\n"
        "except Unreachable as exc:\n"
        "    sys.exit(str(exc))",
        str(world.home("dispatch-ann") / "local"),
        object_id,
    )
    assert stop.returncode == 1, (stop.stdout, stop.stderr)
    assert f"local object {object_id} was not stopped" in stop.stderr
    assert f"(uid {ben}) may not stop it: Permission denied" in stop.stderr
    os.kill(pid, 0)
    # Root cannot see Ann's local objects either: its status says so instead of guessing.
    unseen = world.dispatch_as("root", "dispatch_sup", "status", job_id)
    assert unseen.returncode == 3 and object_id in unseen.stderr, unseen.stderr
    assert f"submitted by uid {ann}" in unseen.stderr
    ours = world.dispatch_as("dispatch-ann", "dispatch_alice", "status", job_id, "--json")
    assert json.loads(ours.stdout)["state"] == "running", ours.stderr
    (asked,) = [e for e in events if e.type == "cancel-requested"]
    assert asked.actor == "root" and asked.by == Identity(uid=ben, role="dispatch_alice")

    # Ann's supervisor carries the recorded cancel out.
    done = world.dispatch_as("dispatch-ann", "dispatch_alice", "supervise", "--once")
    assert done.returncode == 0, done.stderr

    def cancelled() -> dict[str, object] | None:
        shown = world.dispatch_as("dispatch-ann", "dispatch_alice", "status", job_id, "--json")
        status: dict[str, object] = json.loads(shown.stdout)
        if status["state"] == "cancelled" and status["settled"]:
            return status
        world.dispatch_as("dispatch-ann", "dispatch_alice", "supervise", "--once")
        return None

    final = eventually(
        cancelled, timeout=DEADLINE, what="the cancel to be carried out by ann's supervisor"
    )
    assert isinstance(final, dict)
    eventually(lambda: not _alive(pid), timeout=DEADLINE, what="the command to end")
    history = world.dispatch_as("root", "dispatch_sup", "history", job_id)
    who = f"root (uid {ben}, role dispatch_alice)"
    assert f"cancelled by {who}" in history.stdout and f"by {who}" in history.stdout
    status = world.dispatch_as("root", "dispatch_sup", "status", job_id)
    assert f"cancelled by {who}" in status.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not running; /proc says so
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False
