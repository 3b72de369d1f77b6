"""``eventually``: asks until the answer is truthy, fails naming what and the last answer,
on an injected clock (no test here waits)."""

from __future__ import annotations

import pytest
from dispatch_testing.waiting import NotYet, eventually


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_returns_the_first_truthy_answer_after_asking_again() -> None:
    clock = Clock()
    answers = iter([None, 0, "", "ready"])
    value = eventually(
        lambda: next(answers), what="ready", interval=0.5, clock=clock, sleep=clock.sleep
    )
    assert value == "ready"
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_on_timeout_fails_with_what_and_the_last_answer() -> None:
    clock = Clock()
    count = iter(range(1000))
    with pytest.raises(NotYet, match=r"not met in 2s: the job ends; last returned False") as e:
        eventually(
            lambda: next(count) < 0,
            what="the job ends",
            timeout=2,
            interval=0.5,
            clock=clock,
            sleep=clock.sleep,
        )
    assert isinstance(e.value, AssertionError)  # pytest reports it as a failure
    assert clock.now == pytest.approx(102.0)  # asked until the deadline, not past it


def test_until_accepts_the_value_and_a_failure_shows_the_value() -> None:
    clock = Clock()
    seen = iter([(), ("a", "b"), ("a",)])
    assert eventually(
        lambda: next(seen), until=lambda v: len(v) == 1, what="one", clock=clock, sleep=clock.sleep
    ) == ("a",)
    with pytest.raises(NotYet, match=r"one object; last returned \('a', 'b'\)"):
        eventually(
            lambda: ("a", "b"),
            until=lambda v: len(v) == 1,
            what="one object",
            timeout=1,
            clock=clock,
            sleep=clock.sleep,
        )


def test_ignored_exceptions_mean_not_yet_and_the_last_one_is_shown() -> None:
    clock = Clock()

    def read() -> str:
        raise FileNotFoundError("up")

    with pytest.raises(NotYet, match=r"last raised FileNotFoundError\('up'\)"):
        eventually(
            read,
            what="the file",
            timeout=1,
            ignoring=(FileNotFoundError,),
            clock=clock,
            sleep=clock.sleep,
        )


def test_other_exceptions_propagate_at_once() -> None:
    clock = Clock()

    def broken() -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        eventually(broken, what="x", ignoring=(OSError,), clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []
