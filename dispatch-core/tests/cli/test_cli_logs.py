"""``dispatch logs`` on the local backend: every submission, streams, tail, follow (S-46)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from cli.cli_shell import DISPATCH, Shell

RESUBMIT_ON_EXIT = '[[rule]]\non = ["non-zero-exit"]\naction = "resubmit"\nbudget = 1\n'


def _done(sh: Shell, *command: str, policy: str | None = None) -> str:
    extra = ["--policy", str(sh.write("p.toml", policy))] if policy else []
    out = sh.run("submit", *extra, "--interval", "0.2", "--wait", "--", *command)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout.splitlines()[0]


def test_logs_prints_stdout_and_stderr_of_a_job_S46(sh: Shell) -> None:
    job = _done(sh, "sh", "-c", "echo out1; echo err1 >&2; printf 'no newline'")
    out = sh.run("logs", job)
    assert (out.returncode, out.stdout) == (0, "out1\nno newline"), out.stderr
    assert sh.run("logs", job, "--stderr").stdout == "err1\n"
    lines = [json.loads(line) for line in sh.run("logs", job, "--json").stdout.splitlines()]
    assert [x["line"] for x in lines] == ["out1", "no newline"]
    assert {(x["submission"], x["stream"]) for x in lines} == {(1, "stdout")}


def test_earlier_submissions_are_kept_after_a_recovery_S46(sh: Shell) -> None:
    marker = sh.home / "ran"
    script = sh.write(
        "flaky.sh",
        f"[ -e {marker} ] && {{ echo second; exit 0; }}\ntouch {marker}\necho first\nexit 1\n",
    )
    job = _done(sh, "sh", str(script), policy=RESUBMIT_ON_EXIT)
    both = sh.run("logs", job).stdout
    assert both.index("==> submission 1") < both.index("first") < both.index("==> submission 2")
    assert both.index("==> submission 2") < both.index("second")
    assert sh.run("logs", job, "--submission", "1").stdout == "first\n"
    assert sh.run("logs", job, "--submission", "2").stdout == "second\n"


def test_tail_keeps_the_last_lines_S46(sh: Shell) -> None:
    job = _done(sh, "sh", "-c", "seq 1 1000")
    assert sh.run("logs", job, "--tail", "3").stdout == "998\n999\n1000\n"
    assert sh.run("logs", job, "--tail", "0").stdout == ""
    followed = sh.run("logs", job, "--tail", "2", "--follow", "--interval", "0.2")
    assert (followed.returncode, followed.stdout) == (0, "999\n1000\n")  # ended: it stops


def test_follow_streams_until_the_job_ends_S46(sh: Shell) -> None:
    job = sh.run("submit", "--", "sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.5; done").stdout
    job = job.strip()
    assert sh.run("supervise", "--once").returncode == 0  # submitted; nobody supervises now
    out = sh.run("logs", job, "--follow", "--interval", "0.2", timeout=60)
    assert (out.returncode, out.stdout) == (0, "1\n2\n3\n"), out.stderr


def test_bad_selection_exit_2_naming_it_S46(sh: Shell) -> None:
    job = _done(sh, "true")
    host = socket.gethostname()
    for args, words in (
        (["--node", "elsewhere"], f"ran on {host} only"),
        (["--rank", "1"], "rank 1"),
        (["--node", host, "--rank", "0"], "not both"),
        (["--submission", "5"], "has no submission 5"),
    ):
        out = sh.run("logs", job, *args)
        assert out.returncode == 2 and words in out.stderr, out.stderr
    assert sh.run("logs", job, "--node", host).returncode == 0
    assert sh.run("logs", "jnope").returncode == 2


def test_large_log_streams_with_flat_memory_S46(sh: Shell) -> None:
    size = 128 << 20
    job = _done(sh, "sh", "-c", f"yes 0123456789abcdef | head -c {size}")
    code = (
        "import resource, subprocess, sys\n"
        "for extra in ([], ['--tail', '5']):\n"
        "    subprocess.run([sys.argv[1], 'logs', sys.argv[2], *extra], check=True,\n"
        "                   stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, DISPATCH, job], env=sh.env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    peak_mib = int(out.stdout) / 1024
    assert peak_mib < 110, f"dispatch logs of a {size >> 20} MiB log peaked at {peak_mib:.0f} MiB"


def test_a_reader_that_goes_away_is_no_traceback(sh: Shell) -> None:
    job = _done(sh, "seq", "1", "300000")
    proc = subprocess.Popen(
        [DISPATCH, "logs", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sh.env
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"1\n"
    proc.stdout.close()  # as `dispatch logs JOB | head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err
