"""Job files: one TOML file that describes a job, for ``dispatch submit job.toml`` and
:meth:`dispatch.Client.submit_file` (the keys: dispatch-core/docs/jobfile.md)::

    name = "llama-8b"
    command = ["torchrun", "train.py", "--config", "8b.yaml"]   # or script = "train.sh"
    backend = "slurm"
    policy = "policies/preempt.toml"     # a path, or an inline [policy] table
    warn = "USR1@90s"
    progress_window = "20m"

    [resources]
    nodes = 2
    gpus_per_node = 8
    time = "4:00:00"

    [options]
    partition = "gpu"

    [sweep]                              # optional: one job per point (dispatch.sweep)
    lr = [1e-3, 3e-4]
    seed = "1..4"
    max_running = 2

Paths in the file (``script``, ``policy``) are relative to the file's directory. Values
given beside the file (command-line flags, keyword arguments) override the file's, key by
key inside ``resources``, ``options`` and ``env``; the profile fills in what neither gives.
A key the file does not know, a value of the wrong type and a file that is not TOML are
refused naming the file, the key and its line, before anything is recorded (S-36).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.model.errors import BadInput

#: Job file keys whose value is a text.
TEXT_KEYS = (
    "name",
    "script",
    "backend",
    "profile",
    "launcher",
    "workdir",
    "warn",
    "checkpoint_dir",
    "progress_window",
)
#: Every top-level key, in the order ``--save`` writes them.
KEYS = (
    "name",
    "command",
    "script",
    "profile",
    "backend",
    "launcher",
    "policy",
    "workdir",
    "warn",
    "checkpoint_dir",
    "progress_window",
    "resources",
    "options",
    "env",
    "sweep",
)
#: The ``[resources]`` keys and the type each takes.
RESOURCE_KEYS: dict[str, tuple[type, ...]] = {
    "nodes": (int,),
    "tasks_per_node": (int,),
    "cpus_per_task": (int,),
    "gpus_per_node": (int,),
    "mem": (str,),
    "memory_mb": (int,),
    "time": (str, int),
}
#: Keys of which one replaces the other when a later layer gives it.
_ALIASES = {"mem": "memory_mb", "memory_mb": "mem", "time": "time_limit", "time_limit": "time"}
#: What a job file may hold at most; far above any real one.
JOB_FILE_LIMIT = 1 << 20


@dataclass(frozen=True)
class JobFile:
    """A job file, read and checked; :attr:`values` holds the keys it gives, with
    ``script`` and a ``policy`` path made absolute and an inline policy parsed."""

    path: Path
    values: dict[str, Any]
    #: the file's text, for the line of a key named in an error
    text: str = ""

    @property
    def profile(self) -> str | None:
        profile = self.values.get("profile")
        return profile if isinstance(profile, str) else None

    def merged(self, over: Mapping[str, Any]) -> dict[str, Any]:
        """The file's values with ``over``'s on top (None: not given), see :func:`layer`."""
        return layer(self.values, over)

    def check_options(self, backend: str, declared: Collection[str]) -> None:
        """Refuse an ``[options]`` key the backend does not declare, naming the file, the
        key and its line (the check ``-o`` gets from the backend's declarations)."""
        from dispatch.userfiles import shown

        for key in self.values.get("options") or {}:
            if key not in declared:
                line = line_of(self.text, ("options", key))
                at = f" line {line}:" if line is not None else ""
                accepted = ", ".join(sorted(declared)) or "none"
                raise BadInput(
                    f"{shown(self.path)}:{at} key 'options.{key}': backend {backend!r} does "
                    f"not accept this option (it accepts: {accepted})"
                )


def is_job_file(word: str) -> bool:
    """Whether a submit's first word names a job file (it ends in ``.toml``)."""
    return word.endswith(".toml")


def layer(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``under``: a value None in ``over`` is not given; ``resources``,
    ``options`` and ``env`` merge key by key (``mem`` replaces ``memory_mb`` and ``time``
    replaces ``time_limit``, and the other way round); a command replaces a script and a
    script a command."""
    merged = {k: v for k, v in under.items() if v is not None}
    given = {k: v for k, v in over.items() if v is not None}
    if any(k in given for k in ("command", "script", "script_file")):
        for key in ("command", "script", "script_file"):
            merged.pop(key, None)
    for key, value in given.items():
        if key in ("resources", "options", "env") and isinstance(value, Mapping):
            table = dict(merged.get(key) or {})
            for name, item in value.items():
                if item is None:
                    continue
                if name in _ALIASES:
                    table.pop(_ALIASES[name], None)
                table[name] = item
            merged[key] = table
        else:
            merged[key] = value
    return merged


def load_job_file(path: str | os.PathLike[str]) -> JobFile:
    """Read and check a job file; :class:`BadInput` names the file, the key and its line."""
    from dispatch.userfiles import read_text, shown

    path = Path(path)
    where = shown(path)
    text = read_text(path, "job file", JOB_FILE_LIMIT)
    try:
        import tomllib

        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: not valid TOML: nested too deeply") from None
    return JobFile(path, _check(data, text, where, path.parent), text)


def _check(data: dict[str, Any], text: str, where: str, base: Path) -> dict[str, Any]:
    def bad(key: str, problem: str) -> BadInput:
        line = line_of(text, tuple(key.split(".")))
        at = f" line {line}:" if line is not None else ""
        return BadInput(f"{where}:{at} key '{key}': {problem}")

    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise bad(unknown[0], f"unknown key (keys: {', '.join(KEYS)})")
    if "command" in data and "script" in data:
        raise bad("script", "give a command or a script, not both")
    values: dict[str, Any] = {}
    for key in TEXT_KEYS:
        if key in data:
            if not isinstance(data[key], str) or not data[key]:
                raise bad(key, f"give a non-empty text, got {_shown(data[key])}")
            values[key] = data[key]
    if "command" in data:
        command = data["command"]
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(w, str) for w in command)
        ):
            raise bad(
                "command",
                "give the program and its arguments as an array of texts, e.g. "
                f'["python", "train.py"]; got {_shown(command)}',
            )
        values["command"] = tuple(command)
    if "script" in values:
        values["script_file"] = str(base / values.pop("script"))
    for table in ("resources", "options", "env"):
        if table in data:
            values[table] = _table(data[table], table, bad)
    if "policy" in data:
        values["policy"] = _policy(data["policy"], base, where, bad)
    if "sweep" in data:
        values["sweep"] = _sweep(data["sweep"], bad)
    return values


def _sweep(value: object, bad: Any) -> dict[str, Any]:
    """``[sweep]``: each key an array of values or an integer range ``"A..B"``, and
    ``max_running`` (a whole number) the bound on members submitted at once."""
    from dispatch.sweep import check_grid, parse

    if not isinstance(value, dict):
        raise bad("sweep", f"give a table ([sweep]), got {_shown(value)}")
    grid: dict[str, Any] = {}
    max_running = value.get("max_running")
    if max_running is not None and (
        isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1
    ):
        raise bad(
            "sweep.max_running", f"give a whole number of at least 1, got {_shown(max_running)}"
        )
    for key, item in value.items():
        if key == "max_running":
            continue
        try:
            if isinstance(item, str):
                grid.update(parse(f"{key}={item}"))
            elif isinstance(item, list):
                grid.update(check_grid({key: item}))
            else:
                raise BadInput(f'give an array of values or a range "A..B", got {_shown(item)}')
        except BadInput as exc:
            raise bad(f"sweep.{key}", str(exc)) from None
    if not grid:
        raise bad("sweep", "give at least one key with its values, e.g. seed = [1, 2]")
    try:
        checked = check_grid(grid)
    except BadInput as exc:
        raise bad("sweep", str(exc)) from None
    return {"grid": checked, "max_running": max_running}


def _table(value: object, table: str, bad: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad(table, f"give a table ([{table}]), got {_shown(value)}")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        if table == "resources":
            types = RESOURCE_KEYS.get(key)
            if types is None:
                raise bad(f"{table}.{key}", f"unknown key (keys: {', '.join(RESOURCE_KEYS)})")
            if isinstance(item, bool) or not isinstance(item, types):
                want = " or ".join("a whole number" if t is int else "a text" for t in types)
                raise bad(f"{table}.{key}", f"give {want}, got {_shown(item)}")
            from dispatch.inputs import build_resources

            try:
                build_resources({key: item}, "resources")
            except BadInput as exc:
                raise bad(f"{table}.{key}", str(exc).partition(": ")[2] or str(exc)) from None
        elif table == "options":
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                raise bad(f"{table}.{key}", f"give a text, got {_shown(item)}")
            item = str(item)
        elif not isinstance(item, str):
            raise bad(f"{table}.{key}", f"give a text, got {_shown(item)}")
        checked[key] = item
    return checked


def _policy(value: object, base: Path, where: str, bad: Any) -> Any:
    if isinstance(value, str) and value:
        return str(base / value)
    if isinstance(value, dict):
        from dispatch.policy_file import parse_policy

        return parse_policy(value, where=f"{where}: [policy]")
    raise bad("policy", f"give a policy file's path or a [policy] table, got {_shown(value)}")


def _shown(value: object) -> str:
    import datetime

    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return f"a TOML {type(value).__name__} {value} (quote it to give a text)"
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a text"}
    kind = kinds.get(type(value), "an array" if isinstance(value, list) else "a table")
    text = repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


_HEADER = re.compile(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(
    r"^((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)


def line_of(text: str, key: tuple[str, ...]) -> int | None:
    """The line (1-based) where ``key`` (or the inline table holding it) is given, or
    None: TOML parsers give the line of a syntax error only."""

    def words(dotted: str) -> tuple[str, ...]:
        return tuple(w.strip().strip("\"'") for w in dotted.split("."))

    header: tuple[str, ...] = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        found = _HEADER.match(line)
        if found:
            header = words(found.group(1))
            if header == key[: len(header)] and len(header) == len(key):
                return number
            continue
        assigned = _ASSIGN.match(line)
        if assigned:
            full = header + words(assigned.group(1))
            if full == key[: len(full)]:
                return number
    return None


# ---------------------------------------------------------------------- writing (--save)
def dumps(values: Mapping[str, Any]) -> str:
    """A job file holding ``values`` (the keys of :data:`KEYS`; None: left out)."""
    top: list[str] = []
    tables: list[str] = []
    for key in KEYS:
        value = values.get(key)
        if value is None or value == {}:
            continue
        if key in ("resources", "options", "env"):
            tables.append(f"\n[{key}]")
            tables += [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
        elif key == "sweep":
            tables.append("\n[sweep]")
            tables += [f"{_key(k)} = {_value(list(v))}" for k, v in value["grid"].items()]
            if value.get("max_running") is not None:
                tables.append(f"max_running = {_value(value['max_running'])}")
        else:
            top.append(f"{key} = {_value(value)}")
    return "\n".join(top + tables) + "\n"


def save_job_file(path: str | os.PathLike[str], values: Mapping[str, Any]) -> None:
    """Write a new job file (an existing file is never written over)."""
    from dispatch.userfiles import shown

    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise BadInput(f"--save {shown(path)}: the file exists; give a new name") from None
    except OSError as exc:
        raise BadInput(f"--save {shown(path)}: cannot create it: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(dumps(values))


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _value(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"a job file holds no {type(value).__name__}")


__all__ = ["JobFile", "dumps", "is_job_file", "layer", "line_of", "load_job_file"]
