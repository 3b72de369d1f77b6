"""A flapping slurmctld never causes a recovery (S-5), on the real cluster.

A shorter run of ``benchmarks/slurm_flapping.py``: eight jobs of one or two nodes under a
real ``dispatch supervise`` process, with a policy that resubmits on every ending it may,
while slurmctld is stopped and started, then frozen and thawed, twice each
(``start-slurm.sh ctld``, the selected version's controller only). The campaign's checks
are in :mod:`dispatch_slurm_testing.flapping`; the supervisor's worst ticks are printed,
not asserted.
"""

from __future__ import annotations

import pytest
from dispatch_slurm.runner import UNREACHABLE_MARKERS
from dispatch_slurm_testing.flapping import Campaign, Plan

pytestmark = pytest.mark.live(server="slurm")


def test_a_flapping_controller_never_causes_a_recovery_S5(slurm_cluster: str) -> None:
    campaign = Campaign(
        Plan(jobs=8, flaps=4, span=100, down=8, job_seconds=(60, 150), settle=900),
        say=print,
    )
    try:
        result = campaign.run()
    finally:
        campaign.cancel()
    print(result.table())
    broken = [row for row in result.rows if row["broke"]]
    assert not broken, f"{result.table()}\n{result.details}"
    # both kinds of outage were tried, and status asked while jobs ran
    tried = {str(row["what"]): int(str(row["tried"])) for row in result.rows}
    assert tried["flap: slurmctld stopped, started"] == 2
    assert tried["flap: slurmctld frozen, thawed"] == 2
    assert tried["status while down: record, words, exit 3"] >= 1
    # status gave Slurm's own words for the outage (or said it waited in vain)
    words = result.details["status words"]
    said = (*UNREACHABLE_MARKERS, "did not answer within")
    assert words and all(any(m in w for m in said) for w in words), words
    campaign.remove()
