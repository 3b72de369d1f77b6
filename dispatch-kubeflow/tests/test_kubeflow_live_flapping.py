"""Live tier: the real kube-apiserver goes away under TrainJobs run by a real ``dispatch
supervise`` process, stopped and started again (connections refused) and frozen and
thawed (connections accepted, nothing answers), in turns, and nothing breaks (S-5).

The campaign runs on a control plane of its own (its own run dir and ports, beside the
default plane, whose API server the other live tests use), started here and stopped after;
``benchmarks/kube_flapping.py --real`` runs the full one (40 TrainJobs, 20 outages over
10 minutes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dispatch_kubeflow_testing.live import cluster
from dispatch_kubeflow_testing.live.cluster import ControlPlane
from dispatch_kubeflow_testing.live.flapping import Campaign, Plan

pytestmark = pytest.mark.live(server="kubeflow")

RUN_DIR = Path("/var/tmp/dispatch-kube-flap-test")
#: no port in common with the planes at offsets 0, 1000, 2000, 6000, 7000 and 8000, and
#: every port below the kernel's ephemeral range (a client's own port never takes one)
OFFSET = 8500


@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    """Started (or found running) through start-kube.sh; a plane that cannot start fails
    the test with the script's output (ControlPlaneError)."""
    plane = cluster.own_plane(RUN_DIR, OFFSET)
    try:
        yield plane
    finally:
        cluster.stop_own(RUN_DIR, OFFSET)


def test_live_api_server_stopped_and_frozen_under_trainjobs_breaks_nothing_S5(
    own_plane: ControlPlane,
) -> None:
    """S-5: 6 TrainJobs of one or two nodes, the API server stopped 3 times and frozen 3
    times: no recovery, no cause changed, no event lost, every job succeeded with one
    TrainJob that completed and pods that ran once; ``dispatch status`` during each
    outage shows the record and the API server's words, exits 3 and appends nothing;
    the supervisor reaches the API server again after each."""
    plan = Plan(
        jobs=6,
        flaps=6,
        span=60.0,
        down=6.0,
        job_seconds=(60.0, 100.0),
        interval=1.0,
        read_timeout=3.0,
        settle=300.0,
    )
    campaign = Campaign(plan, own_plane)
    try:
        result = campaign.run()
    finally:
        campaign.cancel()
    assert result.broke == 0, f"{result.table()}\n{result.details}"
    tried = {str(r["what"]): int(str(r["tried"])) for r in result.rows}
    assert tried["flap: kube-apiserver stopped, started"] == 3
    assert tried["flap: kube-apiserver frozen, thawed"] == 3
    assert tried["jobs: no recovery"] == 6
    assert tried["status while down: record, words, exit 3"] >= 1, result.details
    campaign.remove()
