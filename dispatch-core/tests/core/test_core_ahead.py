"""A person acts on what ``status`` showed: a job shown ``held (not yet committed)`` can be
given up, resubmitted or cancelled, by making the request on the record as the plan will
commit it (``look_ahead``) and appending both in one append (S-14, S-21, S-40)."""

from __future__ import annotations

import pytest
from core_bench import World, cause, policy
from dispatch import Action, CauseKind, NotAllowed, State, fold
from dispatch.core.interventions import give_up, resubmit
from dispatch.core.projection import look_ahead
from dispatch.model.events import Event, HoldPlaced

EXIT_HOLD = ([CauseKind.NON_ZERO_EXIT], Action.HOLD, None)


def _held_not_committed() -> World:
    w = World(policy(EXIT_HOLD))
    w.tick()
    w.run_current()
    w.end_current(cause(CauseKind.NON_ZERO_EXIT, exit_code=3))
    st = w.status()
    assert (st.state, st.settled) == (State.HELD, False)  # what `dispatch status` shows
    return w


def _append(w: World, events: list[Event]) -> None:
    first = w.job.version + 1
    assert [e.seq for e in events] == list(range(first, first + len(events)))  # one append
    w.events.extend(events)


def test_the_raw_record_is_not_held_yet_so_a_request_on_it_is_refused_S14() -> None:
    w = _held_not_committed()
    with pytest.raises(NotAllowed, match="is not held"):
        give_up(w.job, actor="alice", now=w.now)


def test_give_up_on_a_hold_the_plan_will_commit_S14_S21() -> None:
    w = _held_not_committed()
    ahead = look_ahead(w.job, w.discovery(), w.now)
    assert not ahead.settled and ahead.job.hold is not None
    _append(w, [*ahead.events, *give_up(ahead.job, actor="alice", now=w.now)])
    st = w.status()
    assert (st.state, st.settled) == (State.FAILED, True)
    assert st.cause is not None and st.cause.exit_code == 3
    assert sum(isinstance(e, HoldPlaced) for e in w.events) == 1
    w.tick()  # the supervisor finds nothing left to do
    assert w.job.version == w.events[-1].seq and len(w.submitted) == 1


def test_resubmit_on_a_hold_the_plan_will_commit_S14_S21() -> None:
    w = _held_not_committed()
    ahead = look_ahead(w.job, w.discovery(), w.now)
    _append(w, [*ahead.events, *resubmit(ahead.job, actor="alice", now=w.now)])
    w.tick()
    assert [s.submission for s in w.submitted] == [1, 2]
    assert w.status().state is State.RECOVERING


def test_look_ahead_is_what_project_shows_S21_S40() -> None:
    w = _held_not_committed()
    ahead = look_ahead(w.job, w.discovery(), w.now)
    assert fold(list(ahead.events), w.job) == ahead.job
    committed = w.job
    w.tick()
    assert fold(w.events) == ahead.job  # what the supervisor committed is what was shown
    assert look_ahead(fold(w.events), w.discovery(), w.now).events == ()
    assert committed.version < ahead.job.version
