"""Per-job commands on a big record against the same command on a one-job record.

Target: `status`, `history`, `cancel`, `resubmit`, `give-up` of one job on a record of
100,000 jobs within 1.2x of the same command on a record that holds only that job.

The jobs are real: one job is run for real by the CLI on the local backend under a hold
policy (it exits 1 and is held), and its events are copied under fresh job ids, so every
job of the big record is a held job a person could resolve. Each command runs as a
subprocess, as a person runs it; every resolving command gets a job of its own.

Run: .venv/bin/python benchmarks/scale_commands.py [--jobs 100000] [--runs 7]
     [--store sqlite postgres]  (both by default, one after the other)
Figures are printed (medians, min-max), never asserted. The two records are measured
interleaved (one run on each in turn), so the machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from dispatch.model.events import Event
from dispatch.store import open_store
from dispatch.store.base import Batch

DISPATCH = str(Path(sys.executable).with_name("dispatch"))
COMMANDS = ("status", "history", "cancel", "resubmit", "give-up")
RESOLVING = {"cancel", "resubmit", "give-up"}
HOLD_ME = ("--", "sh", "-c", "exit 1")
DSN_FILE = Path(__file__).resolve().parents[1] / ".venv" / "postgres-dsn"


def _env(store_url: str, state: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(state),
        "XDG_STATE_HOME": str(state / "state"),
        "XDG_CONFIG_HOME": str(state / "config"),
        "DISPATCH_STORE": store_url,
    }


def _held_template(store_url: str, state: Path) -> str:
    policy = state / "hold.toml"
    policy.write_text('[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    out = subprocess.run(
        [DISPATCH, "submit", "--policy", str(policy), "--wait", "--interval", "0.2", *HOLD_ME],
        env=_env(store_url, state),
        capture_output=True,
        text=True,
        check=False,  # --wait exits non-zero for a held job, which is what we want here
    )
    if "held" not in out.stdout:
        raise SystemExit(f"the template job was not held:\n{out.stdout}\n{out.stderr}")
    return out.stdout.split()[0]


def _clone(store_url: str, events: list[Event], count: int, prefix: str) -> list[str]:
    store = open_store(store_url)
    ids, batch = [], []
    for n in range(count):
        job_id = f"{prefix}{n:07d}"
        ids.append(job_id)
        batch.append(Batch(job_id, 0, [e.model_copy(update={"job_id": job_id}) for e in events]))
        if len(batch) == 2000:
            store.append_many(batch)
            batch = []
    if batch:
        store.append_many(batch)
    store.close()
    _analyze(store_url)
    return ids


def _analyze(store_url: str) -> None:
    """On PostgreSQL, gather the planner's statistics as autovacuum would on a record that
    grew over weeks: planned on an empty table's statistics, the read policy's check of
    the jobs table is a hash of every job (O(jobs) per read, ~50 ms at 100,000) instead of
    one index probe (1 ms)."""
    if not store_url.startswith("postgres"):
        return
    import psycopg

    base, _, schema = store_url.partition("options=-csearch_path%3D")
    with psycopg.connect(base.rstrip("?&"), autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("ANALYZE dispatch_events")
        conn.execute("ANALYZE dispatch_jobs")


def _time(args: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(args, env=env, capture_output=True, check=False)
    return (time.perf_counter() - t) * 1000


def _measure(records: list[tuple[str, Path, list[str]]], runs: int) -> list[dict[str, list[float]]]:
    """Each command on every record in turn, run after run: the load of a shared machine
    falls on both records alike, so their ratio holds even when the figures drift."""
    envs = [_env(url, state) for url, state, _ in records]
    spares = [iter(jobs[1:]) for _, _, jobs in records]
    figures: list[dict[str, list[float]]] = [{} for _ in records]
    for env, (_, _, jobs) in zip(envs, records, strict=True):
        subprocess.run([DISPATCH, "status", jobs[0]], env=env, capture_output=True)  # warm
    for command in COMMANDS:
        for _ in range(runs):
            for n, (env, (_, _, jobs)) in enumerate(zip(envs, records, strict=True)):
                job = next(spares[n]) if command in RESOLVING else jobs[0]
                figures[n].setdefault(command, []).append(_time([DISPATCH, command, job], env))
    return figures


def _store_url(kind: str, where: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{where}/record.db"
    base = os.environ.get("DISPATCH_TEST_POSTGRES") or DSN_FILE.read_text().strip()
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:  # the CLI's store opens inside it
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--store", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"]
    )
    args = parser.parse_args()
    for kind in args.store:
        run(kind, args)


def run(kind: str, args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="dispatch-scale-"))
    small_dir, big_dir = root / "small", root / "big"
    load = f"{os.getloadavg()[0]:.1f}"
    for d in (small_dir, big_dir):
        d.mkdir(mode=0o700)
    small, big = _store_url(kind, small_dir), _store_url(kind, big_dir)
    template = _held_template(small, small_dir)
    events = open_store(small).read(template)
    per_job = len(events)
    small_jobs = [template, *_clone(small, events, 3 * args.runs, "s")]
    t = time.perf_counter()
    big_jobs = _clone(big, events, args.jobs, "b")
    print(
        f"{kind}: {args.jobs} held jobs x {per_job} events built in "
        f"{time.perf_counter() - t:.1f} s; one-job record: the same job "
        f"(+{3 * args.runs} spares to resolve)"
    )
    small_fig, big_fig = _measure(
        [(small, small_dir, small_jobs), (big, big_dir, big_jobs)], args.runs
    )
    print(f"load average before/after: {load} / {os.getloadavg()[0]:.1f} (2 cores)")
    print(
        f"{'command':<10} {'1-job record ms':>22} {f'{args.jobs}-job record ms':>24} {'ratio':>6}"
    )
    for command in COMMANDS:
        a, b = small_fig[command], big_fig[command]
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"{command:<10} {ma:8.0f} ({min(a):.0f}-{max(a):.0f}){'':>6} "
            f"{mb:8.0f} ({min(b):.0f}-{max(b):.0f}){'':>6} {mb / ma:6.2f}"
        )


if __name__ == "__main__":
    main()
