"""Capabilities: each declared one works, each undeclared one is refused."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from dispatch import Capability, JobSpec, Resources, SubmitRefused
from dispatch.model.errors import DispatchError

from dispatch_testing.kit.suite.exclusion import check_exclusion
from dispatch_testing.kit.suite.launch_contract import check_contract
from dispatch_testing.kit.suite.logs import check_logs
from dispatch_testing.kit.suite.stop import check_gate
from dispatch_testing.kit.suite.support import alive
from dispatch_testing.kit.view import Kit


def _with_resources(spec: JobSpec, **changes: Any) -> JobSpec:
    resources = Resources.model_validate({**spec.resources.model_dump(), **changes})
    return spec.model_copy(update={"resources": resources})


def _spec_needing(spec: JobSpec, capability: Capability) -> JobSpec:
    if capability is Capability.TIME_LIMIT:
        return _with_resources(spec, time_limit=timedelta(hours=1))
    if capability is Capability.MULTI_NODE:
        return _with_resources(spec, nodes=2)
    if capability is Capability.GPUS:
        return _with_resources(spec, gpus_per_node=1)
    if capability is Capability.EXCLUDE_NODES:
        return spec.model_copy(update={"exclude_nodes": frozenset({"kit-node-to-avoid"})})
    return spec


class CapabilityTests:
    def test_capability(self, kit: Kit, capability: Capability, new_job: Callable[[], str]) -> None:
        """S-28, S-30, S-41, S-43, S-46: a declared capability works; an undeclared one is
        refused with ``SubmitRefused`` at submit and creates nothing (never silently
        ignored), or for ``logs`` is not implemented at all."""
        job = new_job()
        declared = capability in kit.declarations.capabilities
        gated = capability is Capability.GATING
        if capability is Capability.LOGS:
            check_logs(kit, job, new_job) if declared else check_no_logs(kit)
            return
        spec = _spec_needing(kit.harness.long_spec(), capability)
        if not declared:
            with pytest.raises(DispatchError) as refused:
                kit.backend.submit(job, 1, spec, gated)
            raised = type(refused.value).__name__
            if refused.value.__cause__ is not None:  # the core's wrapping of a stray error
                raised = f"{type(refused.value.__cause__).__name__} ({raised})"
            assert isinstance(refused.value, SubmitRefused), (
                f"a submit asking for the undeclared capability {capability.value!r} raised "
                f"{raised}; the hook spec names SubmitRefused, which the core records as a "
                "failed submission (any other error is a fault in the backend)"
            )
            assert str(refused.value).strip(), "the refusal must say what is not supported"
            assert kit.objects(job) == (), "a refused submit created an object"
            return
        if capability is Capability.MULTI_NODE:
            check_contract(kit, job)
            return
        if capability is Capability.EXCLUDE_NODES:
            check_exclusion(kit, job)
            return
        object_id = kit.backend.submit(job, 1, spec, gated)
        if not gated:
            kit.wait_for(job, alive, "listed alive")
            return
        check_gate(kit, job, object_id)


def check_no_logs(kit: Kit) -> None:
    assert not hasattr(kit.backend.plugin, "dispatch_logs"), (
        "the backend implements dispatch_logs but does not declare the logs capability"
    )
