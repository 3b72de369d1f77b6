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
7      a backend is installed but broken (its plugin failed to load)
=====  ==========================================================================
"""

from __future__ import annotations

from dispatch.enums import State
from dispatch.errors import (
    BackendBroken,
    BadInput,
    DecodeError,
    RecordConflict,
    Unreachable,
)

OK = 0
FAILED = 1
BAD_INPUT = 2
UNREACHABLE = 3
RECORD = 4
CANCELLED = 5
HELD = 6
BROKEN = 7

_BY_ERROR: tuple[tuple[type[BaseException], int], ...] = (
    (Unreachable, UNREACHABLE),
    (RecordConflict, RECORD),
    (DecodeError, RECORD),
    (BackendBroken, BROKEN),
    (BadInput, BAD_INPUT),
)

_BY_STATE = {
    State.SUCCEEDED: OK,
    State.FAILED: FAILED,
    State.CANCELLED: CANCELLED,
    State.HELD: HELD,
}


def for_error(exc: BaseException) -> int:
    for cls, code in _BY_ERROR:
        if isinstance(exc, cls):
            return code
    raise exc


def for_state(state: State) -> int:
    return _BY_STATE.get(state, OK)
