"""``dispatch-conformance`` as a third party runs it: one command, pytest's exit status."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


def conformance(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dispatch_testing.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_kit_command_passes_the_simulated_backend(tmp_path: object) -> None:
    """S-30: one command, no configuration, from any directory."""
    done = conformance("simulated", "-q", cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout and not re.search(r"\d+ failed", done.stdout)
    assert "dispatch kit: backend 'simulated' (offline tier)" in done.stdout


def test_kit_command_passes_the_third_party_example(tmp_path: object) -> None:
    """S-30, S-31: examples/dispatch-example, a separate distribution registered only by
    its entry points, passes the kit through the installed console script."""
    from importlib.metadata import PackageNotFoundError, distribution
    from pathlib import Path

    try:
        distribution("dispatch-example")
    except PackageNotFoundError:
        pytest.fail("install it: pip install -e ./examples/dispatch-example", pytrace=False)
    script = Path(sys.executable).with_name("dispatch-conformance")
    assert script.exists(), f"the console script is not installed beside {sys.executable}"
    done = subprocess.run(
        [str(script), "example", "-q"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not re.search(r"\d+ failed", done.stdout), done.stdout
    assert "XFAIL" in done.stdout and "not provokable on example" in done.stdout


def test_kit_command_ignores_a_loosening_ini_in_the_current_directory(tmp_path: object) -> None:
    """The adapter's own ini cannot switch xfail_strict off for the kit."""
    from pathlib import Path

    Path(str(tmp_path), "pytest.ini").write_text("[pytest]\nxfail_strict = false\naddopts = -x\n")
    done = conformance("simulated", "--co", cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    (configfile,) = [line for line in done.stdout.splitlines() if line.startswith("configfile:")]
    assert "pytest.ini" not in configfile


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ((), 2, "usage: dispatch-conformance BACKEND"),
        (("--help",), 0, "usage: dispatch-conformance BACKEND"),
        (("no-such-backend",), 4, "no conformance harness is registered for the backend"),
    ],
)
def test_kit_command_explains_bad_use(
    tmp_path: object, args: tuple[str, ...], code: int, words: str
) -> None:
    done = conformance(*args, cwd=str(tmp_path))
    assert done.returncode == code
    assert words in done.stdout + done.stderr
