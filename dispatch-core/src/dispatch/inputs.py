"""Checking what people give dispatch, before anything is recorded (S-36).

Shared by :class:`dispatch.Client`, the command line and the configuration files, so a
value is refused with the same words wherever it comes from; each error names where the
value was given (an option, a key of a profile, a keyword argument).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.model.enums import Launcher
from dispatch.model.errors import BadInput

if TYPE_CHECKING:
    from dispatch.model.spec import Resources

_RESOURCE_KEYS = (
    "nodes",
    "tasks_per_node",
    "cpus_per_task",
    "gpus_per_node",
    "mem",
    "memory_mb",
    "time",
    "time_limit",
)

_INTERPRETERS = {"sh", "bash", "python", "python3", "torchrun", "srun", "env", "uv", "deepspeed"}


def _text(value: str, where: str) -> str:
    """Refuse text that cannot be recorded: undecodable bytes arrive as surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(value[exc.start]) - 0xDC00 if "\udc80" <= value[exc.start] <= "\udcff" else None
        what = f"byte 0x{byte:02x}" if byte is not None else f"character {value[exc.start]!r}"
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise BadInput(
            f"{where} '{shown}': not valid UTF-8 ({what} at position {exc.start}); "
            "dispatch records text only"
        ) from None
    return value


def check_text(value: object, where: str) -> None:
    """Refuse undecodable bytes anywhere in a str, or in the strs of a tuple/list/dict."""
    if isinstance(value, str):
        _text(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(key, f"{where} key")
            check_text(item, f"{where} {key!r}")
    elif isinstance(value, (tuple, list)):
        for item in value:
            check_text(item, where)


def default_name(script_file: str | os.PathLike[str] | None, command: Sequence[str]) -> str:
    """The script's name, or the program's, skipping an interpreter in front of it."""
    from dispatch.userfiles import shown

    if script_file is not None:
        return shown(Path(script_file).name) or "script"
    words = [w for w in command if not w.startswith("-") and not any(c.isspace() for c in w)]
    for word in words:
        if Path(word).name not in _INTERPRETERS and Path(word).name:
            return Path(word).name
    if not command:  # a script given as text: no file name to go by
        return "script"
    return Path(command[0]).name or "job"


def starts_torchrun(command: Sequence[str]) -> bool:
    """Whether the command starts torchrun: ``torchrun ...`` or ``python -m
    torch.distributed.run ...`` (``python3``, ``python3.11``... too), after an ``env`` and
    its ``NAME=value`` words if the command begins with them."""
    words = list(command)
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    if not words:
        return False
    program = Path(words[0]).name
    if program == "torchrun":
        return True
    interpreter = program == "python" or (
        program.startswith("python") and program[6:].replace(".", "").isdigit()
    )
    return interpreter and words[1:3] == ["-m", "torch.distributed.run"]


def launch(
    command: Sequence[str], launcher: str | None, resources: Resources
) -> tuple[Launcher, Resources]:
    """The launcher and resources a command runs with: a command that starts torchrun
    runs under the ``torchrun`` launcher unless ``launcher`` says otherwise; under it,
    ``gpus_per_node`` N with no ``tasks_per_node`` given starts N workers per node
    (``tasks_per_node`` = N: torchrun's ``nproc_per_node``)."""
    if launcher is None:
        how = Launcher.TORCHRUN if starts_torchrun(command) else Launcher.TASKS
    else:
        try:
            how = Launcher(launcher)
        except ValueError:
            choices = ", ".join(m.value for m in Launcher)
            raise BadInput(f"launcher {launcher!r}: give one of {choices}") from None
    if (
        how is Launcher.TORCHRUN
        and resources.gpus_per_node
        and "tasks_per_node" not in resources.model_fields_set
    ):
        resources = resources.model_copy(update={"tasks_per_node": resources.gpus_per_node})
    return how, resources


def build_resources(
    given: Resources | Mapping[str, Any] | None, where: str = "resources"
) -> Resources:
    """A :class:`dispatch.Resources` from one, or from a mapping of the keys people write
    (``nodes``, ``tasks_per_node``, ``cpus_per_task``, ``gpus_per_node``, ``mem`` such as
    ``"4G"`` or ``memory_mb``, ``time`` such as ``"90m"`` or ``time_limit`` as a timedelta
    or seconds); every error names the key."""
    from dispatch import units
    from dispatch.model.spec import Resources

    if given is None:
        return Resources()
    if isinstance(given, Resources):
        return given
    if not isinstance(given, Mapping):
        raise BadInput(f"{where}: give a Resources or a mapping, not {type(given).__name__}")
    unknown = sorted(set(given) - set(_RESOURCE_KEYS))
    if unknown:
        raise BadInput(
            f"{where}: unknown key(s) {', '.join(map(str, unknown))} "
            f"(keys: {', '.join(_RESOURCE_KEYS)})"
        )
    fields: dict[str, Any] = {}
    for key, minimum in (("nodes", 1), ("tasks_per_node", 1), ("cpus_per_task", 1)):
        if given.get(key) is not None:
            fields[key] = _count(given[key], f"{where}.{key}", minimum)
    if given.get("gpus_per_node") is not None:
        fields["gpus_per_node"] = _count(given["gpus_per_node"], f"{where}.gpus_per_node", 0)
    mem, mb = given.get("mem"), given.get("memory_mb")
    if mem is not None:
        if not isinstance(mem, str):
            raise BadInput(f"{where}.mem: give a size such as '4G', got {mem!r}")
        fields["memory_mb"] = units.megabytes(mem, f"{where}.mem")
    elif mb is not None:
        fields["memory_mb"] = _count(mb, f"{where}.memory_mb", 1)
    limit = given.get("time", given.get("time_limit"))
    if limit is not None:
        key = f"{where}.time" if "time" in given else f"{where}.time_limit"
        if isinstance(limit, timedelta):
            limit = str(int(limit.total_seconds()))
        elif isinstance(limit, (int, float)) and not isinstance(limit, bool):
            limit = str(int(limit)) if limit == int(limit) else str(limit)
        if not isinstance(limit, str):
            raise BadInput(f"{key}: give a duration such as '90m', got {limit!r}")
        fields["time_limit"] = units.duration(limit, key)
    return Resources(**fields)


def _count(value: object, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{where}: give a whole number, got {value!r}")
    if value < minimum:
        raise BadInput(f"{where} must be at least {minimum}, got {value}")
    if value > 1_000_000:
        raise BadInput(f"{where}: {value} is more than any scheduler has")
    return value


def text_pairs(given: Mapping[str, str] | None, where: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for key, value in (given or {}).items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise BadInput(f"{where}: {key!r}={value!r}: keys and values are text, keys non-empty")
        check_text(key, f"{where} key")
        check_text(value, f"{where} {key!r}")
        pairs[key] = value
    return pairs
