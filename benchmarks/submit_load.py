"""Load: many concurrent ``dispatch submit --no-start`` against one record (S-33).

``--submits`` submits (2,000) from ``--processes`` concurrent client processes (50), each
a real ``dispatch submit --no-start --name NAME -- true`` with a name of its own, against
one record: a SQLite file, and a PostgreSQL database on a private server (initdb into a
temporary directory as the postgres user, its own port; never the shared server).

Afterwards the record is read directly: every submit that exited 0 has its job recorded
(``lost``), no job id and no name is recorded twice (``duplicated``), and a submit that
failed recorded nothing, or its one job (``failed``: they are counted, not hidden). Prints
a table (tried, survived, broke) per store with the wall time of a submit (p50, p99, max)
and the throughput; ``--json`` also prints the rows as one JSON line. Exit 1 when
anything broke.

Usage: .venv/bin/python benchmarks/submit_load.py [--submits 2000] [--processes 50]
       [--stores sqlite,postgres] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dispatch_testing.private_postgres import PrivatePostgres

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
    return ordered[index]


def campaign(store: str, url: str, work: Path, submits: int, processes: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISPATCH_")}
    env |= {
        "DISPATCH_STORE": url,
        "XDG_STATE_HOME": str(work / "state"),
        "XDG_CONFIG_HOME": str(work / "config"),
    }

    def one(n: int) -> tuple[str, int, str, float, str]:
        name = f"load-{n}"
        started = time.monotonic()
        out = subprocess.run(
            [DISPATCH, "submit", "--no-start", "--name", name, "--", "true"],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=600,
            check=False,
        )
        took = time.monotonic() - started
        job = out.stdout.split()[0] if out.stdout.split() else ""
        return name, out.returncode, job, took, out.stderr.strip()[-300:]

    assert subprocess.run([DISPATCH, "list"], env=env, cwd=work, check=False).returncode == 0
    started = time.monotonic()
    with ThreadPoolExecutor(processes) as pool:
        results = list(pool.map(one, range(submits)))
    wall = time.monotonic() - started
    recorded = read_record(store, url)
    ids = Counter(job for job, _ in recorded)
    names = Counter(name for _, name in recorded)
    ok = [r for r in results if r[1] == 0 and r[2]]
    failed = [r for r in results if not (r[1] == 0 and r[2])]
    lost = [r for r in ok if r[2] not in ids]
    duplicated = [j for j, n in ids.items() if n > 1] + [x for x, n in names.items() if n > 1]
    failed_recorded = [r for r in failed if r[0] in names]
    times = [r[3] for r in ok]
    return {
        "store": store,
        "tried": submits,
        "survived": len(ok) - len(lost),
        "broke": len(lost) + len(duplicated) + len(failed),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "failed": len(failed),
        "failed_but_recorded": len(failed_recorded),
        "recorded": len(ids),
        "p50_s": round(statistics.median(times), 3) if times else None,
        "p99_s": round(percentile(times, 0.99), 3) if times else None,
        "max_s": round(max(times), 3) if times else None,
        "submits_per_s": round(len(ok) / wall, 2),
        "wall_s": round(wall, 1),
        "errors": sorted({r[4] for r in failed})[:3],
    }


def read_record(store: str, url: str) -> list[tuple[str, str]]:
    query = "SELECT job_id, name FROM dispatch_jobs"
    if store == "sqlite":
        db = sqlite3.connect(url.removeprefix("sqlite://"))
        try:
            return [(str(a), str(b)) for a, b in db.execute(query).fetchall()]
        finally:
            db.close()
    import psycopg

    with psycopg.connect(url) as conn:
        created = Counter(
            j
            for (j,) in conn.execute(
                "SELECT job_id FROM dispatch_events WHERE type = 'job-created'"
            ).fetchall()
        )
        rows = [(str(a), str(b)) for a, b in conn.execute(query).fetchall()]
    # an id with two job-created events would be one jobs row: count it twice
    return rows + [(j, f"(second job-created of {j})") for j, n in created.items() if n > 1]


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'store':10} {'tried':>6} {'survived':>8} {'broke':>5}   "
        f"{'lost':>4} {'dup':>4} {'failed':>6}  {'p50 s':>6} {'p99 s':>6} {'max s':>6} {'/s':>6}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['store']:10} {r['tried']:>6} {r['survived']:>8} {r['broke']:>5}   "
            f"{r['lost']:>4} {r['duplicated']:>4} {r['failed']:>6}  {r['p50_s']!s:>6} "
            f"{r['p99_s']!s:>6} {r['max_s']!s:>6} {r['submits_per_s']!s:>6}"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--submits", type=int, default=2000)
    p.add_argument("--processes", type=int, default=50)
    p.add_argument("--stores", default="sqlite,postgres")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for store in args.stores.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"dispatch-load-{store}-"))
        server = PrivatePostgres() if store == "postgres" else None
        try:
            url = server.dsn if server is not None else f"sqlite://{work / 'record.db'}"
            rows.append(campaign(store, url, work, args.submits, args.processes))
        finally:
            if server is not None:
                server.close()
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    for r in rows:
        if r["errors"]:
            print(f"{r['store']}: failed submits said: {r['errors']}")
    if args.json:
        print(json.dumps(rows))
    return 1 if any(r["broke"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
