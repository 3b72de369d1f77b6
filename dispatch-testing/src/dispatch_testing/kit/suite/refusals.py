"""Undeclared capabilities are refused by the core, before any hook is called.

The kit never hands an adapter a spec asking for a capability it did not declare: it
submits that spec the way a user does, through :class:`dispatch.Client`, on a backend
that watches every hook call, and checks that the core refused it (``BadInput`` naming the
capability), recorded nothing and asked the adapter nothing. An adapter therefore never
checks for capabilities it does not declare, and a capability added to dispatch later is
off for every adapter that does not declare it: the kit's verdict on it does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dispatch import (
    Backend,
    Capability,
    Cause,
    Client,
    Declarations,
    Discovery,
    JobSpec,
    RecoveryPolicy,
    Registry,
    Resources,
    hookimpl,
)
from dispatch.model.errors import BadInput
from dispatch.model.spec import ArrayMember

from dispatch_testing.kit.view import Kit


def _with_resources(spec: JobSpec, **changes: Any) -> JobSpec:
    resources = Resources.model_validate({**spec.resources.model_dump(), **changes})
    return spec.model_copy(update={"resources": resources})


def spec_needing(spec: JobSpec, capability: Capability) -> JobSpec:
    """``spec`` changed so that it asks for ``capability``."""
    if capability is Capability.TIME_LIMIT:
        return _with_resources(spec, time_limit=timedelta(hours=1))
    if capability is Capability.MULTI_NODE:
        return _with_resources(spec, nodes=2)
    if capability is Capability.GPUS:
        return _with_resources(spec, gpus_per_node=1)
    if capability is Capability.EXCLUDE_NODES:
        return spec.model_copy(update={"exclude_nodes": frozenset({"kit-node-to-avoid"})})
    raise AssertionError(f"the kit does not know how a spec asks for {capability.value!r}")


class Watching:
    """The backend under test, every call it gets written down. It serves no logs (its
    declarations leave ``logs`` out), which no refusal needs."""

    def __init__(self, real: Backend) -> None:
        self.real = real
        self.calls: list[tuple[str, Any]] = []

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        declared = self.real.declarations
        return declared.model_copy(
            update={"capabilities": declared.capabilities - {Capability.LOGS}}
        )

    @hookimpl
    def dispatch_discover(self, job_ids: Sequence[str]) -> Discovery:
        self.calls.append(("discover", tuple(job_ids)))
        return self.real.discover(job_ids)

    @hookimpl
    def dispatch_submit(self, job_id: str, submission: int, spec: JobSpec, gated: bool) -> str:
        self.calls.append(("submit", (job_id, submission, gated)))
        return self.real.submit(job_id, submission, spec, gated)

    @hookimpl
    def dispatch_open_gate(self, object_id: str) -> None:
        self.calls.append(("open_gate", object_id))
        self.real.open_gate(object_id)

    @hookimpl
    def dispatch_stop(self, object_id: str, cause: Cause) -> None:
        self.calls.append(("stop", object_id))
        self.real.stop(object_id, cause)

    @hookimpl
    def dispatch_check_array(self, size: int, max_running: int | None) -> None:
        self.calls.append(("check_array", (size, max_running)))
        self.real.check_array(size, max_running)

    @hookimpl
    def dispatch_submit_array(
        self, group_id: str, members: Sequence[ArrayMember], max_running: int | None
    ) -> list[str] | None:
        self.calls.append(("submit_array", group_id))
        return self.real.submit_array(group_id, members, max_running)

    def submits(self) -> list[tuple[str, int, bool]]:
        return [args for what, args in self.calls if what == "submit"]


def check_refused(kit: Kit, capability: Capability, record: Path) -> None:
    """S-28, S-36: a job asking for ``capability``, which the backend does not declare,
    is refused by the core before anything is recorded or sent."""
    watching = Watching(kit.backend)
    client = Client(
        f"sqlite:///{record}",
        registry=Registry.from_plugins({kit.name: watching}),
        actor="dispatch-kit",
    )
    try:
        if capability is Capability.GATING:
            _check_never_gated(kit, client, watching)
            return
        spec = spec_needing(kit.harness.long_spec(), capability)
        with pytest.raises(BadInput) as refused:
            client.submit_spec(spec, backend=kit.name, policy=RecoveryPolicy())
        assert capability.value in str(refused.value), (
            f"the core's refusal does not name {capability.value!r}: {refused.value}"
        )
        assert client.jobs() == [], "a refused job was recorded"
        assert watching.calls == [], (
            f"the core handed the backend a job asking for the undeclared capability "
            f"{capability.value!r}: {watching.calls}"
        )
    finally:
        client.close()


def _check_never_gated(kit: Kit, client: Client, watching: Watching) -> None:
    """Without ``gating`` the core submits ungated and opens no gate; the adapter may
    ignore ``gated`` and leave ``dispatch_open_gate`` out."""
    handle = client.submit_spec(kit.harness.long_spec(), backend=kit.name)
    supervisor = client.supervisor([handle.job_id], owner="dispatch-kit", clock=kit.now)
    try:
        waited = 0.0
        while not watching.submits():
            supervisor.tick(kit.now())
            if watching.submits():
                break
            assert waited < kit.harness.timeout, (
                f"after {waited:.0f}s the supervisor has not submitted the job"
            )
            kit.harness.wait(kit.harness.poll_interval)
            waited += kit.harness.poll_interval
    finally:
        supervisor.release()
        kit.stop_all([handle.job_id])
    gated = [args for args in watching.submits() if args[2]]
    assert not gated, f"the core asked a backend without gating for gated submissions: {gated}"
    opened = [args for what, args in watching.calls if what == "open_gate"]
    assert not opened, f"the core opened gates {opened} of a backend without gating"
