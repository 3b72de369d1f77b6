"""One hierarchy of errors; the CLI maps each class to an exit code in ``cli/exit_codes.py``.

Errors are translated at every boundary (``raise ... from e``) so a caller never has to
know which driver, client or scheduler command was underneath.
"""

from __future__ import annotations

from typing import Any


class DispatchError(Exception):
    """Base of every error dispatch raises on purpose."""


class BadInput(DispatchError, ValueError):
    """Something a user gave us is wrong; the message says what and where (S-36)."""


class PolicyError(BadInput):
    """A recovery policy that ``RecoveryPolicy.validate`` refuses (S-8)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid recovery policy:\n" + "\n".join(f"  - {p}" for p in problems))


class DecodeError(DispatchError, ValueError):
    """Encoded data (a record row, a JSON document) names something this build does not know
    (S-6). The message names the field and the value; nothing is guessed."""

    def __init__(self, message: str, *, field: str = "", value: Any = None) -> None:
        self.field = field
        self.value = value
        super().__init__(message)


class Unreachable(DispatchError, ConnectionError):
    """The scheduler (or record store) could not be reached. Retryable; never a state (S-5)."""


class NoSpace(Unreachable):
    """The file system holding the record or a backend's files is full. Retryable like
    any unreachable store: the command, or the supervisor's next tick, goes on once
    space is freed; nothing half-written is kept."""

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        super().__init__(f"no space left on {where} ({detail}): free space and run again")


def no_space(exc: BaseException) -> bool:
    """Whether an OS error is a full file system (or a quota)."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class SubmitRefused(DispatchError):
    """The scheduler was reached and refused the submission; ``detail`` is its words
    verbatim. The core records it as an ending with cause ``launch-failed``."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class UnknownBackend(BadInput):
    """No installed plugin has this name."""


class BackendBroken(DispatchError):
    """An installed plugin failed to load or does not match the hook specs (S-31)."""


class BackendFailed(BackendBroken):
    """A backend's hook raised an exception its spec does not document, or returned what
    its spec does not allow (S-50): a bug in that backend, named with the hook. The
    supervisor reports it and goes on with every other backend and job."""

    def __init__(self, message: str, *, backend: str, hook: str) -> None:
        self.backend = backend
        self.hook = hook
        super().__init__(message)


class UnknownJob(BadInput):
    """No record has this job id."""


class RecordConflict(DispatchError):
    """An append named a version that is no longer the latest (S-33), or a stale lease."""


class NotAllowed(BadInput):
    """The job is not in a state where this request makes sense (e.g. resubmit a running job)."""
