"""Hooks a backend needs only with a capability (S-30): a backend without
``gating`` may leave out ``dispatch_open_gate``; one declaring ``gating`` (or ``logs``)
without its hook is refused at load time with words that name both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dispatch import (
    BackendBroken,
    Capability,
    CauseKind,
    Declarations,
    Discovery,
    LogSelection,
    hookimpl,
)
from dispatch.backends import Registry


def _backend(name: str, capabilities: frozenset[Capability]) -> object:
    class Minimal:
        @hookimpl
        def dispatch_declare(self) -> Declarations:
            return Declarations(
                name=name,
                node_loss_window=timedelta(seconds=30),
                reports=frozenset({CauseKind.NONE, CauseKind.UNKNOWN}),
                capabilities=capabilities,
            )

        @hookimpl
        def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
            return Discovery(backend=name, at=datetime.now(UTC))

        @hookimpl
        def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
            return f"{name}-{job_id}"

        @hookimpl
        def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
            return None

    return Minimal()


def test_a_backend_without_gating_may_leave_out_open_gate_S30() -> None:
    backend = Registry.from_plugins({"plain": _backend("plain", frozenset())}).get("plain")
    assert backend.declarations.name == "plain"
    assert list(backend.logs("o", LogSelection().of("j", 1))) == []


@pytest.mark.parametrize(
    ("capability", "hook"),
    [(Capability.GATING, "dispatch_open_gate"), (Capability.LOGS, "dispatch_logs")],
)
def test_a_declared_capability_needs_its_hook_S30(capability: Capability, hook: str) -> None:
    registry = Registry.from_plugins({"claims": _backend("claims", frozenset({capability}))})
    with pytest.raises(BackendBroken) as err:
        registry.get("claims")
    assert capability.value in str(err.value) and hook in str(err.value)
