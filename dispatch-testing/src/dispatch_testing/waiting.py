"""Waiting in tests on a condition, never for a fixed time.

A test that sleeps a fixed time and then checks passes on an idle machine and fails on a
loaded one. :func:`eventually` asks again until the answer is truthy or a generous deadline
passes, and then fails saying what it waited for and what it last saw::

    from dispatch_testing.waiting import eventually

    view = eventually(lambda: job_view(job) if ended(job) else None, what=f"{job} ends")

The clock and the sleep can be injected, so the helper itself is tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["NotYet", "eventually"]

T = TypeVar("T")

#: Seconds :func:`eventually` waits unless told: long enough for a loaded machine.
TIMEOUT = 30.0
#: Seconds between two questions.
INTERVAL = 0.05


class NotYet(AssertionError):
    """The condition was not met in time; the message says what and what was last seen."""


def eventually(
    predicate: Callable[[], T],
    *,
    what: str,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    ignoring: tuple[type[Exception], ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    :param what: the condition in words, for the failure message.
    :param timeout: seconds before giving up with :class:`NotYet` (an AssertionError, so
        pytest reports a failure), which names ``what`` and the last value returned.
    :param interval: seconds between calls.
    :param ignoring: exceptions that mean "not yet" (for example a file not written yet);
        the last one is shown on timeout. Any other exception propagates at once.
    """
    deadline = clock() + timeout
    while True:
        try:
            value = predicate()
        except ignoring as exc:
            last = f"raised {exc!r}"
        else:
            if value:
                return value
            last = f"returned {value!r}"
        if clock() >= deadline:
            raise NotYet(f"not met in {timeout:g}s: {what}; last {last}")
        sleep(interval)
