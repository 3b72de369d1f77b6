"""Configuration profiles: the project file found upward, the user file, the environment
and the command line, in that order of precedence, each value shown with its source."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cli.cli_shell import Shell
from dispatch.client import Client
from dispatch.config import load_config
from dispatch.model.errors import BadInput
from pydantic import TypeAdapter

USER = """
[profile.default]
backend = "from-user"
store = "sqlite:///user.db"
[profile.default.resources]
nodes = 3
cpus_per_task = 2
[profile.default.options]
account = "user-account"
partition = "user-part"
"""

PROJECT = """
[profile.default]
backend = "from-project"
policy = "policies/p.toml"
[profile.default.resources]
nodes = 1
time = "5m"
[profile.default.options]
partition = "project-part"

[profile.big]
[profile.big.resources]
time = "2h"
mem = "2G"
"""


def _files(sh: Shell) -> Path:
    sh.write("config/dispatch/config.toml", USER)
    sh.write("proj/dispatch.toml", PROJECT)
    sh.write("proj/policies/p.toml", '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    deep = sh.home / "proj" / "src" / "deep"
    deep.mkdir(parents=True)
    return deep


def _settings(sh: Shell, *args: str, cwd: Path) -> dict[str, dict[str, object]]:
    out = sh.run(*args, "config", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["settings"]  # type: ignore[no-any-return]


def test_precedence_cli_env_project_user(sh: Shell) -> None:
    deep = _files(sh)
    s = _settings(sh, cwd=deep)
    project = str(sh.home / "proj" / "dispatch.toml")
    user = str(sh.home / "config" / "dispatch" / "config.toml")
    assert s["backend"] == {
        "value": "from-project",
        "source": f"project file {project} [profile.default]",
    }
    assert s["store"]["value"] == "sqlite:///user.db" and user in str(s["store"]["source"])
    assert s["resources.nodes"]["value"] == 1 and project in str(s["resources.nodes"]["source"])
    assert s["resources.cpus_per_task"]["value"] == 2 and user in str(
        s["resources.cpus_per_task"]["source"]
    )
    assert s["options.partition"]["value"] == "project-part"
    assert s["options.account"]["value"] == "user-account"
    assert s["policy"]["value"] == str(sh.home / "proj" / "policies" / "p.toml")

    sh.env["DISPATCH_BACKEND"] = "from-env"
    sh.env["DISPATCH_STORE"] = "sqlite:///env.db"
    s = _settings(sh, cwd=deep)
    assert s["backend"] == {"value": "from-env", "source": "environment DISPATCH_BACKEND"}
    assert s["store"]["value"] == "sqlite:///env.db"

    s = _settings(sh, "--store", "sqlite:///cli.db", cwd=deep)
    assert s["store"] == {"value": "sqlite:///cli.db", "source": "command line"}


def test_without_files_the_built_in_defaults_show(sh: Shell) -> None:
    s = _settings(sh, cwd=sh.home)
    assert s["backend"] == {"value": "local", "source": "built-in default"}
    assert s["store"]["value"] == f"sqlite://{sh.db}"
    text = sh.run("config").stdout
    assert "(none found upward from here)" in text and "built-in default" in text


def test_named_profile_and_the_environment_choose_it(sh: Shell) -> None:
    deep = _files(sh)
    s = _settings(sh, "--profile", "big", cwd=deep)
    assert s["resources.time"]["value"] == "2h" and "[profile.big]" in str(
        s["resources.time"]["source"]
    )
    assert "resources.nodes" not in s  # a profile does not inherit the default's values
    sh.env["DISPATCH_PROFILE"] = "big"
    assert _settings(sh, cwd=deep)["resources.mem"]["value"] == "2G"
    out = sh.run("--profile", "nosuch", "config", cwd=deep)
    assert out.returncode == 2 and "profile 'nosuch' is not defined" in out.stderr


def _sent_time_limit(dry_run: dict[str, Any]) -> timedelta:
    """The time limit in what the local backend's dry run would send (its meta.json)."""
    limit = dry_run["prepared"]["parts"]["object"]["spec"]["resources"]["time_limit"]
    return TypeAdapter(timedelta).validate_python(limit)


def test_profile_fills_in_submit_and_the_command_line_wins(sh: Shell) -> None:
    _files(sh)
    (sh.home / "config" / "dispatch" / "config.toml").unlink()
    proj = sh.home / "proj"
    (proj / "dispatch.toml").write_text(PROJECT.replace('"from-project"', '"local"'))
    out = sh.run("submit", "--dry-run", "--json", "--", "true", cwd=proj)
    assert out.returncode == 2 and "does not accept the option(s) partition" in out.stderr
    (proj / "dispatch.toml").write_text(
        PROJECT.replace('"from-project"', '"local"').replace('partition = "project-part"', "")
    )
    data = json.loads(sh.run("submit", "--dry-run", "--json", "--", "true", cwd=proj).stdout)
    assert _sent_time_limit(data) == timedelta(minutes=5)
    assert data["plan"]["rules"][0]["action"] == "hold"  # the profile's policy file
    data = json.loads(
        sh.run("submit", "--dry-run", "--json", "--time", "7m", "--", "true", cwd=proj).stdout
    )
    assert _sent_time_limit(data) == timedelta(minutes=7)
    big = json.loads(
        sh.run("--profile", "big", "submit", "--dry-run", "--json", "--", "true", cwd=proj).stdout
    )
    assert big["spec"]["resources"]["memory_mb"] == 2048


@pytest.mark.parametrize(
    "text,words",
    [
        (
            "[profile.default]\nbackend = 3\n",
            ["[profile.default]", "backend must be a non-empty string"],
        ),
        ("[profile.default]\ncolour = 'blue'\n", ["[profile.default]", "unknown key(s) colour"]),
        ("[profile.default.resources]\nnodes = 0\n", ["resources.nodes must be at least 1"]),
        ("[profile.default.resources]\ntime = '0'\n", ["resources.time '0'"]),
        ("[profile.default.notify]\nurl = 'ftp://x'\n", ["notify.url", "not an http"]),
        ("backend = 'x'\n", ["unknown top-level key(s) backend"]),
        ("[profile.default.notify]\ncommand = 'a \"b'\n", ["notify.command", "quotation"]),
        ("[profile.default.notify]\nurl = 'http://h'\nevents = [[1]]\n", ["notify.events"]),
        ("[profile.default.notify]\nurl = 'http://h'\ntimeout = true\n", ["notify.timeout"]),
        ("[profile.default.notify]\nurl = 'http://h'\ntimeout = -1\n", ["notify.timeout"]),
        ("[profile.default\n", ["not valid TOML"]),
    ],
)
def test_bad_config_exit_2_naming_file_profile_key_S36(
    sh: Shell, text: str, words: list[str]
) -> None:
    sh.write("dispatch.toml", text)
    for args in (["config"], ["submit", "--", "true"]):
        out = sh.run(*args)
        assert out.returncode == 2, out.stdout + out.stderr
        assert str(sh.home / "dispatch.toml") in out.stderr
        for word in words:
            assert word in out.stderr
    assert sh.recorded() == []


def test_client_from_config_uses_the_profile(sh: Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    sh.write("proj/dispatch.toml", '[profile.default.resources]\ntime = "3m"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(sh.home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(sh.home / "state"))
    client = Client.from_config(cwd=sh.home / "proj")
    dry = client.dry_run(["true"])
    assert dry.spec.resources.time_limit is not None
    assert dry.spec.resources.time_limit.total_seconds() == 180
    with pytest.raises(BadInput, match="not defined"):
        load_config("nosuch", cwd=sh.home / "proj")
