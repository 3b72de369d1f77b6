"""dispatch: submit training jobs, know why each stopped, recover by rules on causes."""

from dispatch.backends import Backend, Registry
from dispatch.cause import Cause, root_cause
from dispatch.declarations import Declarations
from dispatch.decide import decide
from dispatch.discovery import Discovery, Execution, ObjectView
from dispatch.enums import (
    Action,
    Capability,
    CauseKind,
    Enforcer,
    Level,
    Phase,
    Provenance,
    Resolution,
    State,
)
from dispatch.errors import (
    BackendBroken,
    BadInput,
    DecodeError,
    DispatchError,
    NotAllowed,
    PolicyError,
    RecordConflict,
    SubmitRefused,
    UnknownBackend,
    UnknownJob,
    Unreachable,
)
from dispatch.fold import fold
from dispatch.job import Job
from dispatch.plugin import hookimpl
from dispatch.policy import Plan, RecoveryPolicy, Rule
from dispatch.project import project
from dispatch.spec import JobSpec, Resources
from dispatch.status import Status

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
