"""What the user asked to run: the same for every submission of a job."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, model_validator

from dispatch.core.warning import EndWarning
from dispatch.model.base import Model
from dispatch.model.enums import NATIVE_ACTIONS, Action, Launcher


class Resources(Model):
    """Resources common to every backend; anything else goes through ``JobSpec.options``."""

    nodes: int = Field(default=1, ge=1)
    tasks_per_node: int = Field(default=1, ge=1)
    cpus_per_task: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=0)
    memory_mb: int | None = Field(default=None, ge=1)
    time_limit: timedelta | None = None


class JobSpec(Model):
    """A command (argv, never a shell string) or a script, with resources and options.

    ``script`` is the text of a script file (what ``dispatch submit --script FILE`` read),
    not a path; a backend runs it by its own ``#!`` line, never through sh.

    ``options`` are backend-specific (Slurm partition, Kubeflow image...); the backend's
    declarations list the names it accepts and the CLI refuses any other before submitting.

    ``native_actions`` is set by dispatch, not the user: the actions (restart, requeue) the
    job's plan leaves to the backend's own mechanism, so the adapter turns them into that
    mechanism at submit time (S-9: Slurm ``--requeue``, a JobSet restart policy).

    ``launcher`` says how a multi-node command starts (S-41, :class:`dispatch.Launcher`).
    ``exclude_nodes`` is set by dispatch, not the user: the nodes earlier submissions of
    the job ended on for a cause the policy blames on the node (S-43), recorded with the
    submission request; a backend declaring ``exclude-nodes`` keeps the object off them.
    """

    name: str = Field(default="job", min_length=1)
    command: tuple[str, ...] = ()
    script: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    resources: Resources = Field(default_factory=Resources)
    options: dict[str, str] = Field(default_factory=dict)
    native_actions: frozenset[Action] = frozenset()
    launcher: Launcher = Launcher.TASKS
    exclude_nodes: frozenset[str] = frozenset()
    # Training that survives its endings (S-44, S-45, S-47; dispatch-core/docs/endings.md):
    # the warning before a time limit, preemption or stop; the per-job checkpoint
    # directory every execution gets as DISPATCH_CHECKPOINT_DIR; the progress window and
    # the heartbeat file (DISPATCH_HEARTBEAT) whose silence raises an escalation.
    warn: EndWarning | None = None
    checkpoint_dir: str | None = None
    progress_window: timedelta | None = Field(default=None, gt=timedelta(0))
    heartbeat: str | None = None

    @model_validator(mode="after")
    def _one_of_command_or_script(self) -> JobSpec:
        if bool(self.command) == (self.script is not None):
            raise ValueError("give exactly one of a command or a script")
        if self.native_actions - NATIVE_ACTIONS:
            raise ValueError("native_actions holds only restart and requeue")
        return self


class ArrayMember(Model):
    """One member of a sweep handed to ``dispatch_submit_array``: its job id, its place in
    the sweep (0-based; the array task it becomes) and the spec of its first submission,
    as ``dispatch_submit`` would get it."""

    job_id: str = Field(min_length=1)
    index: int = Field(ge=0)
    spec: JobSpec
