"""``dispatch --help`` (and a subcommand's) loads the command line only: no backend, no
pydantic model, no store driver. Checked in a fresh interpreter through sys.modules, so
whatever an earlier test imported cannot hide a module the help pulls in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: what the help may load of dispatch: the command line and the plain enums and errors
ALLOWED = ("dispatch", "dispatch.cli", "dispatch.model", "dispatch.model.enums")
ALLOWED_PREFIXES = ("dispatch.cli.", "dispatch.model.errors")

#: never loaded by a help: backends, model libraries, store drivers, client libraries
FORBIDDEN_ROOTS = (
    "dispatch_slurm",
    "dispatch_kubeflow",
    "dispatch_testing",
    "pydantic",
    "pydantic_core",
    "sqlite3",
    "_sqlite3",
    "psycopg",
    "psycopg2",
    "psycopg_binary",
    "kubernetes",
)

PROBE = """
import json, sys
{before}
from dispatch.cli.main import main
sys.argv = ["dispatch", *{argv!r}]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(argv: list[str], before: str = "") -> list[str]:
    code = PROBE.format(before=before, argv=argv)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    modules: list[str] = json.loads(out.strip().splitlines()[-1])
    return modules


def unwanted(modules: list[str]) -> list[str]:
    bad = []
    for name in modules:
        root = name.split(".")[0]
        if root in FORBIDDEN_ROOTS:
            bad.append(name)
        elif root == "dispatch" and not (name in ALLOWED or name.startswith(ALLOWED_PREFIXES)):
            bad.append(name)
    return bad


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["status", "--help"], ["submit", "--help"], ["cancel", "--help"]],
    ids=["help", "status-help", "submit-help", "cancel-help"],
)
def test_help_imports_no_backend_no_model_no_store_driver_S31(argv: list[str]) -> None:
    modules = loaded_by(argv)
    assert "dispatch.cli.main" in modules
    assert unwanted(modules) == []


def test_the_import_probe_sees_a_backend_a_model_and_a_store_driver() -> None:
    # the check above can fail: the same probe, after importing what a help must not load
    modules = loaded_by(
        ["--help"], before="import dispatch.local.backend, dispatch.model.spec, sqlite3"
    )
    bad = unwanted(modules)
    assert "dispatch.local.backend" in bad
    assert "dispatch.model.spec" in bad
    assert "sqlite3" in bad
    assert any(m.startswith("pydantic") for m in bad)
