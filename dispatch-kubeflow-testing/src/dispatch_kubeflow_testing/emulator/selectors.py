"""Kubernetes label selectors, parsed the way the API server reads ``labelSelector``.

The emulator must filter server-side, as a real API server does: kmock ignores selectors,
so a test against it could not tell an adapter that lists by label from one that lists
everything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Requirement = Callable[[Mapping[str, str]], bool]

_SET = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*$")


class SelectorError(ValueError):
    """A selector the API server would refuse with 400."""


def _split(selector: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Requirement:
    if m := _SET.match(text):
        if m.group(1):
            raise SelectorError(f"unable to parse requirement: {text!r}")
        key, op = m.group(2), m.group(3)
        values = {v.strip() for v in m.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ.match(text):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.match(text):
        key, negate = m.group(2), bool(m.group(1))
        return lambda labels: (key in labels) != negate
    raise SelectorError(f"unable to parse requirement: {text!r}")


def parse(selector: str | None) -> Requirement:
    """A predicate over an object's labels; an empty selector matches everything."""

    if not selector:
        return lambda labels: True
    requirements = [_requirement(part) for part in _split(selector)]
    return lambda labels: all(r(labels) for r in requirements)
