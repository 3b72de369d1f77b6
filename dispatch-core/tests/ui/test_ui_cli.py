"""``dispatch ui`` and ``dispatch metrics`` as a user runs them: real local jobs in a
SQLite record, the server started by the CLI on a free port, its pages fetched, stopped by
Ctrl-C; an address beyond loopback refused without a token."""

from __future__ import annotations

import html
import re
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from cli.cli_shell import DISPATCH, Shell
from ui.ui_record import fetch

NAME = "<b>hello</b>"


def first_line(proc: subprocess.Popen[str], within: float = 60.0) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=within):
            raise AssertionError(f"dispatch ui said nothing within {within} s")
    return proc.stdout.readline()


@pytest.fixture
def ui(sh: Shell) -> Iterator[tuple[str, dict[str, str]]]:
    ok = sh.run("submit", "--wait", "--name", NAME, "--", "sh", "-c", "echo 'a <i>line</i>'")
    assert ok.returncode == 0, ok.stderr
    bad = sh.run("submit", "--wait", "--name", "exits-3", "--", "sh", "-c", "exit 3")
    assert bad.returncode != 0
    jobs = {j["name"]: j["job_id"] for j in sh.recorded()}  # type: ignore[index]
    proc = subprocess.Popen(
        [DISPATCH, "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**sh.env, "PYTHONFAULTHANDLER": "1"},  # SIGABRT prints every thread's stack
        cwd=sh.home,
    )
    try:
        line = first_line(proc)
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found is not None, line + (proc.stderr.read() if proc.poll() is not None else "")
        yield found.group(0), jobs
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops it cleanly
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # where it is stuck, for the failure below
            _, stacks = proc.communicate(timeout=60)
            raise AssertionError(f"dispatch ui did not stop on Ctrl-C:\n{stacks}") from None
        assert code == 0, proc.communicate()


def test_dispatch_ui_serves_the_pages_of_real_local_runs(
    ui: tuple[str, dict[str, str]], sh: Shell
) -> None:
    base, jobs = ui
    status, _, listed = fetch(base + "/")
    assert status == 200 and html.escape(NAME) in listed and NAME not in listed
    assert set(re.findall(r'data-job="([^"]+)"', listed)) == set(jobs.values())
    status, _, page = fetch(f"{base}/jobs/{jobs['exits-3']}")
    assert status == 200
    assert re.findall(r'<g class="execution" data-attempt="1" data-cause="([a-z-]+)"', page) == [
        "non-zero-exit"
    ]
    status, _, logs = fetch(f"{base}/jobs/{jobs[NAME]}/logs")
    assert status == 200 and "a &lt;i&gt;line&lt;/i&gt;" in logs
    assert fetch(base + "/summary")[0] == 200
    status, _, served = fetch(base + "/metrics")
    assert status == 200
    assert 'dispatch_endings_total{backend="local",kind="non-zero-exit"' in served
    printed = sh.run("metrics")
    assert printed.returncode == 0, printed.stderr
    assert [line for line in printed.stdout.splitlines() if "_total{" in line] == [
        line for line in served.splitlines() if "_total{" in line
    ]
    assert fetch(base + "/", method="POST")[0] == 405


def test_dispatch_ui_refuses_an_address_beyond_loopback_without_a_token(sh: Shell) -> None:
    start = time.monotonic()
    out = sh.run("ui", "--host", "0.0.0.0", "--port", "0")
    assert out.returncode != 0 and "--token" in out.stderr
    assert time.monotonic() - start < 60  # it refused; it did not serve


def test_dispatch_ui_on_a_port_in_use_says_which(sh: Shell) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = sh.run("ui", "--port", str(port))
    assert out.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in out.stderr
