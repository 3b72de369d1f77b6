"""What the suite's modules share."""

from __future__ import annotations

import pytest
from dispatch import Cause, CauseKind, ObjectView, Provenance

from dispatch_testing.kit.harness import NotProvokable
from dispatch_testing.kit.view import Kit

STOP = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, actor="kit", detail="kit stop")


def alive(objects: tuple[ObjectView, ...]) -> bool:
    return any(o.alive for o in objects)


def find_object(objects: tuple[ObjectView, ...], object_id: str) -> ObjectView | None:
    return next((o for o in objects if o.object_id == object_id), None)


def not_provokable(kit: Kit, exc: NotProvokable) -> None:
    pytest.xfail(f"not provokable on {kit.name} ({kit.harness.tier}): {exc}")
