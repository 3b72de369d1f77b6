"""Status of 500 jobs on the real Slurm: dispatch's discovery vs bare squeue+sacct vs one
squeue per job (the TorchX pattern). Prints wall times, ratios and scheduler call counts.

    python benchmarks/slurm_discovery.py [--jobs 500] [--repeat 5]

Needs the Slurm that dispatch-slurm/scripts/start-slurm.sh starts (it runs it, SKIP_APT=1
when Slurm is installed). The jobs are `true`, submitted through the adapter (tagged like
any dispatch submission) and left ended: the three ways then ask about the same 500
ended jobs. Figures are wall-clock medians on this machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from dispatch import JobSpec
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.parse import SACCT_FIELDS, SQUEUE_FIELDS
from dispatch_slurm.runner import Runner

ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "dispatch-slurm" / "scripts" / "start-slurm.sh"


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
    args = parser.parse_args()

    env = dict(os.environ, SKIP_APT="1" if shutil.which("sbatch") else "0")
    subprocess.run(["bash", str(START)], env=env, check=True, capture_output=True)
    workdir = tempfile.mkdtemp(prefix="dispatch-bench-", dir="/var/tmp")
    os.chmod(workdir, 0o777)

    backend = SlurmBackend()
    run = uuid.uuid4().hex[:8]
    job_ids = [f"bench-{run}-{i}" for i in range(args.jobs)]
    spec = JobSpec(command=("true",), workdir=workdir, options={"output": "/dev/null"})
    t0 = time.perf_counter()
    object_ids = [backend.dispatch_submit(j, 1, spec, False) for j in job_ids]
    submit_s = time.perf_counter() - t0
    while True:
        found = backend.dispatch_discover(job_ids)
        if len(found.objects) == args.jobs and all(not o.alive for o in found.objects):
            break
        time.sleep(2)

    bare = Runner()
    ids = ",".join(object_ids)

    def dispatch_way() -> int:
        return len(backend.dispatch_discover(job_ids).objects)

    def bare_way() -> int:
        sq = bare.run(["squeue", "-h", "--states=all", "-j", ids,
                       "--Format=" + ",".join(f"{f}:|" for f in SQUEUE_FIELDS)])
        sa = bare.run(["sacct", "-P", "-n", "-X", "-D", "-j", ids, "-o", ",".join(SACCT_FIELDS)])
        return len(sq.stdout.splitlines()) + len(sa.stdout.splitlines())

    def per_job_way() -> int:
        states = 0
        for oid in object_ids:
            out = bare.run(["squeue", "-h", "--states=all", "-j", oid, "-o", "%T"])
            states += bool(out.stdout.strip())
        return states

    before = backend.runner.calls
    t_dispatch, n_dispatch = timed(dispatch_way, args.repeat)
    dispatch_calls = (backend.runner.calls - before) / args.repeat
    before = bare.calls
    t_bare, _ = timed(bare_way, args.repeat)
    bare_calls = (bare.calls - before) / args.repeat
    before = bare.calls
    t_per_job, n_per_job = timed(per_job_way, 1)
    per_job_calls = bare.calls - before

    print(f"Slurm discovery benchmark: {args.jobs} ended jobs, median of {args.repeat} "
          f"(per-job: 1 run); submitting them took {submit_s:.1f} s")
    print(f"{'way':<38}{'wall s':>9}{'calls':>8}{'ratio':>9}")
    rows = [
        ("dispatch discovery (squeue -n + sacct)", t_dispatch, dispatch_calls),
        ("bare squeue -j + sacct -j, same ids", t_bare, bare_calls),
        ("one squeue -j per job (TorchX)", t_per_job, per_job_calls),
    ]
    for name, seconds, calls in rows:
        print(f"{name:<38}{seconds:>9.3f}{calls:>8.0f}{seconds / t_bare:>8.2f}x")
    print(f"dispatch / bare = {t_dispatch / t_bare:.2f}x (target <= 1.3x); "
          f"per-job / dispatch = {t_per_job / t_dispatch:.1f}x; objects found: {n_dispatch}, "
          f"per-job states: {n_per_job}")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
