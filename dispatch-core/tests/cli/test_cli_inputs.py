"""Bad input on the command line: a clear error naming what and where, exit 2, nothing
recorded, never a traceback and never a hang (S-36)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from cli.cli_shell import Shell
from pydantic import TypeAdapter


def _refused(sh: Shell, *args: str | bytes, words: list[str]) -> None:
    out = sh.run(*args, timeout=30)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    for word in words:
        assert word in out.stderr, out.stderr
    assert sh.recorded() == []


@pytest.mark.parametrize(
    "args,words",
    [
        (["--cpus-per-task", "0"], ["--cpus-per-task", "0"]),
        (["--gpus-per-node", "-1"], ["--gpus-per-node", "-1"]),
        (["--nodes", "0"], ["--nodes", "0"]),
        (["--time", "99999999999d"], ["--time '99999999999d'", "longer than 365 days"]),
        (["--time", "9" * 5000], ["--time", "longer than 365 days"]),
        (["--time", "0"], ["--time '0'", "more than 0"]),
        (["--time", "0:00:00"], ["--time '0:00:00'", "more than 0"]),
        (["--time", ""], ["--time ''", "give seconds"]),
        (["--time", "1-99:99:99"], ["--time '1-99:99:99'", "below 60"]),
        (["--time", "1:75"], ["--time '1:75'", "below 60"]),
        (["--time", "1-24:00:00"], ["--time '1-24:00:00'", "below 24"]),
        (["--backend", ""], ["backend: give a backend name"]),
        (["--mem", "0"], ["--mem '0'"]),
        (["--mem", "99999999999999T"], ["--mem", "more than 1 PiB"]),
        (["--env", "NOEQUALS"], ["--env 'NOEQUALS'", "KEY=VALUE"]),
        (["--env", "A=1", "--env", "A=2"], ["--env A is given twice ('1' and '2')"]),
        (["-o", "x=1", "-o", "x=2"], ["--option x is given twice ('1' and '2')"]),
        (["--name", " "], ["name", "non-empty"]),
    ],
)
def test_bad_resource_and_option_values_S36(sh: Shell, args: list[str], words: list[str]) -> None:
    _refused(sh, "submit", *args, "--", "true", words=words)


def test_empty_profile_name_refused_S36(sh: Shell) -> None:
    _refused(sh, "--profile", "", "submit", "--", "true", words=["--profile", "profile name"])


def test_empty_program_name_refused_S36(sh: Shell) -> None:
    _refused(sh, "submit", "--", "", words=["program name", "empty"])


@pytest.mark.parametrize(
    "args,where",
    [
        ([b"status", b"j\xff"], "argument JOB_ID"),
        ([b"submit", b"--env", b"K\xff=v", b"--", b"true"], "--env"),
        ([b"submit", b"--env", b"K=v\xfe", b"--", b"true"], "--env"),
        ([b"submit", b"--name", b"n\xff", b"--", b"true"], "--name"),
        ([b"submit", b"--workdir", b"/tmp/\xff", b"--", b"true"], "--workdir"),
        ([b"submit", b"--", b"echo", b"caf\xe9"], "argument COMMAND"),
        ([b"submit", b"-o", b"k=\xff", b"--", b"true"], "--option"),
    ],
)
def test_non_utf8_argv_named_with_its_option_S36(sh: Shell, args: list[bytes], where: str) -> None:
    _refused(sh, *args, words=[where, "not valid UTF-8", "0x"])


def test_non_utf8_script_names_file_and_line_S36(sh: Shell) -> None:
    script = sh.home / "bad.sh"
    script.write_bytes(b"echo ok\necho \xff\xfe\n")
    _refused(sh, "submit", "--script", str(script), words=["bad.sh", "not UTF-8", "line 2"])


@pytest.mark.parametrize("verb", ["submit", "plan"])
def test_policy_that_is_no_policy_file_S36(sh: Shell, verb: str) -> None:
    deep = sh.write("deep.toml", "x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    fifo = sh.home / "fifo.toml"
    os.mkfifo(fifo)
    cases = [
        (deep, ["deep.toml", "nested too deeply"]),
        (Path("/dev/zero"), ["/dev/zero", "character device"]),
        (fifo, ["fifo.toml", "FIFO"]),  # must not hang: the run has a timeout
        (sh.home, [str(sh.home), "directory"]),
    ]
    for path, words in cases:
        extra = ["--", "true"] if verb == "submit" else ["--backend", "local"]
        _refused(sh, verb, "--policy", str(path), *extra, words=words)


@pytest.mark.parametrize(
    "args,words",
    [
        (["--lease", "nan"], ["--lease", "nan"]),
        (["--lease", "inf"], ["--lease", "inf"]),
        (["--lease", "-1"], ["--lease", "-1"]),
        (["--interval", "inf"], ["--interval", "inf"]),
        (["--interval", "-1"], ["--interval", "-1"]),
        (["--interval", "nan"], ["--interval", "nan"]),
        (["--interval", "0"], ["--interval", "0"]),
    ],
)
def test_supervise_bad_seconds_refused_not_spinning_S36(
    sh: Shell, args: list[str], words: list[str]
) -> None:
    _refused(sh, "supervise", *args, words=words)


def test_watch_interval_checked_too_S36(sh: Shell) -> None:
    _refused(sh, "watch", "jnope", "--interval", "nan", words=["--interval"])


def test_time_limits_people_type_are_accepted(sh: Shell) -> None:
    for value, seconds in (
        ("90m", 5400),
        ("1-00:00:00", 86400),
        ("30", 30),
        ("1:30", 90),
        ("100:00", 6000),
        ("36:00:00", 129600),
    ):
        out = sh.run("submit", "--dry-run", "--json", "--time", value, "--", "true")
        assert out.returncode == 0, out.stderr
        sent = json.loads(out.stdout)["prepared"]["parts"]["object"]["spec"]
        limit = TypeAdapter(timedelta).validate_python(sent["resources"]["time_limit"])
        assert limit == timedelta(seconds=seconds)
    assert sh.recorded() == []
