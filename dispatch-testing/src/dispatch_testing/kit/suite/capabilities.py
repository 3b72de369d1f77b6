"""Capabilities: each declared one works; each undeclared one the core refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dispatch import Capability

from dispatch_testing.kit.suite.exclusion import check_exclusion
from dispatch_testing.kit.suite.launch_contract import check_contract
from dispatch_testing.kit.suite.logs import check_logs
from dispatch_testing.kit.suite.refusals import check_refused, spec_needing
from dispatch_testing.kit.suite.stop import check_gate
from dispatch_testing.kit.suite.support import alive
from dispatch_testing.kit.suite.sweeps import check_arrays
from dispatch_testing.kit.view import Kit


class CapabilityTests:
    def test_capability(
        self, kit: Kit, capability: Capability, new_job: Callable[[], str], tmp_path: Path
    ) -> None:
        """S-28, S-30, S-36, S-41, S-43, S-46: a declared capability works; a job asking
        for an undeclared one is refused by the core before any hook is called (the
        adapter is never asked, so it need not check), and ``logs`` undeclared is not
        implemented at all."""
        job = new_job()
        declared = capability in kit.declarations.capabilities
        if capability is Capability.LOGS:
            check_logs(kit, job, new_job) if declared else check_no_logs(kit)
            return
        if capability is Capability.ARRAYS:  # never refused: without it, one object each
            check_arrays(kit, tmp_path / "arrays.db", declared)
            return
        if not declared:
            check_refused(kit, capability, tmp_path / "refusals.db")
            return
        if capability is Capability.MULTI_NODE:
            check_contract(kit, job)
            return
        if capability is Capability.EXCLUDE_NODES:
            check_exclusion(kit, job)
            return
        if capability is Capability.GATING:
            object_id = kit.backend.submit(job, 1, kit.harness.long_spec(), True)
            check_gate(kit, job, object_id)
            return
        kit.backend.submit(job, 1, spec_needing(kit.harness.long_spec(), capability), False)
        kit.wait_for(job, alive, "listed alive")


def check_no_logs(kit: Kit) -> None:
    assert not hasattr(kit.backend.plugin, "dispatch_logs"), (
        "the backend implements dispatch_logs but does not declare the logs capability"
    )
