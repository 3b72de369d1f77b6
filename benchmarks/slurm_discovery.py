"""Status of 500 multi-node jobs on the real 4-node Slurm: dispatch's discovery vs bare
squeue+sacct vs one squeue per job (the TorchX pattern). Prints wall times, ratios and
scheduler calls per tick.

    python benchmarks/slurm_discovery.py [--jobs 500] [--repeat 5] [--failing 0.1]

Needs the cluster of dispatch-slurm-testing's start script (it runs it). Job i runs on
2 + i % 3 nodes (2-4), through the adapter's launch wrapper (one step per node), and
ends: a fraction ``--failing`` of them has rank 1 exit 1, so their discovery also reads
the step rows that name the failing node (one more call per tick, S-42). The three ways
then ask about the same ended jobs. Figures are wall-clock medians on this machine;
nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid

from dispatch import JobSpec, Resources
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.parse import SACCT_FIELDS, SQUEUE_FIELDS
from dispatch_slurm.runner import Runner
from dispatch_slurm_testing.cluster import start


def timed(fn, repeat: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--failing", type=float, default=0.1)
    args = parser.parse_args()

    start()
    workdir = tempfile.mkdtemp(prefix="dispatch-bench-", dir="/var/tmp")
    os.chmod(workdir, 0o777)
    os.environ["DISPATCH_SLURM_LOG_DIR"] = workdir

    backend = SlurmBackend()
    run = uuid.uuid4().hex[:8]
    job_ids = [f"bench-{run}-{i}" for i in range(args.jobs)]
    every = round(1 / args.failing) if args.failing > 0 else 0
    fails = ("sh", "-c", 'if [ "$RANK" = 1 ]; then exit 1; fi')
    t0 = time.perf_counter()
    object_ids = []
    for i, job in enumerate(job_ids):
        failing = every and i % every == every - 1
        spec = JobSpec(
            command=fails if failing else ("true",),
            workdir=workdir,
            resources=Resources(nodes=2 + i % 3),
            options={"output": "/dev/null"},
        )
        object_ids.append(backend.dispatch_submit(job, 1, spec, False))
    submit_s = time.perf_counter() - t0
    ticks_while_running: list[dict[str, int]] = []
    while True:
        before = dict(backend.runner.calls_by_command)
        found = backend.dispatch_discover(job_ids)
        after = backend.runner.calls_by_command
        ticks_while_running.append(
            {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
        )
        if len(found.objects) == args.jobs and all(not o.alive for o in found.objects):
            break
        time.sleep(2)
    attributed = sum(1 for o in found.objects if o.cause is not None and o.cause.nodes)

    bare = Runner()
    ids = ",".join(object_ids)

    def dispatch_way() -> int:
        return len(backend.dispatch_discover(job_ids).objects)

    def bare_way() -> int:
        sq = bare.run(
            [
                "squeue",
                "-h",
                "--states=all",
                "-j",
                ids,
                "--Format=" + ",".join(f"{f}:|" for f in SQUEUE_FIELDS),
            ]
        )
        sa = bare.run(["sacct", "-P", "-n", "-X", "-D", "-j", ids, "-o", ",".join(SACCT_FIELDS)])
        return len(sq.stdout.splitlines()) + len(sa.stdout.splitlines())

    def per_job_way() -> int:
        states = 0
        for oid in object_ids:
            out = bare.run(["squeue", "-h", "--states=all", "-j", oid, "-o", "%T"])
            states += bool(out.stdout.strip())
        return states

    before = backend.runner.calls
    before_by = dict(backend.runner.calls_by_command)
    t_dispatch, n_dispatch = timed(dispatch_way, args.repeat)
    dispatch_calls = (backend.runner.calls - before) / args.repeat
    ended_tick = {
        k: (v - before_by.get(k, 0)) // args.repeat
        for k, v in backend.runner.calls_by_command.items()
        if v - before_by.get(k, 0)
    }
    before = bare.calls
    t_bare, _ = timed(bare_way, args.repeat)
    bare_calls = (bare.calls - before) / args.repeat
    before = bare.calls
    t_per_job, n_per_job = timed(per_job_way, 1)
    per_job_calls = bare.calls - before

    print(
        f"Slurm discovery benchmark: {args.jobs} ended jobs of 2-4 nodes "
        f"({sum(1 for i in range(args.jobs) if every and i % every == every - 1)} with a "
        f"failing rank), median of {args.repeat} (per-job: 1 run); submitting them took "
        f"{submit_s:.1f} s"
    )
    print(
        f"calls per tick, ended: {ended_tick}; while they ran: "
        f"{ticks_while_running[:3]}... ({len(ticks_while_running)} ticks); "
        f"endings attributed to a node: {attributed}"
    )
    print(f"{'way':<38}{'wall s':>9}{'calls':>8}{'ratio':>9}")
    rows = [
        ("dispatch discovery (squeue -n + sacct)", t_dispatch, dispatch_calls),
        ("bare squeue -j + sacct -j, same ids", t_bare, bare_calls),
        ("one squeue -j per job (TorchX)", t_per_job, per_job_calls),
    ]
    for name, seconds, calls in rows:
        print(f"{name:<38}{seconds:>9.3f}{calls:>8.0f}{seconds / t_bare:>8.2f}x")
    print(
        f"dispatch / bare = {t_dispatch / t_bare:.2f}x (target <= 1.3x); "
        f"per-job / dispatch = {t_per_job / t_dispatch:.1f}x; objects found: {n_dispatch}, "
        f"per-job states: {n_per_job}"
    )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
