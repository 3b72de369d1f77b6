"""What ``status`` says about who watches a job, from the lease owner and the beats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dispatch.core.supervision import ago, supervision
from dispatch.model.supervision import SupervisorBeat

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def beat(owner: str, seconds_ago: float, **changes: object) -> SupervisorBeat:
    host, pid = owner.rsplit(":", 1)
    values: dict[str, object] = {
        "owner": owner,
        "host": host,
        "pid": int(pid),
        "started_at": NOW - timedelta(hours=1),
        "last_tick": NOW - timedelta(seconds=seconds_ago),
        "interval": 5.0,
        "lease": 90.0,
    }
    values.update(changes)
    return SupervisorBeat.model_validate(values)


def test_the_lease_holder_that_ticks_supervises_the_job():
    seen = supervision("login1:42", [beat("login2:7", 1), beat("login1:42", 4)], NOW)
    assert seen.watched and seen.holds_lease
    assert seen.message == "supervised by login1:42, last tick 4 s ago"
    assert (seen.host, seen.pid, seen.seconds_since_tick) == ("login1", 42, 4.0)


def test_a_ticking_supervisor_without_the_lease_takes_the_job_next():
    seen = supervision(None, [beat("login1:42", 2)], NOW)
    assert seen.watched and not seen.holds_lease
    assert seen.message.startswith("supervised by login1:42, last tick 2 s ago")
    assert "next tick" in seen.message


def test_a_lease_held_by_a_process_that_records_no_beats_follows_the_job_alone():
    """``watch`` or ``submit --wait``: it supervises this job, and records no beat."""
    for beats in ([], [beat("login1:42", 3)], [beat("login1:42", 3600)]):
        seen = supervision("laptop:99", beats, NOW)
        assert seen.watched and seen.holds_lease
        assert (seen.owner, seen.host, seen.pid) == ("laptop:99", "laptop", 99)
        assert seen.message.startswith("supervised by laptop:99, which follows this job alone")


def test_no_tick_within_the_lease_is_said_loudly_with_how_long():
    seen = supervision(None, [beat("login1:42", 12 * 60)], NOW)
    assert not seen.watched
    assert seen.message == (
        "no supervisor has ticked for 12 min: nothing will be recovered; run `dispatch supervise`"
    )
    assert seen.owner == "login1:42"


def test_a_silent_lease_holder_is_not_watching():
    seen = supervision("login1:42", [beat("login1:42", 91)], NOW)
    assert not seen.watched and "ticked for 91 s" in seen.message


def test_a_long_interval_stretches_the_window():
    assert supervision(None, [beat("login1:42", 500, interval=300.0)], NOW).watched


def test_a_stopped_supervisor_is_not_watching_and_is_named():
    seen = supervision(None, [beat("login1:42", 2, stopped_at=NOW - timedelta(seconds=1))], NOW)
    assert not seen.watched
    assert "login1:42 was stopped" in seen.message


def test_no_beat_at_all_says_none_ever_ticked():
    seen = supervision(None, [], NOW)
    assert not seen.watched and seen.owner is None
    assert seen.message.startswith("no supervisor has ever ticked: nothing will be recovered")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (-3, "0 s"),
        (119, "119 s"),
        (120, "2 min"),
        (7199, "119 min"),
        (7200, "2 h"),
        (48 * 3600, "2 d"),
    ],
)
def test_ages_read_as_a_person_says_them(seconds, shown):
    assert ago(seconds) == shown
