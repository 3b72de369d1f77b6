"""Slurm out of reach raises Unreachable, never a state (S-5), on real daemons.

slurmctld is stopped (and restarted by the start script) for the controller case; slurmdbd
for the accounting case, where squeue still answers but sacct refuses: dispatch does not
report a discovery from squeue alone (sacct holds the executions), it raises.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
from dispatch import Cause, CauseKind, Provenance, Unreachable
from dispatch_slurm.backend import SlurmBackend
from dispatch_slurm.runner import Runner
from dispatch_slurm_testing.cluster import STATE_DIR, start
from dispatch_testing.waiting import eventually

pytestmark = pytest.mark.live(server="slurm")

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail="live test")


def _kill(pidfile: Path) -> None:
    pid = int(pidfile.read_text().strip())
    os.kill(pid, signal.SIGTERM)

    def stopped() -> bool:  # gone, or a zombie its parent has not reaped yet
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")

    eventually(stopped, timeout=30, interval=0.1, what=f"pid {pid} from {pidfile} stops")


def _restart() -> None:
    start(timeout=180)


def test_controller_down_raises_unreachable_for_every_hook_S5(slurm_cluster, provoker) -> None:
    backend = SlurmBackend(Runner(timeout=20))
    job = f"live-unreach-{uuid.uuid4().hex[:8]}"
    oid = provoker.long(job)
    _kill(STATE_DIR / "slurmctld.pid")
    try:
        with pytest.raises(Unreachable, match="Unable to contact slurm controller"):
            backend.dispatch_discover([job])
        with pytest.raises(Unreachable, match="Unable to contact slurm controller"):
            backend.dispatch_stop(oid, STOP)
        with pytest.raises(Unreachable, match="Unable to contact slurm controller"):
            backend.dispatch_submit(f"{job}-2", 1, provoker.spec(("true",)), False)
    finally:
        _restart()
    found = backend.dispatch_discover([job]).objects
    assert [o.object_id for o in found] == [oid]  # the running job survived the outage
    backend.dispatch_stop(oid, STOP)


def test_accounting_down_raises_unreachable_not_a_partial_discovery_S5(slurm_cluster) -> None:
    backend = SlurmBackend()
    _kill(STATE_DIR / "slurmdbd.pid")
    try:
        with pytest.raises(Unreachable, match="Connection refused"):
            backend.dispatch_discover(["any-job"])
    finally:
        _restart()
    assert backend.dispatch_discover(["any-job"]).objects == ()
