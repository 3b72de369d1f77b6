"""Declarations: what a backend says of itself, and its entry point."""

from __future__ import annotations

from datetime import timedelta

from dispatch import Capability, CauseKind, Declarations

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.view import Kit


class DeclarationTests:
    def test_declarations_are_well_formed(self, kit: Kit) -> None:
        """S-25, S-30, S-39: the backend describes itself consistently, without asking the
        scheduler, and its declarations survive encode/decode (S-6)."""
        d = kit.declarations
        assert d.name == kit.name
        assert d.node_loss_window > timedelta(0), "node_loss_window must be positive"
        for kind, window in d.pending_windows.items():
            assert window > timedelta(0), f"pending window for {kind.value} must be positive"
            assert kind in d.reports, f"a pending window for {kind.value!r}, not in reports"
        assert CauseKind.UNKNOWN in d.reports, (
            "every adapter can meet an answer it cannot map (S-4): reports must list 'unknown'"
        )
        assert CauseKind.DUPLICATE not in d.reports, (
            "'duplicate' is dispatch's own cause for a second object it stops; a backend "
            "never reports it"
        )
        if Capability.TIME_LIMIT in d.capabilities:
            assert CauseKind.TIME_LIMIT in d.reports, "time-limit capability without its cause"
        assert Declarations.model_validate_json(d.model_dump_json()) == d
        try:
            before = kit.harness.calls()
        except NotProvokable:
            before = None
        again = kit.backend.plugin.dispatch_declare()  # type: ignore[attr-defined]
        assert again == d, "dispatch_declare answers differently on a second call"
        if before is not None:
            assert kit.harness.calls() == before, "dispatch_declare contacted the scheduler"

    def test_registered_by_its_entry_point(self, kit: Kit) -> None:
        """S-31: the backend is found through the ``dispatch.backends`` entry point alone,
        loads from it with no arguments, and declares the same vocabulary."""
        from dispatch import Registry

        registry = Registry.from_entry_points()
        assert kit.name in registry.names(), (
            f"no 'dispatch.backends' entry point is named {kit.name!r}: "
            f"installed: {registry.names()}, broken: {registry.broken}"
        )
        loaded = registry.get(kit.name).declarations
        mine = kit.declarations
        assert (loaded.reports, loaded.capabilities, loaded.native_actions) == (
            mine.reports,
            mine.capabilities,
            mine.native_actions,
        ), "the entry point's declarations differ from the harness's backend"
