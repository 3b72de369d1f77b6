"""The public API is one list (``dispatch._WHERE``): ``__all__``, the lazy imports and the
type checker's imports all say the same, and every type a public model exposes is in it."""

from __future__ import annotations

import ast
import enum
import subprocess
import sys
import typing
from pathlib import Path

import dispatch
import pytest
from pydantic import BaseModel

WHERE: dict[str, str] = dispatch._WHERE


def _type_checking_imports() -> set[tuple[str, str]]:
    tree = ast.parse(Path(dispatch.__file__).read_text())
    block = next(
        n
        for n in tree.body
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
    )
    found = set()
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
            found.add((node.module, alias.name))
    return found


def test_all_and_the_type_checker_imports_come_from_the_one_list() -> None:
    assert dispatch.__all__ == sorted(WHERE)
    assert _type_checking_imports() == {(m, n) for n, m in WHERE.items()}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_every_public_name_is_defined_where_the_list_says(name: str) -> None:
    value = getattr(dispatch, name)
    module = sys.modules[WHERE[name]]
    assert getattr(module, name) is value


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dispatch.Nope  # noqa: B018


def _exposed(model: type[BaseModel], seen: set[type]) -> set[type]:
    """Every model and enum reachable from ``model``'s fields."""
    for field in model.model_fields.values():
        stack: list[object] = [field.annotation]
        while stack:
            tp = stack.pop()
            stack.extend(typing.get_args(tp))
            if not isinstance(tp, type) or tp in seen:
                continue
            if issubclass(tp, BaseModel):
                seen.add(tp)
                _exposed(tp, seen)
            elif issubclass(tp, enum.Enum):
                seen.add(tp)
    return seen


@pytest.mark.parametrize("root", ["Status", "Job", "Discovery", "JobSpec"])
def test_every_type_a_public_model_exposes_is_public(root: str) -> None:
    model = getattr(dispatch, root)
    missing = {t.__name__ for t in _exposed(model, set()) if t.__name__ not in WHERE}
    assert not missing, f"{root} exposes types dispatch does not export: {sorted(missing)}"


def test_effects_and_events_are_public() -> None:
    effect_types = set(typing.get_args(dispatch.Effect))
    assert effect_types == {dispatch.Append, dispatch.Submit, dispatch.OpenGate, dispatch.Stop}
    assert typing.get_origin(dispatch.Event) is typing.Annotated


def test_importing_dispatch_loads_no_model_until_asked() -> None:
    code = "import sys, dispatch; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
