"""Waiting in tests on a condition, never for a fixed time.

A test that sleeps a fixed time and then checks passes on an idle machine and fails on a
loaded one. :func:`eventually` asks again until the answer is truthy or a generous deadline
passes, and then fails saying what it waited for and what it last saw::

    from dispatch_testing.waiting import eventually

    eventually(lambda: path.exists(), what=f"{path} is written")
    views = eventually(lambda: discover(job), until=lambda v: len(v) == 1, what="one object")

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
    until: Callable[[T], object] | None = None,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    ignoring: tuple[type[Exception], ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``predicate`` until it returns a truthy value (or one ``until`` accepts), and
    return that value.

    :param what: the condition in words, for the failure message.
    :param until: when given, the value is accepted when ``until(value)`` is truthy (so a
        failure shows the value itself, for example the objects last discovered).
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
            if until(value) if until is not None else value:
                return value
            last = f"returned {value!r}"
        if clock() >= deadline:
            raise NotYet(f"not met in {timeout:g}s: {what}; last {last}")
        sleep(interval)
