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
    "Action": "dispatch.model.enums",
    "Append": "dispatch.core.effects",
    "ArrayMember": "dispatch.model.spec",
    "Backend": "dispatch.backends",
    "BackendBroken": "dispatch.model.errors",
    "BadInput": "dispatch.model.errors",
    "Binding": "dispatch.core.policy",
    "Capability": "dispatch.model.enums",
    "Cause": "dispatch.core.cause",
    "CauseKind": "dispatch.model.enums",
    "Client": "dispatch.client",
    "Declarations": "dispatch.model.declarations",
    "DecodeError": "dispatch.model.errors",
    "Discovery": "dispatch.model.discovery",
    "DispatchError": "dispatch.model.errors",
    "Effect": "dispatch.core.effects",
    "EndWarning": "dispatch.core.warning",
    "Enforcer": "dispatch.model.enums",
    "Escalation": "dispatch.core.job",
    "Event": "dispatch.model.events",
    "Execution": "dispatch.model.discovery",
    "FunctionError": "dispatch.functions",
    "FunctionHandle": "dispatch.functions",
    "FunctionSweep": "dispatch.functions",
    "Group": "dispatch.model.events",
    "Hold": "dispatch.core.job",
    "Identity": "dispatch.model.events",
    "Job": "dispatch.core.job",
    "JobHandle": "dispatch.client",
    "JobSpec": "dispatch.model.spec",
    "Launcher": "dispatch.model.enums",
    "Level": "dispatch.model.enums",
    "LogChunk": "dispatch.logs",
    "LogSelection": "dispatch.model.selection",
    "NotAllowed": "dispatch.model.errors",
    "ObjectView": "dispatch.model.discovery",
    "OpenGate": "dispatch.core.effects",
    "Outcome": "dispatch.core.job",
    "Phase": "dispatch.model.enums",
    "Plan": "dispatch.core.policy",
    "Prepared": "dispatch.model.prepared",
    "PolicyError": "dispatch.model.errors",
    "Provenance": "dispatch.model.enums",
    "RecordConflict": "dispatch.model.errors",
    "RecoveryPolicy": "dispatch.core.policy",
    "RemoteError": "dispatch.functions",
    "Registry": "dispatch.backends",
    "Resolution": "dispatch.model.enums",
    "Resources": "dispatch.model.spec",
    "Rule": "dispatch.core.policy",
    "State": "dispatch.model.enums",
    "Status": "dispatch.core.status",
    "Stream": "dispatch.model.enums",
    "Stop": "dispatch.core.effects",
    "Submission": "dispatch.core.job",
    "SubmissionStatus": "dispatch.core.status",
    "Submit": "dispatch.core.effects",
    "SubmitRefused": "dispatch.model.errors",
    "Supervision": "dispatch.model.supervision",
    "Sweep": "dispatch.client",
    "Transition": "dispatch.core.job",
    "UnknownBackend": "dispatch.model.errors",
    "UnknownJob": "dispatch.model.errors",
    "Unreachable": "dispatch.model.errors",
    "Unreached": "dispatch.core.status",
    "decide": "dispatch.core.decisions",
    "fold": "dispatch.core.folding",
    "hookimpl": "dispatch.plugin",
    "project": "dispatch.core.projection",
    "resumed": "dispatch.functions",
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
    from dispatch.client import Sweep as Sweep
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
    from dispatch.core.status import Unreached as Unreached
    from dispatch.core.warning import EndWarning as EndWarning
    from dispatch.functions import FunctionError as FunctionError
    from dispatch.functions import FunctionHandle as FunctionHandle
    from dispatch.functions import FunctionSweep as FunctionSweep
    from dispatch.functions import RemoteError as RemoteError
    from dispatch.functions import resumed as resumed
    from dispatch.logs import LogChunk as LogChunk
    from dispatch.model.declarations import Declarations as Declarations
    from dispatch.model.discovery import Discovery as Discovery
    from dispatch.model.discovery import Execution as Execution
    from dispatch.model.discovery import ObjectView as ObjectView
    from dispatch.model.enums import Action as Action
    from dispatch.model.enums import Capability as Capability
    from dispatch.model.enums import CauseKind as CauseKind
    from dispatch.model.enums import Enforcer as Enforcer
    from dispatch.model.enums import Launcher as Launcher
    from dispatch.model.enums import Level as Level
    from dispatch.model.enums import Phase as Phase
    from dispatch.model.enums import Provenance as Provenance
    from dispatch.model.enums import Resolution as Resolution
    from dispatch.model.enums import State as State
    from dispatch.model.enums import Stream as Stream
    from dispatch.model.errors import BackendBroken as BackendBroken
    from dispatch.model.errors import BadInput as BadInput
    from dispatch.model.errors import DecodeError as DecodeError
    from dispatch.model.errors import DispatchError as DispatchError
    from dispatch.model.errors import NotAllowed as NotAllowed
    from dispatch.model.errors import PolicyError as PolicyError
    from dispatch.model.errors import RecordConflict as RecordConflict
    from dispatch.model.errors import SubmitRefused as SubmitRefused
    from dispatch.model.errors import UnknownBackend as UnknownBackend
    from dispatch.model.errors import UnknownJob as UnknownJob
    from dispatch.model.errors import Unreachable as Unreachable
    from dispatch.model.events import Event as Event
    from dispatch.model.events import Group as Group
    from dispatch.model.events import Identity as Identity
    from dispatch.model.prepared import Prepared as Prepared
    from dispatch.model.selection import LogSelection as LogSelection
    from dispatch.model.spec import ArrayMember as ArrayMember
    from dispatch.model.spec import JobSpec as JobSpec
    from dispatch.model.spec import Resources as Resources
    from dispatch.model.supervision import Supervision as Supervision
    from dispatch.plugin import hookimpl as hookimpl
