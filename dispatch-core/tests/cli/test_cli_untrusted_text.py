"""Text a user or a scheduler wrote reaches the terminal escaped, in every command.

A job name (or an actor name, a scheduler's words) holding a screen clear (ESC[2J), a
title change (OSC 0 ... BEL), a carriage return, a newline that would forge a line of
``list``, a C1 CSI or a bidi override is printed with those characters as visible escapes
(``\\x1b``, ``\\n``...); ``--json`` carries the text unchanged, as valid JSON.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from cli.cli_shell import DISPATCH, Shell
from dispatch.cli.render import escaped

#: Clears the screen, sets the title, returns to the line's start, forges a `list` line,
#: opens a C1 CSI and reverses what follows.
EVIL = (
    "\x1b[2J\x1b]0;pwned\x07\rtrain\nj0123456789ab  2026-01-01 00:00:00  local      "
    "succeeded  forged\u202eevil\x9b31m"
)
#: Short enough to be shown whole: a newline, then what a line of `list` looks like.
FORGER = "t\nj0123456789ab ok"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def assert_safe(text: str) -> None:
    for ch in RAW:
        assert ch not in text, (ch, text)


def run_safe(sh: Shell, *args: str) -> subprocess.CompletedProcess[str]:
    out = sh.run(*args)
    assert_safe(out.stdout + out.stderr)
    assert "Traceback" not in out.stderr
    return out


def test_escaped_makes_every_control_character_visible() -> None:
    assert escaped(EVIL) == (
        "\\x1b[2J\\x1b]0;pwned\\x07\\rtrain\\nj0123456789ab  2026-01-01 00:00:00  local      "
        "succeeded  forged\\u202eevil\\x9b31m"
    )
    assert escaped("tab\there\x7f\u2028\u2066") == "tab\\there\\x7f\\u2028\\u2066"
    assert escaped("naïve 名前 ü — ok") == "naïve 名前 ü — ok"
    assert escaped(escaped(EVIL)) == escaped(EVIL)
    assert escaped("line 1\nline\t2\x1b", lines=True) == "line 1\nline\t2\\x1b"


def test_list_status_and_dry_run_show_a_name_escaped(sh: Shell) -> None:
    job = run_safe(sh, "submit", "--name", EVIL, "--", "true").stdout.splitlines()[0]
    short = run_safe(sh, "submit", "--name", FORGER, "--", "true").stdout.splitlines()[0]
    listed = run_safe(sh, "list").stdout
    # one job, one line: the newline in a name forged no line of another job
    rows = [line for line in listed.splitlines() if line.startswith(("j", "\\"))]
    assert sorted(row.split()[0] for row in rows) == sorted([job, short]), listed
    assert "\\x1b[2J\\x1b]0;pwned\\x07\\r" in listed  # the name, escaped (maybe cut short)
    assert escaped(FORGER) in listed
    shown = run_safe(sh, "status", job).stdout
    assert f"({escaped(EVIL)})" in shown
    dry = run_safe(sh, "submit", "--dry-run", "--name", EVIL, "--", "true").stdout
    assert escaped(EVIL) in dry
    # --json carries the name itself, as valid JSON
    names = {row["name"] for row in sh.json("list")}  # type: ignore[union-attr,index]
    assert names == {EVIL, FORGER}
    assert sh.json("status", job)["name"] == EVIL  # type: ignore[index]


def test_a_command_is_shown_escaped_by_the_dry_run(sh: Shell) -> None:
    dry = run_safe(sh, "submit", "--dry-run", "--", "echo", EVIL).stdout
    assert "\\x1b[2J" in dry


def test_wait_watch_cancel_history_show_an_actor_escaped(sh: Shell) -> None:
    waiting = subprocess.Popen(
        [DISPATCH, "submit", "--name", EVIL, "--interval", "0.2", "--wait", "--", "sleep", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
        env=sh.env,
        cwd=sh.home,
    )
    try:
        assert waiting.stdout is not None
        job = waiting.stdout.readline().strip()
        assert job.startswith("j"), job
        watching = subprocess.Popen(
            [DISPATCH, "watch", job, "--interval", "0.2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="backslashreplace",
            env=sh.env,
            cwd=sh.home,
        )
        try:
            evil_user = Shell(sh.home)
            evil_user.env = {**sh.env, "LOGNAME": EVIL, "USER": EVIL}
            cancelled = run_safe(evil_user, "cancel", job)
            assert cancelled.returncode in (0, 3), cancelled.stderr
            watched = watching.communicate(timeout=120)
        finally:
            watching.kill()
        waited = waiting.communicate(timeout=120)
    finally:
        waiting.kill()
    assert watching.returncode == 5 and waiting.returncode == 5, (watched, waited)
    for out, err in (watched, waited):
        assert_safe(out + err)
        assert f"cancelled  cancelled (actor {escaped(EVIL)}" in out
    history = run_safe(sh, "history", job).stdout
    assert f"by {escaped(EVIL)}" in history
    assert escaped(EVIL) in run_safe(sh, "status", job).stdout
    assert sh.json("status", job)["cause"]["actor"].startswith(EVIL)  # type: ignore[index]


@pytest.mark.parametrize(
    "args",
    [
        ("status", EVIL),
        ("history", EVIL),
        ("cancel", EVIL),
        ("logs", EVIL),
        ("plan", "--backend", EVIL, "--policy", "p.toml"),
        ("submit", "--backend", EVIL, "--", "true"),
        ("--profile", EVIL, "list"),
        ("list", "--state", EVIL),
    ],
)
def test_an_error_quoting_untrusted_text_is_one_escaped_line(
    sh: Shell, args: tuple[str, ...]
) -> None:
    sh.write("p.toml", '[[rule]]\non = ["non-zero-exit"]\naction = "hold"\n')
    out = run_safe(sh, *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("dispatch: ") and out.stderr.count("\n") == 1, out.stderr
    cut = args.index("--") if "--" in args else len(args)
    data = json.loads(run_safe(sh, *args[:cut], "--json", *args[cut:]).stdout)
    assert data["error"]["exit_code"] == 2


def test_what_a_command_prints_passes_through_the_escaping_backstop() -> None:
    """A print site that forgets to escape a field still cannot reach the terminal raw:
    while a command runs, its text output is escaped (line feeds and tabs kept)."""
    import io
    import sys

    import click
    from dispatch.cli.common import escaping_output

    saved = sys.stdout
    sys.stdout = captured = io.StringIO()
    try:
        with escaping_output():
            click.echo("a\x1b]0;title\x07\tb\r\x9b2J\u202e")
            click.echo("second line")
        click.echo("\x1b after")  # outside a command: untouched
    finally:
        sys.stdout = saved
    assert (
        captured.getvalue() == "a\\x1b]0;title\\x07\tb\\r\\x9b2J\\u202e\nsecond line\n\x1b after\n"
    )
