"""What the user asked to run: the same for every submission of a job."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, model_validator

from dispatch.base import Model


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

    ``options`` are backend-specific (Slurm partition, Kubeflow image...); the backend's
    declarations list the names it accepts and the CLI refuses any other before submitting.
    """

    name: str = Field(default="job", min_length=1)
    command: tuple[str, ...] = ()
    script: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    resources: Resources = Field(default_factory=Resources)
    options: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_of_command_or_script(self) -> JobSpec:
        if bool(self.command) == (self.script is not None):
            raise ValueError("give exactly one of a command or a script")
        return self
