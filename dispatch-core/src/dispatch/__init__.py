"""dispatch: submit training jobs, know why each stopped, recover by rules on causes.

The names below are imported on first use (PEP 562), so ``dispatch --help`` and the
entry-point scan of a backend's light module do not pay for pydantic until needed.
``_WHERE`` is the one list of the public API: ``__all__`` is made from it, and the
``TYPE_CHECKING`` imports that give type checkers the same names are checked against it
by ``tests/core/test_core_api.py``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module that defines it
_WHERE: dict[str, str] = {
    "Action": "dispatch.enums",
    "Append": "dispatch.core.effects",
    "Backend": "dispatch.backends",
    "BackendBroken": "dispatch.errors",
    "BadInput": "dispatch.errors",
    "Binding": "dispatch.core.policy",
    "Capability": "dispatch.enums",
    "Cause": "dispatch.core.cause",
    "CauseKind": "dispatch.enums",
    "Client": "dispatch.client",
    "Declarations": "dispatch.declarations",
    "DecodeError": "dispatch.errors",
    "Discovery": "dispatch.discovery",
    "DispatchError": "dispatch.errors",
    "Effect": "dispatch.core.effects",
    "EndWarning": "dispatch.core.warning",
    "Enforcer": "dispatch.enums",
    "Escalation": "dispatch.core.job",
    "Event": "dispatch.events",
    "Execution": "dispatch.discovery",
    "Hold": "dispatch.core.job",
    "Job": "dispatch.core.job",
    "JobHandle": "dispatch.client",
    "JobSpec": "dispatch.spec",
    "Launcher": "dispatch.enums",
    "Level": "dispatch.enums",
    "LogChunk": "dispatch.logs",
    "NotAllowed": "dispatch.errors",
    "ObjectView": "dispatch.discovery",
    "OpenGate": "dispatch.core.effects",
    "Outcome": "dispatch.core.job",
    "Phase": "dispatch.enums",
    "Plan": "dispatch.core.policy",
    "PolicyError": "dispatch.errors",
    "Provenance": "dispatch.enums",
    "RecordConflict": "dispatch.errors",
    "RecoveryPolicy": "dispatch.core.policy",
    "Registry": "dispatch.backends",
    "Resolution": "dispatch.enums",
    "Resources": "dispatch.spec",
    "Rule": "dispatch.core.policy",
    "State": "dispatch.enums",
    "Status": "dispatch.core.status",
    "Stop": "dispatch.core.effects",
    "Submission": "dispatch.core.job",
    "SubmissionStatus": "dispatch.core.status",
    "Submit": "dispatch.core.effects",
    "SubmitRefused": "dispatch.errors",
    "Transition": "dispatch.core.job",
    "UnknownBackend": "dispatch.errors",
    "UnknownJob": "dispatch.errors",
    "Unreachable": "dispatch.errors",
    "decide": "dispatch.core.decisions",
    "fold": "dispatch.core.folding",
    "hookimpl": "dispatch.plugin",
    "project": "dispatch.core.projection",
    "root_cause": "dispatch.core.cause",
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
    from dispatch.backends import Backend as Backend
    from dispatch.backends import Registry as Registry
    from dispatch.client import Client as Client
    from dispatch.client import JobHandle as JobHandle
    from dispatch.core.cause import Cause as Cause
    from dispatch.core.cause import root_cause as root_cause
    from dispatch.core.decisions import decide as decide
    from dispatch.core.effects import Append as Append
    from dispatch.core.effects import Effect as Effect
    from dispatch.core.effects import OpenGate as OpenGate
    from dispatch.core.effects import Stop as Stop
    from dispatch.core.effects import Submit as Submit
    from dispatch.core.folding import fold as fold
    from dispatch.core.job import Escalation as Escalation
    from dispatch.core.job import Hold as Hold
    from dispatch.core.job import Job as Job
    from dispatch.core.job import Outcome as Outcome
    from dispatch.core.job import Submission as Submission
    from dispatch.core.job import Transition as Transition
    from dispatch.core.policy import Binding as Binding
    from dispatch.core.policy import Plan as Plan
    from dispatch.core.policy import RecoveryPolicy as RecoveryPolicy
    from dispatch.core.policy import Rule as Rule
    from dispatch.core.projection import project as project
    from dispatch.core.status import Status as Status
    from dispatch.core.status import SubmissionStatus as SubmissionStatus
    from dispatch.core.warning import EndWarning as EndWarning
    from dispatch.declarations import Declarations as Declarations
    from dispatch.discovery import Discovery as Discovery
    from dispatch.discovery import Execution as Execution
    from dispatch.discovery import ObjectView as ObjectView
    from dispatch.enums import Action as Action
    from dispatch.enums import Capability as Capability
    from dispatch.enums import CauseKind as CauseKind
    from dispatch.enums import Enforcer as Enforcer
    from dispatch.enums import Launcher as Launcher
    from dispatch.enums import Level as Level
    from dispatch.enums import Phase as Phase
    from dispatch.enums import Provenance as Provenance
    from dispatch.enums import Resolution as Resolution
    from dispatch.enums import State as State
    from dispatch.errors import BackendBroken as BackendBroken
    from dispatch.errors import BadInput as BadInput
    from dispatch.errors import DecodeError as DecodeError
    from dispatch.errors import DispatchError as DispatchError
    from dispatch.errors import NotAllowed as NotAllowed
    from dispatch.errors import PolicyError as PolicyError
    from dispatch.errors import RecordConflict as RecordConflict
    from dispatch.errors import SubmitRefused as SubmitRefused
    from dispatch.errors import UnknownBackend as UnknownBackend
    from dispatch.errors import UnknownJob as UnknownJob
    from dispatch.errors import Unreachable as Unreachable
    from dispatch.events import Event as Event
    from dispatch.logs import LogChunk as LogChunk
    from dispatch.plugin import hookimpl as hookimpl
    from dispatch.spec import JobSpec as JobSpec
    from dispatch.spec import Resources as Resources
