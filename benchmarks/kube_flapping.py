"""A flapping Kubernetes API server under a supervisor never causes a recovery (S-5).

40 TrainJobs of one or two nodes on the emulated Trainer cluster (real HTTP on loopback;
each succeeds 20-200 s after it starts running) are recorded with a policy that
resubmits on every ending it may and run by one ``dispatch supervise`` process;
meanwhile the API server refuses connections, hangs (accepts, never answers), answers
every request 500, or 429 with ``Retry-After``, in turns, 20 times over 4 minutes. In
each outage ``dispatch status`` of a job not ended must show the record, the API
server's words and exit 3, appending nothing. Afterwards every job must have succeeded
with one submission, one TrainJob created, and nothing else in its record.

Prints a table (tried, survived, broke) and the worst tick of the supervisor in each kind
of outage and while the API server was well (wall from the tick's start to its report;
CPU of the supervisor). Exit 1 when anything broke.

    .venv/bin/python benchmarks/kube_flapping.py [--jobs 40] [--flaps 20] [--span 240]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from dispatch_kubeflow_testing.flapping import Campaign, Plan


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--flaps", type=int, default=20)
    p.add_argument("--span", type=float, default=240.0, help="seconds the flaps spread over")
    p.add_argument("--down", type=float, default=6.0, help="seconds each outage lasts at least")
    p.add_argument("--read-timeout", type=float, default=5.0, help="the client's read timeout")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the record and logs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    plan = Plan(
        jobs=args.jobs,
        flaps=args.flaps,
        span=args.span,
        down=args.down,
        read_timeout=args.read_timeout,
        job_seconds=(args.span / 12, args.span * 5 / 6),
        seed=args.seed,
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    campaign = Campaign(plan, say=lambda text: print(text, file=sys.stderr, flush=True))
    started = time.monotonic()
    try:
        result = campaign.run()
    finally:
        campaign.cancel()
    print(
        f"emulated Trainer cluster: {args.jobs} TrainJobs, {args.flaps} flaps over {args.span:g} s"
    )
    print(result.table())
    print(f"wall {time.monotonic() - started:.0f} s; {json.dumps(result.details)}")
    if args.json:
        print(json.dumps({"rows": result.rows, "ticks": result.ticks}))
    if args.keep or result.broke:
        print(f"the record and the supervisor's log are kept in {campaign.work}", file=sys.stderr)
    else:
        campaign.remove()
    return 1 if result.broke else 0


if __name__ == "__main__":
    sys.exit(main())
