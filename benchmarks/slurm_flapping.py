"""A flapping slurmctld under a supervisor never causes a recovery (S-5).

40 jobs of one or two nodes (4 CPUs a node, 40-150 s each, so they queue on the 4-node
cluster and start and end throughout) are recorded with a policy that resubmits on every
ending it may and run by one ``dispatch supervise`` process; meanwhile slurmctld is
stopped and started again, or frozen with SIGSTOP and thawed, in turns, 20 times over
10 minutes (``start-slurm.sh ctld``, the selected version's controller only). In each
outage ``dispatch status`` of a job not ended must show the record, the scheduler's words
and exit 3, appending nothing. Afterwards every job must have succeeded with one
submission, one Slurm object that ran once, and nothing else in its record.

Prints a table (tried, survived, broke) and the worst tick of the supervisor while the
controller was frozen, stopped and up (wall from the tick's start to its report; CPU of
the supervisor and its Slurm commands). Exit 1 when anything broke.

Runs on the cluster the shell points at (its start script is run first: idempotent, it
resumes nodes an earlier run left drained; a step that cannot end while the controller is
away drains its node with "Kill task failed"), e.g. Slurm 24.11.7:

    SLURM_VERSION=24.11.7 bash dispatch-slurm/scripts/start-slurm.sh
    eval "$(SLURM_VERSION=24.11.7 bash dispatch-slurm/scripts/start-slurm.sh env)"
    .venv/bin/python benchmarks/slurm_flapping.py [--jobs 40] [--flaps 20] [--span 600]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time

from dispatch_slurm_testing.cluster import start
from dispatch_slurm_testing.flapping import Campaign, Plan


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--flaps", type=int, default=20)
    p.add_argument("--span", type=float, default=600.0, help="seconds the flaps spread over")
    p.add_argument("--down", type=float, default=12.0, help="seconds each outage lasts at least")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    start()  # idempotent; resumes nodes an earlier run left drained
    version = subprocess.run(
        ["sinfo", "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout.strip()
    plan = Plan(jobs=args.jobs, flaps=args.flaps, span=args.span, down=args.down, seed=args.seed)
    # a stop ends the campaign as Ctrl-C does: the controller is started or thawed again
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    campaign = Campaign(plan, say=lambda text: print(text, file=sys.stderr, flush=True))
    started = time.monotonic()
    try:
        result = campaign.run()
    except BaseException:
        campaign.cancel()
        print(f"the record and the supervisor's log are kept in {campaign.work}", file=sys.stderr)
        raise
    print(f"{version}: {args.jobs} jobs, {args.flaps} flaps over {args.span:g} s")
    print(result.table())
    print(f"wall {time.monotonic() - started:.0f} s; {json.dumps(result.details)}")
    if args.json:
        print(json.dumps({"rows": result.rows, "ticks": result.ticks}))
    campaign.cancel()
    if result.broke:
        print(f"the record and the supervisor's log are kept in {campaign.work}", file=sys.stderr)
        return 1
    campaign.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
