"""A scheduler that flaps under a supervisor: the campaign and its checks (S-5).

Jobs of one or two nodes, recorded with a policy that resubmits on every ending it may
(``unknown`` is held: nobody can say a resubmit would mend it), run on the test cluster
under one ``dispatch supervise`` process. Meanwhile slurmctld is stopped and started
again, or frozen with SIGSTOP and thawed, in turns (``start-slurm.sh ctld``, the selected
version's controller only). While it is down, ``dispatch status`` of a job not ended must
show what the record knows, say that the scheduler is unreachable (its words, since when)
and exit 3, appending nothing.

Every job must end as it would have without the flaps: succeeded, one submission, one
Slurm object that ran once on its nodes, and a record with nothing but its creation, its
submission and its outcome, its events numbered without a gap. Each tick the supervisor
prints (``--json``) is timed: wall from its start to its line, CPU of the supervisor and
its Slurm commands between two lines; the worst ticks while the controller was frozen,
stopped and up are reported, never asserted.

Used by ``benchmarks/slurm_flapping.py`` (the full campaign) and by the live test (a
shorter one).
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
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dispatch_slurm_testing.cluster import start_script

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
MODES = ("stop", "freeze")
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


@dataclass
class Plan:
    """What a campaign does: ``flaps`` outages spread over ``span`` seconds, each down for
    at least ``down`` seconds, under ``jobs`` jobs sleeping ``job_seconds`` each."""

    jobs: int = 40
    flaps: int = 20
    span: float = 600.0
    down: float = 12.0
    job_seconds: tuple[int, int] = (40, 150)
    interval: float = 2.0
    lease: float = 60.0
    settle: float = 1800.0
    seed: int = 1


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
    #: the supervisor went on ticking and asked Slurm again after the controller came back
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


def ctld(action: str) -> None:
    """``start-slurm.sh ctld ACTION`` on the selected version's cluster."""
    done = subprocess.run(
        ["bash", str(start_script()), "ctld", action],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"start-slurm.sh ctld {action}: {done.stdout}{done.stderr}")


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its waited-for children (its Slurm commands)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / _TICKS_PER_SECOND


def _worst(ticks: list[Tick]) -> dict[str, float]:
    return {
        "ticks": len(ticks),
        "wall": max((t.wall for t in ticks), default=0.0),
        "cpu": max((t.cpu for t in ticks), default=0.0),
    }


class Campaign:
    """One campaign on the cluster ``sinfo`` reaches (``start-slurm.sh env`` picks it)."""

    def __init__(self, plan: Plan, say: Any = None) -> None:
        self.plan = plan
        self.say = say or (lambda text: None)
        self.rng = random.Random(plan.seed)
        self.work = Path(tempfile.mkdtemp(prefix="dispatch-flapping-", dir="/var/tmp"))
        self.runs = self.work / "runs.txt"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
        self.env |= {
            "DISPATCH_STORE": f"sqlite:///{self.work / 'record.db'}",
            "XDG_STATE_HOME": str(self.work / "state"),
            "XDG_CONFIG_HOME": str(self.work / "config"),
        }
        if "DISPATCH_SLURM_DIR" in os.environ:  # which cluster start-slurm.sh acts on
            self.env["DISPATCH_SLURM_DIR"] = os.environ["DISPATCH_SLURM_DIR"]
        self.jobs: dict[str, int] = {}  # job id -> nodes
        self.ticks: list[Tick] = []
        self.flaps: list[Flap] = []
        self.supervisor: subprocess.Popen[str] | None = None
        #: nodes Slurm drained during the campaign (once per drain), resumed once the
        #: controller is back after each outage, while the jobs settle, and at the end
        self.resumed: list[str] = []
        #: whether the supervisor was still running when the campaign stopped it
        self.alive: bool | None = None
        self._lock = threading.Lock()
        self._tick_seen = threading.Condition(self._lock)

    # ------------------------------------------------------------------ pieces
    def _store(self) -> Any:
        from dispatch.store import open_store

        return open_store(self.env["DISPATCH_STORE"])

    def record(self) -> None:
        """Record the jobs (none submitted: the supervisor makes every submission)."""
        from dispatch import Client

        policy = self.work / "policy.toml"
        policy.write_text(POLICY)
        low, high = self.plan.job_seconds
        with Client(self.env["DISPATCH_STORE"]) as client:
            for i in range(self.plan.jobs):
                nodes = 1 + i % 2
                line = '"$DISPATCH_JOB_ID $DISPATCH_SUBMISSION $DISPATCH_EXECUTION $SLURM_JOB_ID'
                script = f'echo {line} $RANK" >> {self.runs}; sleep {self.rng.randint(low, high)}'
                handle = client.submit(
                    ["sh", "-c", script],
                    backend="slurm",
                    policy=str(policy),
                    start=False,
                    name=f"flap-{i}",
                    workdir=str(self.work),
                    resources={"nodes": nodes, "cpus_per_task": 4},
                    options={"output": f"{self.work}/%j.out", "partition": "low"},
                )
                self.jobs[handle.job_id] = nodes

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
        last = _cpu(proc.pid)
        for line in proc.stdout:
            done = datetime.now(UTC)
            now = _cpu(proc.pid)
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
        """The first tick after ``after`` that asked Slurm and got an answer."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tick = self._wait_tick(after, deadline - time.monotonic())
            if tick is None:
                return None
            if "slurm" not in tick.unreachable:
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
        tick that started after the controller went down has ended)."""
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
            "unreachable with words": bool(away.get("words")) and away.get("backend") == "slurm",
            "since when": bool(away.get("since")),
            "the job shown": shown.get("job_id") == job_id and bool(shown.get("state")),
            "its submissions as recorded": shown_ids == recorded,
        }
        flap.problems += [f"status {job_id}: not {what}" for what, ok in checks.items() if not ok]
        flap.status_ok = all(checks.values())

    def flap(self, mode: str) -> Flap:
        ctld("stop" if mode == "stop" else "freeze")
        flap = Flap(mode=mode, down=datetime.now(UTC))
        self.flaps.append(flap)
        began = time.monotonic()
        try:
            tick = self._wait_tick(flap.down, timeout=180)
            if tick is None:
                flap.problems.append("no tick ended after the controller went down")
            else:
                self._status_while_down(flap)
                if not flap.idle and "slurm" not in tick.unreachable:
                    flap.problems.append("a tick while down did not say slurm is unreachable")
            left = self.plan.down - (time.monotonic() - began)
            if left > 0:
                time.sleep(left)
        finally:
            ctld("start" if mode == "stop" else "thaw")
            flap.up = datetime.now(UTC)
        return flap

    def _check_recovered(self, flap: Flap) -> None:
        assert flap.up is not None
        # backed off at most 300 s; generous on a loaded machine
        tick = self._wait_reaching_tick(flap.up, timeout=420)
        flap.recovered = tick is not None
        self.resumed += self.resume_drained()
        if tick is None:
            flap.problems.append("the supervisor did not reach Slurm again after it came back")

    # ------------------------------------------------------------------ the campaign
    def run(self) -> Result:
        p = self.plan
        self.record()
        self.say(f"recorded {len(self.jobs)} jobs in {self.work}")
        self.start_supervisor()
        started = time.monotonic()
        period = p.span / max(p.flaps, 1)
        try:
            if self._wait_tick(datetime(1970, 1, 1, tzinfo=UTC), timeout=180) is None:
                raise RuntimeError(f"the supervisor never ticked: {self.work}/supervisor.log")
            for n in range(p.flaps):
                gap = started + n * period + self.rng.uniform(0, period / 3) - time.monotonic()
                if gap > 0:
                    time.sleep(gap)
                flap = self.flap(MODES[n % len(MODES)])
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
            self.resumed += self.resume_drained()
            time.sleep(5)
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

    def _slurm_objects(self) -> dict[str, list[tuple[str, str]]]:
        """Each job's Slurm jobs as accounting lists them: (id, state)."""
        names = ",".join(f"dsp.{j}" for j in self.jobs)
        done = subprocess.run(
            [
                "sacct",
                "-X",
                "-n",
                "-P",
                "-S",
                "now-1days",
                f"--name={names}",
                "-o",
                "JobID,JobName,State",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        found: dict[str, list[tuple[str, str]]] = {j: [] for j in self.jobs}
        for line in done.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].startswith("dsp."):
                found.setdefault(parts[1][4:], []).append((parts[0], parts[2]))
        return found

    def _result(self, flapped: float, ended: bool) -> Result:
        events = self._events()
        ran: dict[str, Counter[tuple[str, str, str]]] = {j: Counter() for j in self.jobs}
        if self.runs.exists():
            for line in self.runs.read_text().splitlines():
                parts = line.split()
                if len(parts) == 5 and parts[0] in ran:
                    ran[parts[0]][(parts[1], parts[2], parts[3])] += 1
        objects = self._slurm_objects()
        bad: dict[str, list[str]] = {
            k: [] for k in ("recovered", "cause", "lost", "ended", "ran", "object")
        }
        adopted = 0
        for job_id, nodes in self.jobs.items():
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
            object_id = created[0].object_id if len(created) == 1 else None
            runs = ran[job_id]
            once = ("1", "0", object_id or "?")  # submission 1, its first execution
            if list(runs) != [once] or runs[once] != nodes:
                bad["ran"].append(f"{job_id} ({object_id}): {dict(runs)}")
            if objects.get(job_id) != [(object_id, "COMPLETED")]:
                bad["object"].append(f"{job_id} ({object_id}): {objects.get(job_id)}")
        n = len(self.jobs)

        def row(what: str, tried: int, broke: int) -> dict[str, object]:
            return {"what": what, "tried": tried, "survived": tried - broke, "broke": broke}

        rows = []
        for mode in MODES:
            mine = [f for f in self.flaps if f.mode == mode]
            label = "slurmctld stopped, started" if mode == "stop" else "slurmctld frozen, thawed"
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
            row("jobs: ran once, on every node", n, len(bad["ran"])),
            row("jobs: one Slurm object, completed", n, len(bad["object"])),
            row("supervisor: alive throughout", 1, 0 if self.alive else 1),
        ]
        windows = {
            mode: [(f.down, f.up or datetime.now(UTC)) for f in self.flaps if f.mode == mode]
            for mode in MODES
        }

        def during(tick: Tick, spans: list[tuple[datetime, datetime]]) -> bool:
            return any(tick.at < up and tick.done > down for down, up in spans)

        frozen = [t for t in self.ticks if during(t, windows["freeze"])]
        stopped = [t for t in self.ticks if during(t, windows["stop"])]
        up = [t for t in self.ticks if t not in frozen and t not in stopped]
        details = {
            "flapping s": round(flapped, 1),
            "jobs ended in time": ended,
            "adopted submissions": adopted,
            "outages after every job ended": sum(1 for f in self.flaps if f.idle),
            "nodes Slurm drained (Kill task failed), resumed": len(self.resumed),
            "status words": sorted({f.status_words for f in self.flaps}),
            "problems": [p for f in self.flaps for p in f.problems][:10],
            **{k: v[:5] for k, v in bad.items() if v},
            "work": str(self.work),
        }
        ticks = {"frozen": _worst(frozen), "stopped": _worst(stopped), "up": _worst(up)}
        return Result(rows=rows, ticks=ticks, details=details)

    def cancel(self) -> None:
        """Stop the supervisor if it still runs, cancel what is left of the jobs."""
        self._stop_supervisor()
        if self.jobs:
            names = ",".join(f"dsp.{j}" for j in self.jobs)
            subprocess.run(
                ["scancel", f"--name={names}"], capture_output=True, timeout=120, check=False
            )
        self.resumed += self.resume_drained()

    def resume_drained(self) -> list[str]:
        """Resume the nodes Slurm drained with "Kill task failed" (a step that could not
        report its end to the absent controller outlived UnkillableStepTimeout), so the
        tests after this one find every node; the nodes resumed."""
        listed = subprocess.run(
            ["sinfo", "-h", "-R", "-o", "%N|%E"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        nodes = [
            line.split("|", 1)[0]
            for line in listed.stdout.splitlines()
            if line.partition("|")[2].strip() == "Kill task failed"
        ]
        for node in nodes:
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        return nodes

    def remove(self) -> None:
        """Remove the campaign's directory (its record, logs and job output)."""
        shutil.rmtree(self.work, ignore_errors=True)
