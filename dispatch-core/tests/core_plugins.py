"""Small backends for the loading tests: one good, several broken in different ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dispatch import Capability, CauseKind, Declarations, Discovery, hookimpl

CALLS: list[tuple[str, str]] = []


class Recording:
    """A backend that only records which instance was called."""

    name = "alpha"

    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Declarations(
            name=self.name,
            node_loss_window=timedelta(seconds=30),
            reports=frozenset({CauseKind.NONE}),
            capabilities=frozenset({Capability.GATING}),
        )

    @hookimpl
    def dispatch_discover(self, job_ids):  # type: ignore[no-untyped-def]
        CALLS.append((self.name, "discover"))
        return Discovery(backend=self.name, at=datetime.now(UTC))

    @hookimpl
    def dispatch_submit(self, job_id, submission, spec, gated):  # type: ignore[no-untyped-def]
        CALLS.append((self.name, "submit"))
        return f"{self.name}-{job_id}-{submission}"

    @hookimpl
    def dispatch_open_gate(self, object_id):  # type: ignore[no-untyped-def]
        CALLS.append((self.name, "open_gate"))

    @hookimpl
    def dispatch_stop(self, object_id, cause):  # type: ignore[no-untyped-def]
        CALLS.append((self.name, "stop"))


class Beta(Recording):
    name = "beta"


class Misspelt(Recording):
    name = "misspelt"

    @hookimpl
    def dispatch_discovr(self, job_ids):  # type: ignore[no-untyped-def]
        return None


class WrongArguments(Recording):
    name = "wrongargs"

    @hookimpl
    def dispatch_stop(self, object_id, cause, force):  # type: ignore[no-untyped-def,override]
        return None


class Incomplete:
    @hookimpl
    def dispatch_declare(self) -> Declarations:
        return Recording().dispatch_declare()


class WrongName(Recording):
    name = "not-what-the-entry-point-says"


class ExplodesOnInit(Recording):
    def __init__(self) -> None:
        raise RuntimeError("needs SCHEDULER_URL")
