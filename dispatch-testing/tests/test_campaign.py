"""The flapping campaign's driver without a scheduler: the supervisor's ``--json`` lines
read as ticks, a job's record judged, ticks sorted by outage, the table (S-5)."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from dispatch_testing.campaign import Campaign, Flap, Result, Tick

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Plan:
    jobs: int = 2
    flaps: int = 0
    span: float = 1.0
    down: float = 0.0
    interval: float = 1.0
    lease: float = 60.0
    settle: float = 1.0
    seed: int = 1


class Fake(Campaign[Plan, int]):
    backend = "fake"
    flap_labels: ClassVar[dict[str, str]] = {"stop": "stopped", "hang": "hung"}
    tick_names: ClassVar[dict[str, str]] = {"hang": "hung", "stop": "stopped"}
    well = "up"
    went_down = "it went down"
    not_reached = "not reached again"

    def __init__(self, work: Path, events: dict[str, list[Any]]) -> None:
        super().__init__(Plan(), work, None)
        self.recorded = events
        self.jobs = dict.fromkeys(events, 1)
        self.judged: dict[str, str | None] = {}

    def record(self) -> None:
        raise AssertionError("not recorded here")

    def misbehave(self, mode: str) -> None:
        raise AssertionError("not flapped here")

    def behave(self, mode: str) -> None:
        raise AssertionError("not flapped here")

    def judge(self, object_ids: dict[str, str | None]) -> list[tuple[str, str, list[str]]]:
        self.judged = object_ids
        return [("seen", "seen at the scheduler", [j for j in object_ids if j == "bad"])]

    def _events(self) -> dict[str, list[Any]]:
        return self.recorded


def event(seq: int, type: str, **more: Any) -> SimpleNamespace:
    return SimpleNamespace(seq=seq, type=type, adopted=False, **more)


def plain(object_id: str) -> list[Any]:
    """A job that ran once and succeeded: creation, submission, outcome."""
    cause = SimpleNamespace(kind=SimpleNamespace(value="none"))
    return [
        event(1, "job-created"),
        event(2, "submission-requested"),
        event(3, "submission-created", object_id=object_id),
        event(4, "outcome-committed", cause=cause, state=SimpleNamespace(value="succeeded")),
    ]


def test_the_supervisors_json_lines_are_ticks_and_waited_for(tmp_path: Path) -> None:
    """Each JSON line is a tick (start, unreachable backends, appended); other lines are
    passed over; a wait ends at the first tick after the time asked, or at once when the
    supervisor has ended."""
    lines = [
        {"at": T0.isoformat(), "unreachable": {"fake": "refused"}, "appended": 0},
        "not json",
        {"at": (T0 + timedelta(seconds=2)).isoformat(), "appended": 3},
    ]
    script = "import json\n" + "".join(
        f"print({line!r})\n" if isinstance(line, str) else f"print(json.dumps({line!r}))\n"
        for line in lines
    )
    campaign = Fake(tmp_path, {})
    campaign.supervisor = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )
    reader = threading.Thread(target=campaign._read_ticks, daemon=True)
    reader.start()
    first = campaign._wait_tick(T0 - timedelta(seconds=1), timeout=60)
    assert first is not None and first.unreachable == {"fake": "refused"}
    reached = campaign._wait_reaching_tick(T0 - timedelta(seconds=1), timeout=60)
    assert reached is not None and reached.appended == 3 and reached.unreachable == {}
    campaign.supervisor.wait(60)
    reader.join(60)
    assert [t.at for t in campaign.ticks] == [T0, T0 + timedelta(seconds=2)]
    assert campaign._wait_tick(T0 + timedelta(seconds=2), timeout=60) is None


def test_the_record_is_judged_and_the_checks_at_the_scheduler_follow_S5(
    tmp_path: Path,
) -> None:
    """S-5: a job with a recovery, or anything beyond its creation, submission and
    outcome, breaks its row; the campaign's own checks get each job's one object and
    come after the record's rows; their failures are in the details."""
    recovered = plain("o-2")
    recovered.insert(3, event(4, "recovery-started"))
    recovered[-1].seq = 5
    campaign = Fake(tmp_path, {"good": plain("o-1"), "bad": recovered})
    campaign.alive = True
    result = campaign._result(flapped=1.0, ended=True)
    broke = {str(r["what"]): r["broke"] for r in result.rows}
    assert broke == {
        "flap: stopped": 0,
        "flap: hung": 0,
        "status while down: record, words, exit 3": 0,
        "status while down: nothing appended": 0,
        "jobs: no recovery": 1,
        "jobs: no cause changed": 1,
        "jobs: no event lost": 0,
        "jobs: succeeded, one submission": 0,
        "jobs: seen at the scheduler": 1,
        "supervisor: alive throughout": 0,
    }
    assert campaign.judged == {"good": "o-1", "bad": "o-2"}
    assert result.details["recovered"] == ["bad"] and result.details["seen"] == ["bad"]
    assert result.broke == 3


def test_ticks_are_sorted_by_the_outage_they_overlap(tmp_path: Path) -> None:
    campaign = Fake(tmp_path, {})
    campaign.alive = True
    campaign.flaps = [
        Flap(mode="stop", down=T0 + timedelta(seconds=10), up=T0 + timedelta(seconds=20)),
        Flap(mode="hang", down=T0 + timedelta(seconds=30), up=T0 + timedelta(seconds=40)),
    ]

    def tick(start: int, wall: int, cpu: float) -> Tick:
        at = T0 + timedelta(seconds=start)
        return Tick(at=at, done=at + timedelta(seconds=wall), cpu=cpu, unreachable={}, appended=0)

    campaign.ticks = [tick(0, 1, 0.1), tick(8, 5, 0.2), tick(31, 7, 0.3), tick(45, 2, 0.4)]
    result = campaign._result(flapped=1.0, ended=True)
    assert list(result.ticks) == ["hung", "stopped", "up"]
    assert result.ticks["hung"] == {"ticks": 1, "wall": 7.0, "cpu": 0.3}
    assert result.ticks["stopped"] == {"ticks": 1, "wall": 5.0, "cpu": 0.2}
    assert result.ticks["up"] == {"ticks": 2, "wall": 2.0, "cpu": 0.4}


def test_the_table_lines_up_rows_and_worst_ticks() -> None:
    result = Result(
        rows=[
            {"what": "flap: stopped", "tried": 2, "survived": 1, "broke": 1},
            {"what": "jobs: no recovery", "tried": 8, "survived": 8, "broke": 0},
        ],
        ticks={"up": {"ticks": 3.0, "wall": 1.25, "cpu": 0.5}},
        details={},
    )
    assert result.broke == 1
    assert result.table().splitlines() == [
        "                    tried  survived  broke",
        "flap: stopped           2         1      1",
        "jobs: no recovery       8         8      0",
        "",
        "worst tick          ticks    wall s  CPU s",
        "while up                3       1.2   0.50",
    ]
