"""A usage error is one ``dispatch: ...`` line with advice and exit 2, as every other
error is (docs/cli.md), and under ``--json`` also the error object on stdout; a job id or
a name far longer than any real one is refused at once, naming the option (S-36)."""

from __future__ import annotations

import json

import pytest
from cli.cli_shell import Shell


@pytest.mark.parametrize(
    ("args", "words", "command"),
    [
        (("list", "--limit", "0"), "'--limit': 0 is not in the range", "dispatch list"),
        (("supervise", "--once", "--lease", "nan"), "'--lease'", "dispatch supervise"),
        (
            ("supervise", "--once", "--discovery-timeout", "0"),
            "'--discovery-timeout'",
            "dispatch supervise",
        ),
        (("watch", "j1", "--interval", "inf"), "'--interval'", "dispatch watch"),
        (("list", "--bogus"), "no such option '--bogus'", "dispatch list"),
        (("status",), "missing argument 'JOB_ID'", "dispatch status"),
        (("no-such-command",), "no such command 'no-such-command'", "dispatch"),
        (("--bogus", "list"), "no such option '--bogus'", "dispatch"),
        (("list", "--state", "nope"), "'--state': 'nope' is not one of", "dispatch list"),
    ],
)
def test_a_usage_error_is_one_line_with_advice_and_a_json_error_S36(
    sh: Shell, args: tuple[str, ...], words: str, command: str
) -> None:
    out = sh.run(*args)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("dispatch: "), out.stderr
    assert words in out.stderr and f"(see `{command} --help`)" in out.stderr, out.stderr
    assert "Usage:" not in out.stderr and "Error:" not in out.stderr

    as_json = sh.run(*args, "--json")
    assert as_json.returncode == 2, as_json.stderr
    error = json.loads(as_json.stdout)["error"]
    assert error["exit_code"] == 2 and words in error["message"], error
    assert error["type"] == "UsageError"
    assert as_json.stderr == out.stderr


def test_json_after_the_command_words_belongs_to_the_command(sh: Shell) -> None:
    """``submit ... -- cmd --json``: the flag is the job's, so the error is text only."""
    out = sh.run("submit", "--nodes", "0", "--", "echo", "--json")
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith("dispatch: invalid value for '--nodes'"), out.stderr


def test_help_and_version_are_not_errors(sh: Shell) -> None:
    assert sh.run("--help").returncode == 0
    assert sh.run("list", "--help").returncode == 0
    assert sh.run("--version").returncode == 0
    bare = sh.run()  # no command: the help, as before
    assert "Commands:" in bare.stdout + bare.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("status", "j" * 100_000), "argument JOB_ID: 100,000 characters, more than the 256"),
        (("history", "j" * 257), "argument JOB_ID: 257 characters"),
        (("cancel", "j" * 5000), "argument JOB_ID: 5,000 characters"),
        (("submit", "--name", "n" * 1025, "--", "true"), "--name: 1,025 characters"),
    ],
)
def test_a_job_id_or_name_too_long_is_refused_naming_the_option_S36(
    sh: Shell, args: tuple[str, ...], words: str
) -> None:
    out = sh.run(*args, timeout=120)
    assert out.returncode == 2 and words in out.stderr, out.stderr
    assert len(out.stderr) < 200  # the value is not quoted back
    assert sh.recorded() == []


def test_a_job_id_or_name_at_the_bound_is_accepted(sh: Shell) -> None:
    out = sh.run("submit", "--name", "n" * 1024, "--", "true")
    assert out.returncode == 0, out.stderr
    missing = sh.run("status", "j" * 256)
    assert missing.returncode == 2 and "characters" not in missing.stderr, missing.stderr
