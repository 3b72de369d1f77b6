"""Every exit code of ``dispatch``, in one place (documented in docs/cli.md).

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      ok; for ``--wait`` / ``watch``: the job succeeded
1      for ``--wait`` / ``watch``: the job failed
2      bad input (policy, option, unknown job or backend, a request the state refuses)
3      the scheduler (or the record store's server) could not be reached; retry later
4      record conflict, or a record that does not decode
5      for ``--wait`` / ``watch``: the job was cancelled
6      for ``--wait`` / ``watch``: the job is held and needs a person
7      a backend is installed but broken (its plugin failed to load or misbehaved)
70     a bug in dispatch or a backend: the message names it (DISPATCH_DEBUG=1: traceback)
130    interrupted (Ctrl-C); the job goes on
141    the reader of the output went away (``dispatch logs JOB | head``)
=====  ==========================================================================
"""

from __future__ import annotations

from dispatch.model.enums import State
from dispatch.model.errors import (
    BackendBroken,
    BadInput,
    DecodeError,
    DispatchError,
    RecordConflict,
    SubmitRefused,
    Unreachable,
    no_space,
)

OK = 0
FAILED = 1
BAD_INPUT = 2
UNREACHABLE = 3
RECORD = 4
CANCELLED = 5
HELD = 6
BROKEN = 7
INTERNAL = 70
INTERRUPTED = 130
BROKEN_PIPE = 141

_BY_ERROR: tuple[tuple[type[BaseException], int], ...] = (
    (Unreachable, UNREACHABLE),
    (RecordConflict, RECORD),
    (DecodeError, RECORD),
    (BackendBroken, BROKEN),
    (BadInput, BAD_INPUT),
    (SubmitRefused, BAD_INPUT),
)

_BY_STATE = {
    State.SUCCEEDED: OK,
    State.FAILED: FAILED,
    State.CANCELLED: CANCELLED,
    State.HELD: HELD,
}


def for_error(exc: BaseException) -> int:
    """The code of any exception: a dispatch error by its class (a class added later
    falls back to its nearest documented base), an OS error as "could not be reached",
    anything else as a bug."""
    for cls, code in _BY_ERROR:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, DispatchError):
        return BAD_INPUT
    if isinstance(exc, OSError):
        return UNREACHABLE
    return INTERNAL


def message(exc: BaseException) -> str:
    """What the user reads: dispatch's own words, or the bug named with its type."""
    if isinstance(exc, DispatchError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        if no_space(exc):
            return f"no space left on{where or ' the device'}: free space and run again"
        return f"system error{where}: {exc.strerror or exc}"
    return (
        f"internal error (a bug in dispatch or a backend; please report it): "
        f"{type(exc).__name__}: {exc}; run with DISPATCH_DEBUG=1 for the traceback"
    )


def for_state(state: State) -> int:
    return _BY_STATE.get(state, OK)
