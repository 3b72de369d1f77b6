"""The CLI's fixed cost, in one run: what every command pays before it does anything.

Times, in the same run and the same environment (bytecode cached, as on a user's machine):
``python -c pass`` (the floor), ``python -c "import dispatch"``, ``dispatch --help``,
``dispatch status JOB`` (a 1-job local record) and ``dispatch cancel JOB`` of a running
local job (a fresh job for each run, submitted untimed). Each line shows the median CPU
time of the child (user+sys, what a loaded machine does not inflate) beside its median
wall time, and both as a ratio to ``python -c pass``.

Targets: ``dispatch --help`` <= 80 ms CPU; ``dispatch status`` <= 250 ms CPU; ``cancel``
<= 1.5x ``status`` (CPU).
Run: python benchmarks/cli_start.py [--runs 15]   (uses the dispatch next to this python)
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
from collections.abc import Callable
from pathlib import Path

DISPATCH = str(Path(sys.executable).with_name("dispatch"))

TARGETS_MS = {"dispatch --help": 80.0, "dispatch status JOB": 250.0}


def once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user+sys of the child) milliseconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(args, env=env, capture_output=True, check=True)
    wall = (time.perf_counter() - t) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def submit_running(env: dict[str, str]) -> str:
    """A local job that runs until it is stopped; its id once it is recorded as submitted."""
    out = subprocess.run(
        [DISPATCH, "submit", "--", "sleep", "600"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = {**os.environ, "XDG_STATE_HOME": tempfile.mkdtemp()}
    env.pop("DISPATCH_STORE", None)
    # a user's install has its bytecode cached
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [DISPATCH, "submit", "--wait", "--interval", "0.2", "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    # a 1-job record for status: the finished job above is the only one until cancel runs
    commands: list[tuple[str, Callable[[], list[str]]]] = [
        ("python -c pass", lambda: [sys.executable, "-c", "pass"]),
        ('python -c "import dispatch"', lambda: [sys.executable, "-c", "import dispatch"]),
        ("dispatch --help", lambda: [DISPATCH, "--help"]),
        ("dispatch status JOB", lambda: [DISPATCH, "status", done]),
    ]
    results: dict[str, tuple[list[float], list[float]]] = {}
    for label, make in commands:
        subprocess.run(make(), env=env, capture_output=True, check=True)  # caches warm
        results[label] = ([], [])
    load = [os.getloadavg()[0]]
    # interleaved, so a change of load falls on every command alike
    for _ in range(args.runs):
        for label, make in commands:
            wall, cpu = once(make(), env)
            results[label][0].append(wall)
            results[label][1].append(cpu)
    load.append(os.getloadavg()[0])
    cancel_label = "dispatch cancel JOB (running)"
    results[cancel_label] = ([], [])
    warm = submit_running(env)
    subprocess.run([DISPATCH, "cancel", warm], env=env, capture_output=True, check=True)
    for _ in range(args.runs):
        job = submit_running(env)
        wall, cpu = once([DISPATCH, "cancel", job], env)
        results[cancel_label][0].append(wall)
        results[cancel_label][1].append(cpu)
    load.append(os.getloadavg()[0])
    print(
        f"{args.runs} runs each; load average {min(load):.1f}-{max(load):.1f} "
        f"on {os.cpu_count()} cores; python {sys.version.split()[0]}"
    )
    floor_wall = statistics.median(results["python -c pass"][0])
    floor_cpu = statistics.median(results["python -c pass"][1])
    medians: dict[str, float] = {}
    for label, (walls, cpus) in results.items():
        cpu = statistics.median(cpus)
        wall = statistics.median(walls)
        medians[label] = cpu
        target = TARGETS_MS.get(label)
        verdict = ""
        if target is not None:
            verdict = f"  target <= {target:.0f} ms CPU: {'met' if cpu <= target else 'MISSED'}"
        print(
            f"{label:<30} CPU {cpu:6.0f} ms ({cpu / floor_cpu:4.1f}x)"
            f"   wall {wall:6.0f} ms ({wall / floor_wall:4.1f}x){verdict}"
        )
    ratio = medians[cancel_label] / medians["dispatch status JOB"]
    print(
        f"cancel / status (CPU) {ratio:.2f}x  target <= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
