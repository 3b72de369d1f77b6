"""A scheduler that flaps under a supervisor: the campaign's driver and its checks (S-5).

Jobs recorded with a policy that resubmits on every ending it may (``unknown`` is held:
nobody can say a resubmit would mend it) run under one real ``dispatch supervise``
process while the scheduler misbehaves in turns. While it misbehaves, ``dispatch
status`` of a job not ended must show what the record knows, say that the scheduler is
unreachable (its words, since when) and exit 3, appending nothing; once it is well, the
supervisor must reach it again.

Every job must end as it would have without the flaps: succeeded, one submission, and a
record with nothing but its creation, its submission and its outcome, its events
numbered without a gap. Each tick the supervisor prints (``--json``) is timed: wall from
its start to its line, CPU of the supervisor and the commands it ran between two lines;
the worst ticks in each kind of outage and while the scheduler was well are reported,
never asserted.

:class:`Campaign` is the driver; a scheduler's campaign subclasses it with what is its
own: how it records its jobs, how it makes the scheduler misbehave and well again, and
what else it checks of each job at the scheduler.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

__all__ = ["DISPATCH", "PLAIN", "POLICY", "Campaign", "Flap", "Plan", "Result", "Tick"]

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
#: the events of a job that ran once and succeeded: anything else changed its story
PLAIN = {"job-created", "submission-requested", "submission-created", "outcome-committed"}
POLICY = """\
[[rule]]
on = ["preempted", "node-lost", "out-of-memory", "time-limit", "non-zero-exit",
      "launch-failed", "no-capacity"]
action = "resubmit"
budget = 3

[[rule]]
on = ["unknown"]
action = "hold"
"""
_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


class Plan(Protocol):
    """What every campaign's plan says: ``flaps`` outages spread over ``span`` seconds,
    each at least ``down`` seconds, under ``jobs`` jobs; the supervisor's interval and
    lease; how long the jobs get to end after the flapping; the seed of its choices."""

    jobs: int
    flaps: int
    span: float
    down: float
    interval: float
    lease: float
    settle: float
    seed: int


PlanT = TypeVar("PlanT", bound=Plan)
#: what a campaign keeps of each job it recorded (its nodes, its running time...)
JobT = TypeVar("JobT")


@dataclass
class Tick:
    at: datetime
    done: datetime
    cpu: float
    unreachable: dict[str, str]
    appended: int

    @property
    def wall(self) -> float:
        return (self.done - self.at).total_seconds()


@dataclass
class Flap:
    mode: str
    down: datetime
    up: datetime | None = None
    #: the supervisor went on ticking and reached the scheduler again once it was well
    recovered: bool = False
    status_ok: bool = False
    status_kept_record: bool = False
    status_words: str = ""
    #: every job had ended: the outage found nothing to ask about
    idle: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass
class Result:
    rows: list[dict[str, object]]
    ticks: dict[str, dict[str, float]]
    details: dict[str, Any]

    @property
    def broke(self) -> int:
        return sum(int(str(r["broke"])) for r in self.rows)

    def table(self) -> str:
        width = max(len(str(r["what"])) for r in self.rows)
        lines = [f"{'':{width}}  {'tried':>6}  {'survived':>8}  {'broke':>5}"]
        lines += [
            f"{r['what']!s:{width}}  {r['tried']:>6}  {r['survived']:>8}  {r['broke']:>5}"
            for r in self.rows
        ]
        lines.append("")
        lines.append(f"{'worst tick':{width}}  {'ticks':>6}  {'wall s':>8}  {'CPU s':>5}")
        for when, t in self.ticks.items():
            lines.append(
                f"{'while ' + when:{width}}  {int(t['ticks']):>6}  {t['wall']:>8.1f}  "
                f"{t['cpu']:>5.2f}"
            )
        return "\n".join(lines)


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its waited-for children (the commands it ran)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / _TICKS_PER_SECOND


def worst(ticks: list[Tick]) -> dict[str, float]:
    """How many ticks, and the longest wall and CPU of one of them."""
    return {
        "ticks": len(ticks),
        "wall": max((t.wall for t in ticks), default=0.0),
        "cpu": max((t.cpu for t in ticks), default=0.0),
    }


def row(what: str, tried: int, broke: int) -> dict[str, object]:
    """One line of the campaign's table."""
    return {"what": what, "tried": tried, "survived": tried - broke, "broke": broke}


class Campaign(ABC, Generic[PlanT, JobT]):
    """One campaign: records the jobs, starts ``dispatch supervise --json`` in a directory
    of its own, makes the scheduler misbehave in turns and checks each outage, waits for
    the jobs to end and judges them."""

    #: the backend the jobs are recorded for, as the supervisor names it when unreachable
    backend: ClassVar[str]
    #: each way the scheduler misbehaves (in the order they take turns): its table row
    flap_labels: ClassVar[dict[str, str]]
    #: the worst-tick rows: the ticks during each way, in the table's order
    tick_names: ClassVar[dict[str, str]]
    #: the worst-tick row of the ticks during no outage
    well: ClassVar[str]
    #: the problems said when no tick ended in an outage, or none reached the scheduler after
    went_down: ClassVar[str]
    not_reached: ClassVar[str]

    def __init__(self, plan: PlanT, work: Path, say: Callable[[str], object] | None) -> None:
        self.plan = plan
        self.say: Callable[[str], object] = say or (lambda text: None)
        self.rng = random.Random(plan.seed)
        self.work = work
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
        self.env |= {
            "DISPATCH_STORE": f"sqlite:///{self.work / 'record.db'}",
            "XDG_STATE_HOME": str(self.work / "state"),
            "XDG_CONFIG_HOME": str(self.work / "config"),
        }
        self.jobs: dict[str, JobT] = {}
        self.ticks: list[Tick] = []
        self.flaps: list[Flap] = []
        self.supervisor: subprocess.Popen[str] | None = None
        #: whether the supervisor was still running when the campaign stopped it
        self.alive: bool | None = None
        self._lock = threading.Lock()
        self._tick_seen = threading.Condition(self._lock)

    @staticmethod
    def workdir(prefix: str, parent: str | None = None) -> Path:
        """A new directory for a campaign's record, logs and output."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))

    # ------------------------------------------------------------------ its own
    @abstractmethod
    def record(self) -> None:
        """Record the jobs (none submitted: the supervisor makes every submission)."""

    @abstractmethod
    def misbehave(self, mode: str) -> None:
        """Make the scheduler misbehave in this way."""

    @abstractmethod
    def behave(self, mode: str) -> None:
        """Make the scheduler well again after it misbehaved in this way."""

    @abstractmethod
    def judge(self, object_ids: dict[str, str | None]) -> list[tuple[str, str, list[str]]]:
        """What the campaign checks of each job at the scheduler, given the object each
        job's one recorded submission created (None without exactly one): for each check,
        its key in the details, its row in the table and the jobs that failed it."""

    def start_cluster(self) -> None:
        """Start what runs beside the supervisor (nothing unless the campaign says)."""

    def tend(self) -> None:
        """Once the supervisor reached the scheduler again after an outage, and while the
        jobs settle: mend what the outage left behind at the scheduler (nothing unless
        the campaign says)."""

    def pause_settling(self) -> None:
        """Between two looks at whether every job has ended: until a tick, at most 2 s."""
        with self._tick_seen:
            self._tick_seen.wait(2.0)

    def own_details(self) -> dict[str, Any]:
        """What else the campaign reports in its details."""
        return {}

    def write_policy(self) -> Path:
        """The jobs' policy, written in the campaign's directory."""
        policy = self.work / "policy.toml"
        policy.write_text(POLICY)
        return policy

    # ------------------------------------------------------------------ pieces
    def _store(self) -> Any:
        from dispatch.store import open_store

        return open_store(self.env["DISPATCH_STORE"])

    def start_supervisor(self) -> None:
        p = self.plan
        argv = [DISPATCH, "supervise", "--interval", f"{p.interval:g}", "--lease"]
        self.supervisor = subprocess.Popen(
            [*argv, f"{p.lease:g}", "--json"],
            env=self.env,
            cwd=self.work,
            stdout=subprocess.PIPE,
            stderr=open(self.work / "supervisor.log", "w"),
            text=True,
        )
        threading.Thread(target=self._read_ticks, daemon=True).start()

    def _read_ticks(self) -> None:
        proc = self.supervisor
        assert proc is not None and proc.stdout is not None
        last = cpu_seconds(proc.pid)
        for line in proc.stdout:
            done = datetime.now(UTC)
            now = cpu_seconds(proc.pid)
            try:
                report = json.loads(line)
            except ValueError:
                continue
            tick = Tick(
                at=datetime.fromisoformat(report["at"]),
                done=done,
                cpu=now - last,
                unreachable=dict(report.get("unreachable") or {}),
                appended=int(report.get("appended") or 0),
            )
            last = now
            with self._tick_seen:
                self.ticks.append(tick)
                self._tick_seen.notify_all()

    def _wait_tick(self, started_after: datetime, timeout: float) -> Tick | None:
        """The first tick that started after ``started_after``, once it has ended."""
        deadline = time.monotonic() + timeout
        with self._tick_seen:
            while True:
                for tick in self.ticks:
                    if tick.at > started_after:
                        return tick
                left = deadline - time.monotonic()
                if left <= 0 or (
                    self.supervisor is not None and self.supervisor.poll() is not None
                ):
                    return None
                self._tick_seen.wait(min(left, 1.0))

    def _wait_reaching_tick(self, after: datetime, timeout: float) -> Tick | None:
        """The first tick after ``after`` that asked the scheduler and got an answer."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tick = self._wait_tick(after, deadline - time.monotonic())
            if tick is None:
                return None
            if self.backend not in tick.unreachable:
                return tick
            after = tick.at
        return None

    def _events(self) -> dict[str, list[Any]]:
        store = self._store()
        try:
            return {job_id: list(store.read(job_id)) for job_id in self.jobs}
        finally:
            store.close()

    def _status_while_down(self, flap: Flap) -> None:
        """``dispatch status`` of a job not ended: the record's view, the scheduler's words
        and exit 3, nothing appended. Runs once the supervisor's appends have stopped (a
        tick that started after the scheduler began to misbehave has ended)."""
        before = self._events()
        candidates = [
            j
            for j, events in before.items()
            if not any(e.type == "outcome-committed" for e in events)
        ]
        if not candidates:
            flap.idle = True
            return
        job_id = self.rng.choice(sorted(candidates))
        done = subprocess.run(
            [DISPATCH, "status", job_id, "--json", "--timeout", "60"],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            timeout=300,
            check=False,
        )
        after = self._events()
        flap.status_kept_record = after == before
        if not flap.status_kept_record:
            changed = [j for j in after if after[j] != before.get(j)]
            flap.problems.append(f"the record changed while down: {changed}")
        try:
            shown = json.loads(done.stdout)
        except ValueError:
            flap.problems.append(f"status {job_id} exit {done.returncode}: {done.stderr[-300:]}")
            return
        away = shown.get("unreachable") or {}
        recorded = [e.object_id for e in before[job_id] if e.type == "submission-created"]
        shown_ids = [s.get("object_id") for s in shown.get("submissions", [])]
        flap.status_words = str(away.get("words", ""))
        checks = {
            "exit 3": done.returncode == 3,
            "unreachable with words": bool(away.get("words"))
            and away.get("backend") == self.backend,
            "since when": bool(away.get("since")),
            "the job shown": shown.get("job_id") == job_id and bool(shown.get("state")),
            "its submissions as recorded": shown_ids == recorded,
        }
        flap.problems += [f"status {job_id}: not {what}" for what, ok in checks.items() if not ok]
        flap.status_ok = all(checks.values())

    def flap(self, mode: str) -> Flap:
        self.misbehave(mode)
        flap = Flap(mode=mode, down=datetime.now(UTC))
        self.flaps.append(flap)
        began = time.monotonic()
        try:
            tick = self._wait_tick(flap.down, timeout=180)
            if tick is None:
                flap.problems.append(f"no tick ended after {self.went_down}")
            else:
                self._status_while_down(flap)
                if not flap.idle and self.backend not in tick.unreachable:
                    flap.problems.append(
                        f"a tick while down did not say {self.backend} is unreachable"
                    )
            left = self.plan.down - (time.monotonic() - began)
            if left > 0:
                time.sleep(left)
        finally:
            self.behave(mode)
            flap.up = datetime.now(UTC)
        return flap

    def _check_recovered(self, flap: Flap) -> None:
        assert flap.up is not None
        # the supervisor backs off up to 300 s; generous on a loaded machine
        tick = self._wait_reaching_tick(flap.up, timeout=420)
        flap.recovered = tick is not None
        self.tend()
        if tick is None:
            flap.problems.append(self.not_reached)

    # ------------------------------------------------------------------ the campaign
    def run(self) -> Result:
        p = self.plan
        self.record()
        self.say(f"recorded {len(self.jobs)} jobs in {self.work}")
        self.start_cluster()
        self.start_supervisor()
        started = time.monotonic()
        period = p.span / max(p.flaps, 1)
        modes = tuple(self.flap_labels)
        try:
            if self._wait_tick(datetime(1970, 1, 1, tzinfo=UTC), timeout=180) is None:
                raise RuntimeError(f"the supervisor never ticked: {self.work}/supervisor.log")
            for n in range(p.flaps):
                gap = started + n * period + self.rng.uniform(0, period / 3) - time.monotonic()
                if gap > 0:
                    time.sleep(gap)
                flap = self.flap(modes[n % len(modes)])
                self._check_recovered(flap)
                self.say(
                    f"flap {n + 1}/{p.flaps} {flap.mode}: down "
                    f"{(flap.up - flap.down).total_seconds() if flap.up else 0:.0f} s; "
                    f"status said {flap.status_words!r}; problems {flap.problems}"
                )
            flapped = time.monotonic() - started
            ended = self._settle(p.settle)
        finally:
            self._stop_supervisor()
        return self._result(flapped, ended)

    def _settle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self._events()
            if all(any(e.type == "outcome-committed" for e in ev) for ev in events.values()):
                return True
            if self.supervisor is not None and self.supervisor.poll() is not None:
                return False
            self.tend()
            self.pause_settling()
        return False

    def _stop_supervisor(self) -> None:
        proc = self.supervisor
        if proc is None:
            return
        if self.alive is None:
            self.alive = proc.poll() is None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(60)

    def _result(self, flapped: float, ended: bool) -> Result:
        events = self._events()
        bad: dict[str, list[str]] = {k: [] for k in ("recovered", "cause", "lost", "ended")}
        adopted = 0
        object_ids: dict[str, str | None] = {}
        for job_id in self.jobs:
            ev = events[job_id]
            types = [e.type for e in ev]
            created = [e for e in ev if e.type == "submission-created"]
            adopted += sum(1 for e in created if e.adopted)
            outcome = [e for e in ev if e.type == "outcome-committed"]
            if "recovery-started" in types:
                bad["recovered"].append(job_id)
            if set(types) - PLAIN or any(o.cause.kind.value != "none" for o in outcome):
                bad["cause"].append(f"{job_id}: {[t for t in types if t not in PLAIN]}")
            if [e.seq for e in ev] != list(range(1, len(ev) + 1)) or types.count(
                "job-created"
            ) != 1:
                bad["lost"].append(f"{job_id}: seqs {[e.seq for e in ev]}")
            if len(outcome) != 1 or outcome[0].state.value != "succeeded" or len(created) != 1:
                bad["ended"].append(f"{job_id}: {types}")
            object_ids[job_id] = created[0].object_id if len(created) == 1 else None
        own = self.judge(object_ids)
        bad |= {key: failed for key, _, failed in own}
        n = len(self.jobs)
        rows = []
        for mode, label in self.flap_labels.items():
            mine = [f for f in self.flaps if f.mode == mode]
            rows.append(row(f"flap: {label}", len(mine), sum(1 for f in mine if not f.recovered)))
        asked = [f for f in self.flaps if not f.idle]
        rows += [
            row(
                "status while down: record, words, exit 3",
                len(asked),
                sum(1 for f in asked if not f.status_ok),
            ),
            row(
                "status while down: nothing appended",
                len(asked),
                sum(1 for f in asked if not f.status_kept_record),
            ),
            row("jobs: no recovery", n, len(bad["recovered"])),
            row("jobs: no cause changed", n, len(bad["cause"])),
            row("jobs: no event lost", n, len(bad["lost"])),
            row("jobs: succeeded, one submission", n, len(bad["ended"])),
            *(row(f"jobs: {label}", n, len(failed)) for _, label, failed in own),
            row("supervisor: alive throughout", 1, 0 if self.alive else 1),
        ]
        spans = [(f.down, f.up or datetime.now(UTC)) for f in self.flaps]

        def during(tick: Tick, mode: str | None) -> bool:
            return any(
                tick.at < up and tick.done > down
                for f, (down, up) in zip(self.flaps, spans, strict=True)
                if mode is None or f.mode == mode
            )

        ticks = {
            name: worst([t for t in self.ticks if during(t, mode)])
            for mode, name in self.tick_names.items()
        }
        ticks[self.well] = worst([t for t in self.ticks if not during(t, None)])
        details = {
            "flapping s": round(flapped, 1),
            "jobs ended in time": ended,
            "adopted submissions": adopted,
            "outages after every job ended": sum(1 for f in self.flaps if f.idle),
            **self.own_details(),
            "status words": sorted({f.status_words for f in self.flaps}),
            "problems": [p for f in self.flaps for p in f.problems][:10],
            **{k: v[:5] for k, v in bad.items() if v},
            "work": str(self.work),
        }
        return Result(rows=rows, ticks=ticks, details=details)

    def remove(self) -> None:
        """Remove the campaign's directory (its record, logs and job output)."""
        shutil.rmtree(self.work, ignore_errors=True)
