"""Decode + fold throughput against json.loads of the same bytes.

Target (issue 2): >= 100k events/s, and <= 3x the time json.loads takes on the same bytes.
Run: python benchmarks/fold_decode.py [--jobs 5000] [--wall]

Times are this process's CPU time (best of 5) unless ``--wall``: the machine is shared,
and wall time measures the neighbours as much as the fold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dispatch-core" / "tests"))

from core_bench import World, cause, policy
from dispatch import Action, CauseKind, fold
from dispatch.events import decode_event, encode_event


def one_record() -> list[str]:
    w = World(policy(([CauseKind.PREEMPTED], Action.RESUBMIT, 10)))
    for _ in range(6):
        w.tick()
        w.run_current()
        w.end_current(cause(CauseKind.PREEMPTED))
        w.tick()
    w.tick()
    return [encode_event(e) for e in w.events]


CLOCK = time.process_time


def best(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    template = one_record()
    records = [
        [row.replace(w_id, f"job-{n}") for row in template]
        for n in range(args.jobs)
        for w_id in ["job-1"]
    ]
    total = sum(len(r) for r in records)
    nbytes = sum(len(row) for r in records for row in r)

    t_json = best(lambda: [[json.loads(row) for row in r] for r in records])
    t_decode = best(lambda: [[decode_event(row) for row in r] for r in records])
    decoded = [[decode_event(row) for row in r] for r in records]
    t_fold = best(lambda: [fold(r) for r in decoded])
    t_both = best(lambda: [fold([decode_event(row) for row in r]) for r in records])

    print(
        f"{args.jobs} records, {total} events ({total / args.jobs:.0f} per job), "
        f"{nbytes / 1e6:.1f} MB of JSON"
    )
    print(f"json.loads only     {total / t_json:>10,.0f} events/s  ({t_json:.3f} s)")
    print(f"decode (pydantic)   {total / t_decode:>10,.0f} events/s  ({t_decode:.3f} s)")
    print(f"fold only           {total / t_fold:>10,.0f} events/s  ({t_fold:.3f} s)")
    print(f"decode + fold       {total / t_both:>10,.0f} events/s  ({t_both:.3f} s)")
    print(f"decode + fold vs json.loads: {t_both / t_json:.2f}x")


if __name__ == "__main__":
    main()
