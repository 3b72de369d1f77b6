"""What a backend says about itself (S-25, S-30, S-39); the plan is bound against it."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator

from dispatch.model.base import Model
from dispatch.model.enums import NATIVE_ACTIONS, Action, Capability, CauseKind


class Declarations(Model):
    """A backend's self-description.

    - ``node_loss_window``: how long an object may report running with cause ``node-lost``
      before dispatch stops it and applies the plan for ``node-lost`` (S-25..S-27).
    - ``pending_windows``: per cause, how long an object may stay pending for that reason
      before dispatch stops waiting and applies the plan for it (S-39). A cause absent from
      the map is waited on for ever.
    - ``native_actions``: the subset of {restart, requeue} the backend enforces itself (S-9).
    - ``reports``: the cause kinds this backend can report; the plan lists the others as
      impossible here, not as uncovered.
    - ``max_discovery_batch``: the most job ids one discovery call takes (None: no limit);
      the supervisor splits larger ticks into ceil(N / batch) calls.
    - ``options``: backend-specific submit options it accepts (name → one-line help).
    - ``runs_as_caller``: commands run as the Unix user of the process that submits them
      (the local backend; Slurm, whose sbatch submits as its caller). A supervisor then acts
      only on the jobs its own uid submitted
      (:mod:`dispatch.core.submitters`).
    - ``api_version``: the version of the hook contract (``dispatch.hookspecs.API_VERSION``)
      the backend was written against; one newer than this dispatch is refused at load.
      Left out, it is 1 (the contract before ``dispatch_prepare``).
    """

    name: str = Field(min_length=1, pattern=r"^[a-z][a-z0-9_-]*$")
    description: str = ""
    node_loss_window: timedelta
    pending_windows: dict[CauseKind, timedelta] = Field(default_factory=dict)
    native_actions: frozenset[Action] = frozenset()
    reports: frozenset[CauseKind]
    capabilities: frozenset[Capability] = frozenset()
    max_discovery_batch: int | None = Field(default=None, ge=1)
    options: dict[str, str] = Field(default_factory=dict)
    runs_as_caller: bool = False
    api_version: int = Field(default=1, ge=1)

    @field_validator("native_actions")
    @classmethod
    def _only_native(cls, value: frozenset[Action]) -> frozenset[Action]:
        wrong = sorted(a.value for a in value - NATIVE_ACTIONS)
        if wrong:
            raise ValueError(f"only restart/requeue can be native, not {', '.join(wrong)}")
        return value

    def supports(self, capability: Capability) -> bool:
        return capability in self.capabilities
