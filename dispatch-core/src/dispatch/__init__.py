"""dispatch: submit training jobs, know why each stopped, recover by rules on causes.

The names below are imported on first use (PEP 562), so ``dispatch --help`` and the
entry-point scan of a backend's light module do not pay for pydantic until needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE: dict[str, str] = {
    "Action": "dispatch.enums",
    "Backend": "dispatch.backends",
    "BackendBroken": "dispatch.errors",
    "BadInput": "dispatch.errors",
    "Capability": "dispatch.enums",
    "Cause": "dispatch.cause",
    "CauseKind": "dispatch.enums",
    "Declarations": "dispatch.declarations",
    "DecodeError": "dispatch.errors",
    "Discovery": "dispatch.discovery",
    "DispatchError": "dispatch.errors",
    "Enforcer": "dispatch.enums",
    "Execution": "dispatch.discovery",
    "Job": "dispatch.job",
    "JobSpec": "dispatch.spec",
    "Level": "dispatch.enums",
    "NotAllowed": "dispatch.errors",
    "ObjectView": "dispatch.discovery",
    "Phase": "dispatch.enums",
    "Plan": "dispatch.policy",
    "PolicyError": "dispatch.errors",
    "Provenance": "dispatch.enums",
    "RecordConflict": "dispatch.errors",
    "RecoveryPolicy": "dispatch.policy",
    "Registry": "dispatch.backends",
    "Resolution": "dispatch.enums",
    "Resources": "dispatch.spec",
    "Rule": "dispatch.policy",
    "State": "dispatch.enums",
    "Status": "dispatch.status",
    "SubmitRefused": "dispatch.errors",
    "UnknownBackend": "dispatch.errors",
    "UnknownJob": "dispatch.errors",
    "Unreachable": "dispatch.errors",
    "decide": "dispatch.decisions",
    "fold": "dispatch.folding",
    "hookimpl": "dispatch.plugin",
    "project": "dispatch.projection",
    "root_cause": "dispatch.cause",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'dispatch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from dispatch.backends import Backend, Registry
    from dispatch.cause import Cause, root_cause
    from dispatch.decisions import decide
    from dispatch.declarations import Declarations
    from dispatch.discovery import Discovery, Execution, ObjectView
    from dispatch.enums import Action, Capability, CauseKind, Enforcer, Level, Phase, Provenance, Resolution, State
    from dispatch.errors import BackendBroken, BadInput, DecodeError, DispatchError, NotAllowed, PolicyError, RecordConflict, SubmitRefused, UnknownBackend, UnknownJob, Unreachable
    from dispatch.folding import fold
    from dispatch.job import Job
    from dispatch.plugin import hookimpl
    from dispatch.policy import Plan, RecoveryPolicy, Rule
    from dispatch.projection import project
    from dispatch.spec import JobSpec, Resources
    from dispatch.status import Status
