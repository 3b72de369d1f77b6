"""rich draws tables and live lines on a terminal only: ``dispatch --help``, ``status``
and piped ``list`` never import it (their start-up time stays what it was)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli.cli_shell import Shell

PROBE = """
import json, sys
from dispatch.cli.main import main
sys.argv = ["dispatch", *{argv!r}]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "rich")), file=sys.stderr)
"""


def _rich_loaded(sh: Shell, *argv: str, before: str = "") -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", before + PROBE.format(argv=list(argv))],
        capture_output=True,
        text=True,
        env=sh.env,
        cwd=sh.home,
        timeout=120,
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "argv", [("--help",), ("list", "--help"), ("status", "JOB"), ("list",), ("list", "--json")]
)
def test_help_status_and_piped_list_do_not_import_rich(sh: Shell, argv: tuple[str, ...]) -> None:
    job = sh.run("submit", "--", "true").stdout.strip()
    argv = tuple(job if a == "JOB" else a for a in argv)
    assert _rich_loaded(sh, *argv) == []


def test_the_probe_sees_rich_when_it_is_imported(sh: Shell) -> None:
    assert "rich" in _rich_loaded(sh, "--help", before="import rich.table\n")
