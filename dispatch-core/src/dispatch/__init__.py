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
    "Launcher": "dispatch.enums",
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

__all__ = [
    "Action",
    "Backend",
    "BackendBroken",
    "BadInput",
    "Capability",
    "Cause",
    "CauseKind",
    "Declarations",
    "DecodeError",
    "Discovery",
    "DispatchError",
    "Enforcer",
    "Execution",
    "Job",
    "JobSpec",
    "Launcher",
    "Level",
    "NotAllowed",
    "ObjectView",
    "Phase",
    "Plan",
    "PolicyError",
    "Provenance",
    "RecordConflict",
    "RecoveryPolicy",
    "Registry",
    "Resolution",
    "Resources",
    "Rule",
    "State",
    "Status",
    "SubmitRefused",
    "UnknownBackend",
    "UnknownJob",
    "Unreachable",
    "decide",
    "fold",
    "hookimpl",
    "project",
    "root_cause",
]


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
    from dispatch.backends import Backend as Backend
    from dispatch.backends import Registry as Registry
    from dispatch.cause import Cause as Cause
    from dispatch.cause import root_cause as root_cause
    from dispatch.decisions import decide as decide
    from dispatch.declarations import Declarations as Declarations
    from dispatch.discovery import (
        Discovery as Discovery,
    )
    from dispatch.discovery import (
        Execution as Execution,
    )
    from dispatch.discovery import (
        ObjectView as ObjectView,
    )
    from dispatch.enums import (
        Action as Action,
    )
    from dispatch.enums import (
        Capability as Capability,
    )
    from dispatch.enums import (
        CauseKind as CauseKind,
    )
    from dispatch.enums import (
        Enforcer as Enforcer,
    )
    from dispatch.enums import (
        Launcher as Launcher,
    )
    from dispatch.enums import (
        Level as Level,
    )
    from dispatch.enums import (
        Phase as Phase,
    )
    from dispatch.enums import (
        Provenance as Provenance,
    )
    from dispatch.enums import (
        Resolution as Resolution,
    )
    from dispatch.enums import (
        State as State,
    )
    from dispatch.errors import (
        BackendBroken as BackendBroken,
    )
    from dispatch.errors import (
        BadInput as BadInput,
    )
    from dispatch.errors import (
        DecodeError as DecodeError,
    )
    from dispatch.errors import (
        DispatchError as DispatchError,
    )
    from dispatch.errors import (
        NotAllowed as NotAllowed,
    )
    from dispatch.errors import (
        PolicyError as PolicyError,
    )
    from dispatch.errors import (
        RecordConflict as RecordConflict,
    )
    from dispatch.errors import (
        SubmitRefused as SubmitRefused,
    )
    from dispatch.errors import (
        UnknownBackend as UnknownBackend,
    )
    from dispatch.errors import (
        UnknownJob as UnknownJob,
    )
    from dispatch.errors import (
        Unreachable as Unreachable,
    )
    from dispatch.folding import fold as fold
    from dispatch.job import Job as Job
    from dispatch.plugin import hookimpl as hookimpl
    from dispatch.policy import Plan as Plan
    from dispatch.policy import RecoveryPolicy as RecoveryPolicy
    from dispatch.policy import Rule as Rule
    from dispatch.projection import project as project
    from dispatch.spec import JobSpec as JobSpec
    from dispatch.spec import Resources as Resources
    from dispatch.status import Status as Status
