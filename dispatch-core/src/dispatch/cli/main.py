"""``dispatch``: submit, watch and recover training jobs.

Only click is imported at start-up; each command imports the core when it runs, so
``dispatch --help`` never pays for pydantic or a backend's client library.
"""

from __future__ import annotations

import functools
import getpass
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print data as JSON.")


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in a container: still say someone did it
        return "unknown-user"


def handles_errors(fn: F) -> F:
    """Turn dispatch's errors into advice on stderr and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from dispatch.cli import exit_codes
        from dispatch.errors import DispatchError

        try:
            return fn(*args, **kwargs)
        except DispatchError as exc:
            code = exit_codes.for_error(exc)
            if kwargs.get("as_json"):
                from dispatch.cli.render import emit_json

                emit_json(
                    {"error": {"type": type(exc).__name__, "message": str(exc), "exit_code": code}}
                )
            click.echo(f"dispatch: {exc}", err=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


class Context:
    """Opened on first use: the record store and the installed backends."""

    def __init__(self, store_url: str | None) -> None:
        self.store_url = store_url
        self._store: Any = None
        self._registry: Any = None

    @property
    def store(self) -> Any:
        if self._store is None:
            from dispatch.store import open_store

            self._store = open_store(self.store_url)
        return self._store

    @property
    def registry(self) -> Any:
        if self._registry is None:
            from dispatch.backends import Registry

            self._registry = Registry.from_entry_points()
        return self._registry


pass_ctx = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_url",
    envvar="DISPATCH_STORE",
    metavar="URL",
    help="Record store: sqlite:///path.db or postgresql://... "
    "[default: $XDG_STATE_HOME/dispatch/record.db; env DISPATCH_STORE]",
)
@click.version_option(package_name="dispatch-core")
@click.pass_context
def cli(ctx: click.Context, store_url: str | None) -> None:
    """Submit training jobs, see why each stopped, recover them by rules on causes."""
    ctx.obj = Context(store_url)


# ---------------------------------------------------------------------- backends / plan
@cli.command()
@json_option
@pass_ctx
@handles_errors
def backends(c: Context, as_json: bool) -> None:
    """List installed backends, their declarations, and broken plugins with their error."""
    from dispatch.cli.render import emit_json

    loaded, broken = c.registry.load_all()
    rows = []
    for name, backend in sorted(loaded.items()):
        decl = backend.declarations
        rows.append(
            {
                "name": name,
                "distribution": backend.distribution,
                "version": backend.version,
                "declarations": decl.model_dump(mode="json"),
            }
        )
    if as_json:
        emit_json({"backends": rows, "broken": broken})
        return
    for row in rows:
        d = row["declarations"]
        click.echo(
            f"{row['name']}  ({row['distribution'] or 'registered directly'} {row['version']})"
        )
        click.echo(f"  node-loss window  {_seconds(decl.node_loss_window)}")
        if decl.pending_windows:
            windows = ", ".join(
                f"{k.value} {_seconds(v)}" for k, v in sorted(decl.pending_windows.items())
            )
            click.echo(f"  pending windows   {windows}")
        click.echo(f"  native actions    {', '.join(sorted(d['native_actions'])) or 'none'}")
        click.echo(f"  capabilities      {', '.join(sorted(d['capabilities'])) or 'none'}")
        click.echo(f"  reports           {', '.join(sorted(d['reports']))}")
        if d["options"]:
            click.echo(f"  options           {', '.join(sorted(d['options']))}")
    for name, error in sorted(broken.items()):
        click.echo(f"{name}  BROKEN: {error}")


@cli.command()
@click.option("--backend", required=True, help="Backend to bind the policy to.")
@click.option(
    "--policy",
    "policy_file",
    required=True,
    type=click.Path(path_type=Path),
    help="Policy file (TOML).",
)
@json_option
@pass_ctx
@handles_errors
def plan(c: Context, backend: str, policy_file: Path, as_json: bool) -> None:
    """Validate a policy and show who enforces each rule and which causes stay uncovered."""
    from dispatch.cli.render import emit_json, plan_json, plan_text
    from dispatch.jobs import bind_plan
    from dispatch.policy_file import load_policy

    bound = bind_plan(c.registry, backend, load_policy(policy_file))
    if as_json:
        emit_json(plan_json(bound))
    else:
        click.echo(plan_text(bound))


# ---------------------------------------------------------------------- submit
@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--backend", default="local", show_default=True, help="Where to run it.")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path),
    help="Recovery policy (TOML). Without one, every ending but success fails the job.",
)
@click.option("--name", help="A name for people; defaults to the command.")
@click.option(
    "--script",
    "script_file",
    type=click.Path(path_type=Path),
    help="Run this script instead of a command.",
)
@click.option("--nodes", type=int, default=1, show_default=True)
@click.option("--tasks-per-node", type=int, default=1, show_default=True)
@click.option("--cpus-per-task", type=int)
@click.option("--gpus-per-node", type=int)
@click.option("--mem", help="Memory per node, e.g. 4G.")
@click.option("--time", "time_limit", help="Time limit: seconds, 90m, or [D-]HH:MM:SS.")
@click.option("--workdir", help="Working directory of the job.")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE", help="Environment (repeatable).")
@click.option(
    "--option",
    "-o",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Backend option (repeatable); `dispatch backends` lists them.",
)
@click.option("--wait", is_flag=True, help="Supervise here until the job ends or is held.")
@click.option(
    "--interval",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between checks with --wait.",
)
@click.argument("command", nargs=-1)
@json_option
@pass_ctx
@handles_errors
def submit(
    c: Context,
    backend: str,
    policy_file: Path | None,
    name: str | None,
    script_file: Path | None,
    nodes: int,
    tasks_per_node: int,
    cpus_per_task: int | None,
    gpus_per_node: int | None,
    mem: str | None,
    time_limit: str | None,
    workdir: str | None,
    env: tuple[str, ...],
    options: tuple[str, ...],
    wait: bool,
    interval: float,
    command: tuple[str, ...],
    as_json: bool,
) -> None:
    """Submit COMMAND (after --) or --script FILE; print the job id.

    \b
    dispatch submit --policy policy.toml -- python train.py --epochs 10
    """
    from dispatch.cli import units
    from dispatch.errors import BadInput
    from dispatch.jobs import bind_plan, create_job
    from dispatch.policy import RecoveryPolicy
    from dispatch.policy_file import load_policy
    from dispatch.spec import JobSpec, Resources

    if bool(command) == bool(script_file):
        raise BadInput("give a command after `--` or --script FILE (one of them)")
    script = None
    if script_file is not None:
        try:
            script = script_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"--script {script_file}: {exc.strerror}") from exc
    policy = load_policy(policy_file) if policy_file else RecoveryPolicy()
    resources = Resources(
        nodes=_positive(nodes, "--nodes"),
        tasks_per_node=_positive(tasks_per_node, "--tasks-per-node"),
        cpus_per_task=cpus_per_task,
        gpus_per_node=gpus_per_node,
        memory_mb=units.megabytes(mem) if mem else None,
        time_limit=units.duration(time_limit) if time_limit else None,
    )
    spec = JobSpec(
        name=name or _default_name(script_file, command),
        command=tuple(command),
        script=script,
        env=_pairs(env, "--env"),
        workdir=workdir,
        resources=resources,
        options=_pairs(options, "--option"),
    )
    bound = bind_plan(c.registry, backend, policy)
    if bound.uncovered and not as_json:
        click.echo(
            "uncovered causes (these will fail the job): "
            + ", ".join(sorted(k.value for k in bound.uncovered)),
            err=True,
        )
    for b in bound.unenforced:
        click.echo(
            f"warning: rule {b.index + 1} ({b.rule.describe()}) is not enforced by "
            f"{backend}; its causes will fail the job",
            err=True,
        )
    job_id = create_job(
        c.store, c.registry, backend=backend, spec=spec, policy=policy, actor=_actor()
    )
    if not wait:
        if as_json:
            from dispatch.cli.render import emit_json

            emit_json({"job_id": job_id, "uncovered": sorted(k.value for k in bound.uncovered)})
        else:
            click.echo(job_id)
        return
    if not as_json:
        click.echo(job_id)
    _follow(c, job_id, interval, as_json)


_INTERPRETERS = {"sh", "bash", "python", "python3", "torchrun", "srun", "env", "uv", "deepspeed"}


def _default_name(script_file: Path | None, command: tuple[str, ...]) -> str:
    """The script's name, or the program's, skipping an interpreter in front of it."""
    if script_file is not None:
        return script_file.name
    words = [w for w in command if not w.startswith("-")]
    for word in words:
        if Path(word).name not in _INTERPRETERS:
            return Path(word).name
    return Path(command[0]).name


def _positive(value: int, option: str) -> int:
    from dispatch.errors import BadInput

    if value < 1:
        raise BadInput(f"{option} must be at least 1, got {value}")
    return value


def _pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    from dispatch.errors import BadInput

    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"{option} {item!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


def _follow(c: Context, job_id: str, interval: float, as_json: bool) -> None:
    """Supervise one job in this process, printing each change, until it ends or is held."""
    import threading

    from dispatch.cli import exit_codes
    from dispatch.cli.render import cause_line, emit_json
    from dispatch.enums import State
    from dispatch.jobs import status_of
    from dispatch.supervisor import Supervisor

    supervisor = Supervisor(c.store, c.registry, jobs=[job_id])
    stop = threading.Event()
    seen: list[tuple[str, str]] = []
    final: list[Any] = []

    def on_tick(report: Any) -> None:
        for problem in report.unreachable.values():
            click.echo(f"scheduler unreachable, will retry: {problem}", err=True)
        status = status_of(c.store, c.registry, job_id)
        key = (status.state.value, cause_line(status.cause))
        if not seen or seen[-1] != key:
            seen.append(key)
            if not as_json:
                click.echo(f"{status.at:%H:%M:%S}  {status.state.value:<10} {key[1]}")
        if status.settled and (status.state.terminal or status.state is State.HELD):
            final.append(status)
            stop.set()

    try:
        supervisor.run(interval=interval, stop=stop, on_tick=on_tick)
    except KeyboardInterrupt:
        click.echo(f"stopped watching; the job goes on: dispatch status {job_id}", err=True)
        sys.exit(130)
    finally:
        supervisor.release()
    status = final[-1]
    if as_json:
        emit_json(status.model_dump(mode="json"))
    elif status.state is State.HELD:
        click.echo(
            f"held: resolve with `dispatch resubmit {job_id}`, `dispatch cancel {job_id}` "
            f"or `dispatch give-up {job_id}`"
        )
    sys.exit(exit_codes.for_state(status.state))


def _seconds(delta: Any) -> str:
    total = int(delta.total_seconds())
    for unit, size in (("h", 3600), ("min", 60)):
        if total >= size and total % size == 0:
            return f"{total // size} {unit}"
    return f"{total} s"


# ---------------------------------------------------------------------- reading
@cli.command()
@click.argument("job_id")
@click.option("--no-record", is_flag=True, help="Ask the backend only (S-29): never terminal.")
@click.option("--backend", help="Backend to ask with --no-record.")
@json_option
@pass_ctx
@handles_errors
def status(c: Context, job_id: str, no_record: bool, backend: str | None, as_json: bool) -> None:
    """Show a job: the record plus one fresh look at the scheduler."""
    from dispatch.cli.render import emit_json, status_text
    from dispatch.jobs import status_of

    result = status_of(None if no_record else c.store, c.registry, job_id, backend=backend)
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(status_text(result))


@cli.command(name="list")
@click.option(
    "--state",
    type=click.Choice(["active", "succeeded", "failed", "cancelled"]),
    help="Only jobs in this state (from the record).",
)
@click.option("--limit", type=int, default=None)
@json_option
@pass_ctx
@handles_errors
def list_jobs(c: Context, state: str | None, limit: int | None, as_json: bool) -> None:
    """List jobs from the record (no scheduler call)."""
    from dispatch.cli.render import emit_json

    rows = c.store.jobs(state=state, limit=limit)
    if as_json:
        emit_json(
            [
                {
                    "job_id": r.job_id,
                    "name": r.name,
                    "backend": r.backend,
                    "created_at": r.created_at.isoformat(),
                    "outcome": r.outcome.value if r.outcome else None,
                    "version": r.version,
                }
                for r in rows
            ]
        )
        return
    for r in rows:
        outcome = r.outcome.value if r.outcome else "active"
        click.echo(
            f"{r.job_id}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.backend:<10} {outcome:<10} {r.name}"
        )


@cli.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def history(c: Context, job_id: str, as_json: bool) -> None:
    """Show the committed transitions of a job (recoveries, holds, outcome...)."""
    from dispatch.cli.render import emit_json, history_text
    from dispatch.jobs import load_job

    job = load_job(c.store, job_id)
    if as_json:
        emit_json([t.model_dump(mode="json") for t in job.history])
        return
    from dispatch.enums import Level
    from dispatch.status import Status  # history only: no scheduler call needed

    shown = Status(
        job_id=job.job_id,
        state=job.outcome.state if job.outcome else "pending",
        level=Level.RECORD,
        settled=True,
        at=job.created_at,
        history=job.history,
    )
    click.echo(history_text(shown))


@cli.command()
@click.argument("job_id")
@click.option("--interval", type=float, default=2.0, show_default=True)
@json_option
@pass_ctx
@handles_errors
def watch(c: Context, job_id: str, interval: float, as_json: bool) -> None:
    """Follow a job until it ends or is held, supervising it here if nobody else is."""
    from dispatch.jobs import load_job

    load_job(c.store, job_id)  # unknown id: exit 2 before anything starts
    _follow(c, job_id, interval, as_json)


# ---------------------------------------------------------------------- requests
def _request(c: Context, job_id: str, make: Callable[..., Any], as_json: bool, done: str) -> None:
    """Append what a person asked, then run one supervisor tick on the job so it happens now."""
    from dispatch.cli.render import emit_json, status_text
    from dispatch.jobs import append_request, load_job, status_of
    from dispatch.supervisor import Supervisor

    job = load_job(c.store, job_id)
    append_request(c.store, job, make(job))
    supervisor = Supervisor(c.store, c.registry, jobs=[job_id])
    report = supervisor.tick()
    supervisor.release()
    if report.unreachable:
        click.echo(
            f"{done}; the scheduler is unreachable, a supervisor will carry it out: "
            + "; ".join(report.unreachable.values()),
            err=True,
        )
    result = status_of(c.store, c.registry, job_id) if not report.unreachable else None
    if as_json:
        emit_json(
            result.model_dump(mode="json") if result else {"job_id": job_id, "recorded": True}
        )
    elif result is not None:
        click.echo(done)
        click.echo(status_text(result))
    if report.unreachable:
        from dispatch.cli import exit_codes

        sys.exit(exit_codes.UNREACHABLE)


@cli.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def cancel(c: Context, job_id: str, as_json: bool) -> None:
    """Cancel a job: stop its objects and commit cancelled (actor: you)."""
    from dispatch import requests

    actor = _actor()
    _request(
        c,
        job_id,
        lambda job: requests.cancel(job, actor=actor, now=_now()),
        as_json,
        "cancel requested",
    )


@cli.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def resubmit(c: Context, job_id: str, as_json: bool) -> None:
    """Release a held job with a new submission (spends no budget)."""
    from dispatch import requests

    actor = _actor()
    _request(
        c,
        job_id,
        lambda job: requests.resubmit(job, actor=actor, now=_now()),
        as_json,
        "resubmitted",
    )


@cli.command(name="give-up")
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def give_up(c: Context, job_id: str, as_json: bool) -> None:
    """End a held job as failed, with the cause that ended its execution."""
    from dispatch import requests

    actor = _actor()
    _request(
        c, job_id, lambda job: requests.give_up(job, actor=actor, now=_now()), as_json, "gave up"
    )


@cli.command()
@click.argument("job_id")
@json_option
@pass_ctx
@handles_errors
def supersede(c: Context, job_id: str, as_json: bool) -> None:
    """Run a finished job again as a new job that names the old one; print the new id."""
    from dispatch.cli.render import emit_json
    from dispatch.jobs import supersede_job

    new_id = supersede_job(c.store, c.registry, job_id, actor=_actor())
    if as_json:
        emit_json({"job_id": new_id, "supersedes": job_id})
    else:
        click.echo(new_id)


def _now() -> Any:
    from dispatch.jobs import utc_now

    return utc_now()


# ---------------------------------------------------------------------- supervise
@cli.command()
@click.option("--once", is_flag=True, help="Run one tick and exit.")
@click.option("--interval", type=float, default=5.0, show_default=True)
@click.option(
    "--lease",
    "lease_seconds",
    type=float,
    default=90.0,
    show_default=True,
    help="Seconds a job stays this supervisor's after its last tick; another "
    "supervisor takes over a crashed one's jobs after that.",
)
@json_option
@pass_ctx
@handles_errors
def supervise(c: Context, once: bool, interval: float, lease_seconds: float, as_json: bool) -> None:
    """Run the supervisor: act on every active job; exits cleanly on SIGTERM/SIGINT."""
    import dataclasses
    import os
    import signal
    import threading

    from dispatch.supervisor import Supervisor

    crash_at = os.environ.get("DISPATCH_CRASH_AT")

    def step(name: str) -> None:  # fault injection for the crash tests (S-34)
        if crash_at == name:
            os.kill(os.getpid(), signal.SIGKILL)

    from datetime import timedelta

    supervisor = Supervisor(
        c.store, c.registry, step=step, lease_ttl=timedelta(seconds=lease_seconds)
    )
    stop = threading.Event()

    def report_tick(report: Any) -> None:
        if as_json:
            click.echo(_json_line(dataclasses.asdict(report)))
        else:
            bits = [
                f"{report.at:%H:%M:%S} active={report.active} appended={report.appended} "
                f"submitted={report.submitted} stopped={report.stopped}"
            ]
            bits += [f"unreachable {k}: {v}" for k, v in report.unreachable.items()]
            bits += [f"error: {e}" for e in report.errors]
            click.echo("  ".join(bits), err=not once)

    if once:
        report_tick(supervisor.tick())
        supervisor.release()
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        supervisor.run(interval=interval, stop=stop, on_tick=report_tick)
    finally:
        supervisor.release()


def _json_line(data: Any) -> str:
    import json

    return json.dumps(data, default=str)


def main() -> None:
    cli()
