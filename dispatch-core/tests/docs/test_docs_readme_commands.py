"""The commands README.md and the docs show are commands this ``dispatch`` takes, and the
outputs they show that do not depend on a clock, an id or a scheduler are what it prints.

Every ``$ dispatch ...`` line of a shell block is parsed by the installed CLI (its
options and arguments as written, with ``--help`` put after the command's name, so
nothing runs and no scheduler is asked). The outputs that are the same on every run and
every machine (a plan, the local backend's declarations, the refusal of a job file) are
run for real in a scratch home and compared line by line. The outputs of jobs that ran
(ids, times, pids) are shown as they ran once; the CLI tests check their form.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from cli.cli_shell import Shell, sh
from docs.doc_files import ROOT

#: the files whose shell blocks are checked (docs/sweeps.md and functions.md have their own)
DOCS = [
    ROOT / "README.md",
    *sorted(
        p
        for p in (ROOT / "dispatch-core" / "docs").glob("*.md")
        if p.name not in ("sweeps.md", "functions.md")
    ),
]
__all__ = ["sh"]  # the fixture: the installed dispatch in a scratch home


def blocks(path: Path) -> list[tuple[int, list[str]]]:
    """Each fenced block without a language (or ``sh``/``console``): its first line's number
    and its lines."""
    found: list[tuple[int, list[str]]] = []
    lines = path.read_text().splitlines()
    inside: list[str] | None = None
    fenced = False
    start = 0
    for number, line in enumerate(lines, start=1):
        if line.startswith("```"):
            if not fenced and line[3:].strip() in ("", "sh", "console", "shell"):
                inside, start = [], number
            elif fenced and inside is not None:
                found.append((start, inside))
                inside = None
            fenced = not fenced
            continue
        if inside is not None:
            inside.append(line)
    return found


def sessions(path: Path) -> list[tuple[str, str, list[str]]]:
    """``(where, command line, its output lines)`` for every ``$ dispatch`` line."""
    out: list[tuple[str, str, list[str]]] = []
    for start, lines in blocks(path):
        current: tuple[str, str, list[str]] | None = None
        joined: list[str] = []
        command = -1  # the command a backslash continues, else -1
        for line in lines:  # a command continued with backslashes is one line
            if command >= 0:
                joined[command] = joined[command][:-1] + line.strip()
                joined.append("")  # keeps the line numbers
            else:
                joined.append(line)
                command = len(joined) - 1 if line.startswith("$ ") else -1
            if not joined[command].endswith("\\"):
                command = -1
        for offset, line in enumerate(joined):
            if line.startswith("$ "):
                if current is not None:
                    out.append(current)
                current = None
                if line.startswith("$ dispatch "):
                    current = (f"{path.name}:{start + offset + 1}", line[2:], [])
            elif current is not None:
                current[2].append(line)
        if current is not None:
            out.append(current)
    return out


def listed(path: Path) -> list[tuple[str, str]]:
    """Commands shown without output: the lines of a block (fenced, or indented by four
    spaces) that start with ``dispatch `` (continued with backslashes; comments left
    out; a line of alternatives such as ``status JOB / watch JOB``, or a synopsis with
    ``[--option]``, is not one command)."""
    found: list[tuple[str, str]] = []
    lines = path.read_text().splitlines()
    fenced = False
    command: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if raw.startswith("```"):
            fenced = not fenced
            continue
        line = raw.strip() if (fenced or raw.startswith("    ")) else ""
        if command:
            command.append(line)
        elif line.startswith("dispatch ") and " / " not in line and " [-" not in line:
            command = [line]
            where = f"{path.name}:{number}"
        if command and not command[-1].endswith("\\"):
            found.append((where, " ".join(c.rstrip("\\").strip() for c in command)))
            command = []
    return found


SESSIONS = [s for path in DOCS for s in sessions(path)]
LISTED = [c for path in DOCS for c in listed(path)]


def test_the_docs_show_dispatch_commands() -> None:
    assert len(SESSIONS) >= 20  # the extraction finds the README's and the docs' sessions


@pytest.mark.parametrize(("where", "line"), [(w, c) for w, c, _ in SESSIONS] + LISTED)
def test_every_command_shown_is_one_dispatch_takes(sh: Shell, where: str, line: str) -> None:
    words = shlex.split(line.split(" | ")[0], comments=True)
    assert words[0] == "dispatch", where
    args = words[1:]
    # the subcommand (and a group's subcommand), then --help: the options are parsed as
    # written and nothing runs
    depth = 2 if args[:1] == ["config"] and len(args) > 1 and not args[1].startswith("-") else 1
    checked = [*args[:depth], "--help", *args[depth:]]
    ran = sh.run(*checked)
    assert ran.returncode == 0, f"{where}: {line}\n{ran.stderr}"
    assert ran.stdout.startswith("Usage: dispatch"), where


def _shown_until_blank(lines: list[str]) -> list[str]:
    shown = []
    for line in lines:
        if not line.strip():
            break
        shown.append(line)
    return shown


def test_the_plan_shown_is_what_dispatch_plan_prints(sh: Shell) -> None:
    command = "dispatch plan --backend local --policy examples/demo/policy.toml"
    printed = sh.run(*shlex.split(command)[1:], cwd=ROOT)
    assert printed.returncode == 0, printed.stderr
    shown = [out for _, line, out in SESSIONS if line == command]
    assert shown, f"{command!r} is no longer shown"
    for out in shown:
        assert printed.stdout.splitlines() == _shown_until_blank(out)


def test_the_local_backend_shown_is_what_dispatch_backends_prints(sh: Shell) -> None:
    printed = sh.run("backends")
    assert printed.returncode == 0, printed.stderr
    local = re.search(r"^local .*?(?=^\S|\Z)", printed.stdout, re.M | re.S)
    assert local is not None
    ours = local.group(0).rstrip("\n").splitlines()
    for where, line, out in SESSIONS:
        if line == "dispatch backends":
            shown = out[: len(ours)]
            assert shown == ours, where


def test_a_bad_job_file_is_refused_as_the_docs_say(sh: Shell) -> None:
    """docs/jobfile.md's refusals, each for a file that has what it names (a list the
    page shortens with ``...`` is compared up to there)."""
    page = ROOT / "dispatch-core" / "docs" / "jobfile.md"
    (shown,) = [lines for _, lines in blocks(page) if lines[0].startswith("dispatch: job.toml")]
    files = [
        'name = "a"\ncommand = ["true"]\n\n[resources]\n\n\nnodes = "2"\n',
        'name = "a"\nnodez = 2\n',
        '# a job\n\n\nname = = "a"\n',
    ]
    assert len(shown) == len(files)
    for said, body in zip(shown, files, strict=True):
        (sh.home / "job.toml").write_text(body)
        refused = sh.run("submit", "job.toml")
        assert refused.returncode == 2, refused.stderr
        printed = refused.stderr.strip()
        if said.endswith("...)"):
            assert printed.startswith(said.removesuffix("...)")), printed
        else:
            assert printed == said
        assert not sh.db.exists() or sh.recorded() == []  # nothing recorded


def test_a_bad_policy_is_refused_as_the_docs_say(sh: Shell) -> None:
    """docs/policy.md's refusal of an unknown cause, by ``dispatch plan`` (which prefixes
    every error with ``dispatch:``); the list the page shortens is compared up to ``...``."""
    page = ROOT / "dispatch-core" / "docs" / "policy.md"
    (said,) = [lines[0] for _, lines in blocks(page) if lines and lines[0].startswith("p.toml:")]
    (sh.home / "p.toml").write_text('[[rule]]\non = ["martian"]\naction = "hold"\n')
    refused = sh.run("plan", "--policy", "p.toml")
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("dispatch: " + said.removesuffix("...)")), said
