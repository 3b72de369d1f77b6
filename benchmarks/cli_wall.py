"""Wall time of the CLI as a person feels it, with all four distributions installed.

Targets: `dispatch --help` <= 150 ms; `dispatch status JOB` <= 300 ms. Also the
daily loop: `logs`, `config`, `submit --dry-run`, and `dispatch logs` of a
64 MiB log with its peak resident memory (flat: it streams).
Run: python benchmarks/cli_wall.py [--runs 15]   (uses the dispatch next to this python)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DISPATCH = str(Path(sys.executable).with_name("dispatch"))


def timed(args: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user+sys) milliseconds per run; CPU time is what a loaded machine
    does not inflate, wall time is what a person waits."""
    subprocess.run(args, env=env, capture_output=True, check=True)  # warm the file cache
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(args, env=env, capture_output=True, check=True)
        walls.append((time.perf_counter() - t) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = {**os.environ, "XDG_STATE_HOME": tempfile.mkdtemp()}
    env.pop("DISPATCH_STORE", None)
    # a user's install has its bytecode cached; this sandbox sets PYTHONDONTWRITEBYTECODE
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    job = subprocess.run(
        [DISPATCH, "submit", "--wait", "--interval", "0.2", "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    big = subprocess.run(
        [
            DISPATCH,
            "submit",
            "--wait",
            "--interval",
            "0.2",
            "--",
            "sh",
            "-c",
            f"yes 0123456789abcdef | head -c {64 << 20}",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for label, cmd in [
        ("dispatch --help", [DISPATCH, "--help"]),
        ("dispatch status JOB", [DISPATCH, "status", job]),
        ("dispatch status JOB --json", [DISPATCH, "status", job, "--json"]),
        ("dispatch logs JOB", [DISPATCH, "logs", job]),
        ("dispatch config", [DISPATCH, "config"]),
        ("dispatch submit --dry-run", [DISPATCH, "submit", "--dry-run", "--", "true"]),
        ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
    ]:
        wall, cpu = timed(cmd, env, args.runs)
        print(
            f"{label:<28} wall median {statistics.median(wall):5.0f} ms (min {min(wall):4.0f})"
            f"   cpu median {statistics.median(cpu):5.0f} ms (min {min(cpu):4.0f})"
        )

    code = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "wall = (time.perf_counter() - t) * 1000\n"
        "print(f'{wall:.0f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')\n"
    )
    for label, extra in (
        ("dispatch logs (64 MiB)", []),
        ("dispatch logs --tail 5 (64 MiB)", ["--tail", "5"]),
    ):
        out = subprocess.run(
            [sys.executable, "-c", code, DISPATCH, "logs", big, *extra],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"{label:<28} wall {out[0]:>5} ms   peak resident {int(out[1]) / 1024:5.0f} MiB")


if __name__ == "__main__":
    main()
