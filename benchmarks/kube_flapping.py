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

``--real``: the same against a real control plane of its own (``start-kube.sh`` with
DISPATCH_KUBE_RUN, default /var/tmp/dispatch-kube-flap, and DISPATCH_KUBE_PORT_OFFSET,
default 8000, beside the default plane, which is never touched), started first and
stopped after (``--keep-plane`` leaves it running): its kube-apiserver is stopped and
started, or frozen and thawed, in turns, 20 times over 10 minutes, under 40 TrainJobs of
one or two nodes that run 50-300 s once scheduled on its KWOK nodes
(:mod:`dispatch_kubeflow_testing.live.flapping`). A real API server cannot be made to
answer 500 or 429 on demand: those rows are the emulated run's.

    .venv/bin/python benchmarks/kube_flapping.py --real [--jobs 40] [--flaps 20] [--span 600]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from dispatch_kubeflow_testing.flapping import Campaign, Plan
from dispatch_kubeflow_testing.live import cluster
from dispatch_kubeflow_testing.live import flapping as live
from dispatch_testing import campaign as base


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--real", action="store_true", help="a real control plane of its own")
    p.add_argument("--keep-plane", action="store_true", help="(--real) leave the plane running")
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--flaps", type=int, default=20)
    p.add_argument("--span", type=float, help="seconds the flaps spread over (240; --real 600)")
    p.add_argument("--down", type=float, help="seconds each outage lasts at least (6; --real 12)")
    p.add_argument("--read-timeout", type=float, default=5.0, help="the client's read timeout")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the record and logs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.real:
        return real(args)
    args.span = 240.0 if args.span is None else args.span
    args.down = 6.0 if args.down is None else args.down
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
    return report(args, campaign, result, started)


def report(
    args: argparse.Namespace, campaign: base.Campaign[Any, Any], result: base.Result, started: float
) -> int:
    """The table and figures of either campaign; its work directory kept when asked or
    when something broke. Exit 1 when something broke."""
    print(result.table())
    print(f"wall {time.monotonic() - started:.0f} s; {json.dumps(result.details)}")
    if args.json:
        print(json.dumps({"rows": result.rows, "ticks": result.ticks}))
    if args.keep or result.broke:
        print(f"the record and the supervisor's log are kept in {campaign.work}", file=sys.stderr)
    else:
        campaign.remove()
    return 1 if result.broke else 0


def real(args: argparse.Namespace) -> int:
    span = 600.0 if args.span is None else args.span
    plan = live.Plan(
        jobs=args.jobs,
        flaps=args.flaps,
        span=span,
        down=12.0 if args.down is None else args.down,
        read_timeout=args.read_timeout,
        job_seconds=(span / 12, span / 2),
        seed=args.seed,
    )
    run_dir = Path(os.environ.get("DISPATCH_KUBE_RUN", "/var/tmp/dispatch-kube-flap"))
    offset = int(os.environ.get("DISPATCH_KUBE_PORT_OFFSET", "8000"))
    if offset == 0:
        print("--real needs a plane of its own: DISPATCH_KUBE_PORT_OFFSET not 0", file=sys.stderr)
        return 2
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    began = time.monotonic()
    plane = cluster.own_plane(run_dir, offset)
    say(f"control plane {plane.api} ({run_dir}) ready in {time.monotonic() - began:.0f} s")
    # a stop ends the campaign as Ctrl-C does: the API server is started or thawed again
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    campaign = live.Campaign(plan, plane, say=say)
    started = time.monotonic()
    try:
        result = campaign.run()
    finally:
        try:
            campaign.cancel()
        finally:
            if not args.keep_plane:
                cluster.stop_own(run_dir, offset)
    versions = ", ".join(f"{k} {v}" for k, v in plane.versions.items())
    print(f"real control plane ({versions}; KWOK nodes): {args.jobs} TrainJobs, ", end="")
    print(f"{args.flaps} flaps over {span:g} s")
    return report(args, campaign, result, started)


if __name__ == "__main__":
    sys.exit(main())
