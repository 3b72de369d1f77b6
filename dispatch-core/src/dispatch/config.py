"""Configuration: named profiles of defaults, and where each effective value came from.

Two files may hold profiles, both TOML::

    # dispatch.toml (the project file: the first found upward from the working directory)
    # or $XDG_CONFIG_HOME/dispatch/config.toml (the user file; ~/.config/dispatch/...)
    [profile.default]                # used when no profile is named
    backend = "slurm"
    policy = "policies/preempt.toml" # relative to the file that names it
    store = "postgresql://dispatch@db/dispatch"

    [profile.default.resources]
    nodes = 2
    tasks_per_node = 4
    time = "2h"
    mem = "16G"

    [profile.default.options]
    partition = "gpu"

    [profile.default.notify]
    url = "http://hooks.internal/dispatch"    # POST, JSON body
    command = ["notify-send", "dispatch"]    # or run this, JSON on stdin
    timeout = 10

A profile is chosen by ``--profile NAME``, else ``DISPATCH_PROFILE``, else ``default``.
Each setting is taken, key by key (``resources.nodes``, ``options.partition``...), from the
first of: the command line, the environment (``DISPATCH_STORE``, ``DISPATCH_BACKEND``,
``DISPATCH_POLICY``, ``DISPATCH_NOTIFY_URL``), the project file's profile, the user file's
profile, the built-in default. ``dispatch config`` shows every value and its source.

A config file (and a policy it names) is used only when it is owned by the user running
dispatch or by root and nobody else can write it; any other is refused naming its path
and owner (:func:`dispatch.userfiles.check_trusted`), never skipped.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.model.errors import BadInput

if TYPE_CHECKING:
    from dispatch.notify import Notifier

PROJECT_FILE = "dispatch.toml"
USER_FILE = "config.toml"
PROFILE_ENV = "DISPATCH_PROFILE"
DEFAULT_PROFILE = "default"

#: The environment layer: setting -> variable.
ENVIRONMENT = {
    "store": "DISPATCH_STORE",
    "backend": "DISPATCH_BACKEND",
    "policy": "DISPATCH_POLICY",
    "notify.url": "DISPATCH_NOTIFY_URL",
}

_TEXT_KEYS = ("backend", "policy", "store")
_TABLES = ("resources", "options", "notify")
_NOTIFY_KEYS = ("url", "command", "timeout", "events")


@dataclass(frozen=True)
class Setting:
    """One effective value and where it came from (``dispatch config`` shows both)."""

    key: str
    value: Any
    source: str


@dataclass
class Config:
    """The effective configuration for one profile."""

    profile: str
    project_file: Path | None = None
    user_file: Path | None = None
    settings: dict[str, Setting] = field(default_factory=dict)

    def value(self, key: str) -> Any:
        """A setting's value (None when unset); ``resources``/``options``/``notify`` give
        a dict of their keys, or None when none is set."""
        if key in _TABLES:
            prefix = key + "."
            found = {
                k.removeprefix(prefix): s.value
                for k, s in self.settings.items()
                if k.startswith(prefix)
            }
            return found or None
        setting = self.settings.get(key)
        return None if setting is None else setting.value

    def source(self, key: str) -> str | None:
        setting = self.settings.get(key)
        return None if setting is None else setting.source

    def rows(self) -> list[Setting]:
        return [self.settings[k] for k in sorted(self.settings)]

    def notifier(self, store_url: str | None) -> Notifier | None:
        """The notifier the profile configures (None: no ``notify.url``/``notify.command``)."""
        notify = self.value("notify") or {}
        if not notify.get("url") and not notify.get("command"):
            return None
        from dispatch.notify import Notifier, cursor_path

        return Notifier(
            store_url,
            url=notify.get("url"),
            command=notify.get("command"),
            timeout=notify.get("timeout", 10.0),
            events=notify.get("events"),
            cursor=cursor_path(store_url, notify),
        )


def user_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/dispatch``; XDG says to ignore a relative XDG_CONFIG_HOME."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "dispatch"


def find_project_file(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The first ``dispatch.toml`` in ``cwd`` or a directory above it.

    Whatever holds the name is found, not only a regular file: a FIFO, a directory or a
    dangling link named ``dispatch.toml`` is then refused when read, naming its path
    (skipping it would silently apply another file's settings, or none).
    """
    here = Path(cwd) if cwd is not None else Path.cwd()
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_FILE
        if os.path.lexists(candidate):
            return candidate
    return None


def _profiles(path: Path) -> dict[str, dict[str, Any]]:
    from dispatch.userfiles import CONFIG_LIMIT, read_toml

    data = read_toml(path, "config file", CONFIG_LIMIT, trusted=True)
    extra = sorted(set(data) - {"profile"})
    if extra:
        raise BadInput(
            f"{path}: unknown top-level key(s) {', '.join(extra)}; "
            "settings go in [profile.NAME] tables"
        )
    profiles = data.get("profile", {})
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        raise BadInput(f"{path}: 'profile' must hold tables ([profile.NAME])")
    return profiles


def _layer(path: Path, name: str, table: dict[str, Any], source: str) -> list[Setting]:
    """One file's profile as settings, each checked, errors naming file, profile and key."""
    from dispatch.inputs import build_resources

    where = f"{path}: [profile.{name}]"
    unknown = sorted(set(table) - set(_TEXT_KEYS) - set(_TABLES))
    if unknown:
        keys = ", ".join((*_TEXT_KEYS, *_TABLES))
        raise BadInput(f"{where}: unknown key(s) {', '.join(unknown)} (keys: {keys})")
    found: list[Setting] = []
    for key in _TEXT_KEYS:
        if key in table:
            value = table[key]
            if not isinstance(value, str) or not value.strip():
                raise BadInput(f"{where}: {key} must be a non-empty string, got {value!r}")
            if key == "policy":
                value = str((path.parent / value).resolve())
            found.append(Setting(key, value, source))
    for key in _TABLES:
        sub = table.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            raise BadInput(f"{where}: {key} must be a table ([profile.{name}.{key}])")
        if key == "resources":
            build_resources(sub, where=f"{where}.resources")
        elif key == "options":
            for k, v in sub.items():
                if not isinstance(v, str):
                    raise BadInput(f"{where}.options: {k} must be a string, got {v!r}")
        else:
            sub = _notify(sub, f"{where}.notify")
        found += [Setting(f"{key}.{k}", v, source) for k, v in sub.items()]
    return found


def _notify(table: dict[str, Any], where: str) -> dict[str, Any]:
    from dispatch.notify import EVENTS
    from dispatch.units import seconds

    unknown = sorted(set(table) - set(_NOTIFY_KEYS))
    if unknown:
        raise BadInput(
            f"{where}: unknown key(s) {', '.join(unknown)} (keys: {', '.join(_NOTIFY_KEYS)})"
        )
    checked = dict(table)
    url = table.get("url")
    if url is not None:
        checked["url"] = check_url(url, f"{where}.url")
    command = table.get("command")
    if command is not None:
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as exc:
                raise BadInput(f"{where}.command {command!r}: {exc}") from None
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(w, str) for w in command)
        ):
            raise BadInput(
                f"{where}.command: give the program and its arguments as a list of strings"
            )
        checked["command"] = command
    if "timeout" in table:
        if isinstance(table["timeout"], bool):
            raise BadInput(f"{where}.timeout: give a number of seconds, got {table['timeout']!r}")
        checked["timeout"] = seconds(table["timeout"], f"{where}.timeout", maximum=3600)
    events = table.get("events")
    if events is not None:
        if (
            not isinstance(events, list)
            or not events
            or not all(isinstance(e, str) and e in EVENTS for e in events)
        ):
            raise BadInput(f"{where}.events: give one or more of {', '.join(EVENTS)}")
    return checked


def check_url(url: object, where: str) -> str:
    from urllib.parse import urlsplit

    if (
        not isinstance(url, str)
        or urlsplit(url).scheme not in ("http", "https")
        or not urlsplit(url).netloc
    ):
        raise BadInput(f"{where}: {url!r} is not an http:// or https:// URL")
    return url


def load_config(
    profile: str | None = None,
    *,
    cli: Mapping[str, Any] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """The effective configuration: see the module docstring for the precedence.

    :param cli: settings given on the command line (None values are "not given").
    """
    env = os.environ if environ is None else environ
    if profile is not None and not profile.strip():
        raise BadInput("--profile: give a profile name (`dispatch config` shows the one in use)")
    explicit = profile or env.get(PROFILE_ENV) or None
    name = explicit or DEFAULT_PROFILE
    config = Config(profile=name)
    config.settings["backend"] = Setting("backend", "local", "built-in default")
    config.settings["store"] = Setting("store", _default_store(env), "built-in default")

    files = []
    user = user_config_dir(env) / USER_FILE
    if os.path.lexists(user):  # not a regular file: refused when read (find_project_file)
        config.user_file = user
        files.append(("user file", user))
    project = find_project_file(cwd)
    if project is not None:
        config.project_file = project
        files.append(("project file", project))
    seen = False
    for kind, path in files:  # lowest precedence first
        profiles = _profiles(path)
        if name in profiles:
            seen = True
            for s in _layer(path, name, profiles[name], f"{kind} {path} [profile.{name}]"):
                config.settings[s.key] = s
    if explicit and not seen:
        where = ", ".join(str(p) for _, p in files) or "no config file found"
        raise BadInput(f"profile {name!r} is not defined ({where})")
    for key, variable in ENVIRONMENT.items():
        value = env.get(variable)
        if value:
            if key == "notify.url":
                value = check_url(value, variable)
            config.settings[key] = Setting(key, value, f"environment {variable}")
    for key, value in (cli or {}).items():
        if value is not None:
            config.settings[key] = Setting(key, value, "command line")
    return config


def _default_store(env: Mapping[str, str]) -> str:
    """The store's own default (:func:`dispatch.store.default_store_url`), for ``env``."""
    state = env.get("XDG_STATE_HOME", "")
    home = Path(env.get("HOME") or Path.home())
    base = Path(state) if os.path.isabs(state) else home / ".local" / "state"
    return f"sqlite://{base / 'dispatch' / 'record.db'}"
