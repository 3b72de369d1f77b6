"""Config, profile and policy files that are not regular files, and secrets in settings.

A ``dispatch.toml`` (or the user's ``config.toml``, or a policy a profile names) that is a
FIFO, a directory or a dangling link is refused naming its path: never skipped (another
file's settings, or none, would apply silently) and never opened in a way that waits for
a writer. ``dispatch config`` shows no secret: a notification URL's query values, a
notification command's header values, the store's password (S-51).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from dispatch.model.errors import BadInput
from dispatch.policy_file import load_policy

SECRETS = ("tok3n-value", "s1g-value", "b3arer-value", "k3y-value", "pw-value", "fr4g-value")


def make(kind: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(path.parent / "nowhere.toml")


WORDS = {"fifo": "is a FIFO", "directory": "is a directory", "dangling": "no such file"}


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling"])
@pytest.mark.parametrize("where", ["project", "parent", "user"])
def test_a_config_file_that_is_not_a_regular_file_is_refused_naming_it_S36(
    sh: Shell, kind: str, where: str
) -> None:
    work = sh.home / "proj" / "src"
    work.mkdir(parents=True)
    path = {
        "project": work / "dispatch.toml",
        "parent": sh.home / "proj" / "dispatch.toml",
        "user": sh.home / "config" / "dispatch" / "config.toml",
    }[where]
    make(kind, path)
    for args in (("config",), ("list",), ("submit", "--", "true")):
        # a FIFO with no writer: a blocking open would never return (timeout = failure)
        out = sh.run(*args, cwd=work, timeout=60)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert str(path) in out.stderr and WORDS[kind] in out.stderr, out.stderr
    error = json.loads(sh.run("config", "--json", cwd=work, timeout=60).stdout)["error"]
    assert str(path) in error["message"] and error["exit_code"] == 2
    assert sh.recorded() == []


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_policy_file_that_is_not_a_regular_file_is_refused_naming_it_S36(
    sh: Shell, kind: str
) -> None:
    policy = sh.home / "policy.toml"
    make(kind, policy)
    refused: list[BaseException] = []

    def load() -> None:
        try:
            load_policy(policy)
        except BaseException as exc:
            refused.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=60)  # a blocking open of a FIFO would never return
    assert not reader.is_alive(), "load_policy blocked on the FIFO"
    assert len(refused) == 1 and isinstance(refused[0], BadInput), refused
    assert str(policy) in str(refused[0]) and WORDS[kind] in str(refused[0])
    sh.write("dispatch.toml", f'[profile.default]\npolicy = "{policy}"\n')
    for args in (("plan",), ("submit", "--", "true"), ("plan", "--policy", str(policy))):
        out = sh.run(*args, timeout=60)
        assert out.returncode == 2 and str(policy) in out.stderr, (args, out.stderr)
        assert WORDS[kind] in out.stderr
    assert sh.recorded() == []


CONFIG = """
[profile.default]
store = "postgresql://dispatch:pw-value@db.example/records?sslmode=require"

[profile.default.notify]
url = "https://hooks.example/dispatch?token=tok3n-value&sig=s1g-value#fr4g-value"
command = ["curl", "-H", "Authorization: Bearer b3arer-value", "--api-key=k3y-value",
           "https://hooks.example/x?token=tok3n-value"]
"""


def test_dispatch_config_shows_no_notification_secret_S51(sh: Shell) -> None:
    sh.write("dispatch.toml", CONFIG)
    text = sh.run("config")
    assert text.returncode == 0, text.stderr
    data = sh.json("config")
    for shown in (text.stdout + text.stderr, json.dumps(data)):
        for secret in SECRETS:
            assert secret not in shown, (secret, shown)
    settings = data["settings"]  # type: ignore[index]
    assert settings["notify.url"]["value"] == (
        "https://hooks.example/dispatch?token=***&sig=***#***"
    )
    assert settings["notify.command"]["value"] == [
        "curl",
        "-H",
        "Authorization: ***",
        "--api-key=***",
        "https://hooks.example/x?token=***",
    ]
    # the store: its password masked, what people need to see (sslmode) kept
    assert settings["store"]["value"] == (
        "postgresql://dispatch:***@db.example/records?sslmode=require"
    )


def test_a_notification_url_from_the_environment_shows_no_secret_S51(sh: Shell) -> None:
    sh.env["DISPATCH_NOTIFY_URL"] = "http://u:pw-value@hooks.example/x?k3y-value"
    out = sh.run("config")
    assert out.returncode == 0, out.stderr
    assert "pw-value" not in out.stdout and "k3y-value" not in out.stdout
    assert "http://u:***@hooks.example/x?***" in out.stdout
