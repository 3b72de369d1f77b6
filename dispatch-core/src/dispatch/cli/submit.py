"""``dispatch submit``: record a job (or, with ``--dry-run``, show what would be sent).

Over 500 lines on purpose: every way a job is given (flags, a job file, a sweep, --save,
--dry-run) meets in this one command, and they must merge the same way.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import Context, handles_errors, json_option, pass_ctx, seconds_option

if TYPE_CHECKING:
    from dispatch.client import Client, DryRun, JobHandle, SweepDryRun

_COUNT = click.IntRange(min=1, max=1_000_000)


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--backend", help="Where to run it [default: the profile's, else local].")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(path_type=Path),
    help="Recovery policy (TOML) [default: the profile's]. Without one, every ending but "
    "success fails the job.",
)
@click.option("--name", help="A name for people; defaults to the command.")
@click.option(
    "--script",
    "script_file",
    type=click.Path(path_type=Path),
    help="Run this script instead of a command.",
)
@click.option("--nodes", type=_COUNT, help="[default: 1]")
@click.option("--tasks-per-node", type=_COUNT, help="[default: 1]")
@click.option(
    "--launcher",
    type=click.Choice(["tasks", "torchrun"]),
    help="tasks: the command once per task, each with RANK/WORLD_SIZE/MASTER_ADDR...; "
    "torchrun: once per node, torchrun's rendezvous set through PET_*, --gpus-per-node "
    "workers per node unless --tasks-per-node says [default: torchrun when the command "
    "is torchrun or python -m torch.distributed.run, else tasks]",
)
@click.option("--cpus-per-task", type=_COUNT)
@click.option("--gpus-per-node", type=click.IntRange(min=0, max=1_000_000))
@click.option("--mem", help="Memory per node, e.g. 4G.")
@click.option("--time", "time_limit", help="Time limit: seconds, 90m, or [D-]HH:MM:SS.")
@click.option("--workdir", help="Working directory of the job.")
@click.option(
    "--warn",
    metavar="SIG@DURATION",
    help="Signal sent that long before a time limit, preemption or stop, e.g. USR1@90s.",
)
@click.option("--checkpoint-dir", help="The job's checkpoint directory (DISPATCH_CHECKPOINT_DIR).")
@click.option("--progress-window", help="Escalate when the heartbeat is silent this long (20m).")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE", help="Environment (repeatable).")
@click.option(
    "--option",
    "-o",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Backend option (repeatable); `dispatch backends` lists them.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check everything and print what would be submitted and the plan; record nothing.",
)
@click.option(
    "--save",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a job file (TOML) from the job file and flags given, checked as a submit "
    "is; submit nothing (with --dry-run: also show what would be sent).",
)
@click.option(
    "--no-start",
    is_flag=True,
    help="Record the job only; a supervisor makes its first submission (from a host that "
    "cannot reach the scheduler, say).",
)
@click.option(
    "--sweep",
    "sweep",
    metavar="GRID",
    help="One job per point of GRID, as one group: 'lr=[1e-3,3e-4],seed=1..4' (lists and "
    "integer ranges, their cross product); {key} in the command and --name is replaced by "
    "each member's value; prints the group id.",
)
@click.option(
    "--max-running",
    type=click.IntRange(min=1),
    help="With --sweep: at most K members submitted and not ended at once; the rest wait "
    "for a slot, in member order.",
)
@click.option("--wait", is_flag=True, help="Supervise here until the job ends or is held.")
@seconds_option("--interval", 2.0, "Seconds between checks with --wait.")
@click.argument("command", nargs=-1)
@json_option
@pass_ctx
@handles_errors
def submit(
    c: Context,
    backend: str | None,
    policy_file: Path | None,
    name: str | None,
    script_file: Path | None,
    nodes: int | None,
    tasks_per_node: int | None,
    launcher: str | None,
    cpus_per_task: int | None,
    gpus_per_node: int | None,
    mem: str | None,
    time_limit: str | None,
    workdir: str | None,
    warn: str | None,
    checkpoint_dir: str | None,
    progress_window: str | None,
    env: tuple[str, ...],
    options: tuple[str, ...],
    dry_run: bool,
    save: Path | None,
    no_start: bool,
    sweep: str | None,
    max_running: int | None,
    wait: bool,
    interval: float,
    command: tuple[str, ...],
    as_json: bool,
) -> None:
    """Submit COMMAND (after --), --script FILE, or a job file; print the job id.

    \b
    dispatch submit --policy policy.toml -- python train.py --epochs 10
    dispatch submit job.toml --nodes 4          # flags override the file's values
    dispatch submit --save job.toml --nodes 2 -- torchrun train.py   # write one
    """
    from dispatch.cli.render import emit_json, escaped

    params = _params(click.get_current_context())
    dry_run, save, wait = params["dry_run"], params["save"], params["wait"]
    interval, as_json = params["interval"], params["as_json"]
    args, source = _arguments(c, params)
    backend, policy = args.pop("backend", None), args.pop("policy", None)
    grid, max_running = _sweep_args(params, args)
    spec = _spec(c, args, source)
    if grid is not None:
        if save is not None or wait:
            from dispatch.model.errors import BadInput

            raise BadInput("--sweep: --save and --wait take one job; leave them out")
        _submit_sweep(c, spec, grid, max_running, backend, policy, params, args)
        return
    if save is not None or dry_run:
        dry = c.client.dry_run_spec(spec, backend=backend, policy=policy)
        if save is not None:
            _save(c, save, params, source)
            if not dry_run:
                if as_json:
                    emit_json({"saved": str(save), "spec": dry.spec.model_dump(mode="json")})
                else:
                    click.echo(escaped(f"saved {save} (submit it with `dispatch submit {save}`)"))
                return
        if params["job_file"] is not None and not as_json:
            from dispatch.jobfile import dumps

            click.echo(escaped(f"=== {params['job_file']} with the flags over it ==="))
            click.echo(
                escaped(dumps(_file_values(c, params, source, None)).rstrip("\n"), lines=True)
            )
        show_dry_run(dry)
        return
    client = c.client
    bound = client.plan(backend, policy)
    handle = client.submit_spec(
        spec,
        backend=bound.declarations.name,
        policy=bound.policy,
        start=False,
        offline=params["no_start"],
    )
    # the plan's warnings once the job is recorded: a refused job has no plan to warn of
    if bound.uncovered and not as_json:
        click.echo(
            "uncovered causes (these will fail the job): "
            + ", ".join(sorted(k.value for k in bound.uncovered)),
            err=True,
        )
    for b in bound.unenforced:
        click.echo(
            f"warning: rule {b.index + 1} ({b.rule.describe()}) is not enforced by "
            f"{bound.declarations.name}; its causes will fail the job",
            err=True,
        )
    if not as_json:
        # the id before the scheduler is asked: whatever happens then, the person has it
        click.echo(handle.job_id)
    start = not params["no_start"]
    if start:
        client.start(handle.job_id)
    sent = first_submission(client, handle.job_id, started=start)
    if as_json and not wait:
        emit_json(
            {
                "job_id": handle.job_id,
                "object_id": sent.object_id,
                "submitted": sent.line,
                "uncovered": sorted(k.value for k in bound.uncovered),
            }
        )
    if not as_json:
        click.echo(escaped(sent.line), err=True)
    if wait:
        follow(handle, interval, as_json)


def _sweep_args(params: dict[str, Any], args: dict[str, Any]) -> tuple[Any, int | None]:
    """The sweep's grid and max-running: the flags', else the job file's ``[sweep]``."""
    from dispatch.model.errors import BadInput

    table = args.pop("sweep", None)
    grid: Any = params.get("sweep")
    max_running = params.get("max_running")
    if grid is None and table is not None:
        grid = dict(table.get("grid") or {})
    if max_running is None and table is not None:
        max_running = table.get("max_running")
    if max_running is not None and grid is None:
        raise BadInput("--max-running bounds a sweep: give --sweep GRID too")
    return grid, max_running


def _submit_sweep(
    c: Context,
    spec: Any,
    grid: Any,
    max_running: int | None,
    backend: str | None,
    policy: Any,
    params: dict[str, Any],
    args: dict[str, Any],
) -> None:
    """``submit --sweep``: record every member (one write), print the group id, then
    submit into the free slots in one tick."""
    from dispatch.cli.render import emit_json, escaped

    client = c.client
    script = args.get("script_file") is not None
    if params["dry_run"]:
        show_sweep_dry_run(
            client.dry_run_sweep_spec(
                spec,
                grid,
                backend=backend,
                policy=policy,
                max_running=max_running,
                script=script,
            )
        )
        return
    bound = client.plan(backend, policy)
    as_json = params["as_json"]
    made = client.sweep_spec(
        spec,
        grid,
        backend=bound.declarations.name,
        policy=bound.policy,
        max_running=max_running,
        start=False,
        script=script,
    )
    if bound.uncovered and not as_json:
        click.echo(
            "uncovered causes (these will fail the jobs): "
            + ", ".join(sorted(k.value for k in bound.uncovered)),
            err=True,
        )
    if not as_json:
        click.echo(made.group_id)  # before the scheduler is asked
    start = not params["no_start"]
    if start:
        client.start_many(made.job_ids)
    members = []
    for job_id, point in zip(made.job_ids, made.values, strict=True):
        sent = first_submission(client, job_id, started=start)
        members.append(
            {
                "job_id": job_id,
                "values": point,
                "object_id": sent.object_id,
                "submitted": sent.line,
            }
        )
        if not as_json:
            shown = ",".join(f"{k}={v}" for k, v in point.items())
            click.echo(escaped(f"{job_id} {shown}: {sent.line}"), err=True)
    if as_json:
        emit_json(
            {
                "group_id": made.group_id,
                "max_running": max_running,
                "members": members,
                "uncovered": sorted(k.value for k in bound.uncovered),
            }
        )


def _params(ctx: click.Context) -> dict[str, Any]:
    """The options given, with those written after a job file (``dispatch submit job.toml
    --nodes 4``: click takes every word after the first argument as an argument) parsed
    as options too, and the job file's path under ``job_file``."""
    from click.core import ParameterSource

    from dispatch.jobfile import is_job_file

    params = dict(ctx.params)
    words = tuple(params["command"])
    params["job_file"] = None
    if words and is_job_file(words[0]) and params["script_file"] is None:
        params["job_file"], params["command"] = Path(words[0]), ()
        if len(words) > 1:
            assert ctx.info_name is not None and isinstance(ctx.command, click.Command)
            after = ctx.command.make_context(ctx.info_name, list(words[1:]), parent=ctx.parent)
            for name, value in after.params.items():
                if after.get_parameter_source(name) is ParameterSource.COMMANDLINE:
                    params[name] = value
    return params


#: submit's flags that set a job file key, and the key each sets
_FLAGS = {
    "name": "name",
    "backend": "backend",
    "launcher": "launcher",
    "workdir": "workdir",
    "warn": "warn",
    "checkpoint_dir": "checkpoint_dir",
    "progress_window": "progress_window",
    "policy_file": "policy",
    "script_file": "script_file",
}
_RESOURCE_FLAGS = {
    "nodes": "nodes",
    "tasks_per_node": "tasks_per_node",
    "cpus_per_task": "cpus_per_task",
    "gpus_per_node": "gpus_per_node",
    "mem": "mem",
    "time_limit": "time",
}
_OPTION_NAMES = {
    "name": "--name",
    "backend": "--backend",
    "launcher": "--launcher",
    "workdir": "--workdir",
    "warn": "--warn",
    "checkpoint_dir": "--checkpoint-dir",
    "progress_window": "--progress-window",
    "policy": "--policy",
    "script_file": "--script",
}


def _given(c: Context, params: dict[str, Any]) -> dict[str, Any]:
    """The flags given, as job file keys (values as typed: ``mem = "4G"``)."""
    from dispatch import units

    given: dict[str, Any] = {key: params[flag] for flag, key in _FLAGS.items()}
    given["command"] = tuple(params["command"]) or None
    given["profile"] = c.profile
    if params["mem"] is not None:
        units.megabytes(params["mem"], "--mem")  # refused naming the flag
    if params["time_limit"] is not None:
        units.duration(params["time_limit"], "--time")
    given["resources"] = {key: params[flag] for flag, key in _RESOURCE_FLAGS.items()}
    given["env"] = pairs(params["env"], "--env") or None
    given["options"] = pairs(params["options"], "--option") or None
    return given


def _arguments(c: Context, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The job's values: the job file's (if one is given) with the flags over them; and,
    for each value, where it was given (an option, or the file's key) for the errors."""
    from dispatch.jobfile import layer, load_job_file
    from dispatch.model.errors import BadInput
    from dispatch.userfiles import shown

    given = _given(c, params)
    source = dict(_OPTION_NAMES)
    if params["job_file"] is not None:
        job = load_job_file(params["job_file"])
        if c.profile is None and job.profile is not None:
            c.profile = job.profile  # before the configuration is first read
        for key in job.values:
            if given.get(key) is None:
                source[key] = f"{shown(job.path)}: key '{key.replace('_file', '')}'"
        args = job.merged(given)
        _check_file_options(c, job, args.get("backend"))
    else:
        args = layer({}, given)
        if bool(args.get("command")) == bool(args.get("script_file")):
            raise BadInput(
                "give a command after `--` or --script FILE (one of them), or a job file"
            )
    args.pop("profile", None)
    return args, source


def _check_file_options(c: Context, job: Any, backend: str | None) -> None:
    """A job file's option the backend does not take, refused naming the file's line."""
    from dispatch.model.errors import DispatchError

    name = backend or c.config.value("backend") or "local"
    try:
        declared = c.client.registry.get(name).declarations.options
    except DispatchError:
        return  # an unknown or broken backend is refused, with its own words, when bound
    job.check_options(name, declared)


def _spec(c: Context, args: dict[str, Any], source: dict[str, str]) -> Any:
    """The checked :class:`dispatch.JobSpec` from the merged values; the profile's
    resources under them, key by key."""
    from dispatch.inputs import default_name
    from dispatch.jobfile import layer
    from dispatch.userfiles import SCRIPT_LIMIT, read_text

    profile = {"resources": c.config.value("resources") or {}}
    resources = layer(profile, {"resources": args.get("resources") or {}})["resources"]
    script, name, script_file = None, args.get("name"), args.get("script_file")
    if script_file is not None:
        script = read_text(script_file, source["script_file"], SCRIPT_LIMIT)
        name = name if name is not None else default_name(script_file, ())
    return c.client.spec(
        args.get("command"),
        script=script,
        name=name,
        resources=resources,
        env=args.get("env"),
        workdir=args.get("workdir"),
        options=args.get("options"),
        launcher=args.get("launcher"),
        **_endings(
            args.get("warn"),
            args.get("checkpoint_dir"),
            args.get("progress_window"),
            source,
        ),
    )


def _save(c: Context, path: Path, params: dict[str, Any], source: dict[str, str]) -> None:
    """``--save``: the job file for these flags (and the job file given, if any)."""
    from dispatch.jobfile import save_job_file

    save_job_file(path, _file_values(c, params, source, path))


def _file_values(
    c: Context, params: dict[str, Any], source: dict[str, str], path: Path | None
) -> dict[str, Any]:
    """The job file's values with the flags over them, as a job file holds them; paths
    relative to ``path``'s directory (None: absolute)."""
    import os

    from dispatch.jobfile import load_job_file
    from dispatch.model.errors import BadInput

    values = _given(c, params)
    if params["job_file"] is not None:
        values = load_job_file(params["job_file"]).merged(values)
    here = os.path.dirname(os.path.abspath(path)) if path is not None else None
    for key in ("script_file", "policy"):
        value = values.get(key)
        if value is not None and not isinstance(value, (str, os.PathLike)):
            if path is None:
                values[key] = "(inline)"
                continue
            raise BadInput(
                f"--save: the inline policy of {source.get(key, 'the job file')} cannot be "
                'written back; give it as a file (policy = "policy.toml")'
            )
        if value is not None:
            full = os.path.abspath(value)
            values[key] = full if here is None else os.path.relpath(full, here)
    values["script"] = values.pop("script_file", None)
    if values.get("command") is not None:
        values["command"] = list(values["command"])
    return values


@dataclass(frozen=True)
class FirstSubmission:
    object_id: str | None
    line: str


def first_submission(client: Client, job_id: str, started: bool = True) -> FirstSubmission:
    """What became of the submission made at submit, from the record: the scheduler's id,
    its refusal, or why it waits for a supervisor (so a person is never left guessing)."""
    from dispatch.job_records import load_job

    job = load_job(client.store, job_id)
    if not started:
        return FirstSubmission(
            None, "recorded only (--no-start): `dispatch supervise` makes its first submission"
        )
    current = job.current
    if current is not None and current.object_id is not None:
        return FirstSubmission(
            current.object_id, f"submitted to {job.backend} as {current.object_id}"
        )
    if current is not None and current.failed is not None:
        return FirstSubmission(None, f"{job.backend} refused it: {current.failed.detail}")
    if current is None and job.group is not None and job.group.max_running is not None:
        return FirstSubmission(
            None, "waiting for a sweep slot: a supervisor submits it when a member ends"
        )
    return FirstSubmission(
        None,
        f"recorded, not yet sent to {job.backend} (the scheduler could not be asked now, "
        f"or another supervisor holds the job): `dispatch supervise` submits it",
    )


def show_dry_run(dry: DryRun) -> None:
    """The dry run: for a backend with ``dispatch_prepare``, the ``Prepared`` that its
    send would send, part by part (``--json``: the same, as data); else the spec."""
    from dispatch.cli.render import emit_json, escaped, plan_json, plan_text

    ctx = click.get_current_context()
    if ctx.params.get("as_json"):
        emit_json(
            {
                "dry_run": True,
                "job_id": dry.job_id,
                "backend": dry.backend,
                "spec": dry.spec.model_dump(mode="json"),
                "prepared": None if dry.prepared is None else dry.prepared.model_dump(mode="json"),
                "rendered": dry.rendered,
                "plan": plan_json(dry.plan),
            }
        )
        return
    click.echo(f"dry run: nothing recorded, nothing sent to {dry.backend}")
    click.echo(f"job id    {dry.job_id}  (a real submit draws a new one)")
    click.echo(f"name      {escaped(dry.spec.name)}")
    click.echo(f"=== what {dry.backend} would be sent for submission 1 ===")
    # what is sent holds the user's words (command, script, env): shown escaped
    if dry.prepared is not None:
        click.echo(escaped(dry.prepared.render().rstrip("\n"), lines=True))
    elif dry.rendered is not None:
        click.echo(escaped(dry.rendered.rstrip("\n"), lines=True))
    else:
        click.echo(
            f"({dry.backend} builds what it sends only when it sends it (no dispatch_prepare); "
            "the spec it would be given:)\n" + dry.spec.model_dump_json(indent=2)
        )
    click.echo("=== plan ===")
    click.echo(plan_text(dry.plan))


def show_sweep_dry_run(dry: SweepDryRun) -> None:
    """A sweep's dry run: its members, then what its first submissions send: ONE array
    (the backend's ``dispatch_prepare_array``, exactly what it sends) or one object per
    member, each shown as :func:`show_dry_run` shows a job (``--json``: the same, as data)."""
    import shlex

    from dispatch.cli.render import emit_json, escaped, plan_json, plan_text

    ctx = click.get_current_context()
    if ctx.params.get("as_json"):
        emit_json(
            {
                "dry_run": True,
                "group_id": dry.group_id,
                "backend": dry.backend,
                "max_running": dry.max_running,
                "as_array": dry.as_array,
                "members": [
                    {"job_id": job_id, "values": values, "spec": spec.model_dump(mode="json")}
                    for job_id, values, spec in zip(dry.job_ids, dry.values, dry.specs, strict=True)
                ],
                "array": None if dry.array is None else dry.array.model_dump(mode="json"),
                "submissions": [
                    {
                        "job_id": one.job_id,
                        "prepared": (
                            None if one.prepared is None else one.prepared.model_dump(mode="json")
                        ),
                        "rendered": one.rendered,
                    }
                    for one in dry.members
                ],
                "plan": plan_json(dry.plan),
            }
        )
        return
    size = len(dry.job_ids)
    click.echo(f"dry run: nothing recorded, nothing sent to {dry.backend}")
    click.echo(f"group id  {dry.group_id}  (a real submit draws a new one)")
    for job_id, values, spec in zip(dry.job_ids, dry.values, dry.specs, strict=True):
        shown = ",".join(f"{k}={v}" for k, v in values.items())
        what = shlex.join(spec.command) if spec.script is None else f"script {spec.name}"
        click.echo(escaped(f"{job_id} {shown}: {what}"))
    bound = "" if dry.max_running is None else f", at most {dry.max_running} at once"
    if dry.array is not None:
        click.echo(
            f"=== what {dry.backend} would be sent for the first submissions of all "
            f"{size} members: ONE array{bound} ==="
        )
        click.echo(escaped(dry.array.render().rstrip("\n"), lines=True))
    elif dry.as_array:
        click.echo(
            f"=== {dry.backend} gets the first submissions of all {size} members as ONE "
            f"array{bound} (dispatch_submit_array); it builds it only when it sends it (no "
            "dispatch_prepare_array); the spec each member would be given: ==="
        )
        for job_id, spec in zip(dry.job_ids, dry.specs, strict=True):
            click.echo(escaped(f"--- {job_id} ---\n{spec.model_dump_json(indent=2)}", lines=True))
    else:
        waits = (
            ""
            if dry.max_running is None or dry.max_running >= size
            else f" (the first {dry.max_running} at once; a supervisor sends each other one "
            "when a member ends)"
        )
        click.echo(f"=== what {dry.backend} would be sent: one object per member{waits} ===")
        for one in dry.members:
            click.echo(f"=== {one.job_id}, submission 1 ===")
            if one.prepared is not None:
                click.echo(escaped(one.prepared.render().rstrip("\n"), lines=True))
            elif one.rendered is not None:
                click.echo(escaped(one.rendered.rstrip("\n"), lines=True))
            else:
                click.echo(
                    f"({dry.backend} builds what it sends only when it sends it (no "
                    "dispatch_prepare); the spec it would be given:)\n"
                    + escaped(one.spec.model_dump_json(indent=2), lines=True)
                )
    click.echo("=== plan ===")
    click.echo(plan_text(dry.plan))


def _endings(
    warn: str | None, directory: str | None, window: str | None, source: dict[str, str]
) -> dict[str, Any]:
    """--warn, --checkpoint-dir, --progress-window for Client.spec (dispatch.warning_text);
    an error names the option or the job file's key the value came from."""
    from dispatch.warning_text import as_checkpoint_dir, as_warning, as_window

    return {
        "warn": as_warning(warn, source["warn"]),
        "checkpoint_dir": as_checkpoint_dir(directory, source["checkpoint_dir"]),
        "progress_window": as_window(window, source["progress_window"]),
    }


def pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    from dispatch.model.errors import BadInput

    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"{option} {item!r}: expected KEY=VALUE")
        if key in found:  # the last one would silently replace the first
            raise BadInput(
                f"{option} {key} is given twice ({found[key]!r} and {value!r}): give it once"
            )
        found[key] = value
    return found


def follow(handle: JobHandle, interval: float, as_json: bool) -> None:
    """Supervise one job in this process, printing each change (with how long and why a
    pending job waits), until it ends or is held."""
    from dispatch.cli import exit_codes
    from dispatch.cli.live import Follow
    from dispatch.cli.render import emit_json, escaped, watch_line
    from dispatch.job_records import with_supervision
    from dispatch.model.enums import State

    def unreachable(name: str, problem: str) -> None:
        click.echo(escaped(f"scheduler unreachable, will retry: {problem}"), err=True)

    try:
        if as_json:
            status = handle.wait(interval=interval, on_unreachable=unreachable)
        else:
            # a line per change (state, cause, pending reason...); on a terminal also a
            # last line kept up to date: how long, and why it waits (dispatch.cli.live)
            with Follow(handle.record().created_at) as shown:
                status = handle.wait(
                    interval=interval, on_status=shown.status, on_unreachable=unreachable
                )
    except KeyboardInterrupt:
        click.echo(f"stopped watching; the job goes on: dispatch status {handle.job_id}", err=True)
        sys.exit(exit_codes.INTERRUPTED)
    # who watches it now that this process has let it go, as status says it
    status = with_supervision(handle.client.store, status)
    if as_json:
        emit_json(status.model_dump(mode="json"))
    elif status.state is State.HELD:
        job = handle.job_id
        click.echo(
            f"held: resolve with `dispatch resubmit {job}`, `dispatch cancel {job}` "
            f"or `dispatch give-up {job}`"
        )
        if status.supervisor is not None:
            click.echo(escaped(f"watch: {watch_line(status.supervisor)}"))
    sys.exit(exit_codes.for_state(status.state))
