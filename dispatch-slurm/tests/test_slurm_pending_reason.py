"""A pending object carries Slurm's Reason for people (``watch``, ``list``); a gated,
running or ended one carries none."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from dispatch import Phase
from dispatch_slurm.observe import build_objects

REC = Path(__file__).parent / "data" / "recorded"
AT = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)


def test_a_pending_object_says_why_it_waits() -> None:
    squeue = (REC / "tick-ended.squeue").read_text()
    sacct = (REC / "tick-ended.sacct").read_text()
    line = next(x for x in squeue.splitlines() if "smoke-63a0ac-cpus" in x)
    _, rest = line.split("|", 1)  # another Slurm job id, another job, another reason
    waiting = "9999|" + rest.replace("smoke-63a0ac-cpus", "waits-priority").replace(
        "|PartitionConfig|", "|Priority|"
    )
    wanted = {
        "smoke-63a0ac-cpus",
        "smoke-63a0ac-gated",
        "waits-priority",
        "live-1792712e-signal",
    }
    seen = {o.job_id: o for o in build_objects(squeue + waiting + "\n", sacct, None, wanted, AT)}
    assert (seen["waits-priority"].phase, seen["waits-priority"].pending_reason) == (
        Phase.PENDING,
        "Priority",
    )
    assert seen["waits-priority"].cause is None  # an ordinary wait: no cause
    assert seen["smoke-63a0ac-cpus"].pending_reason == "PartitionConfig"
    assert seen["smoke-63a0ac-gated"].pending_reason is None
    assert seen["live-1792712e-signal"].pending_reason is None
