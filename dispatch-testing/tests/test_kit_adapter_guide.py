"""The adapter guide's table (dispatch-core/docs/adapters.md) is true: each row's example
object decodes as an ObjectView, shows the phase, kind and provenance its row says, and
passes every check the kit makes of a discovery."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dispatch import CauseKind, Declarations, Discovery, ObjectView
from dispatch_testing.kit import check_discovery

GUIDE = Path(__file__).resolve().parents[2] / "dispatch-core" / "docs" / "adapters.md"
ROW = re.compile(r"^\| (\d+) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \|$", re.M)
EXAMPLE = re.compile(r"^### (\d+)\n\n```json\n(.+?)\n```", re.M | re.S)
#: a backend that may report anything an adapter reports
EVERYTHING = Declarations(
    name="guide",
    node_loss_window=timedelta(minutes=10),
    reports=frozenset(CauseKind) - {CauseKind.DUPLICATE},
)


def _rows() -> dict[int, tuple[str, ...]]:
    return {int(m[1]): tuple(c.strip() for c in m.groups()[1:]) for m in ROW.finditer(_text())}


def _text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _examples() -> dict[int, ObjectView]:
    return {int(m[1]): ObjectView.model_validate_json(m[2]) for m in EXAMPLE.finditer(_text())}


def test_guide_has_one_example_object_per_row() -> None:
    rows, examples = _rows(), _examples()
    assert len(rows) >= 18
    assert sorted(examples) == sorted(rows), "every row has exactly one example object"


@pytest.mark.parametrize("number", sorted(_rows()))
def test_guide_example_matches_its_row_and_passes_the_kit_checks(number: int) -> None:
    """S-2, S-4, S-19, S-42: the example is what the row says, and the kit accepts it."""
    _, phase, kind, provenance, _, _ = _rows()[number]
    obj = _examples()[number]
    if phase.startswith("from its timestamps"):
        started = any(e.started_at for e in obj.executions)
        ended = any(e.ended_at for e in obj.executions)
        phase = "ended" if ended else "running" if started else "pending"
    assert obj.phase.value == phase
    if kind == "—":
        assert obj.cause is None
    else:
        assert obj.cause is not None
        assert obj.cause.kind.value == kind.split()[0]
        assert obj.cause.provenance.value == provenance.split()[0]
    discovery = Discovery(backend="guide", at=datetime(2026, 1, 2, tzinfo=UTC), objects=(obj,))
    check_discovery(discovery, EVERYTHING, [obj.job_id])


def test_guide_answers_the_four_questions() -> None:
    """The rows a first adapter's author asks about say what the kit enforces."""
    rows, examples = _rows(), _examples()
    stop = next(n for n, r in rows.items() if "dispatch's own stop" in r[0])
    assert examples[stop].cause is not None and examples[stop].cause.provenance.value == "actor"
    unmappable = next(n for n, r in rows.items() if "cannot map" in r[0])
    assert examples[unmappable].alive, "an unmappable answer about a run not shown ended"
    never_started = [o for o in examples.values() if not o.alive and not o.executions]
    assert never_started, "an ended object without an execution is shown"
    text = _text()
    for question in (
        "**The provenance of dispatch's own stop**",
        "**The phase of an unmappable answer**",
        "**`reports` includes `none`**",
        "**An ended object needs an `Execution`**",
    ):
        assert question in text
