"""``dispatch.Client``: submit, watch and recover jobs from Python.

The same record, the same supervisor and the same checks as the ``dispatch`` command,
which is a thin shell over this module: a job submitted here shows in ``dispatch list``,
and one submitted there is a :class:`JobHandle` here (``client.job(job_id)``).

::

    from dispatch import Client

    client = Client()                       # the default record, or Client("sqlite:///x.db")
    job = client.submit(["python", "train.py"], policy="policy.toml",
                        resources={"cpus_per_task": 4, "time": "2h"})
    final = job.wait(timeout=3600, on_change=lambda s: print(s.state.value))
    for chunk in job.logs(tail=20):
        print(chunk.text, end="")

``wait`` supervises the job in this process while it waits (as ``dispatch watch`` does),
so nothing else needs to run; a supervisor elsewhere holding the job's lease is fine too.

Longer than most modules on purpose: :class:`Client` is the whole public façade in one
class, so the API reads in one place; each method is a few lines over the module that
does the work (records, sweeps, job files, the supervisor).
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from dispatch.handle import JobHandle, WaitTimeout
from dispatch.inputs import build_resources, check_text, default_name, launch, text_pairs
from dispatch.model.errors import BadInput, SubmitRefused, Unreachable

if TYPE_CHECKING:
    from dispatch.backends import Backend, Registry
    from dispatch.config import Config
    from dispatch.core.job import Job
    from dispatch.core.policy import Plan, RecoveryPolicy
    from dispatch.core.status import Status
    from dispatch.functions import FunctionHandle, FunctionSweep
    from dispatch.job_records import RecordClock
    from dispatch.model.events import Identity
    from dispatch.model.prepared import Prepared
    from dispatch.model.spec import JobSpec, Resources
    from dispatch.notify import Notifier
    from dispatch.store.base import JobSummary, RecordStore
    from dispatch.supervisor import Supervisor, TickReport

    #: What ``policy=`` takes: a policy, a policy file's path, or None (the profile's, else
    #: no rules).
    PolicyArg = RecoveryPolicy | str | os.PathLike[str] | None


#: What :meth:`Client.submit_file` takes beside the file.
_FILE_KEYWORDS = frozenset(
    {
        "command",
        "script",
        "script_file",
        "name",
        "resources",
        "env",
        "workdir",
        "options",
        "launcher",
        "warn",
        "checkpoint_dir",
        "progress_window",
        "backend",
        "policy",
        "profile",
    }
)

#: How many times a request is read and appended again when another writer got there first.
#: Seconds between two snapshots of a running supervisor's folded jobs (at most).
SNAPSHOT_EVERY = 600.0
REQUEST_ATTEMPTS = 5


class SpecFields(TypedDict, total=False):
    """The keywords that describe a job, for :meth:`Client.spec`, :meth:`Client.submit`
    and :meth:`Client.dry_run` (defined once, here).

    - ``script`` / ``script_file``: the script's text, or a file to read it from, instead
      of a command;
    - ``name``: for people (default: the command or the script's file name);
    - ``resources``: a :class:`dispatch.Resources` or a mapping (see ``build_resources``);
    - ``env``: variables added to the job's environment;
    - ``workdir``: the job's working directory;
    - ``options``: backend options (``dispatch backends`` lists them);
    - ``launcher``: ``"tasks"`` (the command once per task) or ``"torchrun"`` (once per
      node, torchrun's rendezvous set): :class:`dispatch.Launcher` (S-41). Default:
      ``torchrun`` when the command starts torchrun (``torchrun ...``, ``python -m
      torch.distributed.run ...``), where ``gpus_per_node`` N without ``tasks_per_node``
      starts N workers per node; else ``tasks``;
    - ``warn``: ``"USR1@90s"`` or an :class:`dispatch.EndWarning`: the signal sent that
      long before a time limit, preemption or stop (S-45);
    - ``checkpoint_dir``: the job's checkpoint directory (DISPATCH_CHECKPOINT_DIR);
      without it the backend gives every job one of its own (S-44);
    - ``progress_window``: ``"20m"`` or a timedelta: no heartbeat for that long while
      running raises an escalation (S-47).
    """

    script: str | None
    script_file: str | os.PathLike[str] | None
    name: str | None
    resources: Resources | Mapping[str, Any] | None
    env: Mapping[str, str] | None
    workdir: str | None
    options: Mapping[str, str] | None
    launcher: str | None
    warn: Any
    checkpoint_dir: str | os.PathLike[str] | None
    progress_window: Any


class Deferred(Unreachable):
    """A request was recorded but the scheduler could not be reached to carry it out now;
    any supervisor carries it out once it can (the record holds it)."""

    def __init__(self, job_id: str, done: str, problems: Mapping[str, str]) -> None:
        self.job_id = job_id
        self.done = done
        super().__init__(
            f"{done}; the scheduler is unreachable, a supervisor will carry it out: "
            + "; ".join(problems.values())
        )


class LeftToSubmitter(Deferred):
    """A request was recorded, but this process may not carry it out: the job runs on a
    backend that runs commands as their submitter, another user (S-51). Nothing else was
    done (no stop was tried, no ending recorded); a supervisor running as the submitter
    carries it out. Exits like :class:`Deferred` (3): the object could not be reached."""

    def __init__(self, job: Job, done: str, why: str) -> None:
        self.job_id = job.job_id
        self.done = done
        objects = [s.object_id for s in job.submissions if s.object_id]
        what = (
            f"its object {objects[-1]}"
            if len(objects) == 1
            else f"its objects {', '.join(objects)}"
            if objects
            else "its next submission"
        )
        Unreachable.__init__(
            self,
            f"{done} (recorded, not carried out): job {job.job_id} and {what} are not this "
            f"process's to act on: {why}",
        )


@dataclass(frozen=True)
class DryRun:
    """What ``submit`` would record and send, sent nowhere (``submit --dry-run``)."""

    job_id: str
    backend: str
    spec: JobSpec
    plan: Plan
    #: Exactly what the first submission would send (the sbatch argv and script, the
    #: TrainJob and its runtime copy, the local runner's command and environment), or
    #: None for a backend without ``dispatch_prepare``.
    prepared: Prepared | None
    #: The text of the deprecated ``dispatch_render`` of a backend without
    #: ``dispatch_prepare``, if it has that hook.
    rendered: str | None = None


@dataclass(frozen=True)
class SweepDryRun:
    """What :meth:`Client.sweep` would record and send, sent nowhere (``submit --sweep
    ... --dry-run``): the first submissions as they would go, either ONE array object
    (a backend that declares ``arrays``) or one object per member."""

    group_id: str
    backend: str
    plan: Plan
    #: Each member's job id, spec (as recorded) and values, in member order.
    job_ids: tuple[str, ...]
    specs: tuple[JobSpec, ...]
    values: tuple[dict[str, str], ...]
    max_running: int | None
    #: The members' first submissions go as one array object.
    as_array: bool
    #: That array exactly as it would be sent (``dispatch_prepare_array``), or None: the
    #: members go one by one, or the backend builds its array only when it sends it.
    array: Prepared | None = None
    #: Each member's own dry run, when the members go one by one (else empty).
    members: tuple[DryRun, ...] = ()


@dataclass(frozen=True)
class Sweep:
    """A recorded sweep (:meth:`Client.sweep`): its group id and its members' handles,
    in member order (member ``i`` is job ``<group_id>-<i>``)."""

    group_id: str
    members: tuple[JobHandle, ...]
    #: Each member's values, in member order.
    values: tuple[dict[str, str], ...]
    max_running: int | None = None

    @property
    def job_ids(self) -> list[str]:
        return [m.job_id for m in self.members]


def _runs_script(fields: Mapping[str, object]) -> bool:
    """Whether a sweep's template runs a script (its values then reach it through the
    environment, not placeholders in its argv)."""
    return fields.get("script") is not None or fields.get("script_file") is not None


def _check_max_running(max_running: int | None) -> None:
    if max_running is not None and (
        isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1
    ):
        raise BadInput(f"max_running: give a whole number of at least 1, not {max_running!r}")


def current_actor() -> str:
    """Who is asking: the OS user (recorded with every request)."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in a container: still say someone did it
        return "unknown-user"


class Client:
    """The way into dispatch from Python: submit jobs and find them again.

    :param store: a record store URL (``sqlite:///path.db``, ``postgresql://...``), an
        open :class:`~dispatch.store.base.RecordStore`, or None for the configured one
        (``DISPATCH_STORE``, else ``$XDG_STATE_HOME/dispatch/record.db``).
    :param registry: the backends (default: the installed ones).
    :param defaults: a :class:`dispatch.config.Config` whose profile fills in backend,
        policy, resources and options a call leaves out (see :meth:`from_config`).
    :param notifier: told after each supervisor tick run here (``wait``, requests).
    :param discovery_timeout: seconds a request (``cancel``, ``resubmit``, ``give_up``), a
        ``wait`` or a supervisor made here waits for a backend's discovery before treating
        the scheduler as unreachable (a third-party adapter may have no timeout of its own).
    """

    def __init__(
        self,
        store: str | RecordStore | None = None,
        *,
        registry: Registry | None = None,
        actor: str | None = None,
        defaults: Config | None = None,
        notifier: Notifier | None = None,
        discovery_timeout: float = 10.0,
    ) -> None:
        from dispatch import units

        self.discovery_timeout = units.seconds(discovery_timeout, "discovery timeout")
        if store is not None and not isinstance(store, str):
            self._store: RecordStore | None = store
            self._store_url: str | None = None
        else:
            self._store = None
            self._store_url = store
        self._registry = registry
        self.actor = actor or current_actor()
        self.defaults = defaults
        self.notifier = notifier
        self._identity: Identity | None = None
        self._record_clock: RecordClock | None = None

    @classmethod
    def from_config(
        cls, profile: str | None = None, *, cwd: str | os.PathLike[str] | None = None
    ) -> Client:
        """A client with the effective configuration: ``dispatch.toml`` found upward from
        ``cwd``, the user's file, the environment, and the profile named (see
        docs/cli.md, "Configuration")."""
        from dispatch.config import load_config

        config = load_config(profile=profile, cwd=cwd)
        return cls(
            config.value("store"), defaults=config, notifier=config.notifier(config.value("store"))
        )

    # ------------------------------------------------------------------ plumbing
    @property
    def store(self) -> RecordStore:
        if self._store is None:
            from dispatch.store import open_store

            self._store = open_store(self._store_url)
        return self._store

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from dispatch.backends import Registry

            self._registry = Registry.from_entry_points()
        return self._registry

    @property
    def store_url(self) -> str | None:
        return self._store_url

    def backend(self, name: str) -> Backend:
        return self.registry.get(name)

    def close(self) -> None:
        """Let the notifier finish what this process committed (at most its timeout),
        then close the store."""
        if self.notifier is not None:
            self.notifier.flush(self.notifier.timeout)
            self.notifier.close()
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _default(self, key: str) -> Any:
        return self.defaults.value(key) if self.defaults is not None else None

    # ------------------------------------------------------------------ policy and plan
    def policy(self, policy: PolicyArg = None) -> RecoveryPolicy:
        """A policy from a policy, a file path, or the profile's (None: no rules)."""
        from dispatch.core.policy import RecoveryPolicy
        from dispatch.userfiles import load_policy

        if policy is None:
            policy = self._default("policy")
        if policy is None:
            return RecoveryPolicy()
        if isinstance(policy, RecoveryPolicy):
            return policy.validate()
        if isinstance(policy, (str, os.PathLike)):
            return load_policy(policy)  # type: ignore[no-any-return]
        raise BadInput(f"policy: give a RecoveryPolicy or a file path, not {type(policy).__name__}")

    def plan(self, backend: str | None = None, policy: PolicyArg = None) -> Plan:
        """Bind a policy to a backend: who enforces each rule, which causes stay uncovered."""
        from dispatch.job_records import bind_plan

        return bind_plan(self.registry, self._backend_name(backend), self.policy(policy))

    def _backend_name(self, backend: str | None) -> str:
        if backend is not None and not backend.strip():
            raise BadInput("backend: give a backend name (`dispatch backends` lists them)")
        name = backend or self._default("backend") or "local"
        check_text(name, "backend")
        return str(name)

    # ------------------------------------------------------------------ submit
    def spec(self, command: Sequence[str] | None = None, **fields: Unpack[SpecFields]) -> JobSpec:
        """The :class:`dispatch.JobSpec` a submit would record, checked (S-36).

        :param command: argv (never a shell string), or give ``script``/``script_file``.
        :param fields: the rest of the job, as :class:`SpecFields` says. Resources and
            options the call leaves out come from the profile.
        """
        unknown = sorted(set(fields) - set(SpecFields.__annotations__))
        if unknown:
            raise TypeError(f"spec() got unexpected keyword arguments: {', '.join(unknown)}")
        script, script_file = fields.get("script"), fields.get("script_file")
        name, workdir, resources = (
            fields.get("name"),
            fields.get("workdir"),
            fields.get("resources"),
        )
        from dispatch.model.spec import JobSpec
        from dispatch.userfiles import SCRIPT_LIMIT, read_text
        from dispatch.warning_text import endings

        given_script = script is not None or script_file is not None
        if bool(command) == given_script or (script is not None and script_file is not None):
            raise BadInput("give a command or a script (one of them)")
        if command is not None and (isinstance(command, str) or not command):
            raise BadInput("command: give the program and its arguments as a list of strings")
        words = tuple(command or ())
        for i, word in enumerate(words):
            if not isinstance(word, str):
                raise BadInput(f"command word {i + 1}: {word!r} is not a string")
            check_text(word, f"command word {i + 1}")
        if words and not words[0]:
            raise BadInput("command: the program name (its first word) is empty")
        if words and "\0" in "".join(words):
            raise BadInput("command: a word holds a NUL byte, which no program can receive")
        if script_file is not None:
            script = read_text(script_file, "script", SCRIPT_LIMIT)
        if script is not None:
            check_text(script, "script")
            if not script.strip():
                raise BadInput("script: it is empty")
        if name is not None:
            check_text(name, "name")
            if not name.strip():
                raise BadInput("name: give a non-empty name, or leave it out")
        if workdir is not None:
            check_text(workdir, "workdir")
            if not workdir or "\0" in workdir:
                raise BadInput(f"workdir {workdir!r}: give a directory path")
        if resources is None:
            resources = self._default("resources")
        merged_options = dict(self._default("options") or {})
        merged_options.update(fields.get("options") or {})
        how, built = launch(words, fields.get("launcher"), build_resources(resources))
        return JobSpec(
            name=name or default_name(script_file, words),
            command=words,
            script=script,
            env=text_pairs(fields.get("env"), "env"),
            workdir=workdir,
            resources=built,
            options=text_pairs(merged_options, "option"),
            launcher=how,
            **endings(
                warn=fields.get("warn"),
                checkpoint_dir=fields.get("checkpoint_dir"),
                progress_window=fields.get("progress_window"),
                time_limit=built.time_limit,
            ),  # S-44, S-45, S-47: dispatch.warning_text
        )

    def _prepare(
        self, backend: str | None, policy: PolicyArg, spec: JobSpec, *, recording_only: bool = False
    ) -> tuple[str, Plan]:
        """Everything that can refuse a job, before anything is recorded
        (:func:`dispatch.job_records.refuse_early`); ``recording_only`` for ``start=False``
        and ``--no-start``."""
        from dispatch.job_records import bind_plan, refuse_early

        name = self._backend_name(backend)
        chosen = self.policy(policy)
        plan = bind_plan(self.registry, name, chosen)
        refuse_early(self.registry, name, spec, recording_only=recording_only)
        return name, plan

    def submit(
        self,
        command: Sequence[str] | None = None,
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        start: bool = True,
        **fields: Unpack[SpecFields],
    ) -> JobHandle:
        """Record a new job and submit it now; a supervisor recovers it (:meth:`start`).
        ``start=False`` records it only, for a supervisor to submit.

        :param command: argv (never a shell string), or give ``script``/``script_file``.
        :param policy: a :class:`dispatch.RecoveryPolicy` or a policy file's path.
        :param fields: the rest of the job, as :class:`SpecFields` says (see :meth:`spec`).
        :raises BadInput: anything the core or the backend refuses; nothing is recorded.
        """
        return self.submit_spec(
            self.spec(command, **fields), backend=backend, policy=policy, start=start
        )

    def submit_spec(
        self,
        spec: JobSpec,
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        start: bool = True,
        offline: bool | None = None,
    ) -> JobHandle:
        """Record a job from a ready :class:`dispatch.JobSpec` (see :meth:`spec`) and make
        its first submission now (see :meth:`start`), unless ``start`` is False.

        :param offline: record it even when the backend's ``dispatch_check`` cannot reach
            the scheduler (what the check refuses is still refused); default: when
            ``start`` is False (a supervisor elsewhere submits it)."""
        from dispatch.job_records import create_job

        recording_only = not start if offline is None else offline
        backend_name, plan = self._prepare(backend, policy, spec, recording_only=recording_only)
        job_id = create_job(
            self.store,
            self.registry,
            backend=backend_name,
            spec=spec,
            policy=plan.policy,
            actor=self.actor,
        )
        if start:
            self.start(job_id)
        return JobHandle(self, job_id)

    def sweep(
        self,
        command: Sequence[str] | None,
        grid: str | Mapping[str, Sequence[Any]],
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        start: bool = True,
        **fields: Unpack[SpecFields],
    ) -> Sweep:
        """Record one job per point of ``grid`` (:mod:`dispatch.sweep`), as one group,
        and submit them now (at most ``max_running`` at once; a supervisor submits the
        rest as members end). Each member is a job of its own: its record, budget,
        causes, submissions and logs.

        :param command: argv whose words may hold ``{key}`` placeholders (as may
            ``name``), or give ``script``/``script_file`` (then the values reach it
            through ``DISPATCH_SWEEP_<KEY>``).
        :param grid: ``"lr=[1e-3,3e-4],seed=1..4"``, or a mapping of each key to its values
            (``{"lr": [1e-3, 3e-4], "seed": range(1, 5)}``).
        :param max_running: at most this many members submitted and not ended at once.
        :raises BadInput: a bad grid, a placeholder that is not a key, a key never used,
            more than 10,000 members, or anything :meth:`submit` refuses; nothing is
            recorded.
        """
        return self.sweep_spec(
            self.spec(command, **fields),
            grid,
            backend=backend,
            policy=policy,
            max_running=max_running,
            start=start,
            script=_runs_script(fields),
        )

    def sweep_specs(
        self,
        template: JobSpec,
        grid: str | Mapping[str, Sequence[Any]],
        *,
        group_id: str,
        script: bool = False,
    ) -> tuple[list[JobSpec], list[dict[str, str]]]:
        """Each member's spec and values: ``template`` with its placeholders replaced and
        the member's ``DISPATCH_SWEEP_*`` variables added (checked, nothing recorded)."""
        from dispatch.sweep import (
            check_grid,
            check_uses,
            environment,
            expand,
            parse,
            placeholders,
            substitute,
        )

        points = parse(grid) if isinstance(grid, str) else check_grid(grid)
        if script:  # a script reads its values from the environment; the name may use them
            for key in sorted(placeholders(template.name, "the name")):
                if key not in points:
                    raise BadInput(f"sweep: the name uses {{{key}}}, which is not a key")
        else:
            check_uses(points, template.command, template.name)
        members = expand(points)
        specs: list[JobSpec] = []
        for member in members:
            values = member.values
            env = dict(template.env)
            env.update(environment(group_id, member, len(members)))
            name = substitute(template.name, values)
            check_text(name, "name")
            specs.append(
                template.model_copy(
                    update={
                        "command": tuple(substitute(w, values) for w in template.command),
                        "name": name,
                        "env": env,
                    }
                )
            )
        return specs, [m.values for m in members]

    def sweep_spec(
        self,
        template: JobSpec,
        grid: str | Mapping[str, Sequence[Any]],
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        start: bool = True,
        script: bool = False,
    ) -> Sweep:
        """:meth:`sweep` for a ready template :class:`dispatch.JobSpec`."""
        from dispatch.sweep import new_group_id

        _check_max_running(max_running)
        group_id = new_group_id()
        specs, values = self.sweep_specs(template, grid, group_id=group_id, script=script)
        return self._record_sweep(
            group_id,
            specs,
            values,
            backend=backend,
            policy=policy,
            max_running=max_running,
            start=start,
        )

    def _record_sweep(
        self,
        group_id: str,
        specs: Sequence[JobSpec],
        values: Sequence[dict[str, str]],
        *,
        backend: str | None,
        policy: PolicyArg,
        max_running: int | None,
        start: bool,
    ) -> Sweep:
        """Check every member's spec, record the group in one write, submit the first
        members now (unless ``start`` is False)."""
        from dispatch.job_records import check_spec, create_group

        _check_max_running(max_running)
        backend_name, plan = self._prepare(backend, policy, specs[0])
        chosen = self.registry.get(backend_name)
        for spec in specs[1:]:
            check_spec(self.registry, backend_name, spec)
            chosen.validate(spec)
        job_ids = create_group(
            self.store,
            self.registry,
            backend=backend_name,
            specs=specs,
            policy=plan.policy,
            group_id=group_id,
            values=values,
            max_running=max_running,
            actor=self.actor,
        )
        if start:
            self.start_many(job_ids)
        return Sweep(
            group_id,
            tuple(JobHandle(self, job_id) for job_id in job_ids),
            tuple(values),
            max_running,
        )

    def start_many(self, job_ids: Sequence[str]) -> TickReport:
        """:meth:`start` for several jobs in one tick (one discovery per backend); the
        members of a sweep with ``max_running`` are submitted only into free slots."""
        supervisor = self.supervisor(list(job_ids))
        try:
            return supervisor.tick()
        finally:
            supervisor.release()

    def start(self, job_id: str) -> TickReport:
        """One supervisor tick on this job alone: a new job's first submission goes to the
        scheduler now, through the same intent-then-effect path a supervisor takes (the
        intent is recorded before the scheduler is asked, so a crash in between leaves a
        submission the next tick adopts by its tag, never a second object). Only recovery
        needs a supervisor running. A job another supervisor holds is left to it; with
        the scheduler unreachable the job stays recorded and any supervisor submits it
        (the report says so)."""
        supervisor = self.supervisor([job_id])
        try:
            return supervisor.tick()
        finally:
            supervisor.release()

    def dry_run(
        self,
        command: Sequence[str] | None = None,
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        **fields: Unpack[SpecFields],
    ) -> DryRun:
        """What :meth:`submit` would record and what its first submission would send,
        checked the same way; records nothing and changes nothing at the scheduler (a
        backend may read it to prepare, e.g. the runtime a TrainJob copies)."""
        return self.dry_run_spec(self.spec(command, **fields), backend=backend, policy=policy)

    def dry_run_spec(
        self, spec: JobSpec, *, backend: str | None = None, policy: PolicyArg = None
    ) -> DryRun:
        """:meth:`dry_run` for a ready :class:`dispatch.JobSpec`."""
        from dispatch.job_records import new_job_id
        from dispatch.model.enums import Enforcer

        backend_name, plan = self._prepare(backend, policy, spec)
        native = frozenset(b.rule.action for b in plan.bindings if b.enforcer is Enforcer.BACKEND)
        spec = spec.model_copy(update={"native_actions": native})
        return self._dry_run(new_job_id(), backend_name, plan, spec)

    def _dry_run(self, job_id: str, backend_name: str, plan: Plan, spec: JobSpec) -> DryRun:
        """The first submission of ``job_id`` as the backend would send it."""
        chosen = self.registry.get(backend_name)
        if chosen.prepares:
            try:
                prepared = chosen.prepare(job_id, 1, spec, False)
            except SubmitRefused as exc:
                raise BadInput(f"{backend_name} would refuse this job: {exc.detail}") from exc
            return DryRun(job_id, backend_name, spec, plan, prepared)
        rendered = chosen.render(job_id, 1, spec, False)
        return DryRun(job_id, backend_name, spec, plan, None, rendered)

    def dry_run_sweep(
        self,
        command: Sequence[str] | None,
        grid: str | Mapping[str, Sequence[Any]],
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        **fields: Unpack[SpecFields],
    ) -> SweepDryRun:
        """What :meth:`sweep` would record and what its first submissions would send,
        checked the same way; records nothing and changes nothing at the scheduler.

        On a backend that declares ``arrays`` the members go as ONE object, shown as the
        backend's ``dispatch_prepare_array`` builds it (what its ``dispatch_submit_array``
        sends); members that cannot share an array, and every sweep elsewhere, go one
        object per member, each shown as :meth:`dry_run` shows a job."""
        return self.dry_run_sweep_spec(
            self.spec(command, **fields),
            grid,
            backend=backend,
            policy=policy,
            max_running=max_running,
            script=_runs_script(fields),
        )

    def dry_run_sweep_spec(
        self,
        template: JobSpec,
        grid: str | Mapping[str, Sequence[Any]],
        *,
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        script: bool = False,
    ) -> SweepDryRun:
        """:meth:`dry_run_sweep` for a ready template :class:`dispatch.JobSpec`."""
        from dispatch.job_records import check_spec
        from dispatch.model.enums import Capability, Enforcer
        from dispatch.model.spec import ArrayMember
        from dispatch.sweep import member_id, new_group_id

        _check_max_running(max_running)
        group_id = new_group_id()
        specs, values = self.sweep_specs(template, grid, group_id=group_id, script=script)
        backend_name, plan = self._prepare(backend, policy, specs[0])
        chosen = self.registry.get(backend_name)
        for spec in specs[1:]:
            check_spec(self.registry, backend_name, spec)
            chosen.validate(spec)
        chosen.check_array(len(specs), max_running)
        native = frozenset(b.rule.action for b in plan.bindings if b.enforcer is Enforcer.BACKEND)
        specs = [spec.model_copy(update={"native_actions": native}) for spec in specs]
        job_ids = tuple(member_id(group_id, index) for index in range(len(specs)))
        made = SweepDryRun(
            group_id,
            backend_name,
            plan,
            job_ids,
            tuple(specs),
            tuple(values),
            max_running,
            as_array=False,
        )
        if len(specs) > 1 and chosen.declarations.supports(Capability.ARRAYS):
            if not chosen.prepares_arrays:
                return dataclasses.replace(made, as_array=True)
            members = [
                ArrayMember(job_id=job_id, index=index, spec=spec)
                for index, (job_id, spec) in enumerate(zip(job_ids, specs, strict=True))
            ]
            try:
                array = chosen.prepare_array(group_id, members, max_running)
            except SubmitRefused as exc:
                raise BadInput(f"{backend_name} would refuse this sweep: {exc.detail}") from exc
            if array is not None:
                return dataclasses.replace(made, as_array=True, array=array)
        singles = tuple(
            self._dry_run(job_id, backend_name, plan, spec)
            for job_id, spec in zip(job_ids, specs, strict=True)
        )
        return dataclasses.replace(made, members=singles)

    def submit_file(self, path: str | os.PathLike[str], **overrides: Any) -> JobHandle:
        """Record and submit the job a job file describes (:mod:`dispatch.jobfile`).

        :param overrides: :meth:`submit`'s keywords (and ``profile``), over the file's
            values: key by key in ``resources``, ``options`` and ``env``; a command
            replaces the file's script and the other way round.
        :raises BadInput: the file is not TOML, has an unknown key or a value of the wrong
            type (named with its line), or the job is refused; nothing is recorded.
        """
        client, args = self._from_file(path, overrides)
        backend, policy = args.pop("backend", None), args.pop("policy", None)
        if args.pop("sweep", None) is not None:
            raise BadInput(f"{path}: the file has a [sweep] table: use sweep_file")
        return client.submit_spec(client.spec(**args), backend=backend, policy=policy)

    def sweep_file(
        self, path: str | os.PathLike[str], *, start: bool = True, **overrides: Any
    ) -> Sweep:
        """Record and submit the sweep a job file with a ``[sweep]`` table describes (see
        :meth:`sweep`), with :meth:`submit_file`'s ``overrides``."""
        client, args = self._from_file(path, overrides)
        backend, policy = args.pop("backend", None), args.pop("policy", None)
        table = args.pop("sweep", None)
        if table is None:
            raise BadInput(f"{path}: the file has no [sweep] table: use submit_file")
        return client.sweep_spec(
            client.spec(**args),
            table["grid"],
            backend=backend,
            policy=policy,
            max_running=table.get("max_running"),
            start=start,
            script=_runs_script(args),
        )

    def dry_run_sweep_file(self, path: str | os.PathLike[str], **overrides: Any) -> SweepDryRun:
        """:meth:`dry_run_sweep` for a job file with a ``[sweep]`` table, with
        :meth:`submit_file`'s ``overrides``."""
        client, args = self._from_file(path, overrides)
        backend, policy = args.pop("backend", None), args.pop("policy", None)
        table = args.pop("sweep", None)
        if table is None:
            raise BadInput(f"{path}: the file has no [sweep] table: use dry_run_file")
        return client.dry_run_sweep_spec(
            client.spec(**args),
            table["grid"],
            backend=backend,
            policy=policy,
            max_running=table.get("max_running"),
            script=_runs_script(args),
        )

    def dry_run_file(self, path: str | os.PathLike[str], **overrides: Any) -> DryRun:
        """:meth:`dry_run` for a job file, with :meth:`submit_file`'s ``overrides``."""
        client, args = self._from_file(path, overrides)
        backend, policy = args.pop("backend", None), args.pop("policy", None)
        args.pop("sweep", None)  # the dry run of the template (member placeholders kept)
        return client.dry_run_spec(client.spec(**args), backend=backend, policy=policy)

    def _from_file(
        self, path: str | os.PathLike[str], overrides: Mapping[str, Any]
    ) -> tuple[Client, dict[str, Any]]:
        """The client for the file's profile (this one when it names none) and the
        keywords of :meth:`spec` plus ``backend`` and ``policy``; the profile's resources
        under the file's, key by key."""
        from dispatch.jobfile import layer, load_job_file
        from dispatch.model.errors import DispatchError

        unknown = sorted(set(overrides) - _FILE_KEYWORDS)
        if unknown:
            raise BadInput(
                f"submit_file: unknown keyword(s) {', '.join(unknown)} "
                f"(keywords: {', '.join(sorted(_FILE_KEYWORDS))})"
            )
        job = load_job_file(path)
        args = job.merged(overrides)
        client = self
        profile = args.pop("profile", None)
        if profile is not None:
            from dispatch.config import load_config

            client = Client(
                self.store,
                registry=self.registry,
                actor=self.actor,
                defaults=load_config(profile=profile),
                notifier=self.notifier,
            )
        name = client._backend_name(args.get("backend"))
        try:
            declared = client.registry.get(name).declarations.options
        except DispatchError:
            declared = None  # refused with the backend's own words when bound
        if declared is not None:
            job.check_options(name, declared)
        if args.get("resources") is not None or client._default("resources"):
            under = {"resources": client._default("resources") or {}}
            args["resources"] = layer(under, {"resources": args.get("resources")})["resources"]
        return client, args

    # ------------------------------------------------------------------ functions
    def submit_function(
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        resources: Resources | Mapping[str, Any] | None = None,
        policy: PolicyArg = None,
        backend: str | None = None,
        python: str | os.PathLike[str] | None = None,
        job: SpecFields | None = None,
        start: bool = True,
        **kwargs: Any,
    ) -> FunctionHandle:
        """Run ``fn(*args, **kwargs)`` as a job (docs/functions.md); its handle's
        :meth:`~dispatch.functions.FunctionHandle.result` is the value.

        The function and its arguments are pickled by cloudpickle into the job's
        checkpoint directory (``job["checkpoint_dir"]``, else a new directory under
        ``$XDG_DATA_HOME/dispatch/functions``): it must be on a file system every node
        reaches. The job runs ``<python> -m dispatch.function_runner``; every rank calls
        the function and rank 0 writes the outcome.

        :param python: the interpreter the job runs (default: this one, by its path); it
            must be this Python's major.minor and import what the function needs.
        :param job: the rest of the job, as :class:`SpecFields` says (``name``, ``env``,
            ``checkpoint_dir``, ``warn``, ``options``...), apart from the function's own
            keywords; not ``script``.
        :raises BadInput: the function or an argument cannot be pickled (the pickler's
            reason), or anything :meth:`submit` refuses; nothing is recorded.
        """
        from dispatch import functions
        from dispatch.job_records import create_job, new_job_id

        fields = self._function_fields(job, resources)
        name = fields.pop("name", None) or functions.function_name(fn)
        function = functions.pickled(fn, f"the function {name!r}")
        call = functions.pickled((args, kwargs), f"the arguments of {name!r}")
        job_id = new_job_id()
        directory = fields.pop("checkpoint_dir", None) or functions.default_root() / job_id
        spec = self.spec(functions.command(python), name=name, checkpoint_dir=directory, **fields)
        backend_name, plan = self._prepare(backend, policy, spec)
        written = functions.Written()
        try:
            assert spec.checkpoint_dir is not None
            functions.write_call(written, spec.checkpoint_dir, call, function)
            create_job(
                self.store,
                self.registry,
                backend=backend_name,
                spec=spec,
                policy=plan.policy,
                job_id=job_id,
                actor=self.actor,
            )
        except BaseException:
            written.remove()
            raise
        if start:
            self.start(job_id)
        return functions.FunctionHandle(self, job_id)

    def submit_map(
        self,
        fn: Callable[..., Any],
        iterable: Iterable[Any],
        /,
        *iterables: Iterable[Any],
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        python: str | os.PathLike[str] | None = None,
        start: bool = True,
        **fields: Unpack[SpecFields],
    ) -> FunctionSweep:
        """Record ``fn(item)`` for each item (``fn(a, b)`` for each pair of two
        iterables, which must have the same length) as a sweep (:meth:`sweep`): one
        group, member ``i`` calling the function on item ``i``, each recovered on its
        own; the first ``max_running`` (default: all) are submitted now.

        Member ``i``'s checkpoint directory is ``<checkpoint_dir>/<i>`` (by default
        ``checkpoint_dir`` is a new directory under ``$XDG_DATA_HOME/dispatch/functions``),
        the function is pickled once, beside them. The name may hold ``{i}``, the item's
        index (default ``<function>-{i}``). See :meth:`submit_function`.

        :raises BadInput: no items, iterables of different lengths, a function or an
            item that cannot be pickled, or anything :meth:`sweep` refuses; nothing is
            recorded.
        """
        from dispatch import functions
        from dispatch.sweep import new_group_id
        from dispatch.warning_text import heartbeat_for

        _check_max_running(max_running)
        given = self._function_fields(fields, fields.get("resources"))
        try:
            items = list(zip(iterable, *iterables, strict=True))
        except ValueError as exc:
            raise BadInput(f"map: the iterables are not of one length ({exc})") from None
        if not items:
            raise BadInput("map: no items to call the function on")
        name = given.pop("name", None) or functions.function_name(fn)
        if "{" + functions.MAP_KEY + "}" not in name:
            name += "-{" + functions.MAP_KEY + "}"
        function = functions.pickled(fn, f"the function {name!r}")
        calls = [
            functions.pickled((item, {}), f"item {index} of {name!r}")
            for index, item in enumerate(items)
        ]
        group_id = new_group_id()
        root = given.pop("checkpoint_dir", None) or functions.default_root() / group_id
        shared = functions.call_dir(root) / functions.FUNCTION
        template = self.spec(
            functions.command(python, shared), name=name, checkpoint_dir=root, **given
        )
        assert template.checkpoint_dir is not None
        specs, values = self.sweep_specs(
            template, {functions.MAP_KEY: range(len(items))}, group_id=group_id
        )
        members = []
        for index, spec in enumerate(specs):
            directory = str(Path(template.checkpoint_dir) / str(index))
            update: dict[str, Any] = {"checkpoint_dir": directory}
            if spec.heartbeat is not None:  # each member beats in its own directory
                update["heartbeat"] = heartbeat_for(directory)
            members.append(spec.model_copy(update=update))
        written = functions.Written()
        try:
            functions.write_call(written, template.checkpoint_dir, function=function)
            for spec, call in zip(members, calls, strict=True):
                assert spec.checkpoint_dir is not None
                functions.write_call(written, spec.checkpoint_dir, call)
            recorded = self._record_sweep(
                group_id,
                members,
                values,
                backend=backend,
                policy=policy,
                max_running=max_running,
                start=False,
            )
        except BaseException:
            written.remove()
            raise
        if start:
            self.start_many(recorded.job_ids)
        return functions.FunctionSweep(
            group_id, tuple(functions.FunctionHandle(self, j) for j in recorded.job_ids)
        )

    def map(
        self,
        fn: Callable[..., Any],
        iterable: Iterable[Any],
        /,
        *iterables: Iterable[Any],
        timeout: float | None = None,
        interval: float = 2.0,
        backend: str | None = None,
        policy: PolicyArg = None,
        max_running: int | None = None,
        python: str | os.PathLike[str] | None = None,
        **fields: Unpack[SpecFields],
    ) -> list[Any]:
        """``fn`` over the items as one sweep (:meth:`submit_map`), supervised here until
        every member has ended or is held: the values, in item order.

        :raises RemoteError: a member's function raised (the first such member in item
            order; the original exception when it unpickles here).
        :raises FunctionError: a member ended without a value.
        :raises WaitTimeout: ``timeout`` seconds passed first (the members go on).
        """
        sweep = self.submit_map(
            fn,
            iterable,
            *iterables,
            backend=backend,
            policy=policy,
            max_running=max_running,
            python=python,
            **fields,
        )
        return sweep.results(timeout, interval=interval)

    def function_job(self, job_id: str) -> FunctionHandle:
        """A handle on a recorded function job (one :meth:`submit_function` or
        :meth:`map` made), for its result; ``UnknownJob`` when the record has none."""
        from dispatch.functions import FunctionHandle

        check_text(job_id, "job id")
        handle = FunctionHandle(self, job_id)
        handle.record()
        return handle

    def _function_fields(self, fields: Mapping[str, Any] | None, resources: Any) -> dict[str, Any]:
        """A function job's :class:`SpecFields`: any but a command's or a script's."""
        given = dict(fields or {})
        unknown = sorted(set(given) - set(SpecFields.__annotations__))
        if unknown:
            raise TypeError(f"unexpected job keyword(s): {', '.join(unknown)}")
        for key in ("script", "script_file"):
            if given.get(key) is not None:
                raise BadInput(f"{key}: a function job runs the function, not a script")
        given.pop("script", None)
        given.pop("script_file", None)
        if resources is not None:
            given["resources"] = resources
        return given

    # ------------------------------------------------------------------ finding jobs
    def job(self, job_id: str) -> JobHandle:
        """A handle on a recorded job; ``UnknownJob`` when the record has none."""
        check_text(job_id, "job id")
        handle = JobHandle(self, job_id)
        handle.record()
        return handle

    def jobs(self, state: str | None = None, limit: int | None = None) -> list[JobSummary]:
        """Jobs in the record, newest first (no scheduler call); ``state`` is ``active``
        or a terminal state."""
        return self.store.jobs(state=state, limit=limit)

    def status(
        self,
        job_id: str,
        *,
        backend: str | None = None,
        record: bool = True,
        timeout: float | None = None,
    ) -> Status:
        """The record plus one fresh discovery; ``record=False`` asks the backend alone
        (S-29, level object-only, needs ``backend``). From the record, a job not ended says
        whether a supervisor watches it (``Status.supervisor``). A scheduler that cannot be
        asked (or does not answer within ``timeout`` seconds) leaves the record's view with
        ``Status.unreachable`` set; nothing is appended."""
        from dispatch.job_records import status_of, with_supervision

        check_text(job_id, "job id")
        if backend is not None:
            check_text(backend, "backend")
        status = status_of(
            self.store if record else None,
            self.registry,
            job_id,
            backend=backend,
            timeout=timeout,
        )
        return with_supervision(self.store, status, self.record_clock()) if record else status

    # ------------------------------------------------------------------ supervising
    def supervisor(self, jobs: Sequence[str] | None = None, **options: Any) -> Supervisor:
        from dispatch.supervisor import Supervisor

        options.setdefault("notifier", self.notifier)
        options.setdefault("clock", self.record_clock)
        options.setdefault("discovery_timeout", timedelta(seconds=self.discovery_timeout))
        return Supervisor(self.store, self.registry, jobs=jobs, **options)

    @property
    def record_clock(self) -> RecordClock:
        """The clock every supervisor of this client acts by: the record's
        (:class:`dispatch.job_records.RecordClock`), so hosts whose clocks disagree share
        leases fairly."""
        if self._record_clock is None:
            from dispatch.job_records import RecordClock

            self._record_clock = RecordClock(self.store)
        return self._record_clock

    def supervise(
        self,
        *,
        once: bool = False,
        interval: float = 5.0,
        lease: float = 90.0,
        stop: threading.Event | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
        discovery_timeout: float | None = None,
    ) -> TickReport:
        """Run the supervisor on every active job (what ``dispatch supervise`` runs) until
        ``stop`` is set; ``once``: one tick. Every supervisor a client makes tells its
        notifier after each tick. Each tick records this supervisor's beat (host, pid, last
        tick) so ``status`` says who watches a job; a loop that ends records its stop.
        A tick waits for each backend's discovery up to ``discovery_timeout`` seconds (the
        client's when None): one that has not answered by then is unreachable for that
        tick."""
        from dispatch import units
        from dispatch.supervising import Heartbeat

        interval = units.seconds(interval, "interval")
        seconds = units.seconds(lease, "lease")
        waited = (
            self.discovery_timeout
            if discovery_timeout is None
            else units.seconds(discovery_timeout, "discovery timeout")
        )
        from dispatch.store.snapshot import snapshot_path

        beat = Heartbeat(self.store, interval=interval, lease=seconds, clock=self.record_clock)
        supervisor = self.supervisor(
            lease_ttl=timedelta(seconds=seconds),
            discovery_timeout=timedelta(seconds=waited),
            heartbeat=beat,
            snapshot=snapshot_path(self.store),
        )
        saved = [0.0]

        def after_tick(report: TickReport) -> None:
            # the snapshot of the folded jobs: after the first tick, then at most every
            # ten minutes (writing one costs about as much as a cold start's fold)
            if time.monotonic() - saved[0] >= SNAPSHOT_EVERY:
                supervisor.save_snapshot()
                saved[0] = time.monotonic()
            if on_tick is not None:
                on_tick(report)

        try:
            if once:
                report = supervisor.tick()
                if on_tick is not None:
                    on_tick(report)
                supervisor.save_snapshot()
                return report
            return supervisor.run(interval=interval, stop=stop, on_tick=after_tick)
        finally:
            supervisor.release()
            # a single tick (`supervise --once`, e.g. from cron) stops too: left unrecorded,
            # status would name a process that has exited as the job's supervisor until
            # its lease ran out
            beat.stopped()

    def request(self, job_id: str, make: Callable[[Job], list[Any]], done: str) -> Status:
        """Append what a person asked, then run one supervisor tick on the job so it
        happens now; :class:`Deferred` when the scheduler could not be reached for it."""
        from dispatch.job_records import append_request, load_job, status_of
        from dispatch.store.base import VersionConflict

        check_text(job_id, "job id")
        for attempt in range(1, REQUEST_ATTEMPTS + 1):
            # A supervisor may append between our read and our append: read
            # again and ask again; a request the new record refuses is refused in its words.
            job = load_job(self.store, job_id)
            try:
                append_request(self.store, job, self._on_look_ahead(job, make))
                break
            except VersionConflict:
                if attempt == REQUEST_ATTEMPTS:
                    raise
        supervisor = self.supervisor([job_id])
        try:
            report = supervisor.tick()
        finally:
            supervisor.release()
        if report.unreachable:
            raise Deferred(job_id, done, report.unreachable)
        if job_id in report.refused:
            raise LeftToSubmitter(load_job(self.store, job_id), done, report.refused[job_id])
        return status_of(self.store, self.registry, job_id, timeout=self.discovery_timeout)

    def identity(self) -> Identity:
        """Who this process is, as recorded beside :attr:`actor`: the real uid and the
        record store's database role (:func:`dispatch.job_records.identity_of`)."""
        from dispatch.job_records import identity_of

        if self._identity is None:
            self._identity = identity_of(self.store)
        return self._identity

    def _on_look_ahead(self, job: Job, make: Callable[[Job], list[Any]]) -> list[Any]:
        """The request made on the record as the plan will commit it (what ``status``
        shows, e.g. ``held (not yet committed)``), with the events that commit it first;
        on the record alone when the scheduler cannot be asked."""
        from dispatch.core.projection import look_ahead
        from dispatch.job_records import discover_within, submitter_refusal

        if submitter_refusal(self.store, self.registry, job) is not None:
            return make(job)  # its objects are not ours to look at (S-51): the record alone
        if not job.submissions:
            # nothing submitted, nothing ended: looking ahead would only request its first
            # submission, which is a supervisor's to make (a sweep member may be waiting
            # for a slot), never part of a person's request
            return make(job)
        try:
            discovery = discover_within(
                self.registry, job.backend, job.job_id, self.discovery_timeout
            )
        except Unreachable:
            return make(job)
        ahead = look_ahead(job, discovery, discovery.at)
        return [*ahead.events, *make(ahead.job)]


__all__ = [
    "Client",
    "Deferred",
    "DryRun",
    "JobHandle",
    "LeftToSubmitter",
    "SpecFields",
    "Sweep",
    "WaitTimeout",
    "current_actor",
]
