"""Cold start as a person meets it: a fresh ``dispatch supervise --once`` process over a
real record of many active jobs (read, decode, fold, lease, ask the backend, decide).

The record is built once per store: one job is run for real by the CLI on the local
backend (its first six submissions exit 1 and are resubmitted by the policy, the seventh
reaches its time limit and is held: 22 events, an active job), and its events are copied
under fresh job ids, each copy's times a second later than the last one's. Then each run
is a new process, as after a restart; its CPU time (user+sys of the child) is printed
beside its wall time, with the load average, and its whole peak resident set over the
jobs (memory target: <= 8 KiB per active job).

Each run is measured twice: without a snapshot of the folded jobs (the first start ever:
it folds the whole record and writes the snapshot) and from the snapshot the run before
wrote (:mod:`dispatch.store.snapshot`).

Targets: <= 2 s CPU at 10,000 jobs and <= 10 s CPU at 50,000, on SQLite and PostgreSQL.
``--profile`` runs one more process without a snapshot under cProfile and prints where
its CPU time went.

Run: python benchmarks/cold_start.py [--jobs 10000 50000] [--runs 3]
     [--store sqlite postgres] [--profile]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from dispatch.model.events import Event
from dispatch.store import open_store
from dispatch.store.base import Batch
from scale_commands import DISPATCH, _analyze, _env, _store_url

TARGET_S = {10_000: 2.0, 50_000: 10.0}

POLICY = """\
[[rule]]
on = ["non-zero-exit"]
action = "resubmit"
budget = 6

[[rule]]
on = ["time-limit"]
action = "hold"
"""
COMMAND = 'if [ "$DISPATCH_SUBMISSION" -le 6 ]; then exit 1; fi; sleep 60'


def _template(store_url: str, state: Path) -> str:
    """A real held job with six recoveries behind it."""
    policy = state / "policy.toml"
    policy.write_text(POLICY)
    out = subprocess.run(
        [
            *(DISPATCH, "submit", "--policy", str(policy), "--time", "1", "--wait"),
            *("--interval", "0.2", "--", "sh", "-c", COMMAND),
        ],
        env=_env(store_url, state),
        capture_output=True,
        text=True,
        check=False,  # --wait exits non-zero for a held job, which is what we want here
    )
    if "held" not in out.stdout:
        raise SystemExit(f"the template job was not held:\n{out.stdout}\n{out.stderr}")
    return out.stdout.split()[0]


#: The child's wall and CPU seconds, peak resident set (KiB, from its own
#: /proc/self/status at exit), its CPU seconds when its first tick ended (the cold start
#: proper: what follows is writing the snapshot and exiting) and output.
_PEAK = (
    "import atexit, sys, time\n"
    "first = []\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('VmHWM', line.split()[1], file=sys.stderr)\n"
    "    print('FIRST', first[0] if first else 0.0, file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "import dispatch.supervisor as s\n"
    "tick = s.Supervisor.tick\n"
    "def timed(self, *args, **kwargs):\n"
    "    report = tick(self, *args, **kwargs)\n"
    "    first.append(time.process_time())\n"
    "    return report\n"
    "s.Supervisor.tick = timed\n"
    "from dispatch.cli.main import main\n"
    "sys.argv[0] = 'dispatch'\n"
    "main()\n"
)


def _once(args: list[str], env: dict[str, str]) -> tuple[float, float, int, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    peaks = [int(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("VmHWM")]
    firsts = [
        float(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("FIRST")
    ]
    return wall, cpu, (peaks[-1] if peaks else 0), (firsts[-1] if firsts else 0.0), out.stdout


def _clone(url: str, events: list[Event], count: int) -> None:
    """``count`` copies of the template's events under fresh job ids, each copy's times
    (its events' and their causes') moved by a second per copy: a real record's jobs
    were not all submitted, recovered and held at the same instants, and a record of one
    instant would flatter the decoder's and the fold's caches of times and transitions."""
    store = open_store(url)
    batch: list[Batch] = []
    for n in range(count):
        job_id = f"c{n:07d}"
        shift = timedelta(seconds=n + 1)
        copies: list[Event] = []
        for e in events:
            update: dict[str, object] = {"job_id": job_id, "at": e.at + shift}
            cause = getattr(e, "cause", None)
            if cause is not None:
                update["cause"] = cause.model_copy(update={"at": cause.at + shift})
            copies.append(e.model_copy(update=update))
        batch.append(Batch(job_id, 0, copies))
        if len(batch) == 2000:
            store.append_many(batch)
            batch = []
    if batch:
        store.append_many(batch)
    store.close()
    _analyze(url)


def _drop(url: str) -> None:
    """Remove a PostgreSQL record's schema (a SQLite record goes with its directory)."""
    if not url.startswith("postgres"):
        return
    import psycopg

    base, _, schema = url.partition("options=-csearch_path%3D")
    with psycopg.connect(base.rstrip("?&"), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def run(kind: str, jobs: int, runs: int, profile: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="dispatch-cold-"))
    root.chmod(0o700)
    url = _store_url(kind, root)
    try:
        _measure(kind, url, root, jobs, runs, profile)
    finally:
        _drop(url)
        shutil.rmtree(root, ignore_errors=True)


def _measure(kind: str, url: str, root: Path, jobs: int, runs: int, profile: bool) -> None:
    template = _template(url, root)
    events = open_store(url).read(template)
    t = time.perf_counter()
    _clone(url, events, jobs - 1)
    env = _env(url, root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as on a user's machine
    print(
        f"{kind}: {jobs} held jobs x {len(events)} events built in {time.perf_counter() - t:.1f} s"
    )
    supervise = [DISPATCH, "supervise", "--once", "--json"]
    # the same command, reporting its peak resident set as it exits
    measured = [sys.executable, "-c", _PEAK, *supervise[1:]]
    figures: dict[str, tuple[list[float], list[float]]] = {
        "without a snapshot (folds the record, writes one)": ([], []),
        "from the snapshot": ([], []),
    }
    firsts: dict[str, list[float]] = {label: [] for label in figures}
    for n in range(runs):
        for label, (walls, cpus) in figures.items():
            if label.startswith("without"):
                for old in root.rglob("*.snapshot"):
                    old.unlink()
            load = os.getloadavg()[0]
            wall, cpu, peak, first, out = _once(measured, env)
            report = json.loads(out)
            walls.append(wall)
            cpus.append(cpu)
            firsts[label].append(first)
            print(
                f"  run {n + 1} {label}: CPU {cpu:6.2f} s (first tick done at {first:.2f} s)"
                f"  wall {wall:6.2f} s  "
                f"load average {load:.1f}  peak resident {peak / 1024:.0f} MiB = "
                f"{peak / jobs:.1f} KiB per job  (active={report['active']} "
                f"leased={report['leased']} decided={report['decided']} "
                f"appended={report['appended']})"
            )
    target = TARGET_S.get(jobs)
    for label, (walls, cpus) in figures.items():
        cpu = statistics.median(cpus)
        verdict = (
            ""
            if target is None
            else f"  target <= {target:.0f} s CPU: " + ("met" if cpu <= target else "MISSED")
        )
        print(
            f"  {label}, median of {runs}: CPU {cpu:.2f} s (min {min(cpus):.2f}; "
            f"first tick done at {statistics.median(firsts[label]):.2f} s)  "
            f"wall {statistics.median(walls):.2f} s{verdict}"
        )
    if profile:  # the start without a snapshot: the one that misses its target
        for old in root.rglob("*.snapshot"):
            old.unlink()
        out_file = root / "cold.prof"
        _once([sys.executable, "-m", "cProfile", "-o", str(out_file), *supervise], env)
        text = io.StringIO()
        stats = pstats.Stats(str(out_file), stream=text)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
        print(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", nargs="+", choices=("sqlite", "postgres"), default=["sqlite"])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for kind in args.store:
        for jobs in args.jobs:
            run(kind, jobs, args.runs, args.profile)


if __name__ == "__main__":
    main()
