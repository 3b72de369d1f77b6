"""PostgreSQL restarts mid-tick under supervisors and CLI traffic (S-33, S-34).

A private PostgreSQL server (initdb into a temporary directory as the postgres user, its
own port; never the shared server) holds the record. Supervisor processes
(``dispatch supervise``) run local jobs while submitters (``dispatch submit --no-start``)
and readers (``dispatch status``, ``dispatch list``) keep calling; meanwhile the server is
stopped fast, stopped immediately (a crash) and has its connections dropped
(``pg_terminate_backend``), in turns. Each job appends its id and submission number to a
file when it runs, so a run twice is seen.

Afterwards, with the server up: every job a submit acknowledged is in the record once
(``lost``), no submission was made twice and no job ran twice (``duplicated``), every job
ended (``unfinished``), every supervisor is still alive and ticked again after each fault.

Prints a table: tried, survived, broke per fault kind and per check; ``--json`` also
prints the rows as one JSON line. Exit 1 when anything broke.

Usage: .venv/bin/python benchmarks/pg_restart_campaign.py [--short] [--faults 30]
       [--supervisors 4] [--submitters 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from dispatch_testing.private_postgres import PrivatePostgres

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
KINDS = ("fast", "immediate", "terminate")


class Campaign:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="dispatch-pg-campaign-"))
        self.runs = self.work / "runs.txt"
        self.pg = PrivatePostgres()
        self.dsn = self.pg.dsn
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
        self.env |= {
            "DISPATCH_STORE": self.dsn,
            "XDG_STATE_HOME": str(self.work / "state"),
            "XDG_CONFIG_HOME": str(self.work / "config"),
            "DISPATCH_LOCAL_STOP_GRACE": "1",
        }
        self.sups: list[subprocess.Popen[bytes]] = []
        self.acknowledged: list[str] = []
        self.failed_submits: list[str] = []  # exit != 0: recorded or not, never twice
        self.reads = Counter[str]()
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def dispatch(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            cwd=self.work,
            check=False,
        )

    def submitter(self, n: int) -> None:
        script = f'echo "$DISPATCH_JOB_ID $DISPATCH_SUBMISSION" >> {self.runs}'
        i = 0
        while not self.stop.is_set():
            i += 1
            out = self.dispatch(
                "submit", "--no-start", "--name", f"s{n}-{i}", "--", "sh", "-c", script
            )
            job = out.stdout.splitlines()[0].strip() if out.stdout.strip() else ""
            with self.lock:
                if out.returncode == 0 and job:
                    self.acknowledged.append(job)
                else:
                    self.failed_submits.append(job or f"(no id) {out.stderr.strip()[:200]}")
            self.stop.wait(0.05)

    def reader(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                job = random.choice(self.acknowledged) if self.acknowledged else None
            out = self.dispatch("status", job) if job else self.dispatch("list", "--json")
            self.reads["ok" if out.returncode == 0 else f"exit {out.returncode}"] += 1
            self.stop.wait(0.2)

    def beats(self) -> dict[str, datetime]:
        import psycopg

        try:
            with psycopg.connect(self.dsn, connect_timeout=5, application_name="campaign") as c:
                rows = c.execute(
                    "SELECT owner, last_tick FROM dispatch_supervisors WHERE stopped_at IS NULL"
                ).fetchall()
        except psycopg.Error:
            return {}
        return {str(owner): tick for owner, tick in rows}

    def ticked_since(self, since: datetime, owners: int, deadline: float) -> bool:
        while time.monotonic() < deadline:
            fresh = [t for t in self.beats().values() if t > since]
            if len(fresh) >= owners:
                return True
            time.sleep(0.5)
        return False

    def run(self) -> list[dict[str, object]]:
        a = self.args
        sups = [
            subprocess.Popen(
                [DISPATCH, "supervise", "--interval", "0.5", "--lease", "20"],
                env=self.env,
                cwd=self.work,
                stdout=subprocess.DEVNULL,
                stderr=open(self.work / f"supervisor-{i}.log", "w"),
            )
            for i in range(a.supervisors)
        ]
        self.sups = sups
        threads = [threading.Thread(target=self.submitter, args=(n,)) for n in range(a.submitters)]
        threads += [threading.Thread(target=self.reader) for _ in range(a.readers)]
        for t in threads:
            t.start()
        faults: dict[str, list[bool]] = {k: [] for k in KINDS}
        try:
            if not self.ticked_since(
                datetime(1970, 1, 1, tzinfo=UTC), a.supervisors, time.monotonic() + 120
            ):
                raise SystemExit(
                    "the supervisors never ticked; see their logs in " + str(self.work)
                )
            for n in range(a.faults):
                kind = KINDS[n % len(KINDS)]
                time.sleep(a.gap)
                at = datetime.now(UTC)
                if kind == "terminate":
                    self.pg.terminate()
                else:
                    self.pg.stop(kind)
                    time.sleep(a.down)
                    self.pg.start()
                alive = all(p.poll() is None for p in sups)
                faults[kind].append(
                    alive and self.ticked_since(at, a.supervisors, time.monotonic() + 120)
                )
        finally:
            self.stop.set()
            for t in threads:
                t.join(300)
        # every recorded job ends: the supervisors run them
        deadline = time.monotonic() + a.settle
        import psycopg

        with psycopg.connect(self.dsn, application_name="campaign") as conn:
            while time.monotonic() < deadline:
                (active,) = conn.execute(
                    "SELECT count(*) FROM dispatch_jobs WHERE outcome IS NULL"
                ).fetchone() or (0,)
                if active == 0:
                    break
                time.sleep(1)
            jobs = dict(conn.execute("SELECT job_id, outcome FROM dispatch_jobs").fetchall())
            per_job = Counter(
                j
                for (j,) in conn.execute(
                    "SELECT job_id FROM dispatch_events WHERE type = 'job-created'"
                ).fetchall()
            )
            created = Counter(
                (j, b)
                for j, b in conn.execute(
                    "SELECT job_id, body::json->>'submission' FROM dispatch_events "
                    "WHERE type = 'submission-created'"
                ).fetchall()
            )
        alive = sum(1 for p in sups if p.poll() is None)
        for p in sups:
            p.send_signal(signal.SIGTERM)
        for p in sups:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        runs = (
            Counter(line.strip() for line in self.runs.read_text().splitlines() if line.strip())
            if self.runs.exists()
            else Counter[str]()
        )
        ran: Counter[str] = Counter(line.split()[0] for line in runs.elements())
        lost = [j for j in self.acknowledged if j not in jobs]
        twice_recorded = [j for j, n in per_job.items() if n > 1]
        twice_submitted = [k for k, n in created.items() if n > 1]
        twice_run = [j for j, n in ran.items() if n > 1]
        unfinished = [j for j, o in jobs.items() if o is None]
        not_succeeded = [j for j, o in jobs.items() if o not in (None, "succeeded")]
        stray = [j for j in self.failed_submits if j in jobs and ran[j] > 1]
        told_failed_but_recorded = [j for j in self.failed_submits if j in jobs]
        rows: list[dict[str, object]] = [
            {"what": f"fault: {k}", "tried": len(v), "survived": sum(v), "broke": len(v) - sum(v)}
            for k, v in faults.items()
        ]
        acked = len(self.acknowledged)
        rows += [
            {
                "what": "submits acknowledged: recorded",
                "tried": acked,
                "survived": acked - len(lost),
                "broke": len(lost),
            },
            {
                "what": "jobs recorded: once",
                "tried": len(jobs),
                "survived": len(jobs) - len(twice_recorded),
                "broke": len(twice_recorded),
            },
            {
                "what": "jobs: submitted once per submission",
                "tried": len(jobs),
                "survived": len(jobs) - len(twice_submitted),
                "broke": len(twice_submitted),
            },
            {
                "what": "jobs: ran once",
                "tried": len(jobs),
                "survived": len(jobs) - len(twice_run) - len(stray),
                "broke": len(twice_run) + len(stray),
            },
            {
                "what": "jobs: ended",
                "tried": len(jobs),
                "survived": len(jobs) - len(unfinished),
                "broke": len(unfinished),
            },
            {
                "what": "jobs: succeeded",
                "tried": len(jobs),
                "survived": len(jobs) - len(not_succeeded),
                "broke": len(not_succeeded),
            },
            {
                "what": "supervisors: alive",
                "tried": len(sups),
                "survived": alive,
                "broke": len(sups) - alive,
            },
        ]
        self.details = {
            "failed submits (exit != 0, retried by a person)": len(self.failed_submits),
            "of which recorded all the same": len(told_failed_but_recorded),
            "reads": dict(self.reads),
            "lost": lost[:5],
            "twice_submitted": twice_submitted[:5],
            "twice_run": twice_run[:5],
            "unfinished": unfinished[:5],
            "not_succeeded": not_succeeded[:5],
        }
        return rows

    def close(self) -> None:
        for p in self.sups:  # left running only when the campaign itself failed
            if p.poll() is None:
                p.kill()
                p.wait(60)
        self.pg.close()


def table(rows: list[dict[str, object]]) -> str:
    width = max(len(str(r["what"])) for r in rows)
    lines = [f"{'':{width}}  {'tried':>6}  {'survived':>8}  {'broke':>5}"]
    lines += [
        f"{r['what']!s:{width}}  {r['tried']:>6}  {r['survived']:>8}  {r['broke']:>5}" for r in rows
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--short", action="store_true", help="a few faults and jobs (the test)")
    p.add_argument("--faults", type=int, default=30)
    p.add_argument("--supervisors", type=int, default=4)
    p.add_argument("--submitters", type=int, default=4)
    p.add_argument("--readers", type=int, default=2)
    p.add_argument("--gap", type=float, default=4.0, help="seconds between faults")
    p.add_argument("--down", type=float, default=2.0, help="seconds the server stays down")
    p.add_argument("--settle", type=float, default=300.0, help="seconds for every job to end")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.short:
        args.faults, args.supervisors, args.submitters, args.readers = 3, 2, 2, 1
        args.gap, args.down = 2.0, 1.0
    campaign = Campaign(args)
    started = time.monotonic()
    try:
        rows = campaign.run()
    finally:
        campaign.close()
    print(table(rows))
    print(f"wall {time.monotonic() - started:.0f} s; {json.dumps(campaign.details)}")
    if args.json:
        print(json.dumps(rows))
    if any(r["broke"] for r in rows):
        print(f"the supervisors' logs are kept in {campaign.work}", file=sys.stderr)
        return 1
    shutil.rmtree(campaign.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
