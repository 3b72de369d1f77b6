"""A sweep: one command over a grid of values, recorded as one group of jobs.

The grid is written ``lr=[1e-3,3e-4],seed=1..4``: comma-separated parts, each a key with
a list of values in brackets (``key=[v1,v2,...]``) or an inclusive range of integers
(``key=A..B``). The members are the cross product of the parts, the last key varying
fastest: ``lr=[a,b],seed=1..2`` is (a,1), (a,2), (b,1), (b,2), members 0 to 3.

Each member's command and name get ``{key}`` replaced by its value (``{{`` and ``}}`` are
a literal brace); every key must be used by the command or the name, and every
placeholder must be a key. Each member's environment gains ``DISPATCH_SWEEP_GROUP``,
``DISPATCH_SWEEP_INDEX``, ``DISPATCH_SWEEP_SIZE`` and ``DISPATCH_SWEEP_<KEY>`` (the key in
capitals) for each value.

Everything here is checked before anything is recorded; a mistake is a ``BadInput``
naming where it is (the character of the grid, the word of the command).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dispatch.model.errors import BadInput

#: The most members one sweep may have.
MAX_MEMBERS = 10_000

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RANGE = re.compile(r"(-?[0-9]+)\.\.(-?[0-9]+)")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")

#: A grid: each key with its values, in the order written.
Grid = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Member:
    """One member of a sweep: its place (0-based) and its value of each key."""

    index: int
    values: dict[str, str]


def parse(text: str) -> dict[str, tuple[str, ...]]:
    """The grid ``text`` writes, each key with its values in order.

    :raises BadInput: naming the character where the grammar breaks, a duplicate key, an
        empty list, a backwards range, or a grid of more than :data:`MAX_MEMBERS` members.
    """
    if not isinstance(text, str):
        raise BadInput("sweep: give the grid as text, e.g. 'lr=[1e-3,3e-4],seed=1..4'")
    grid: dict[str, tuple[str, ...]] = {}
    pos = 0
    while True:
        key_match = _KEY.match(text, pos)
        if key_match is None:
            raise _bad(text, pos, "expected a key (letters, digits, _)")
        key = key_match.group()
        pos = key_match.end()
        if not text.startswith("=", pos):
            raise _bad(text, pos, f"expected '=' after the key {key!r}")
        pos += 1
        start = pos
        if text.startswith("[", pos):
            end = text.find("]", pos)
            if end < 0:
                raise _bad(text, pos, "a list opened with '[' is never closed with ']'")
            items = [item.strip() for item in text[pos + 1 : end].split(",")]
            offset = pos + 1
            for item in text[pos + 1 : end].split(","):
                if not item.strip():
                    raise _bad(text, offset, f"an empty value in the list of {key!r}")
                if any(c in item for c in "[{}"):
                    raise _bad(text, offset, f"a value of {key!r} holds a bracket or brace")
                offset += len(item) + 1
            values = tuple(items)
            pos = end + 1
        else:
            range_match = _RANGE.match(text, pos)
            if range_match is None:
                raise _bad(text, pos, f"expected a list [v1,v2,...] or a range A..B for {key!r}")
            low, high = int(range_match.group(1)), int(range_match.group(2))
            if low > high:
                raise _bad(text, start, f"the range {low}..{high} of {key!r} runs backwards")
            if high - low >= MAX_MEMBERS:
                raise _too_many(high - low + 1)
            values = tuple(str(n) for n in range(low, high + 1))
            pos = range_match.end()
        for other in grid:
            if other.upper() == key.upper():
                raise _bad(text, key_match.start(), f"the key {key!r} is given twice")
        grid[key] = values
        if pos == len(text):
            break
        if text[pos] != ",":
            raise _bad(text, pos, "expected ',' before the next key, or the end")
        pos += 1
    size = 1
    for values in grid.values():
        size *= len(values)
        if size > MAX_MEMBERS:
            raise _too_many(_product(len(v) for v in grid.values()))
    return grid


def check_grid(grid: Mapping[str, Sequence[object]]) -> dict[str, tuple[str, ...]]:
    """A grid given as a mapping (``Client.sweep``, a job file's ``[sweep]`` table),
    checked as :func:`parse` checks text: keys, non-empty lists, at most
    :data:`MAX_MEMBERS` members. Values are kept as their text (``str(value)``)."""
    if not isinstance(grid, Mapping) or not grid:
        raise BadInput("sweep: give at least one key with its values, e.g. {'seed': [1, 2]}")
    checked: dict[str, tuple[str, ...]] = {}
    for key, raw in grid.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise BadInput(f"sweep key {key!r}: use letters, digits and _, not first a digit")
        if any(other.upper() == key.upper() for other in checked):
            raise BadInput(f"sweep key {key!r}: given twice")
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (Sequence, range)):
            raise BadInput(f"sweep key {key!r}: give a list of values")
        if not raw:
            raise BadInput(f"sweep key {key!r}: the list of values is empty")
        values = []
        for value in raw:
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise BadInput(f"sweep key {key!r}: {value!r} is not a string or a number")
            values.append(str(value))
        checked[key] = tuple(values)
    size = _product(len(v) for v in checked.values())
    if size > MAX_MEMBERS:
        raise _too_many(size)
    return checked


def expand(grid: Mapping[str, Sequence[str]]) -> list[Member]:
    """Every member of ``grid``: the cross product, the last key varying fastest."""
    keys = list(grid)
    return [
        Member(index, dict(zip(keys, combo, strict=True)))
        for index, combo in enumerate(itertools.product(*(grid[k] for k in keys)))
    ]


def placeholders(text: str, where: str) -> set[str]:
    """The keys ``text`` names as ``{key}``; a brace that is not a placeholder is refused."""
    found: set[str] = set()
    for match in _PLACEHOLDER.finditer(text):
        name = match.group(1)
        if name is None:
            continue  # {{ or }}
        if not _KEY.fullmatch(name):
            raise BadInput(
                f"sweep: {where} has {match.group()!r} at character {match.start() + 1}, "
                "not a {key} placeholder (write {{ and }} for a literal brace)"
            )
        found.add(name)
    return found


def check_uses(grid: Mapping[str, Sequence[str]], command: Sequence[str], name: str | None) -> None:
    """Every placeholder of the command and the name is a key, and every key is used."""
    used: set[str] = set()
    texts = [(word, f"command word {i + 1}") for i, word in enumerate(command)]
    if name is not None:
        texts.append((name, "the name"))
    for text, where in texts:
        for key in sorted(placeholders(text, where)):
            if key not in grid:
                raise BadInput(
                    f"sweep: {where} uses {{{key}}}, which is not a key of the sweep "
                    f"(keys: {', '.join(grid)})"
                )
            used.add(key)
    unused = [key for key in grid if key not in used]
    if unused:
        raise BadInput(
            f"sweep: the key(s) {', '.join(unused)} are never used: put {{{unused[0]}}} in "
            "the command or the name"
        )


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{key}`` replaced by its value, ``{{``/``}}`` by one brace."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group()[0]
        return values[name]

    return _PLACEHOLDER.sub(one, text)


def environment(group_id: str, member: Member, size: int) -> dict[str, str]:
    """The variables a member's command gets."""
    env = {
        "DISPATCH_SWEEP_GROUP": group_id,
        "DISPATCH_SWEEP_INDEX": str(member.index),
        "DISPATCH_SWEEP_SIZE": str(size),
    }
    for key, value in member.values.items():
        env[f"DISPATCH_SWEEP_{key.upper()}"] = value
    return env


def member_id(group_id: str, index: int) -> str:
    """The job id of member ``index`` of group ``group_id``."""
    return f"{group_id}-{index}"


def new_group_id() -> str:
    """Short, unguessable, and distinct from a job id (which starts with ``j``)."""
    import secrets

    return "g" + secrets.token_hex(6)


_GROUP_ID = re.compile(r"g[0-9a-f]{12}")
_MEMBER_ID = re.compile(r"(g[0-9a-f]{12})-([0-9]+)")


def is_group_id(text: str) -> bool:
    return bool(_GROUP_ID.fullmatch(text))


def group_of(job_id: str) -> str | None:
    """The group of a sweep member's job id (``g...-3`` -> ``g...``), else None."""
    match = _MEMBER_ID.fullmatch(job_id)
    return match.group(1) if match else None


def index_of(job_id: str) -> int:
    """A member's index from its job id (-1 for a job that is no member)."""
    match = _MEMBER_ID.fullmatch(job_id)
    return int(match.group(2)) if match else -1


def _product(sizes: Iterable[int]) -> int:
    size = 1
    for n in sizes:
        size *= n
    return size


def _bad(text: str, pos: int, why: str) -> BadInput:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return BadInput(f"sweep {shown!r}: at character {pos + 1}: {why}")


def _too_many(size: int) -> BadInput:
    return BadInput(f"sweep: {size} members; at most {MAX_MEMBERS} in one sweep")


__all__ = [
    "MAX_MEMBERS",
    "Grid",
    "Member",
    "check_grid",
    "check_uses",
    "environment",
    "expand",
    "group_of",
    "index_of",
    "is_group_id",
    "member_id",
    "new_group_id",
    "parse",
    "placeholders",
    "substitute",
]
