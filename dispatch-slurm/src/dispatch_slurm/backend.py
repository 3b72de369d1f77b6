"""The Slurm backend: dispatch's hooks carried out with Slurm's own commands.

Registered as ``slurm`` under ``dispatch.backends``. Configuration comes from the
environment (the plugin is instantiated with no arguments):

==================================  =========  ==================================================
variable                            default    meaning
==================================  =========  ==================================================
DISPATCH_SLURM_NODE_LOSS_WINDOW     600        seconds a job may run on a NOT_RESPONDING/DOWN
                                               node before dispatch stops it (S-25)
DISPATCH_SLURM_NO_CAPACITY_WINDOW   3600       seconds a job may pend for a reason that says it
                                               cannot run as configured (PartitionConfig,
                                               ReqNodeNotAvail...) before dispatch stops it (S-39)
DISPATCH_SLURM_UNKNOWN_WINDOW       3600       the same for a pending reason mapped to unknown
                                               (DependencyNeverSatisfied, reasons not in the table)
DISPATCH_SLURM_TIMEOUT              30         seconds any one Slurm command may take
DISPATCH_SLURM_SACCT_SINCE          now-30days how far back sacct looks (``sacct -S``)
DISPATCH_SLURM_LOG_DIR              see below  where each submission's output goes
                                               (default ~/.local/share/dispatch/slurm-logs;
                                               every node must reach it)
==================================  =========  ==================================================

A command runs through the launch wrapper of :mod:`dispatch_slurm.launch` (one srun step
per node, the torch.distributed contract, first failure ends the job, output appended per
node and rank); a ``script`` runs as the child of a short prelude (the same module) that
gives it what a command gets: the environment, the warning, its output as progress, the
signals passed on.

One module for the hooks, each a few lines over the module that does the work (launch,
parse, classify, version, logs); the configuration table above is why it runs long.
"""

from __future__ import annotations

import math
import os
import shlex
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dispatch import (
    Action,
    BadInput,
    Capability,
    Cause,
    CauseKind,
    Declarations,
    Discovery,
    DispatchError,
    JobSpec,
    Launcher,
    LogSelection,
    Prepared,
    SubmitRefused,
    hookimpl,
)
from dispatch.hookspecs import API_VERSION
from dispatch.model.spec import ArrayMember
from dispatch.sweep import group_of

from dispatch_slurm import warning as slurm_warning
from dispatch_slurm.attribute import attribution_queries, silent_nodes
from dispatch_slurm.launch import (
    WRAPPER,
    added_environment,
    log_dir,
    script_body,
    submitter_environment,
)
from dispatch_slurm.logs import read_logs
from dispatch_slurm.observe import build_objects, running_any
from dispatch_slurm.parse import (
    EVENT_FIELDS,
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    STEP_FIELDS,
    parse_sinfo_nodes,
)
from dispatch_slurm.runner import Result, Runner, beside
from dispatch_slurm.tags import Tag, array_comment, job_name, parse_comment
from dispatch_slurm.version import (
    TESTED,
    SlurmVersion,
    VersionCache,
    parse_version,
    untested_warning,
)

NAME = "slurm"
#: Where the temporary batch script's path goes in the sbatch argv (see dispatch_send).
_SCRIPT = "\0batch-script\0"

OPTIONS = {
    "partition": "Slurm partition (sbatch --partition)",
    "account": "account to charge (sbatch --account)",
    "qos": "quality of service (sbatch --qos)",
    "constraint": "node features required (sbatch --constraint)",
    "reservation": "reservation to run in (sbatch --reservation)",
    "output": "the batch script's stdout path pattern (sbatch --output), default batch.out "
    "in the submission's log directory (DISPATCH_SLURM_LOG_DIR)",
    "error": "the batch script's stderr path pattern (sbatch --error)",
    "requeue": "yes|no: let Slurm requeue the job itself (sbatch --requeue); default yes "
    "when the policy has a requeue rule (Slurm then enforces it), else no",
    "sbatch_args": "more sbatch options, split like a shell would (never run by a shell)",
}
#: options dispatch sets itself; an sbatch_args that tries to set them is refused
_RESERVED = (
    "-J",
    "--job-name",
    "--comment",
    "-H",
    "--hold",
    "--parsable",
    "--requeue",
    "--no-requeue",
    "--wrap",
    "-D",
    "--chdir",
    "--export",
    "--open-mode",
    "-x",
    "--exclude",
)


class SlurmCommandFailed(DispatchError):
    """A Slurm command was reached and failed in a way that is not a refusal of a job."""


def _seconds(variable: str, default: float) -> timedelta:
    raw = os.environ.get(variable)
    if raw is None:
        return timedelta(seconds=default)
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{variable}={raw!r}: expected a number of seconds") from None
    if value <= 0:
        raise BadInput(f"{variable}={raw!r}: must be positive")
    return timedelta(seconds=value)


def declarations(version_note: str = "") -> Declarations:
    tested = ", ".join(str(t) for t in TESTED)
    description = f"Slurm through sbatch/squeue/sacct/scontrol/scancel (tested on {tested})"
    return Declarations(
        name=NAME,
        description=f"{description}; {version_note}" if version_note else description,
        node_loss_window=_seconds("DISPATCH_SLURM_NODE_LOSS_WINDOW", 600),
        pending_windows={
            CauseKind.NO_CAPACITY: _seconds("DISPATCH_SLURM_NO_CAPACITY_WINDOW", 3600),
            CauseKind.UNKNOWN: _seconds("DISPATCH_SLURM_UNKNOWN_WINDOW", 3600),
        },
        native_actions=frozenset({Action.REQUEUE}),
        # sbatch submits as whoever runs it: a root supervisor would run a user's job as root
        runs_as_caller=True,
        reports=frozenset(
            {
                CauseKind.NONE,
                CauseKind.PREEMPTED,
                CauseKind.NODE_LOST,
                CauseKind.OUT_OF_MEMORY,
                CauseKind.TIME_LIMIT,
                CauseKind.NON_ZERO_EXIT,
                CauseKind.LAUNCH_FAILED,
                CauseKind.NO_CAPACITY,
                CauseKind.HELD,
                CauseKind.REQUEUED,
                CauseKind.CANCELLED,
                CauseKind.UNKNOWN,
            }
        ),
        capabilities=frozenset(
            {
                Capability.GATING,
                Capability.TIME_LIMIT,
                Capability.MULTI_NODE,
                Capability.GPUS,
                Capability.EXCLUDE_NODES,
                Capability.LOGS,
                Capability.ARRAYS,
            }
        ),
        max_discovery_batch=1000,
        options=dict(OPTIONS),
        api_version=API_VERSION,
    )


def validate(spec: JobSpec, job_id: str = "") -> None:
    """Refuse what sbatch would be asked wrongly, before anything runs (no Slurm call)."""
    where = f"job {job_id!r}: " if job_id else ""
    unknown = sorted(set(spec.options) - set(OPTIONS))
    if unknown:
        raise BadInput(
            f"{where}unknown slurm option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}"
        )
    requeue = spec.options.get("requeue", "no").lower()
    if requeue not in ("yes", "no"):
        raise BadInput(f"{where}option requeue={spec.options['requeue']!r}: expected yes or no")
    if spec.script is not None and spec.launcher is Launcher.TORCHRUN:
        raise BadInput(
            f"{where}--launcher torchrun starts a command on every node; a --script "
            "is the batch script itself and starts its own steps"
        )
    for node in spec.exclude_nodes:
        if not node or any(c in node for c in ",[] \t\n"):
            raise BadInput(f"{where}exclude node {node!r}: expected one Slurm node name")
    _extra_words(spec, where)


def _extra_words(spec: JobSpec, where: str) -> list[str]:
    extra = spec.options.get("sbatch_args", "")
    if not extra:
        return []
    try:
        words = shlex.split(extra)
    except ValueError as exc:
        raise BadInput(f"{where}option sbatch_args={extra!r}: {exc}") from None
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in _RESERVED:
            raise BadInput(f"{where}option sbatch_args may not set {flag}: dispatch sets it")
    return words


def sbatch_argv(
    job_id: str, submission: int, spec: JobSpec, gated: bool, script_path: str
) -> list[str]:
    """The sbatch argument list for one submission (no shell anywhere)."""
    validate(spec, job_id)
    tag = Tag(job_id=job_id, submission=submission, gated=gated)
    logs = log_dir(job_id, submission)
    argv = ["sbatch", "--parsable", f"--job-name={job_name(job_id)}", f"--comment={tag.comment()}"]
    default = "yes" if Action.REQUEUE in spec.native_actions else "no"
    requeue = spec.options.get("requeue", default).lower()
    argv.append("--requeue" if requeue == "yes" else "--no-requeue")
    if gated:
        argv.append("--hold")
    r = spec.resources
    argv += [f"--nodes={r.nodes}", f"--ntasks-per-node={r.tasks_per_node}"]
    if r.cpus_per_task is not None:
        argv.append(f"--cpus-per-task={r.cpus_per_task}")
    if r.gpus_per_node:
        argv.append(f"--gpus-per-node={r.gpus_per_node}")
    if r.memory_mb is not None:
        argv.append(f"--mem={r.memory_mb}M")
    if r.time_limit is not None:
        minutes = max(1, math.ceil(r.time_limit.total_seconds() / 60))
        argv.append(f"--time={minutes}")
    if spec.exclude_nodes:
        argv.append(f"--exclude={','.join(sorted(spec.exclude_nodes))}")
    argv += slurm_warning.signal_option(spec.warn)  # S-45: --signal=B:SIG@SECONDS
    # a requeued execution appends to what the earlier one printed (S-46)
    argv.append("--open-mode=append")
    if not spec.options.get("output"):
        argv.append(f"--output={logs / 'batch.out'}")
    for key in ("partition", "account", "qos", "constraint", "reservation", "output", "error"):
        if spec.options.get(key):
            argv.append(f"--{key}={spec.options[key]}")
    if spec.workdir:
        argv.append(f"--chdir={spec.workdir}")
    argv += _extra_words(spec, f"job {job_id!r}: ")
    argv.append(script_path)
    if spec.script is None:
        argv += [spec.launcher.value, str(logs), *spec.command]
    return argv


class SlurmBackend:
    """One instance per process; ``runner.calls`` counts every Slurm command it ran."""

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or Runner()
        self.versions = VersionCache(self._read_version)
        self._max_array_size: int | None = None

    # -- version ------------------------------------------------------------------------

    def _read_version(self) -> SlurmVersion:
        result = self.runner.run(["sinfo", "--version"])
        try:
            return parse_version(result.stdout if result.ok else "")
        except ValueError:
            raise SlurmCommandFailed(
                f"sinfo --version exited {result.returncode}: {result.words()!r} "
                "is not a Slurm version"
            ) from None

    def version(self) -> SlurmVersion:
        """The Slurm this host's commands talk to (read at most once a minute)."""
        return self.versions.get()

    def version_note(self) -> str:
        """What ``dispatch backends`` says of the version here: a warning for a version
        never tested, else which one; "" when Slurm cannot be asked (declaring must work
        on a host without Slurm)."""
        try:
            version = self.version()
        except DispatchError:
            return ""
        warning = untested_warning(version)
        return f"WARNING: {warning}" if warning else f"Slurm {version} here"

    # -- declaration --------------------------------------------------------------------

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return declarations(self.version_note())

    # -- submit -------------------------------------------------------------------------

    @hookimpl
    def dispatch_validate(self, spec: JobSpec) -> None:
        validate(spec)

    @hookimpl
    def dispatch_prepare(
        self, job_id: str, submission: int, spec: JobSpec, gated: bool
    ) -> Prepared:
        """The sbatch argv, the batch script, the script's arguments and the environment
        sbatch runs with: :meth:`dispatch_send` runs exactly these, with the script in a
        temporary file whose path goes between the options and the arguments."""
        try:
            argv = sbatch_argv(job_id, submission, spec, gated, _SCRIPT)
        except BadInput as exc:
            raise SubmitRefused(str(exc)) from exc
        at = argv.index(_SCRIPT)
        env = added_environment(job_id, submission, spec.env)
        env |= slurm_warning.environment(job_id, spec, submission)  # S-44, S-45
        return Prepared(
            backend=NAME,
            job_id=job_id,
            submission=submission,
            gated=gated,
            parts={
                "sbatch": argv[:at],
                "batch script": _body(spec),
                "script arguments": argv[at + 1 :],
                "environment": env,
            },
            notes=(
                "run as: `sbatch` options, then a temporary file (0600) holding the batch "
                "script, then the script arguments",
                "sbatch's environment is the submitter's (without DISPATCH_* variables) with "
                "`environment` on top; sbatch passes it on to the job",
            ),
        )

    @hookimpl
    def dispatch_send(self, prepared: Prepared) -> str:
        env = prepared.mapping("environment")
        # Slurm cannot start a job whose output directory is missing
        log_dir(prepared.job_id, prepared.submission).mkdir(parents=True, exist_ok=True, mode=0o700)
        slurm_warning.make_directories(env)
        with tempfile.NamedTemporaryFile(
            "w", prefix="dispatch-slurm-", suffix=".sh", delete=False
        ) as handle:
            handle.write(prepared.text("batch script"))
            path = handle.name
        try:
            argv = [*prepared.words("sbatch"), path, *prepared.words("script arguments")]
            result = self.runner.run(argv, env=submitter_environment() | env, inherit_env=False)
        finally:
            os.unlink(path)
        if not result.ok:
            raise SubmitRefused(result.words())
        first = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
        object_id = first.split(";", 1)[0].strip()
        if not (object_id.isascii() and object_id.isdigit()):
            raise SlurmCommandFailed(f"sbatch answered {result.stdout!r}; expected a job id")
        return object_id

    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        """Prepare and send at once, for a caller holding the backend itself (not a hook:
        dispatch calls :meth:`dispatch_prepare` and :meth:`dispatch_send`)."""
        return self.dispatch_send(self.dispatch_prepare(job_id, submission, spec, gated))

    # -- arrays -------------------------------------------------------------------------

    def max_array_size(self) -> int:
        """Slurm's ``MaxArraySize`` (``scontrol show config``): array task ids run from 0
        to one less than it. Read once per backend object."""
        if self._max_array_size is None:
            shown = self._checked(self.runner.run(["scontrol", "show", "config"]))
            for line in shown.stdout.splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "MaxArraySize" and value.strip().isdigit():
                    self._max_array_size = int(value.strip())
                    break
            else:
                raise SlurmCommandFailed("scontrol show config printed no MaxArraySize")
        return self._max_array_size

    @hookimpl
    def dispatch_check_array(self, size: int, max_running: int | None) -> None:
        limit = self.max_array_size()
        if size > limit:
            raise BadInput(
                f"sweep: {size} members, but this Slurm's MaxArraySize is {limit}: a job "
                f"array holds tasks 0 to {limit - 1} (scontrol show config); split the sweep "
                f"into sweeps of at most {limit} members"
            )

    @hookimpl
    def dispatch_prepare_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> Prepared | None:
        """One ``sbatch --array=<indices>%K``: every task runs the launch wrapper with its
        own member's command, log directory and environment (a ``case`` on
        ``SLURM_ARRAY_TASK_ID`` ahead of the wrapper); task ``i`` is member ``i`` and its
        object is ``<array id>_<i>``. None (one sbatch per member) for script sweeps,
        whose batch script is the user's own, and members whose specs differ in more than
        what a task's own environment carries: command, name, environment, checkpoint
        directory and heartbeat file (``Client.map`` gives each member its own directory).
        :meth:`dispatch_submit_array` sends exactly this."""
        if not members:
            return None
        first = members[0].spec
        same = {"command", "env", "name", "checkpoint_dir", "heartbeat"}
        if first.script is not None or any(
            m.spec.model_dump(exclude=same) != first.model_dump(exclude=same) for m in members
        ):
            return None
        try:
            argv = sbatch_argv(members[0].job_id, 1, first, False, _SCRIPT)
        except BadInput as exc:
            raise SubmitRefused(str(exc)) from exc
        at = argv.index(_SCRIPT)
        options = [
            word
            for word in argv[2:at]  # after "sbatch --parsable"
            if not word.startswith(("--job-name=", "--comment=", "--output="))
        ]
        indices = _ranges([m.index for m in members])
        bound = f"%{max_running}" if max_running is not None else ""
        output = str(log_dir(group_id + "-ARRAYTASK", 1) / "batch.out").replace("ARRAYTASK", "%a")
        if first.options.get("output"):
            output = first.options["output"]
        sbatch = [
            "sbatch",
            "--parsable",
            f"--job-name={job_name(group_id)}",
            f"--comment={array_comment(group_id)}",
            f"--array={indices}{bound}",
            *options,
            f"--output={output}",
        ]
        cases = []
        directories: dict[str, None] = {}
        for member in members:
            spec = member.spec
            env = added_environment(member.job_id, 1, spec.env)
            env |= slurm_warning.environment(member.job_id, spec, 1)
            directories.update(dict.fromkeys(_directories(member.job_id, env)))
            words = [spec.launcher.value, str(log_dir(member.job_id, 1)), *spec.command]
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
            cases.append(
                f"  {member.index}) set -- {shlex.join(words)}; export {exports} ;;"
                if exports
                else f"  {member.index}) set -- {shlex.join(words)} ;;"
            )
        head, _, body = WRAPPER.partition("\n")
        script = "\n".join(
            [
                head,
                "# a sweep's array: each task takes its own member's command and environment",
                'case "${SLURM_ARRAY_TASK_ID:-}" in',
                *cases,
                '  *) echo "dispatch: array task ${SLURM_ARRAY_TASK_ID:-?} is no member" >&2;'
                " exit 1 ;;",
                "esac",
                body,
            ]
        )
        env = added_environment(members[0].job_id, 1, first.env)
        env |= slurm_warning.environment(members[0].job_id, first, 1)
        return Prepared(
            backend=NAME,
            job_id=group_id,
            submission=1,
            gated=False,
            parts={
                "sbatch": sbatch,
                "batch script": script,
                "environment": env,
                "directories": list(directories),
            },
            notes=(
                "run as: `sbatch` options, then a temporary file (0600) holding the batch "
                "script; task i of the array is member i, its object <array id>_i",
                "sbatch's environment is the submitter's (without DISPATCH_* variables) with "
                "`environment` (member 0's) on top; each task exports its own member's "
                "variables (the script's case)",
                "the `directories` (each member's log directory, checkpoint directory and "
                "heartbeat's) are made (0700) before sbatch runs",
            ),
        )

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        """Send what :meth:`dispatch_prepare_array` builds for the same members, exactly;
        one object id per member (``<array id>_<index>``), or None as that hook says."""
        if not members:
            return []
        prepared = self.dispatch_prepare_array(group_id, members, max_running)
        if prepared is None:
            return None
        array_id = self._send_array(prepared)
        return [f"{array_id}_{m.index}" for m in members]

    def _send_array(self, prepared: Prepared) -> str:
        """Run the array's ``sbatch`` as ``prepared`` says; Slurm's job id of the array."""
        for directory in prepared.words("directories"):
            Path(directory).mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(
            "w", prefix="dispatch-slurm-", suffix=".sh", delete=False
        ) as handle:
            handle.write(prepared.text("batch script"))
            path = handle.name
        try:
            result = self.runner.run(
                [*prepared.words("sbatch"), path],
                env=submitter_environment() | prepared.mapping("environment"),
                inherit_env=False,
            )
        finally:
            os.unlink(path)
        if not result.ok:
            raise SubmitRefused(result.words())
        first_line = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
        array_id = first_line.split(";", 1)[0].strip()
        if not (array_id.isascii() and array_id.isdigit()):
            raise SlurmCommandFailed(f"sbatch answered {result.stdout!r}; expected a job id")
        return array_id

    # -- discovery ----------------------------------------------------------------------

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        at = datetime.now(UTC)
        wanted = list(dict.fromkeys(job_ids))
        if not wanted:
            return Discovery(backend=NAME, at=at)
        # every answer below is read in this version's form, with its rules (never a guess)
        version = self.version()
        # a sweep's array is named for its group: asked for beside its members' names
        groups = {g for g in map(group_of, wanted) if g is not None}
        names = ",".join([*(job_name(j) for j in wanted), *(job_name(g) for g in sorted(groups))])
        named = set(wanted) | groups
        since = os.environ.get("DISPATCH_SLURM_SACCT_SINCE", "now-30days")
        # the two listings are independent: ask both at once (still two calls); squeue's
        # answer is checked first, so sacct's stale answer while slurmctld is down is
        # never used
        sacct_call = beside(
            self.runner.run,
            [
                "sacct",
                "-P",
                "-n",
                "-X",
                "-D",
                "--allusers",
                f"--name={names}",
                "-S",
                since,
                "-E",
                "now",
                "-o",
                ",".join(SACCT_FIELDS),
            ],
        )
        squeue = self._checked(
            self.runner.run(
                [
                    "squeue",
                    "-h",
                    "--states=all",
                    f"--name={names}",
                    "--Format=" + ",".join(f"{f}:|" for f in SQUEUE_FIELDS),
                ]
            )
        )
        # the step rows of the failures squeue already shows are asked for while
        # sacct still answers (S-42 attribution without a third round trip)
        early = attribution_queries(squeue.stdout, "", named)
        steps_call = beside(self._steps, early.steps_of) if early.steps_of else None
        nodes = None
        if running_any(squeue.stdout, version):
            sinfo = self._checked(self.runner.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"]))
            nodes = parse_sinfo_nodes(sinfo.stdout)
        sacct = self._checked(sacct_call.result())
        steps_text = steps_call.result() if steps_call is not None else ""
        events_text = ""
        queries = attribution_queries(squeue.stdout, sacct.stdout, named)
        late = [i for i in queries.steps_of if i not in set(early.steps_of)]
        if late:  # failures only sacct still lists (slurmctld forgot them)
            steps_text += self._steps(tuple(late))
        events_nodes, events_since = queries.events_nodes, queries.events_since
        silent, silent_since = silent_nodes(steps_text)
        if silent:
            events_nodes = ",".join(
                dict.fromkeys(filter(None, [*events_nodes.split(","), *silent.split(",")]))
            )
            events_since = min(filter(None, [events_since, silent_since]))
        if events_nodes:
            # best effort: without the events a node-lost cause names no node, but is
            # still node-lost; an unreachable slurmdbd still raises
            events = self.runner.run(
                [
                    "sacctmgr",
                    "-n",
                    "-P",
                    "show",
                    "event",
                    f"nodes={events_nodes}",
                    f"start={events_since}",
                    "format=" + ",".join(EVENT_FIELDS),
                ]
            )
            events_text = events.stdout if events.ok else ""
        objects = build_objects(
            squeue.stdout,
            sacct.stdout,
            nodes,
            set(wanted),
            at,
            steps_text=steps_text,
            events_text=events_text,
            version=version,
        )
        objects = slurm_warning.reclassify(objects)  # S-45: ended after the warning
        return Discovery(backend=NAME, at=at, objects=tuple(objects))

    def _steps(self, object_ids: Sequence[str]) -> str:
        return self._checked(
            self.runner.run(
                [
                    "sacct",
                    "-P",
                    "-n",
                    "-D",
                    "--allusers",
                    "-j",
                    ",".join(object_ids),
                    "-o",
                    ",".join(STEP_FIELDS),
                ]
            )
        ).stdout

    # -- logs ---------------------------------------------------------------------------

    @hookimpl
    def dispatch_logs(self, object_id: str, selection: LogSelection) -> Iterable[bytes]:
        """The files of the submission's log directory. Slurm is asked first that it
        still answers (``squeue -j``), so an unreachable scheduler is said, not a log
        that may be missing its last lines."""
        _check_object_id(object_id)
        self.runner.run(["squeue", "-h", "--states=all", "-j", object_id, "-o", "%T"])
        assert selection.job_id is not None and selection.submission is not None
        return read_logs(log_dir(selection.job_id, selection.submission), selection)

    # -- gate and stop ------------------------------------------------------------------

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        _check_object_id(object_id)
        shown = self.runner.run(
            ["squeue", "-h", "--states=all", "-j", object_id, "--Format=Comment:|"]
        )
        release = self.runner.run(["scontrol", "release", object_id])
        if not release.ok and not _gone(release):
            raise SlurmCommandFailed(f"scontrol release {object_id}: {release.words()}")
        tag = parse_comment(shown.stdout.strip().rstrip("|")) if shown.ok else None
        if tag is not None and tag.gated:
            opened = Tag(job_id=tag.job_id, submission=tag.submission, gated=False)
            update = self.runner.run(
                ["scontrol", "update", f"JobId={object_id}", f"Comment={opened.comment()}"]
            )
            if not update.ok and not _gone(update):
                raise SlurmCommandFailed(f"scontrol update {object_id}: {update.words()}")

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        _check_object_id(object_id)
        result = self.runner.run(["scancel", object_id])
        if not result.ok and not _gone(result):
            raise SlurmCommandFailed(f"scancel {object_id}: {result.words()}")

    # -- helpers ------------------------------------------------------------------------

    def _checked(self, result: Result) -> Result:
        if not result.ok:
            raise SlurmCommandFailed(
                f"{' '.join(result.argv[:2])}... exited {result.returncode}: {result.words()}"
            )
        return result


def _body(spec: JobSpec) -> str:
    # a script runs under a prelude giving it a command's environment, warning and progress
    return WRAPPER if spec.script is None else script_body(spec.script)  # S-44, S-45, S-47


def _directories(job_id: str, env: dict[str, str]) -> list[str]:
    """What an array task needs made before sbatch runs: its member's log directory (Slurm
    cannot start a job whose output directory is missing), checkpoint directory and
    heartbeat's directory (as :func:`dispatch_slurm.warning.make_directories` makes them
    for a single job)."""
    found = [str(log_dir(job_id, 1))]
    if "DISPATCH_CHECKPOINT_DIR" in env:
        found.append(env["DISPATCH_CHECKPOINT_DIR"])
    if "DISPATCH_HEARTBEAT" in env:
        found.append(str(Path(env["DISPATCH_HEARTBEAT"]).parent))
    return found


def _ranges(indices: Sequence[int]) -> str:
    """Array task ids as sbatch takes them, runs of consecutive ids as ranges:
    ``[0, 1, 2, 5, 7, 8]`` is ``0-2,5,7-8``."""
    runs: list[list[int]] = []
    for index in sorted(indices):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _check_object_id(object_id: str) -> None:
    """A job id (``123``) or an array task's (``123_4``)."""
    head, _, task = object_id.partition("_")
    if not (object_id.isascii() and head.isdigit() and (not task or task.isdigit())):
        raise BadInput(f"{object_id!r} is not a Slurm job id")


def _gone(result: Result) -> bool:
    """Answers that mean the job already ended or was forgotten: not an error (S-30)."""
    words = result.words()
    return any(
        w in words
        for w in (
            "already finished",
            "already completing or completed",
            "Invalid job id specified",
            "Job is no longer pending",
            "Job has already finished",
        )
    )
